package delivery

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/netguard"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// A process that stops, gracefully or not, must leave nothing stuck: work
// it had claimed goes to the next process at once, not when its lease
// runs out two minutes later.

// rig is a store, a hub and the node "news", with engines the test starts
// and stops itself (the harness runs one engine for the whole test).
type rig struct {
	t     *testing.T
	store store.Store
	hub   *hub.Hub
	clock *testenv.Clock
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := context.Background()
	st := openTestStore(t)
	clock := testenv.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Now: clock.Now, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.CreateNode(ctx, hub.NodeSpec{Name: "news", Config: hub.DefaultNodeConfig()}); err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, store: st, hub: h, clock: clock}
}

// start runs an engine under the given instance name until the returned
// stop is called; stop waits for Run to return.
func (r *rig) start(instance string, exclusive bool) (stop func()) {
	r.t.Helper()
	_, stop = r.startEngine(instance, exclusive)
	return stop
}

// startEngine is start, returning the engine too.
func (r *rig) startEngine(instance string, exclusive bool) (e *Engine, stop func()) {
	r.t.Helper()
	e, err := New(Config{
		Store: r.store,
		Senders: map[hub.Kind]Sender{hub.KindWebhook: &Webhook{HTTPSender: HTTPSender{
			Client:    netguard.NewClient(netguard.Options{AllowPrivate: true}),
			PublicURL: testPublicURL,
			UserAgent: "pingd/test",
		}}},
		Logger:       quietLogger(),
		Now:          r.clock.Now,
		Instance:     instance,
		PollInterval: 10 * time.Millisecond,
		Exclusive:    exclusive,
	})
	if err != nil {
		r.t.Fatal(err)
	}
	r.hub.Register(e, e.Kinds()...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	r.t.Cleanup(stop)
	return e, stop
}

func (r *rig) subscription(id int64) *hub.Subscription {
	r.t.Helper()
	s, err := r.store.Subscription(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

func (r *rig) lastSeq() int64 {
	r.t.Helper()
	n, err := r.hub.Node(context.Background(), "news")
	if err != nil {
		r.t.Fatal(err)
	}
	return n.LastSeq
}

func (r *rig) publish(id string) {
	r.t.Helper()
	_, err := r.hub.Publish(context.Background(), "news", "owner@example.org", []hub.Entry{{
		ID: id, Title: "Title " + id,
		Payload: []byte(`<entry xmlns="http://www.w3.org/2005/Atom"><id>` + id + `</id><title>Title ` + id + `</title></entry>`),
	}})
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) subscribe(address string) int64 {
	r.t.Helper()
	s, _, err := r.hub.Subscribe(context.Background(), hub.Subscription{
		NodeName: "news", Kind: hub.KindWebhook, Address: address, State: hub.SubActive,
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return s.ID
}

// TestShutdownGivesBackADeliveryInFlight: a delivery cut off by shutdown
// leaves the subscription unleased, its cursor and attempt count as they
// were, and the next engine delivers it at once.
func TestShutdownGivesBackADeliveryInFlight(t *testing.T) {
	r := newRig(t)
	rcv := newReceiver(t, r.clock)
	arrived := make(chan struct{}, 10)
	unblock := make(chan struct{})
	rcv.set(func(rc *receiver) {
		rc.answer = func(*received) (int, string) {
			arrived <- struct{}{}
			select {
			case <-unblock:
			case <-time.After(20 * time.Second):
			}
			return http.StatusNoContent, ""
		}
	})
	id := r.subscribe(rcv.URL("/hook"))
	stop := r.start("first", false)
	r.publish("a")
	select {
	case <-arrived:
	case <-time.After(15 * time.Second):
		t.Fatal("the delivery never reached the receiver")
	}
	stop() // shutdown while the receiver holds the request

	s := r.subscription(id)
	if s.LeaseOwner != "" {
		t.Fatalf("the cut-off delivery is still leased by %q until %v", s.LeaseOwner, s.LeaseUntil)
	}
	if s.Cursor != 0 || s.Attempts != 0 || s.ConsecutiveErrors != 0 || !s.NextAttemptAt.IsZero() {
		t.Fatalf("the cut-off delivery changed the delivery state: %+v", s.DeliveryState)
	}

	close(unblock)
	r.start("second", false)
	testenv.WaitFor(t, 15*time.Second, "the delivery by the next engine", func() bool {
		s := r.subscription(id)
		return s.Cursor == r.lastSeq() && s.LeaseOwner == ""
	})
	if s := r.subscription(id); s.Attempts != 1 || s.ConsecutiveErrors != 0 {
		t.Errorf("after the redelivery: %+v", s.DeliveryState)
	}
}

// TestExclusiveEngineTakesBackDeadLeases: leases a killed process left are
// taken back at start by an engine that is the store's only user, and are
// respected by one that shares the store.
func TestExclusiveEngineTakesBackDeadLeases(t *testing.T) {
	r := newRig(t)
	rcv := newReceiver(t, r.clock)
	id := r.subscribe(rcv.URL("/hook"))
	r.publish("a")
	// The process that claimed it died without saving (kill -9).
	now := r.clock.Now()
	claimed, err := r.store.ClaimDeliveries(context.Background(), now, 0, 10, "killed-process", now.Add(2*time.Minute))
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}

	shared, stop := r.startEngine("shared", false)
	shared.settle(r.t) // it looked for work past its start, and left the lease
	stop()
	if s := r.subscription(id); s.LeaseOwner != "killed-process" || len(rcv.deliveries("")) != 0 {
		t.Fatalf("an engine sharing the store took a live lease: owner %q, %d deliveries", s.LeaseOwner, len(rcv.deliveries("")))
	}

	r.start("sole", true)
	testenv.WaitFor(t, 15*time.Second, "the delivery after the lease was taken back", func() bool {
		s := r.subscription(id)
		return s.Cursor == r.lastSeq() && s.LeaseOwner == ""
	})
	if n := len(rcv.deliveries("")); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
}

// requestChange stores a subscribe request with the secret about the
// subscription id's callback: a pending change of that verified
// subscription.
func (r *rig) requestChange(id int64, secret string) hub.SubChange {
	r.t.Helper()
	s, outcome, err := r.hub.RequestSubscription(context.Background(), hub.Subscription{
		NodeName: "news", Kind: hub.KindWebhook, Address: r.subscription(id).Address, Options: hub.Options{Secret: secret},
	})
	if err != nil || outcome != hub.RequestChangePending {
		r.t.Fatalf("request: %q %v", outcome, err)
	}
	return s.Change
}

// TestShutdownGivesBackAChangeVerificationInFlight: the verification of a
// pending change cut off by shutdown leaves the change pending and
// unleased, the subscription as it was, and the next engine verifies it
// at once.
func TestShutdownGivesBackAChangeVerificationInFlight(t *testing.T) {
	r := newRig(t)
	rcv := newReceiver(t, r.clock)
	asked := make(chan struct{}, 10)
	unblock := make(chan struct{})
	rcv.set(func(rc *receiver) {
		rc.echo = func(challenge string) (int, string) {
			asked <- struct{}{}
			select {
			case <-unblock:
			case <-time.After(20 * time.Second):
			}
			return http.StatusOK, challenge
		}
	})
	id := r.subscribe(rcv.URL("/hook"))
	change := r.requestChange(id, "new")
	stop := r.start("first", false)
	select {
	case <-asked:
	case <-time.After(15 * time.Second):
		t.Fatal("the verification never reached the callback")
	}
	stop() // shutdown while the callback holds the verification

	s := r.subscription(id)
	if s.Change.ID != change.ID || !s.Change.Pending() || s.Change.LeaseOwner != "" || !s.Change.LeaseUntil.IsZero() {
		t.Fatalf("the cut-off verification left the change %+v", s.Change)
	}
	if s.Options.Secret != "" || s.State != hub.SubActive {
		t.Fatalf("the cut-off verification changed the subscription: %+v", s)
	}

	close(unblock)
	r.start("second", false)
	testenv.WaitFor(t, 15*time.Second, "the change verified by the next engine", func() bool {
		s := r.subscription(id)
		return !s.Change.Pending() && s.Options.Secret == "new"
	})
}

// TestExclusiveEngineTakesBackDeadChangeLeases: the lease of a change's
// verification that a killed process left is taken back at start by an
// engine that is the store's only user.
func TestExclusiveEngineTakesBackDeadChangeLeases(t *testing.T) {
	r := newRig(t)
	rcv := newReceiver(t, r.clock)
	id := r.subscribe(rcv.URL("/hook"))
	r.requestChange(id, "new")
	now := r.clock.Now()
	claimed, err := r.store.ClaimDeliveries(context.Background(), now, 0, 10, "killed-process", now.Add(2*time.Minute))
	if err != nil || len(claimed) != 1 || !claimed[0].Change.Claimed {
		t.Fatalf("claim: %+v %v", claimed, err)
	}

	shared, stop := r.startEngine("shared", false)
	shared.settle(r.t) // it looked for work past its start, and left the lease
	stop()
	if s := r.subscription(id); s.Change.LeaseOwner != "killed-process" || len(rcv.verifications()) != 0 {
		t.Fatalf("an engine sharing the store took a live lease: owner %q, %d verifications", s.Change.LeaseOwner, len(rcv.verifications()))
	}

	r.start("sole", true)
	testenv.WaitFor(t, 15*time.Second, "the change verified after its lease was taken back", func() bool {
		s := r.subscription(id)
		return !s.Change.Pending() && s.Options.Secret == "new"
	})
}
