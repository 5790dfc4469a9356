package hub_test

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pingd/pingd/hub"
)

func entryIDs(es []hub.Entry) []string {
	var ids []string
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}

func eventIDs(evs []hub.Event) []string {
	var ids []string
	for _, ev := range evs {
		if ev.Kind == hub.EventChange {
			ids = append(ids, "change:"+ev.Title)
			continue
		}
		ids = append(ids, ev.ItemID)
	}
	return ids
}

// TestFetchNewsOf: the rules of what one fetch brings, without a store.
func TestFetchNewsOf(t *testing.T) {
	entries := []hub.Entry{{ID: "a", Title: "A"}, {ID: "b", Title: "B"}, {ID: "c", Title: "C"}}
	seenBefore := func(ids ...string) func(string) bool {
		return func(id string) bool { return !slices.Contains(ids, id) }
	}
	note := &hub.ChangeNote{Title: "announced", Description: "d", Extensions: "<x/>"}
	for _, tc := range []struct {
		name      string
		o         hub.FetchOutcome
		baselined bool
		unseen    func(string) bool
		baseline  bool
		newIDs    []string
		events    []string // for a node keeping everything
	}{
		{name: "first changed fetch is the baseline", o: hub.FetchOutcome{Changed: true, Entries: entries},
			unseen: seenBefore(), baseline: true},
		{name: "only a changed fetch can be the baseline", o: hub.FetchOutcome{Entries: entries},
			unseen: seenBefore(), newIDs: []string{"a", "b", "c"}, events: []string{"a", "b", "c"}},
		{name: "only never-seen entries are new, in order", o: hub.FetchOutcome{Changed: true, Entries: entries},
			baselined: true, unseen: seenBefore("b"), newIDs: []string{"a", "c"}, events: []string{"a", "c"}},
		{name: "a change without new entries is a change event", o: hub.FetchOutcome{Changed: true, Entries: entries},
			baselined: true, unseen: seenBefore("a", "b", "c"), events: []string{"change:"}},
		{name: "nothing changed, nothing new: nothing", o: hub.FetchOutcome{Entries: entries},
			baselined: true, unseen: seenBefore("a", "b", "c")},
		{name: "a note is a change even when nothing changed", o: hub.FetchOutcome{Entries: entries, Note: note},
			baselined: true, unseen: seenBefore("a", "b", "c"), events: []string{"change:announced"}},
		{name: "a note stands in for the plain change and follows the items", o: hub.FetchOutcome{Changed: true, Entries: entries, Note: note},
			baselined: true, unseen: seenBefore("a"), newIDs: []string{"b", "c"}, events: []string{"b", "c", "change:announced"}},
		{name: "a note on the baseline fetch is still told", o: hub.FetchOutcome{Changed: true, Entries: entries, Note: note},
			unseen: seenBefore(), baseline: true, events: []string{"change:announced"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			news := hub.FetchNewsOf(tc.o, tc.baselined, tc.unseen)
			if news.Baseline != tc.baseline {
				t.Errorf("baseline %v, want %v", news.Baseline, tc.baseline)
			}
			if got := entryIDs(news.New); !slices.Equal(got, tc.newIDs) {
				t.Errorf("new %v, want %v", got, tc.newIDs)
			}
			if got := eventIDs(news.ForNode(0)); !slices.Equal(got, tc.events) {
				t.Errorf("events %v, want %v", got, tc.events)
			}
			if news.Empty() != (len(tc.events) == 0) {
				t.Errorf("Empty() %v with events %v", news.Empty(), tc.events)
			}
		})
	}
}

// TestFetchNewsForNode: a node takes no more new entries from one fetch
// than it keeps, the newest, and the change event whatever its bound.
func TestFetchNewsForNode(t *testing.T) {
	o := hub.FetchOutcome{Changed: true, Entries: []hub.Entry{{ID: "1"}, {ID: "2"}, {ID: "3"}, {ID: "4"}},
		Note: &hub.ChangeNote{Title: "n"}}
	news := hub.FetchNewsOf(o, true, func(string) bool { return true })
	for max, want := range map[int][]string{
		0: {"1", "2", "3", "4", "change:n"},
		2: {"3", "4", "change:n"},
		4: {"1", "2", "3", "4", "change:n"},
		9: {"1", "2", "3", "4", "change:n"},
	} {
		if got := eventIDs(news.ForNode(max)); !slices.Equal(got, want) {
			t.Errorf("max_items %d: %v, want %v", max, got, want)
		}
	}
	// One node's events do not leak into another's.
	a := news.ForNode(2)
	b := news.ForNode(0)
	a[0].ItemID = "changed"
	if b[2].ItemID != "3" {
		t.Error("nodes share their event slices")
	}
}

func TestDistinctEntries(t *testing.T) {
	got := entryIDs(hub.DistinctEntries([]hub.Entry{{ID: "a", Title: "first"}, {ID: ""}, {ID: "b"}, {ID: "a", Title: "again"}}))
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("%v, want a b", got)
	}
}

