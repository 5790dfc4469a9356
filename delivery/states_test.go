package delivery

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
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
	rec   *writeRecorder
	w     *stateWriter
	busy  atomic.Bool
	subs  []hub.Subscription
	mu    sync.Mutex
	woken []int64
}

func newStateWriterFixture(t *testing.T, n int, linger, gap time.Duration) *stateWriterFixture {
	t.Helper()
	ctx := context.Background()
	st := openTestStore(t)
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
	f.w = newStateWriter(stateWriterConfig{store: f.rec, log: quietLogger(), busy: f.busy.Load, linger: linger, gap: gap,
		wake: func(node int64) {
			f.mu.Lock()
			f.woken = append(f.woken, node)
			f.mu.Unlock()
		}})
	t.Cleanup(f.w.close)
	return f
}

// save queues subscription i's state with its cursor at seq.
func (f *stateWriterFixture) save(i int, seq int64) { f.saveWaking(i, seq, false, time.Time{}) }

// saveWaking is save asking for a look at the node once written, if not
// before due.
func (f *stateWriterFixture) saveWaking(i int, seq int64, wake bool, due time.Time) {
	f.w.save(pendingState{SavedDeliveryState: hub.SavedDeliveryState{ID: f.subs[i].ID, State: hub.DeliveryState{Cursor: seq}},
		nodeID: f.subs[i].NodeID, wake: wake, due: due})
}

func (f *stateWriterFixture) wakes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.woken)
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
// transaction when the last one is done, not one transaction each. The
// writer runs in a synctest bubble: once every goroutine in it waits
// (synctest.Wait), a writer that did not wait for the deliveries would
// have written.
func TestStatesOfRunningDeliveriesAreWrittenTogether(t *testing.T) {
	synctest.Test(t, testStatesOfRunningDeliveriesAreWrittenTogether)
}

func testStatesOfRunningDeliveriesAreWrittenTogether(t *testing.T) {
	f := newStateWriterFixture(t, 3, time.Hour, time.Hour)
	f.busy.Store(true)
	for i := range 3 {
		f.save(i, 7)
	}
	synctest.Wait()
	if got := f.rec.written(); len(got) != 0 {
		t.Fatalf("states written while deliveries still run: writes %v", got)
	}
	f.busy.Store(false)
	f.w.settled()
	testenv.WaitFor(t, 15*time.Second, "the states written", func() bool { return len(f.rec.written()) > 0 })
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
	f := newStateWriterFixture(t, 1, time.Hour, time.Hour)
	f.save(0, 3)
	testenv.WaitFor(t, 15*time.Second, "the state written", func() bool { return len(f.rec.written()) == 1 })
	if c := f.cursor(t, 0); c != 3 {
		t.Errorf("cursor %d, want 3", c)
	}
}

// Deliveries that keep running hold finished ones' states no longer than
// the linger in all, nor longer than the gap without another state coming
// (a subscriber catching up batch by batch beside a slow receiver
// elsewhere waits the gap for its next batch, not the linger).
func TestWaitForMoreIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name        string
		linger, gap time.Duration
	}{
		{"by the linger", 50 * time.Millisecond, time.Hour},
		{"by the gap", time.Hour, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newStateWriterFixture(t, 1, tc.linger, tc.gap)
			f.busy.Store(true) // and never settles
			f.save(0, 5)
			testenv.WaitFor(t, 15*time.Second, "the state written", func() bool { return len(f.rec.written()) == 1 })
			if c := f.cursor(t, 0); c != 5 {
				t.Errorf("cursor %d, want 5", c)
			}
		})
	}
}

// A full write does not wait for the deliveries still running.
func TestFullWriteGoesAtOnce(t *testing.T) {
	f := newStateWriterFixture(t, maxStatesPerWrite+1, time.Hour, time.Hour)
	f.busy.Store(true)
	for i := range maxStatesPerWrite + 1 {
		f.save(i, 2)
	}
	testenv.WaitFor(t, 15*time.Second, "a full write", func() bool { return len(f.rec.written()) == 1 })
	if got := f.rec.written(); got[0] != maxStatesPerWrite {
		t.Fatalf("writes %v, want one of %d", got, maxStatesPerWrite)
	}
	// The one left over waits for the running deliveries, then goes too.
	f.busy.Store(false)
	f.w.settled()
	testenv.WaitFor(t, 15*time.Second, "the rest written", func() bool { return len(f.rec.written()) == 2 })
	if c := f.cursor(t, maxStatesPerWrite); c != 2 {
		t.Errorf("last subscription's cursor %d, want 2", c)
	}
}

// Closing the writer writes what waits, even while deliveries count as
// running.
func TestCloseWritesWhatWaits(t *testing.T) {
	f := newStateWriterFixture(t, 2, time.Hour, time.Hour)
	f.busy.Store(true)
	f.save(0, 4)
	f.save(1, 4)
	f.w.close()
	if got := f.rec.written(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("writes %v, want one of 2", got)
	}
}

