package fetching

import (
	"context"
	"time"

	"github.com/pingd/pingd/hub"
)

// AwaitFetch waits, up to Config.BaselineWait, until the fetch of src
// made due at `at` is over: the baseline is stored, or the fetch failed or
// was put off. Whoever learnt of the source answers only then: a change
// made between an earlier answer and the fetch went into the baseline, and
// the ping that announced it notified nothing. It returns at once when no
// fetch loop runs in this process (Run not started). A WaitObserver in
// parent's context hears of the wait (hub.StartSlowWait).
func (e *Engine) AwaitFetch(parent context.Context, src *hub.Source, at time.Time) {
	ctx, cancel := context.WithTimeout(parent, e.cfg.BaselineWait)
	defer cancel()
	// Another process sharing the store may claim the fetch, and this one
	// then hears nothing of it: look at the store now and then.
	var poll <-chan time.Time
	if !e.cfg.Exclusive {
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
		fetched, ok := e.fetchedSignal(src.ID)
		if !ok {
			return
		}
		s, err := e.store.Source(ctx, src.ID)
		if err != nil || s.Baselined || s.Gone || s.NextFetchAt.IsZero() || s.NextFetchAt.After(at) {
			// Not due any more without a baseline: the fetch failed or
			// was put off, and the status shows why.
			return
		}
		if ended == nil {
			ended = hub.StartSlowWait(parent)
		}
		select {
		case <-fetched:
		case <-poll:
		case <-ctx.Done():
			if parent.Err() == nil {
				e.log.InfoContext(parent, "answering before the baseline fetch of a source is over",
					"source", src.URL, "waited", e.cfg.BaselineWait)
			}
			return
		}
	}
}

// fetchedSignal returns the channel closed when this process next stores
// a fetch outcome of the source; false when no fetch loop runs here.
func (e *Engine) fetchedSignal(sourceID int64) (<-chan struct{}, bool) {
	e.fetchedMu.Lock()
	defer e.fetchedMu.Unlock()
	if !e.fetchLoopOn {
		return nil, false
	}
	ch, ok := e.fetched[sourceID]
	if !ok {
		ch = make(chan struct{})
		e.fetched[sourceID] = ch
	}
	return ch, true
}

// signalFetched tells the waiters of the source that an outcome of its
// fetch is stored.
func (e *Engine) signalFetched(sourceID int64) {
	e.fetchedMu.Lock()
	defer e.fetchedMu.Unlock()
	if ch, ok := e.fetched[sourceID]; ok {
		close(ch)
		delete(e.fetched, sourceID)
	}
}

// setFetchLoopOn records whether the fetch loop runs; when it stops,
// every waiter is let go.
func (e *Engine) setFetchLoopOn(on bool) {
	e.fetchedMu.Lock()
	defer e.fetchedMu.Unlock()
	e.fetchLoopOn = on
	if !on {
		for id, ch := range e.fetched {
			close(ch)
			delete(e.fetched, id)
		}
	}
}
