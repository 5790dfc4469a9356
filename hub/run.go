package hub

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"
)

// Run does the hub's background work until ctx ends: fetching due sources
// (pinged, new, or scheduled polls), removing expired subscriptions and
// pruning old log entries. It returns after its goroutines have stopped.
func (h *Hub) Run(ctx context.Context) error {
	if h.fetcher != nil {
		// From now until the fetch loop ends, learning of a source waits
		// for its baseline fetch (awaitBaseline).
		h.setFetchLoopOn(true)
	}
	h.reclaimOwnSourceLeases(ctx)
	if h.cfg.Exclusive {
		h.reclaimSourceLeases(ctx)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer h.setFetchLoopOn(false)
		w := newUnchangedWriter(h)
		go w.run(ctx)
		h.fetchLoop(ctx, w)
		w.close() // stores what the fetches that ended queued
	})
	wg.Go(func() { h.maintenanceLoop(ctx) })
	wg.Wait()
	return nil
}

// fetchSource fetches one claimed source and stores the outcome: an
// unchanged one through w, in a batch, the others at once. It returns
// until when the source's host asked to be left alone (429 or 503), zero
// when it did not.
func (h *Hub) fetchSource(ctx context.Context, src *Source, w *unchangedWriter) (hostPausedUntil time.Time) {
	until := src.Hints.RetryAfter
	if limit := src.LastFetchAt.Add(maxRetryAfterWait); until.After(limit) {
		until = limit
	}
	if until.After(h.now()) {
		// The origin asked to be left alone until then (429 or 503 with
		// Retry-After), and a ping or a push made the source due sooner:
		// the ping stays recorded, the fetch waits.
		h.postponeFetch(ctx, src, until)
		return time.Time{}
	}
	req := FetchRequest{URL: src.URL, ETag: src.ETag, LastModified: src.LastModified, Subscribers: src.Subscribers}
	if src.IsFeed && src.BodyHash != "" {
		// Claimed without its body: read only if the origin sends a delta.
		id := src.ID
		req.LoadPrevious = func(ctx context.Context) ([]byte, error) { return h.stores.Sources.SourceBody(ctx, id) }
	}
	fctx, cancel := context.WithTimeout(ctx, h.cfg.FetchTimeout)
	started := time.Now()
	res, ferr := h.fetcher.Fetch(fctx, req)
	cancel()
	status := FetchStatus(ferr)
	if res != nil {
		status = res.Status
	}
	h.cfg.Observe.Fetched(status, ferr, time.Since(started))
	if ctx.Err() != nil {
		h.giveBack(ctx, src) // shutting down: the next process fetches it again at once
		return time.Time{}
	}
	out := h.outcome(src, res, ferr)
	var retryAfter time.Time
	if fe := (*FetchError)(nil); errors.As(ferr, &fe) {
		retryAfter = fe.RetryAfter
	}
	hostPausedUntil = hostPause(status, retryAfter, out.State.LastFetchAt)
	if out.Unchanged() {
		h.logFetch(ctx, src, out, ferr, FetchApplied{})
		w.add(out, src.URL)
		return hostPausedUntil
	}
	applied, err := h.stores.Fetches.ApplyFetch(ctx, out)
	h.signalFetched(src.ID)
	if errors.Is(err, ErrLeaseLost) {
		// The lease ran out during the fetch and another process took the
		// source: its fetch is the one stored.
		h.log.WarnContext(ctx, "fetch outcome not stored: the source's lease ran out and another process holds it",
			"source", src.URL, "err", err)
		return hostPausedUntil
	}
	if err != nil {
		h.log.ErrorContext(ctx, "store fetch outcome", "source", src.URL, "err", err)
		return hostPausedUntil
	}
	h.logFetch(ctx, src, out, ferr, applied)
	if n := applied.Published; n > 0 {
		var sincePing time.Duration
		if !src.LastPingAt.IsZero() && src.LastPingAt.After(src.LastFetchAt) {
			sincePing = h.now().Sub(src.LastPingAt)
		}
		h.cfg.Observe.Published(n, sincePing)
	}
	for _, id := range applied.Nodes {
		h.wake(id)
	}
	return hostPausedUntil
}

