package hub

import (
	"bytes"
	"errors"
	"mime"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// The rules of a fetch's outcome: which entries are new, when a fetch is
// the baseline, when a fetch is a change without new entries, how many new
// entries a node takes, and when a source is fetched next if a ping came
// while it was fetched. They are pure functions so that they are decided
// and tested here; the store runs them inside the one transaction that
// reads what they need (the seen entry ids, the source's baseline and
// latest ping, its nodes) and writes what they decide (Store.ApplyFetch).

// FetchNews is what a fetch brings, as FetchNewsOf decides it.
type FetchNews struct {
	// Baseline is true when this is the source's first changed fetch:
	// its entries are recorded as seen and none is published, so a new
	// node does not announce a feed's whole history.
	Baseline bool
	// Kept are, on the baseline of a feed, its entries as item events
	// (publishing order): each node keeps the newest of them as its items
	// without telling anyone (KeptForNode, Store.ApplyFetch), so a node is
	// never empty while its feed has entries. None otherwise, and none for
	// a resource that is not a feed, whose one entry only says it changed.
	Kept []Event
	// Title is, on the baseline of a feed, the feed's title as a node
	// title (NodeTitleOf): the nodes pingd made for the source's URL that
	// have no title take it, so they read as the feed rather than its URL.
	Title string
	// New are the entries never seen before, in publishing order (oldest
	// first); none on a baseline.
	New []Entry
	// Items are New as item events.
	Items []Event
	// Change is the change event this fetch appends besides its items:
	// a trusted announcement (ChangeNote) always, else a plain change when
	// the representation changed without any new entry; none otherwise.
	Change []Event
}

// FetchNewsOf decides what a fetch brings: entries (in the order the fetch
// gave them, repeats and id-less ones already dropped by DistinctEntries)
// whose ids unseen reports as never seen before are new, unless the source
// had no baseline yet (baselined false) and this changed fetch is it.
func FetchNewsOf(o FetchOutcome, baselined bool, unseen func(id string) bool) FetchNews {
	news := FetchNews{Baseline: !baselined && o.Changed}
	if !news.Baseline {
		for _, e := range o.Entries {
			if unseen(e.ID) {
				news.New = append(news.New, e)
			}
		}
	}
	news.Items = ItemEvents(news.New)
	if news.Baseline && o.State.IsFeed {
		news.Kept = ItemEvents(o.Entries)
		news.Title = NodeTitleOf(o.State.Title)
	}
	switch {
	case o.Note != nil:
		// A trusted announcement is a change even when the fetch shows
		// none; it stands in for the plain change event.
		news.Change = []Event{{Kind: EventChange, Title: o.Note.Title, Summary: o.Note.Description,
			Payload: []byte(o.Note.Extensions)}}
	case o.Changed && !news.Baseline && len(news.New) == 0:
		news.Change = []Event{{Kind: EventChange}}
	}
	return news
}

// ItemEvents makes item events of entries, in their order.
func ItemEvents(entries []Entry) []Event {
	out := make([]Event, 0, len(entries))
	for _, e := range entries {
		out = append(out, Event{Kind: EventItem, ItemID: e.ID, Payload: e.Payload,
			Title: e.Title, Summary: e.Summary, Link: e.Link, Updated: e.Updated})
	}
	return out
}

// Empty reports whether the fetch appends nothing to any node's log.
func (n FetchNews) Empty() bool { return len(n.Items)+len(n.Change)+len(n.Kept) == 0 }

// KeptForNode is what one node keeps of the baseline: no more entries
// than the node keeps (maxItems, 0 for no bound), the newest of them.
func (n FetchNews) KeptForNode(maxItems int) []Event {
	return NewestItems(n.Kept, maxItems)
}

// NewestItems is the newest max (0: all) of events in publishing order.
func NewestItems(events []Event, max int) []Event {
	if max > 0 && len(events) > max {
		return events[len(events)-max:]
	}
	return events
}

// maxNodeTitleBytes is NodeConfig.Validate's bound on a title.
const maxNodeTitleBytes = 1024

// NodeTitleOf is a feed's title made a node title: spaces collapsed and
// cut, at a character boundary, to what a node title may hold.
func NodeTitleOf(feedTitle string) string {
	t := strings.Join(strings.Fields(feedTitle), " ")
	if len(t) <= maxNodeTitleBytes {
		return t
	}
	cut := maxNodeTitleBytes
	for cut > 0 && !utf8.RuneStart(t[cut]) {
		cut--
	}
	return t[:cut]
}

// ForNode is what one node following the source appends: no more new
// entries than the node keeps (maxItems, 0 for no bound), the newest of
// them, then the change event.
func (n FetchNews) ForNode(maxItems int) []Event {
	take := NewestItems(n.Items, maxItems)
	return append(slices.Clip(take), n.Change...)
}

// DistinctEntries drops entries without an id and repeats of an id,
// keeping the first in publishing order: an id is one entry of a source.
func DistinctEntries(entries []Entry) []Entry {
	seen := make(map[string]bool, len(entries))
	out := make([]Entry, 0, len(entries))
	for _, e := range entries {
		if e.ID == "" || seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		out = append(out, e)
	}
	return out
}

// NextFetchAfter returns the state a fetch leaves its source in, given the
// latest ping stored meanwhile (storedPing): a ping newer than the one the
// fetch knew of may announce something newer than what was fetched, so the
// source is due again at that ping (unless it is due sooner already); a
// gone source is never due.
func NextFetchAfter(st SourceState, storedPing time.Time) SourceState {
	if !storedPing.IsZero() && storedPing.After(st.LastPingAt) {
		st.LastPingAt = storedPing
		if !st.Gone && (st.NextFetchAt.IsZero() || storedPing.Before(st.NextFetchAt)) {
			st.NextFetchAt = storedPing
		}
	}
	if st.Gone {
		st.NextFetchAt = time.Time{}
	}
	return st
}

// OutcomeOf turns what a fetch of the claimed source src at now gave (res,
// or the error ferr) into the state and entries to store, the next fetch
// as next decides it.
func OutcomeOf(src *Source, res *FetchResult, ferr error, now time.Time, next Scheduler) FetchOutcome {
	st := src.SourceState
	st.LastFetchAt = now
	out := FetchOutcome{SourceID: src.ID, Note: src.PendingNote, Owner: src.LeaseOwner}
	switch {
	case ferr != nil:
		st.LastError = ferr.Error()
		st.LastStatus = FetchStatus(ferr)
		st.ConsecutiveErrors++
		var fe *FetchError
		if errors.As(ferr, &fe) && !fe.RetryAfter.IsZero() {
			st.Hints.RetryAfter = fe.RetryAfter
		}
	default:
		st.LastError = ""
		st.ConsecutiveErrors = 0
		st.LastStatus = res.Status
		st.LastBytes = res.Bytes
		if moved := canonicalOrEmpty(res.PermanentURL); moved != "" && moved != st.URL {
			st.MovedFrom, st.MovedAt, st.URL = st.URL, now, moved
		}
		if res.Gone {
			st.Gone = true
			break
		}
		// Header hints come with every answer; feed hints only with a body.
		st.Hints.MaxAge, st.Hints.Expires, st.Hints.RetryAfter = res.Hints.MaxAge, res.Hints.Expires, res.Hints.RetryAfter
		if res.NotModified {
			st.Unchanged++
			if res.ETag != "" {
				st.ETag = res.ETag
			}
			if res.LastModified != "" {
				st.LastModified = res.LastModified
			}
			break
		}
		st.ETag, st.LastModified = res.ETag, res.LastModified
		if res.BodyHash == src.BodyHash && src.Baselined {
			st.Unchanged++
			break
		}
		out.Changed = true
		st.Unchanged = 0
		st.LastChangeAt = now
		st.Body, st.BodyHash, st.ContentType, st.IsFeed = nil, res.BodyHash, res.ContentType, res.IsFeed
		if KeepsBody(res) {
			st.Body = res.Body
		}
		st.Title, st.Description, st.SiteURL = res.Title, res.Description, canonicalOrEmpty(res.SiteURL)
		if res.IsFeed {
			hdr := st.Hints
			st.Hints = res.Hints
			st.Hints.MaxAge, st.Hints.Expires, st.Hints.RetryAfter = hdr.MaxAge, hdr.Expires, hdr.RetryAfter
		}
		st.Baselined = true
		out.Entries = PublishOrder(res.Entries)
		if src.PendingNote != nil {
			out.Entries = withExtensions(out.Entries, src.PendingNote.Extensions)
		}
	}
	at, reason := next.Next(now, &Source{ID: src.ID, OriginalURL: src.OriginalURL, SourceState: st}, res, ferr)
	if st.Gone {
		at, reason = time.Time{}, "gone"
	}
	st.NextFetchAt, st.NextFetchReason = at, reason
	out.State = st
	return out
}

// KeepsBody reports whether a changed representation is kept as the
// source's stored body, rather than its hash, validators and entries
// alone. A later fetch or reader needs the document itself only
//   - to merge an RFC 3229 delta into: the origin sent one to this fetch
//     (res.Deltas; a feed whose body is not kept still asks for deltas,
//     and when one comes the fetcher asks again for the whole document,
//     which is then kept);
//   - when it is not a feed: WebSub subscribers to the topic get it whole;
//   - for a feed whose media type does not say RSS but whose document is
//     RSS (LooksLikeRSS): WebSub renders the new items of a feed topic in
//     the feed's own format, told by the media type or, failing that, by
//     the stored document.
//
// A node made for a feed that another node follows takes its first items
// from the stored body when there is one, and from that node's items
// when there is none (NodeUseCases.CreateNode).
func KeepsBody(res *FetchResult) bool {
	if !res.IsFeed || res.Deltas {
		return true
	}
	if mt, _, _ := mime.ParseMediaType(res.ContentType); strings.Contains(mt, "rss") || strings.Contains(mt, "rdf") {
		return false
	}
	return LooksLikeRSS(res.Body)
}

// LooksLikeRSS reports whether a feed served as generic XML is RSS: its
// root element is <rss> or <rdf:RDF>.
func LooksLikeRSS(body []byte) bool {
	head := body[:min(len(body), 2048)]
	return bytes.Contains(head, []byte("<rss")) || bytes.Contains(head, []byte("<rdf:RDF"))
}
