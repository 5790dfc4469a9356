package hub_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// batchCountingStore counts the batches the ping queue commits and can
// hold them back, to fill the queue.
type batchCountingStore struct {
	store.Store
	mu      sync.Mutex
	batches []int // the pings of each batch committed
	started int
	hold    chan struct{} // when set, a batch waits for it to close
}

func (s *batchCountingStore) RecordPingsMarkingDue(ctx context.Context, batch []hub.PingToRecord, at time.Time) ([][]int64, error) {
	s.mu.Lock()
	s.started++
	hold := s.hold
	s.mu.Unlock()
	if hold != nil {
		<-hold
	}
	marked, err := s.Store.RecordPingsMarkingDue(ctx, batch, at)
	s.mu.Lock()
	s.batches = append(s.batches, len(batch))
	s.mu.Unlock()
	return marked, err
}

func (s *batchCountingStore) startedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

func (s *batchCountingStore) batchCount() (batches, pings int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.batches {
		pings += n
	}
	return len(s.batches), pings
}

// TestPingCommitDelay: with Config.PingCommitDelay a ping is answered
// once queued; the queue is committed in batches within the delay, each
// ping heard of by the listeners and marking its sources due as a ping
// answered after its commit does, and whatever is queued when Run stops
// is committed before Run returns. Once Run has stopped, a ping is
// recorded before it is answered again.
func TestPingCommitDelay(t *testing.T) {
	ctx := t.Context()
	st := &batchCountingStore{Store: openStore(t)}
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Logger: testLogger(t), PingCommitDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	src, _, err := st.EnsureSource(ctx, "http://blog.example/feed")
	if err != nil {
		t.Fatal(err)
	}
	var heard pingHeard
	h.AddPingListener(&heard)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { _ = h.Run(runCtx); close(ran) }()

	n, err := h.Ping(ctx, hub.Ping{Dialect: "rest"}, []string{"http://blog.example/feed"}, nil)
	if err != nil || n != 0 {
		t.Fatalf("queued ping answered %d, %v; want 0 (not known yet), nil", n, err)
	}
	for i := range 9 {
		if _, err := h.Ping(ctx, hub.Ping{Dialect: "rest"}, []string{"http://other.example/" + string(rune('a'+i))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		heard.mu.Lock()
		n := len(heard.recs)
		heard.mu.Unlock()
		if n == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the queued pings were not committed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if batches, _ := st.batchCount(); batches > 2 {
		t.Errorf("10 pings sent at once were committed in %d batches", batches)
	}
	_, total, err := h.Pings(ctx, time.Time{}, 0)
	if err != nil || total != 10 {
		t.Fatalf("%d pings stored (%v), want 10", total, err)
	}
	got, err := st.Source(ctx, src.ID)
	if err != nil || got.NextFetchAt.IsZero() {
		t.Fatalf("the pinged source was not marked due: %+v, %v", got, err)
	}
	heard.mu.Lock()
	if heard.recs[0].Matched != 1 || heard.recs[0].Ping.ID == 0 {
		t.Errorf("listeners heard of the first ping as %+v", heard.recs[0])
	}
	heard.mu.Unlock()

	// Queued when Run stops: committed before it returns.
	if _, err := h.Ping(ctx, hub.Ping{Dialect: "rest"}, []string{"http://late.example/"}, nil); err != nil {
		t.Fatal(err)
	}
	stop()
	<-ran
	if _, total, _ := h.Pings(ctx, time.Time{}, 0); total != 11 {
		t.Fatalf("%d pings stored after Run returned, want 11", total)
	}
	// After Run: recorded before the answer.
	if _, err := h.Ping(ctx, hub.Ping{Dialect: "rest"}, []string{"http://after.example/"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, total, _ := h.Pings(ctx, time.Time{}, 0); total != 12 {
		t.Fatalf("%d pings stored after a ping once Run returned, want 12", total)
	}
}

// TestPingQueueFull: a full queue refuses the ping with
// ErrPingQueueFull, and what it held is committed all the same.
func TestPingQueueFull(t *testing.T) {
	ctx := t.Context()
	st := &batchCountingStore{Store: openStore(t), hold: make(chan struct{})}
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Logger: testLogger(t), PingCommitDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { _ = h.Run(runCtx); close(ran) }()
	// The first ping's batch is held in the store; then the queue fills.
	if _, err := h.Ping(ctx, hub.Ping{Dialect: "rest"}, []string{"http://first.example/"}, nil); err != nil {
		t.Fatal(err)
	}
	for { // until the committer has taken it
		if st.startedCount() == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	accepted := 1
	for i := 0; ; i++ {
		_, err := h.Ping(ctx, hub.Ping{Dialect: "rest"}, []string{"http://blog.example/" + time.Duration(i).String()}, nil)
		if errors.Is(err, hub.ErrPingQueueFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		accepted++
		if accepted > hub.MaxQueuedPings+1 {
			t.Fatalf("%d pings queued, more than MaxQueuedPings", accepted)
		}
	}
	if accepted != hub.MaxQueuedPings+1 {
		t.Errorf("%d pings accepted before the queue was full, want %d", accepted, hub.MaxQueuedPings+1)
	}
	close(st.hold)
	stop()
	<-ran
	if _, total, _ := h.Pings(ctx, time.Time{}, 0); total != int64(accepted) {
		t.Fatalf("%d pings stored, want the %d accepted", total, accepted)
	}
}