// TestNextFetchAfter: a ping stored during the fetch makes the source due
// at that ping unless it is due sooner; a gone source is never due.
func TestNextFetchAfter(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	later := t0.Add(time.Hour)
	for _, tc := range []struct {
		name     string
		st       hub.SourceState
		stored   time.Time
		next     time.Time
		lastPing time.Time
	}{
		{name: "no ping", st: hub.SourceState{NextFetchAt: later}, next: later},
		{name: "the ping the fetch knew", st: hub.SourceState{NextFetchAt: later, LastPingAt: t0}, stored: t0, next: later, lastPing: t0},
		{name: "a newer ping brings the fetch forward", st: hub.SourceState{NextFetchAt: later, LastPingAt: t0.Add(-time.Hour)},
			stored: t0, next: t0, lastPing: t0},
		{name: "due sooner already", st: hub.SourceState{NextFetchAt: t0.Add(-time.Minute)}, stored: t0,
			next: t0.Add(-time.Minute), lastPing: t0},
		{name: "nothing scheduled", st: hub.SourceState{}, stored: t0, next: t0, lastPing: t0},
		{name: "gone", st: hub.SourceState{NextFetchAt: later, Gone: true}, stored: t0, lastPing: t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := hub.NextFetchAfter(tc.st, tc.stored)
			if !st.NextFetchAt.Equal(tc.next) || !st.LastPingAt.Equal(tc.lastPing) {
				t.Errorf("next %v last ping %v, want %v and %v", st.NextFetchAt, st.LastPingAt, tc.next, tc.lastPing)
			}
		})
	}
}

// TestFetchNewsKeepsTheBaseline: a feed's baseline keeps its entries as
// item events (a node at most its max_items, the newest) and names its
// title; a resource that is not a feed keeps nothing, and a later fetch
// keeps nothing either.
func TestFetchNewsKeepsTheBaseline(t *testing.T) {
	entries := []hub.Entry{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	feed := hub.FetchOutcome{Changed: true, Entries: entries, State: hub.SourceState{IsFeed: true, Title: " A\n feed "}}
	news := hub.FetchNewsOf(feed, false, func(string) bool { return true })
	if !news.Baseline || news.Title != "A feed" || !slices.Equal(eventIDs(news.KeptForNode(0)), []string{"a", "b", "c"}) ||
		!slices.Equal(eventIDs(news.KeptForNode(2)), []string{"b", "c"}) || len(news.ForNode(0)) != 0 || news.Empty() {
		t.Errorf("baseline of a feed: %+v", news)
	}
	page := feed
	page.State.IsFeed = false
	if news := hub.FetchNewsOf(page, false, func(string) bool { return true }); len(news.Kept) != 0 || news.Title != "" {
		t.Errorf("baseline of a page kept %v, titled %q", eventIDs(news.Kept), news.Title)
	}
	if news := hub.FetchNewsOf(feed, true, func(string) bool { return true }); len(news.Kept) != 0 || news.Title != "" {
		t.Errorf("a later fetch kept %v, titled %q", eventIDs(news.Kept), news.Title)
	}
	long := strings.Repeat("é", 600) // 1,200 bytes
	if got := hub.NodeTitleOf(long); len(got) > 1024 || !utf8.ValidString(got) || !strings.HasPrefix(long, got) {
		t.Errorf("a long title cut to %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
}

// TestKeepsBody: a changed representation is kept where a later fetch or
// reader needs it: not a feed, a feed whose origin sent a delta, an RSS
// feed served as generic XML; not a feed whose media type names it, nor
// an Atom feed served as generic XML.
func TestKeepsBody(t *testing.T) {
	rssDoc, atomDoc := []byte(`<?xml version="1.0"?><rss version="2.0"><channel/></rss>`), []byte(`<feed xmlns="http://www.w3.org/2005/Atom"/>`)
	for _, c := range []struct {
		name string
		res  hub.FetchResult
		want bool
	}{
		{"a page", hub.FetchResult{ContentType: "text/html", Body: []byte("<html/>")}, true},
		{"RSS", hub.FetchResult{IsFeed: true, ContentType: "application/rss+xml; charset=utf-8", Body: rssDoc}, false},
		{"RDF", hub.FetchResult{IsFeed: true, ContentType: "application/rdf+xml", Body: rssDoc}, false},
		{"Atom", hub.FetchResult{IsFeed: true, ContentType: "application/atom+xml", Body: atomDoc}, false},
		{"RSS whose origin sends deltas", hub.FetchResult{IsFeed: true, Deltas: true, ContentType: "application/rss+xml", Body: rssDoc}, true},
		{"RSS as generic XML", hub.FetchResult{IsFeed: true, ContentType: "text/xml", Body: rssDoc}, true},
		{"Atom as generic XML", hub.FetchResult{IsFeed: true, ContentType: "application/xml", Body: atomDoc}, false},
	} {
		if got := hub.KeepsBody(&c.res); got != c.want {
			t.Errorf("%s: kept %v, want %v", c.name, got, c.want)
		}
	}
}
