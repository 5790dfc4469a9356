package delivery

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/pingd/pingd/hub"
)

// stateWriter saves the delivery states of finished deliveries several at
// a time: whatever has finished while the previous write ran goes into the
// next one, in one transaction. A cursor write per delivery, each its own
// transaction, was the limit of webhook fan-out (docs/benchmarks.md).
//
// After the first state of a write it waits for more only while
// deliveries are still running (busy) and states keep coming, each within
// stateGap of the one before, as PostgreSQL's commit_delay waits only when
// other transactions are active: the states of a fan-out then join one
// transaction, written after its last delivery, instead of two or three
// competing with the deliveries for the CPU. A lone delivery is written at
// once, and one that waits for nothing but a slow receiver elsewhere (a
// subscriber catching up on a backlog, batch by batch) waits stateGap at
// most. The whole wait is bounded by maxStateLinger.
//
// A subscription stays leased until its state is written, so nobody else
// takes it meanwhile; if the process dies first, the lease runs out and
// the delivery is repeated (at least once, as before, over a window of
// one write more).
type stateWriter struct {
	cfg     stateWriterConfig
	quiet   chan struct{}
	in      chan pendingState
	stopped chan struct{}
	once    sync.Once
}

// stateWriterConfig is what a stateWriter works with.
type stateWriterConfig struct {
	store stateStore
	log   *slog.Logger
	// wake is called after a write for the nodes whose saves asked for it
	// (nil: nothing is).
	wake func(nodeID int64)
	// busy reports whether deliveries are running whose states will come
	// (nil: never); the writer's settled is called when it may have
	// turned false.
	busy func() bool
	// now is the clock the states' due times are read with.
	now func() time.Time
	// linger and gap are maxStateLinger and stateGap unless set (tests).
	linger, gap time.Duration
}

// pendingState is one subscription's state waiting to be written.
type pendingState struct {
	hub.SavedDeliveryState
	nodeID int64
	// wake: look at the node again once written (more events may wait),
	// unless due is set and the write lands before it (a subscription put
	// off until due is looked for then anyway).
	wake bool
	due  time.Time
}

// maxStatesPerWrite bounds one transaction of saves; maxStateLinger is how
// long the writer waits for more after the first, while deliveries run;
// stateGap how long it waits for the next one.
const (
	maxStatesPerWrite = 256
	maxStateLinger    = 10 * time.Millisecond
	stateGap          = 2 * time.Millisecond
)

func newStateWriter(cfg stateWriterConfig) *stateWriter {
	if cfg.log == nil {
		cfg.log = slog.Default()
	}
	if cfg.wake == nil {
		cfg.wake = func(int64) {}
	}
	if cfg.busy == nil {
		cfg.busy = func() bool { return false }
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.linger <= 0 {
		cfg.linger = maxStateLinger
	}
	if cfg.gap <= 0 {
		cfg.gap = stateGap
	}
	w := &stateWriter{
		cfg:     cfg,
		quiet:   make(chan struct{}, 1),
		in:      make(chan pendingState, 16*maxStatesPerWrite),
		stopped: make(chan struct{}),
	}
	go w.loop()
	return w
}

// save queues a state; it blocks while the writer is a full write behind.
func (w *stateWriter) save(p pendingState) { w.in <- p }

// settled tells the writer that busy may have turned false. Never blocks.
func (w *stateWriter) settled() {
	select {
	case w.quiet <- struct{}{}:
	default:
	}
}

// close writes what is queued and stops. No save may follow.
func (w *stateWriter) close() {
	w.once.Do(func() { close(w.in) })
	<-w.stopped
}

func (w *stateWriter) loop() {
	defer close(w.stopped)
	batch := make([]pendingState, 0, maxStatesPerWrite)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for p := range w.in {
		batch = w.collect(append(batch[:0], p), timer)
		w.write(batch)
	}
}

// collect adds to batch what is queued and, while deliveries run and
// their states keep coming, what comes until the batch is full or the
// linger ends.
func (w *stateWriter) collect(batch []pendingState, timer *time.Timer) []pendingState {
	deadline := time.Now().Add(w.cfg.linger)
	for len(batch) < maxStatesPerWrite {
		p, open, got := w.queued()
		if !got && !w.cfg.busy() {
			// A delivery queues its state before it stops counting as
			// busy, so once busy is false one more look at the queue
			// finds every state there is to wait for.
			p, open, got = w.queued()
			if !got {
				return batch
			}
		}
		if got {
			if !open {
				return batch
			}
			batch = append(batch, p)
			continue
		}
		wait := min(w.cfg.gap, time.Until(deadline))
		if wait <= 0 {
			return batch
		}
		timer.Reset(wait)
		select {
		case p, open := <-w.in:
			timer.Stop()
			if !open {
				return batch
			}
			batch = append(batch, p)
		case <-w.quiet:
			timer.Stop()
		case <-timer.C:
			return batch // none came within the gap, or the linger is over
		}
	}
	return batch
}

// queued takes a state from the queue without waiting: got is false when
// none is there, open false when the queue is closed.
func (w *stateWriter) queued() (p pendingState, open, got bool) {
	select {
	case p, open = <-w.in:
		return p, open, true
	default:
		return p, true, false
	}
}

func (w *stateWriter) write(batch []pendingState) {
	states := make([]hub.SavedDeliveryState, len(batch))
	for i, p := range batch {
		states[i] = p.SavedDeliveryState
	}
	// These record what receivers already answered: written even when
	// shutdown has begun (persistContext).
	ctx, cancel := persistContext(context.Background())
	err := w.cfg.store.SaveDeliveryStates(ctx, states)
	cancel()
	if err != nil {
		// All or nothing failed: try them one by one, so that one write's
		// trouble does not make every delivery of the batch be repeated.
		w.cfg.log.Warn("save delivery states together; saving them one by one", "subscriptions", len(states), "err", err)
		for _, st := range states {
			ctx, cancel := persistContext(context.Background())
			err := w.cfg.store.SaveDeliveryState(ctx, st.ID, st.State)
			cancel()
			switch {
			case err == nil, errors.Is(err, hub.ErrNotFound):
			case errors.Is(err, hub.ErrLeaseLost):
				// Its lease ran out and another process serves it now:
				// that one's state stands (the delivery may be repeated).
				w.cfg.log.Warn("delivery state not saved: the subscription's lease ran out and another process holds it",
					"subscription", st.ID, "err", err)
			default:
				// Its lease runs out and the delivery is repeated: at
				// least once.
				w.cfg.log.Error("save delivery state", "subscription", st.ID, "err", err)
			}
		}
	}
	woken := map[int64]bool{}
	now := w.cfg.now()
	for _, p := range batch {
		if p.wake && !woken[p.nodeID] && !now.Before(p.due) {
			woken[p.nodeID] = true
			w.cfg.wake(p.nodeID)
		}
	}
}