// logFetch logs what a fetch found and what storing it did.
func (h *Hub) logFetch(ctx context.Context, src *Source, out FetchOutcome, ferr error, applied FetchApplied) {
	attrs := []any{"source", src.URL, "status", out.State.LastStatus, "changed", out.Changed,
		"new_items", len(applied.New), "published", applied.Published, "kept", applied.Kept,
		"next_fetch", out.State.NextFetchAt, "reason", out.State.NextFetchReason}
	switch {
	case ferr != nil:
		h.log.WarnContext(ctx, "fetch failed", append(attrs, "err", ferr, "errors_in_a_row", out.State.ConsecutiveErrors)...)
	case applied.Baseline:
		h.log.InfoContext(ctx, "source baselined", append(attrs, "entries", len(out.Entries))...)
	default:
		h.log.DebugContext(ctx, "source fetched", attrs...)
	}
}

// postponeFetch gives back a claimed source unfetched, due at `at` with
// the Retry-After reason.
func (h *Hub) postponeFetch(ctx context.Context, src *Source, at time.Time) {
	if h.release(ctx, src, at, ReasonRetryAfter) {
		h.log.DebugContext(ctx, "fetch put off: the origin asked to wait", "source", src.URL, "until", at)
	}
}

// ReasonRetryAfter is the NextFetchReason of a source whose origin asked
// to be left alone for a while (the scheduler's reason of the same name);
// maxRetryAfterWait bounds that while, as the scheduler's default does.
const (
	ReasonRetryAfter  = "retry-after"
	maxRetryAfterWait = 7 * 24 * time.Hour
)

// ReasonInterrupted is the NextFetchReason of a source whose fetch was cut
// off by shutdown or by the death of the process that had claimed it.
const ReasonInterrupted = "fetch interrupted"

// giveBack releases the lease of a claimed source whose fetch did not
// happen or was cut off, leaving its state as it was and making it due at
// once, so that the next process fetches it without waiting for the lease
// to run out. It writes with a context of its own: ctx may have ended.
func (h *Hub) giveBack(ctx context.Context, src *Source) {
	if src.Gone {
		h.release(ctx, src, time.Time{}, "gone")
		return
	}
	h.release(ctx, src, h.now(), ReasonInterrupted)
}

// release ends the lease of a claimed source that was not fetched, its
// state as it was but for the next fetch (at, with reason); a note waiting
// for the fetch stays for the next one. It writes with a context of its
// own: ctx may have ended. If the write fails, the lease runs out and the
// source is claimed again then; release reports whether it succeeded.
func (h *Hub) release(ctx context.Context, src *Source, at time.Time, reason string) bool {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	st := src.SourceState
	st.NextFetchAt, st.NextFetchReason = at, reason
	_, err := h.stores.Fetches.ApplyFetch(wctx, FetchOutcome{SourceID: src.ID, State: st, Owner: src.LeaseOwner})
	h.signalFetched(src.ID)
	if err != nil {
		h.log.WarnContext(wctx, "release an unfetched source; it is fetched when its lease runs out",
			"source", src.URL, "reason", reason, "err", err)
		return false
	}
	return true
}

// giveBackTimeout bounds the write of giveBack.
const giveBackTimeout = 5 * time.Second

// reclaimSourceLeases gives back the sources leased by anyone but this
// hub. Only with Config.Exclusive: then their holder is a process that
// died before it could store the outcome of its fetches.
func (h *Hub) reclaimSourceLeases(ctx context.Context) {
	srcs, err := h.stores.Fetches.SourcesLeasedByOthers(ctx, h.instance, h.now())
	if err != nil {
		if ctx.Err() == nil {
			h.log.WarnContext(ctx, "look for fetches left leased by an earlier process", "err", err)
		}
		return
	}
	for i := range srcs {
		h.giveBack(ctx, &srcs[i])
	}
	if len(srcs) > 0 {
		h.log.InfoContext(ctx, "took back fetches an earlier process left leased", "sources", len(srcs))
	}
}

