package fetching

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/pingd/pingd/hub"
)

// fetchSource fetches one claimed source and stores the outcome: an
// unchanged one through w, in a batch, the others at once. It returns
// until when the source's host asked to be left alone (429 or 503), zero
// when it did not.
func (e *Engine) fetchSource(ctx context.Context, src *hub.Source, w *unchangedWriter) (hostPausedUntil time.Time) {
	until := src.Hints.RetryAfter
	if limit := src.LastFetchAt.Add(maxRetryAfterWait); until.After(limit) {
		until = limit
	}
	if until.After(e.now()) {
		// The origin asked to be left alone until then (429 or 503 with
		// Retry-After), and a ping or a push made the source due sooner:
		// the ping stays recorded, the fetch waits.
		e.postponeFetch(ctx, src, until)
		return time.Time{}
	}
	req := hub.FetchRequest{URL: src.URL, ETag: src.ETag, LastModified: src.LastModified, Subscribers: src.Subscribers}
	if src.IsFeed && src.BodyHash != "" {
		// Claimed without its body: read only if the origin sends a delta.
		id := src.ID
		req.LoadPrevious = func(ctx context.Context) ([]byte, error) { return e.store.SourceBody(ctx, id) }
	}
	fctx, cancel := context.WithTimeout(ctx, e.cfg.FetchTimeout)
	started := time.Now()
	res, ferr := e.fetcher.Fetch(fctx, req)
	cancel()
	status := hub.FetchStatus(ferr)
	if res != nil {
		status = res.Status
	}
	e.cfg.Observe.Fetched(status, ferr, time.Since(started))
	if ctx.Err() != nil {
		e.giveBack(ctx, src) // shutting down: the next process fetches it again at once
		return time.Time{}
	}
	out := hub.OutcomeOf(src, res, ferr, e.now(), e.scheduler)
	var retryAfter time.Time
	if fe := (*hub.FetchError)(nil); errors.As(ferr, &fe) {
		retryAfter = fe.RetryAfter
	}
	hostPausedUntil = hostPause(status, retryAfter, out.State.LastFetchAt)
	if out.Unchanged() {
		e.logFetch(ctx, src, out, ferr, hub.FetchApplied{})
		w.add(out, src.URL)
		return hostPausedUntil
	}
	applied, err := e.store.ApplyFetch(ctx, out)
	e.signalFetched(src.ID)
	if errors.Is(err, hub.ErrLeaseLost) {
		// The lease ran out during the fetch and another process took the
		// source: its fetch is the one stored.
		e.log.WarnContext(ctx, "fetch outcome not stored: the source's lease ran out and another process holds it",
			"source", src.URL, "err", err)
		return hostPausedUntil
	}
	if err != nil {
		e.log.ErrorContext(ctx, "store fetch outcome", "source", src.URL, "err", err)
		return hostPausedUntil
	}
	e.logFetch(ctx, src, out, ferr, applied)
	if n := applied.Published; n > 0 {
		var sincePing time.Duration
		if !src.LastPingAt.IsZero() && src.LastPingAt.After(src.LastFetchAt) {
			sincePing = e.now().Sub(src.LastPingAt)
		}
		e.cfg.Observe.Published(n, sincePing)
	}
	for _, id := range applied.Nodes {
		e.published(id)
	}
	return hostPausedUntil
}

// logFetch logs what a fetch found and what storing it did.
func (e *Engine) logFetch(ctx context.Context, src *hub.Source, out hub.FetchOutcome, ferr error, applied hub.FetchApplied) {
	if ferr == nil && !applied.Baseline && !e.log.Enabled(ctx, slog.LevelDebug) {
		// Most polls: nothing to log at the usual levels, and the
		// attributes would cost a dozen allocations a poll.
		return
	}
	attrs := []any{"source", src.URL, "status", out.State.LastStatus, "changed", out.Changed,
		"new_items", len(applied.New), "published", applied.Published, "kept", applied.Kept,
		"next_fetch", out.State.NextFetchAt, "reason", out.State.NextFetchReason}
	switch {
	case ferr != nil:
		e.log.WarnContext(ctx, "fetch failed", append(attrs, "err", ferr, "errors_in_a_row", out.State.ConsecutiveErrors)...)
	case applied.Baseline:
		e.log.InfoContext(ctx, "source baselined", append(attrs, "entries", len(out.Entries))...)
	default:
		e.log.DebugContext(ctx, "source fetched", attrs...)
	}
}

