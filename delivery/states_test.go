package delivery

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// writeRecorder is a real SQLite store that remembers the size of every
// SaveDeliveryStates call.
type writeRecorder struct {
	store.Store
	mu     sync.Mutex
	writes []int
}

func (r *writeRecorder) SaveDeliveryStates(ctx context.Context, states []hub.SavedDeliveryState) error {
	err := r.Store.SaveDeliveryStates(ctx, states)
	r.mu.Lock()
	r.writes = append(r.writes, len(states))
	r.mu.Unlock()
	return err
}

func (r *writeRecorder) written() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.writes...)
}

// stateWriterFixture is a state writer on a store with n webhook
// subscriptions, whose deliveries count as running while busy is set.
type stateWriterFixture struct {
	rec  *writeRecorder
	w    *stateWriter
	busy atomic.Bool
	subs []hub.Subscription
}

func newStateWriterFixture(t *testing.T, n int, linger time.Duration) *stateWriterFixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "pingd.db"), store.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	node := &hub.Node{Name: "news", NodeConfig: hub.DefaultNodeConfig()}
	if err := st.CreateNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	f := &stateWriterFixture{rec: &writeRecorder{Store: st}}
	for i := range n {
		sub := hub.Subscription{NodeID: node.ID, Kind: hub.KindWebhook, Address: fmt.Sprintf("http://127.0.0.1:1/hook/%d", i)}
		if _, err := st.PutSubscription(ctx, &sub); err != nil {
			t.Fatal(err)
		}
		f.subs = append(f.subs, sub)
	}
	f.w = newStateWriter(f.rec, quietLogger(), func(int64) {}, f.busy.Load, linger)
	t.Cleanup(f.w.close)
	return f
}

// save queues subscription i's state with its cursor at seq.
func (f *stateWriterFixture) save(i int, seq int64) {
	f.w.save(pendingState{SavedDeliveryState: hub.SavedDeliveryState{ID: f.subs[i].ID, State: hub.DeliveryState{Cursor: seq}}, nodeID: f.subs[i].NodeID})
}

func (f *stateWriterFixture) cursor(t *testing.T, i int) int64 {
	t.Helper()
	subs, err := f.rec.Subscriptions(context.Background(), hub.SubscriptionFilter{NodeID: f.subs[i].NodeID})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range subs {
		if s.ID == f.subs[i].ID {
			return s.Cursor
		}
	}
	t.Fatalf("subscription %d is gone", f.subs[i].ID)
	return 0
}

// While deliveries run, their states wait for each other and go into one
// transaction when the last one is done, not one transaction each.
func TestStatesOfRunningDeliveriesAreWrittenTogether(t *testing.T) {
	f := newStateWriterFixture(t, 3, time.Hour)
	f.busy.Store(true)
	for i := range 3 {
		f.save(i, 7)
	}
	// Long enough for a writer that did not wait to have written.
	time.Sleep(100 * time.Millisecond)
	if got := f.rec.written(); len(got) != 0 {
		t.Fatalf("states written while deliveries still run: writes %v", got)
	}
	f.busy.Store(false)
	f.w.settled()
	eventually(t, "the states written", func() bool { return len(f.rec.written()) > 0 })
	if got := f.rec.written(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("writes %v, want one of 3", got)
	}
	for i := range 3 {
		if c := f.cursor(t, i); c != 7 {
			t.Errorf("subscription %d: cursor %d, want 7", i, c)
		}
	}
}

// With nothing else running, a state is written at once, not after a
// linger.
func TestLoneStateIsWrittenAtOnce(t *testing.T) {
	f := newStateWriterFixture(t, 1, time.Hour)
	f.save(0, 3)
	eventually(t, "the state written", func() bool { return len(f.rec.written()) == 1 })
	if c := f.cursor(t, 0); c != 3 {
		t.Errorf("cursor %d, want 3", c)
	}
}

// Deliveries that keep running do not hold finished ones' states longer
// than the linger.
func TestLingerBoundsTheWait(t *testing.T) {
	f := newStateWriterFixture(t, 1, 50*time.Millisecond)
	f.busy.Store(true) // and never settles
	f.save(0, 5)
	eventually(t, "the state written", func() bool { return len(f.rec.written()) == 1 })
	if c := f.cursor(t, 0); c != 5 {
		t.Errorf("cursor %d, want 5", c)
	}
}

// A full write does not wait for the deliveries still running.
func TestFullWriteGoesAtOnce(t *testing.T) {
	f := newStateWriterFixture(t, maxStatesPerWrite+1, time.Hour)
	f.busy.Store(true)
	for i := range maxStatesPerWrite + 1 {
		f.save(i, 2)
	}
	eventually(t, "a full write", func() bool { return len(f.rec.written()) == 1 })
	if got := f.rec.written(); got[0] != maxStatesPerWrite {
		t.Fatalf("writes %v, want one of %d", got, maxStatesPerWrite)
	}
	// The one left over waits for the running deliveries, then goes too.
	f.busy.Store(false)
	f.w.settled()
	eventually(t, "the rest written", func() bool { return len(f.rec.written()) == 2 })
	if c := f.cursor(t, maxStatesPerWrite); c != 2 {
		t.Errorf("last subscription's cursor %d, want 2", c)
	}
}

// Closing the writer writes what waits, even while deliveries count as
// running.
func TestCloseWritesWhatWaits(t *testing.T) {
	f := newStateWriterFixture(t, 2, time.Hour)
	f.busy.Store(true)
	f.save(0, 4)
	f.save(1, 4)
	f.w.close()
	if got := f.rec.written(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("writes %v, want one of 2", got)
	}
}