// reclaimOwnSourceLeases gives back, at start, the sources leased under
// this hub's instance name: a process of that name died holding them, and
// with a stable name (Config.Instance) its restart fetches them at once
// instead of after their leases run out, on any store.
func (h *Hub) reclaimOwnSourceLeases(ctx context.Context) {
	srcs, err := h.stores.Fetches.SourcesLeasedBy(ctx, h.instance)
	if err != nil {
		if ctx.Err() == nil {
			h.log.WarnContext(ctx, "look for fetches left leased under this instance name", "instance", h.instance, "err", err)
		}
		return
	}
	for i := range srcs {
		h.giveBack(ctx, &srcs[i])
	}
	if len(srcs) > 0 {
		h.log.InfoContext(ctx, "took back fetches a process of this instance name left leased",
			"instance", h.instance, "sources", len(srcs))
	}
}

// outcome turns a fetch result into the state and events to store.
func (h *Hub) outcome(src *Source, res *FetchResult, ferr error) FetchOutcome {
	now := h.now()
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
		st.Body, st.BodyHash, st.ContentType, st.IsFeed = res.Body, res.BodyHash, res.ContentType, res.IsFeed
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
	next, reason := h.scheduler.Next(now, &Source{ID: src.ID, OriginalURL: src.OriginalURL, SourceState: st}, res, ferr)
	if st.Gone {
		next, reason = time.Time{}, "gone"
	}
	st.NextFetchAt, st.NextFetchReason = next, reason
	out.State = st
	return out
}

// PublishOrder orders a document's entries oldest first: by their update
// time when every entry has one, else by reversing the document order
// (feeds list the newest first).
func PublishOrder(entries []Entry) []Entry {
	out := slices.Clone(entries)
	dated := true
	for _, e := range out {
		if e.Updated.IsZero() {
			dated = false
			break
		}
	}
	if dated {
		// Stable on the reversed document order so ties keep feed semantics.
		slices.Reverse(out)
		sort.SliceStable(out, func(i, j int) bool { return out[i].Updated.Before(out[j].Updated) })
		return out
	}
	slices.Reverse(out)
	return out
}

// SeenRetention is how long the id of an entry a source no longer shows
// is remembered (counted from the source's latest fetch that showed
// entries). Without a bound the record of ids grows for as long as a feed
// publishes; an entry that comes back after it is announced again.
const SeenRetention = 90 * 24 * time.Hour

func (h *Hub) maintenanceLoop(ctx context.Context) {
	expiry := time.NewTicker(time.Minute)
	defer expiry.Stop()
	prune := time.NewTicker(10 * time.Minute)
	defer prune.Stop()
	forget := time.NewTicker(6 * time.Hour)
	defer forget.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-expiry.C:
			removed, err := h.stores.Maintenance.DeleteExpiredSubscriptions(ctx, h.now())
			if err != nil {
				h.log.WarnContext(ctx, "remove expired subscriptions", "err", err)
			}
			for _, s := range removed {
				h.log.InfoContext(ctx, "subscription expired", "node", s.NodeName, "kind", s.Kind, "subscriber", s.Address)
			}
		case <-prune.C:
			if err := h.stores.Maintenance.Prune(ctx, h.now().Add(-h.cfg.PingRetention)); err != nil {
				h.log.WarnContext(ctx, "prune", "err", err)
			}
			if _, _, err := h.DeleteUnused(ctx); err != nil {
				h.log.WarnContext(ctx, "remove unused nodes and sources", "err", err)
			}
		case <-forget.C:
			n, err := h.stores.Maintenance.ForgetSeenEntries(ctx, SeenRetention)
			if err != nil {
				h.log.WarnContext(ctx, "forget entry ids sources no longer show", "err", err)
			} else if n > 0 {
				h.log.InfoContext(ctx, "forgot entry ids sources no longer show", "ids", n, "after", SeenRetention)
			}
		}
	}
}

// defaultScheduler polls hourly and backs off exponentially on errors, up
// to a day.
type defaultScheduler struct{}

func (defaultScheduler) Next(now time.Time, src *Source, res *FetchResult, err error) (time.Time, string) {
	if err != nil {
		d := time.Minute << min(src.ConsecutiveErrors, 10)
		return now.Add(min(d, 24*time.Hour)), "error backoff"
	}
	return now.Add(time.Hour), "default interval"
}

// canonicalOrEmpty is the canonical form of a URL a fetch found (a
// permanent redirect's target, a feed's site link), "" when it is none:
// sources are looked up by these, in canonical form.
func canonicalOrEmpty(raw string) string {
	c, err := CanonicalURL(raw)
	if err != nil {
		return ""
	}
	return c
}
