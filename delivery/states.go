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
// deliveries are still running (busy), as PostgreSQL's commit_delay waits
// only when other transactions are active: their states join the same
// transaction instead of a commit each. A fan-out of a hundred is then
// written once, after its last delivery, not in two or three transactions
// competing with the deliveries for the CPU; a lone delivery is written
// at once. The wait is bounded by maxStateLinger.
//
// A subscription stays leased until its state is written, so nobody else
// takes it meanwhile; if the process dies first, the lease runs out and
// the delivery is repeated (at least once, as before, over a window of
// one write more).
type stateWriter struct {
	store hub.Store
	log   *slog.Logger
	// wake is called after a write for the nodes whose saves asked for it.
	wake func(nodeID int64)
	// busy reports whether deliveries are running whose states will come;
	// quiet is signalled when it may have turned false.
	busy  func() bool
	quiet chan struct{}
	// linger bounds the wait for more (maxStateLinger; tests change it).
	linger time.Duration

	in      chan pendingState
	stopped chan struct{}
	once    sync.Once
}

// pendingState is one subscription's state waiting to be written.
type pendingState struct {
	hub.SavedDeliveryState
	nodeID int64
	// wake: look at the node again once written (more events may wait).
	wake bool
}

// maxStatesPerWrite bounds one transaction of saves; maxStateLinger is how
// long the writer waits for more after the first, while deliveries run.
const (
	maxStatesPerWrite = 256
	maxStateLinger    = 10 * time.Millisecond
)

// newStateWriter starts a writer; busy may be nil (never wait for more),
// linger 0 (maxStateLinger).
func newStateWriter(store hub.Store, log *slog.Logger, wake func(int64), busy func() bool, linger time.Duration) *stateWriter {
	if busy == nil {
		busy = func() bool { return false }
	}
	if linger <= 0 {
		linger = maxStateLinger
	}
	w := &stateWriter{
		store:   store,
		log:     log,
		wake:    wake,
		busy:    busy,
		quiet:   make(chan struct{}, 1),
		linger:  linger,
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
	linger := time.NewTimer(0)
	<-linger.C
	for p := range w.in {
		batch = append(batch[:0], p)
		linger.Reset(w.linger)
		batch = w.collect(batch, linger.C)
		linger.Stop()
		w.write(batch)
	}
}

// collect adds to batch what is queued and, while deliveries run, what
// comes until the batch is full or the linger ends.
func (w *stateWriter) collect(batch []pendingState, linger <-chan time.Time) []pendingState {
	for len(batch) < maxStatesPerWrite {
		select {
		case p, ok := <-w.in:
			if !ok {
				return batch
			}
			batch = append(batch, p)
			continue
		default:
		}
		// Nothing queued. A delivery queues its state before it stops
		// counting as busy, so once busy is false one more look at the
		// queue finds every state there is to wait for.
		if !w.busy() {
			select {
			case p, ok := <-w.in:
				if !ok {
					return batch
				}
				batch = append(batch, p)
				continue
			default:
				return batch
			}
		}
		select {
		case p, ok := <-w.in:
			if !ok {
				return batch
			}
			batch = append(batch, p)
		case <-w.quiet:
		case <-linger:
			return batch
		}
	}
	return batch
}

func (w *stateWriter) write(batch []pendingState) {
	states := make([]hub.SavedDeliveryState, len(batch))
	for i, p := range batch {
		states[i] = p.SavedDeliveryState
	}
	// These record what receivers already answered: written even when
	// shutdown has begun (persistContext).
	ctx, cancel := persistContext(context.Background())
	err := w.store.SaveDeliveryStates(ctx, states)
	cancel()
	if err != nil {
		// All or nothing failed: try them one by one, so that one write's
		// trouble does not make every delivery of the batch be repeated.
		w.log.Warn("save delivery states together; saving them one by one", "subscriptions", len(states), "err", err)
		for _, st := range states {
			ctx, cancel := persistContext(context.Background())
			err := w.store.SaveDeliveryState(ctx, st.ID, st.State)
			cancel()
			if err != nil && !errors.Is(err, hub.ErrNotFound) {
				// Its lease runs out and the delivery is repeated: at
				// least once.
				w.log.Error("save delivery state", "subscription", st.ID, "err", err)
			}
		}
	}
	woken := map[int64]bool{}
	for _, p := range batch {
		if p.wake && !woken[p.nodeID] {
			woken[p.nodeID] = true
			w.wake(p.nodeID)
		}
	}
}