// States that keep coming, each within the gap of the one before, go
// into one write. On the fake time of a synctest bubble each comes 900 ms
// after the one before: within the gap, however slow the machine.
func TestStatesWithinTheGapAreWrittenTogether(t *testing.T) {
	synctest.Test(t, testStatesWithinTheGapAreWrittenTogether)
}

func testStatesWithinTheGapAreWrittenTogether(t *testing.T) {
	f := newStateWriterFixture(t, 3, time.Hour, time.Second)
	f.busy.Store(true)
	for i := range 3 {
		f.save(i, 8)
		time.Sleep(900 * time.Millisecond)
	}
	testenv.WaitFor(t, 15*time.Second, "the states written", func() bool { return len(f.rec.written()) > 0 })
	if got := f.rec.written(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("writes %v, want one of 3", got)
	}
}

// A state that asks for a look at its node once written, but not before
// a due time, gets it only if the write lands at or after that time.
func TestWakeAfterWriteWaitsForDue(t *testing.T) {
	f := newStateWriterFixture(t, 2, time.Hour, time.Hour)
	f.saveWaking(0, 1, true, time.Now().Add(time.Hour))
	testenv.WaitFor(t, 15*time.Second, "the first state written", func() bool { return len(f.rec.written()) == 1 })
	if n := f.wakes(); n != 0 {
		t.Fatalf("a write before the due time woke the node (%d wakes)", n)
	}
	f.saveWaking(1, 1, true, time.Now().Add(-time.Second))
	testenv.WaitFor(t, 15*time.Second, "the node woken after the second write", func() bool { return f.wakes() == 1 })
}

// A delivery's state is written, and its lease released, as soon as the
// last delivery running beside it ends, not after the linger or the gap
// (here an hour each), even when that last one leaves no state to write
// (its receiver asked to be removed): the engine tells the writer when
// nothing runs any more.
func TestStateIsWrittenWhenTheLastDeliveryEnds(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Now, c.PollInterval = time.Now, time.Hour
		c.stateLinger, c.stateGap = time.Hour, time.Hour
	})
	fast, slow := newReceiver(t, h.clock), newReceiver(t, h.clock)
	slow.set(func(r *receiver) {
		r.answer = func(*received) (int, string) {
			time.Sleep(300 * time.Millisecond) // the fast one's state waits meanwhile
			return http.StatusGone, ""
		}
	})
	kept := h.subscribe(fast.URL("/kept"), hub.SubActive, hub.Options{})
	gone := h.subscribe(slow.URL("/gone"), hub.SubActive, hub.Options{})
	h.publish("a")
	testenv.WaitFor(t, 15*time.Second, "the slow receiver's subscription removed", func() bool { return h.sub(gone) == nil })
	if s := h.settled(kept); s.Cursor != h.lastSeq() {
		t.Fatalf("cursor %d after the delivery, want %d", s.Cursor, h.lastSeq())
	}
}

// A subscriber catching up on a backlog batch by batch keeps moving while
// another delivery hangs on a slow receiver: each batch's state waits for
// company no longer than the gap, not the linger (here an hour).
func TestBacklogBesideAHangingDeliveryKeepsMoving(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Now, c.PollInterval = time.Now, time.Hour
		c.Batch = 2
		c.stateLinger = time.Hour
	})
	fast, hanging := newReceiver(t, h.clock), newReceiver(t, h.clock)
	release := make(chan struct{})
	hanging.set(func(r *receiver) {
		r.answer = func(*received) (int, string) {
			<-release
			return http.StatusNoContent, ""
		}
	})
	t.Cleanup(func() { close(release) })
	h.subscribe(hanging.URL("/hangs"), hub.SubActive, hub.Options{})
	h.subscribe(fast.URL("/backlog"), hub.SubActive, hub.Options{})
	h.publish("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
	testenv.WaitFor(t, 15*time.Second, "the whole backlog delivered", func() bool { return len(fast.deliveries("/backlog")) == 5 })
}

// slowSaves is the real store whose delivery-state writes take a while,
// so they land after whatever is scheduled meanwhile.
type slowSaves struct {
	store.Store
	delay time.Duration
}

func (s *slowSaves) SaveDeliveryStates(ctx context.Context, states []hub.SavedDeliveryState) error {
	time.Sleep(s.delay)
	return s.Store.SaveDeliveryStates(ctx, states)
}

// A subscription put off because its host's queue was full is looked for
// again when due; when its state is written only after that look (which
// then found it still leased), the write itself brings the look, so it is
// served without waiting for the next poll (here an hour away).
func TestPostponedSubscriptionWrittenLateIsServed(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Now, c.PollInterval = time.Now, time.Hour
		c.Workers, c.PerHost = 1, 1 // one request at a time, a queue of 16, the rest put off
		c.Store = &slowSaves{Store: c.Store.(store.Store), delay: 200 * time.Millisecond}
	})
	rc := newReceiver(t, h.clock)
	const n = 20
	for i := range n {
		h.subscribe(rc.URL(fmt.Sprintf("/p%d", i)), hub.SubActive, hub.Options{})
	}
	h.publish("a")
	testenv.WaitFor(t, 15*time.Second, "every subscriber's delivery", func() bool { return len(rc.deliveries("")) >= n })
}