// postponeFetch gives back a claimed source unfetched, due at `at` with
// the Retry-After reason.
func (e *Engine) postponeFetch(ctx context.Context, src *hub.Source, at time.Time) {
	if e.release(ctx, src, at, hub.ReasonRetryAfter) {
		e.log.DebugContext(ctx, "fetch put off: the origin asked to wait", "source", src.URL, "until", at)
	}
}

// maxRetryAfterWait bounds how long a source's fetch waits for its
// origin's Retry-After (hub.ReasonRetryAfter), as the scheduler's default
// does.
const maxRetryAfterWait = 7 * 24 * time.Hour

// giveBack releases the lease of a claimed source whose fetch did not
// happen or was cut off, leaving its state as it was and making it due at
// once, so that the next process fetches it without waiting for the lease
// to run out. It writes with a context of its own: ctx may have ended.
func (e *Engine) giveBack(ctx context.Context, src *hub.Source) {
	if src.Gone {
		e.release(ctx, src, time.Time{}, "gone")
		return
	}
	e.release(ctx, src, e.now(), hub.ReasonInterrupted)
}

// release ends the lease of a claimed source that was not fetched, its
// state as it was but for the next fetch (at, with reason); a note waiting
// for the fetch stays for the next one. It writes with a context of its
// own: ctx may have ended. If the write fails, the lease runs out and the
// source is claimed again then; release reports whether it succeeded.
func (e *Engine) release(ctx context.Context, src *hub.Source, at time.Time, reason string) bool {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	st := src.SourceState
	st.NextFetchAt, st.NextFetchReason = at, reason
	_, err := e.store.ApplyFetch(wctx, hub.FetchOutcome{SourceID: src.ID, State: st, Owner: src.LeaseOwner})
	e.signalFetched(src.ID)
	if err != nil {
		e.log.WarnContext(wctx, "release an unfetched source; it is fetched when its lease runs out",
			"source", src.URL, "reason", reason, "err", err)
		return false
	}
	return true
}

// giveBackTimeout bounds the write of giveBack.
const giveBackTimeout = 5 * time.Second

// reclaimSourceLeases gives back the sources leased by anyone but this
// engine. Only with Config.Exclusive: then their holder is a process that
// died before it could store the outcome of its fetches.
func (e *Engine) reclaimSourceLeases(ctx context.Context) {
	srcs, err := e.store.SourcesLeasedByOthers(ctx, e.instance, e.now())
	if err != nil {
		if ctx.Err() == nil {
			e.log.WarnContext(ctx, "look for fetches left leased by an earlier process", "err", err)
		}
		return
	}
	for i := range srcs {
		e.giveBack(ctx, &srcs[i])
	}
	if len(srcs) > 0 {
		e.log.InfoContext(ctx, "took back fetches an earlier process left leased", "sources", len(srcs))
	}
}

// reclaimOwnSourceLeases gives back, at start, the sources leased under
// this engine's instance name: a process of that name died holding them, and
// with a stable name (Config.Instance) its restart fetches them at once
// instead of after their leases run out, on any store.
func (e *Engine) reclaimOwnSourceLeases(ctx context.Context) {
	srcs, err := e.store.SourcesLeasedBy(ctx, e.instance)
	if err != nil {
		if ctx.Err() == nil {
			e.log.WarnContext(ctx, "look for fetches left leased under this instance name", "instance", e.instance, "err", err)
		}
		return
	}
	for i := range srcs {
		e.giveBack(ctx, &srcs[i])
	}
	if len(srcs) > 0 {
		e.log.InfoContext(ctx, "took back fetches a process of this instance name left leased",
			"instance", e.instance, "sources", len(srcs))
	}
}

// defaultScheduler polls hourly and backs off exponentially on errors, up
// to a day.
type defaultScheduler struct{}

func (defaultScheduler) Next(now time.Time, src *hub.Source, res *hub.FetchResult, err error) (time.Time, string) {
	if err != nil {
		d := time.Minute << min(src.ConsecutiveErrors, 10)
		return now.Add(min(d, 24*time.Hour)), "error backoff"
	}
	return now.Add(time.Hour), "default interval"
}
