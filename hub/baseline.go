package hub

import (
	"context"
	"fmt"
	"time"
)

// retryFailingSourceAfter is how long after a failed fetch a source
// without a baseline may be fetched again ahead of its backoff because a
// subscription or a URL names it (ensureBaseline).
const retryFailingSourceAfter = time.Minute

// ensureBaseline schedules the first fetch of a source not fetched yet,
// when a subscription or a URL names it again. After a failed fetch it does
// so only once retryFailingSourceAfter has passed: anyone may subscribe
// (and unsubscribe, and subscribe again), and hurrying the fetch each time
// would make pingd hammer an origin that is already failing. Within that
// minute the answer comes at once, before any baseline.
func (h *Hub) ensureBaseline(ctx context.Context, sourceID int64) error {
	src, err := h.stores.Sources.Source(ctx, sourceID)
	if err != nil {
		return err
	}
	if src.ConsecutiveErrors > 0 && h.now().Sub(src.LastFetchAt) < retryFailingSourceAfter {
		return nil
	}
	return h.scheduleBaseline(ctx, src)
}

// ReasonNewSource is the NextFetchReason of a source waiting for its
// baseline fetch; ReasonRevived that of a source gone before that a new
// node follows.
const (
	ReasonNewSource = "new source"
	ReasonRevived   = "gone before; followed by a new node"
)

// scheduleBaseline makes a source that has no baseline yet due now and
// waits for that fetch (awaitBaseline). Learning of a source is not a
// ping: the scheduler polls sources that ping only at a safety-net
// interval, so this must not record one.
func (h *Hub) scheduleBaseline(ctx context.Context, src *Source) error {
	if src.Baselined || src.Gone {
		return nil
	}
	at := h.now()
	if err := h.stores.Sources.ScheduleSource(ctx, src.ID, at, ReasonNewSource); err != nil {
		return fmt.Errorf("schedule first fetch of %s: %w", src.URL, err)
	}
	h.WakeFetcher()
	h.awaitBaseline(ctx, src, at)
	return nil
}

// awaitBaseline waits for the fetch of src made due at `at` (the engine's
// AwaitFetch); at once when no fetch engine is configured.
func (h *Hub) awaitBaseline(ctx context.Context, src *Source, at time.Time) {
	if h.fetches != nil {
		h.fetches.AwaitFetch(ctx, src, at)
	}
}
