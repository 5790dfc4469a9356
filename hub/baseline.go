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

// awaitBaseline waits, up to Config.BaselineWait, until the fetch of src
// made due at `at` is over: the baseline is stored, or the fetch failed or
// was put off. Whoever learnt of the source answers only then: a change
// made between an earlier answer and the fetch went into the baseline, and
// the ping that announced it notified nothing. It returns at once when no
// fetch loop runs in this process (Run not started). A WaitObserver in
// parent's context hears of the wait.
func (h *Hub) awaitBaseline(parent context.Context, src *Source, at time.Time) {
	ctx, cancel := context.WithTimeout(parent, h.cfg.BaselineWait)
	defer cancel()
	// Another process sharing the store may claim the fetch, and this one
	// then hears nothing of it: look at the store now and then.
	var poll <-chan time.Time
	if !h.cfg.Exclusive {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		poll = t.C
	}
	var ended func()
	defer func() {
		if ended != nil {
			ended()
		}
	}()
	for {
		fetched, ok := h.fetchedSignal(src.ID)
		if !ok {
			return
		}
		s, err := h.stores.Sources.Source(ctx, src.ID)
		if err != nil || s.Baselined || s.Gone || s.NextFetchAt.IsZero() || s.NextFetchAt.After(at) {
			// Not due any more without a baseline: the fetch failed or
			// was put off, and the status shows why.
			return
		}
		if ended == nil {
			ended = StartSlowWait(parent)
		}
		select {
		case <-fetched:
		case <-poll:
		case <-ctx.Done():
			if parent.Err() == nil {
				h.log.InfoContext(parent, "answering before the baseline fetch of a source is over",
					"source", src.URL, "waited", h.cfg.BaselineWait)
			}
			return
		}
	}
}

// fetchedSignal returns the channel closed when this process next stores
// a fetch outcome of the source; false when no fetch loop runs here.
func (h *Hub) fetchedSignal(sourceID int64) (<-chan struct{}, bool) {
	h.fetchedMu.Lock()
	defer h.fetchedMu.Unlock()
	if !h.fetchLoopOn {
		return nil, false
	}
	ch, ok := h.fetched[sourceID]
	if !ok {
		ch = make(chan struct{})
		h.fetched[sourceID] = ch
	}
	return ch, true
}

// signalFetched tells the waiters of the source that an outcome of its
// fetch is stored.
func (h *Hub) signalFetched(sourceID int64) {
	h.fetchedMu.Lock()
	defer h.fetchedMu.Unlock()
	if ch, ok := h.fetched[sourceID]; ok {
		close(ch)
		delete(h.fetched, sourceID)
	}
}

// setFetchLoopOn records whether the fetch loop runs; when it stops,
// every waiter is let go.
func (h *Hub) setFetchLoopOn(on bool) {
	h.fetchedMu.Lock()
	defer h.fetchedMu.Unlock()
	h.fetchLoopOn = on
	if !on {
		for id, ch := range h.fetched {
			close(ch)
			delete(h.fetched, id)
		}
	}
}
