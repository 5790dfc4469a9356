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

// TestLeaseRenewedWhileDelivering: a delivery that takes longer than the
// lease keeps its subscription (the engine renews what it holds), so
// another process finds nothing to claim meanwhile; the delivery's state
// is saved when it ends.
func TestLeaseRenewedWhileDelivering(t *testing.T) {
	const lease = 600 * time.Millisecond
	h := newHarness(t, func(c *Config) { c.Lease, c.Timeout = lease, 10*time.Second })
	r := newReceiver(t, h.clock)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	r.set(func(r *receiver) {
		r.answer = func(*received) (int, string) {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
			return http.StatusOK, ""
		}
	})
	id := h.subscribe(r.URL("/slow"), hub.SubActive, hub.Options{})
	h.publish("a")
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the delivery did not start")
	}
	// Twice the claim's lease passes while the receiver thinks, half a
	// lease at a time; the engine renews what it holds (every third of a
	// lease) and records when, which is waited for after each step. A
	// lease let lapse would be taken again, by another process or by this
	// engine, which would send the delivery a second time.
	for range 4 {
		at := h.clock.Advance(lease / 2)
		testenv.WaitFor(t, 15*time.Second, "a renewal of the leases after the clock moved on", func() bool {
			return h.engine.renewed.Load() >= at.UnixNano()
		})
	}
	ctx := context.Background()
	if got, err := h.store.ClaimDeliveries(ctx, h.clock.Now(), 0, 10, "another process", h.clock.Now().Add(lease)); err != nil || len(got) != 0 {
		t.Fatalf("another process claimed %d subscriptions (err %v) during a delivery whose lease is renewed", len(got), err)
	}
	close(release)
	testenv.WaitFor(t, 15*time.Second, "the delivery saved", func() bool {
		s := h.sub(id)
		return s.LeaseOwner == "" && s.Cursor == h.lastSeq() && s.LastStatus == http.StatusOK
	})
	h.engine.settle(t)
	if n := len(r.deliveries("")); n != 1 {
		t.Fatalf("%d deliveries of one item, want 1", n)
	}
}

// TestRestartTakesBackOwnLeases: on a store that other processes share
// (not Exclusive), a process starting under the name of one that died
// holding leases takes them back at once instead of waiting for them to
// run out.
func TestRestartTakesBackOwnLeases(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t)
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.CreateNode(ctx, hub.NodeSpec{Name: "news", Config: hub.DefaultNodeConfig()}); err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t, testenv.NewClock(time.Now()))
	sub, _, err := h.Subscribe(ctx, hub.Subscription{NodeName: "news", Kind: hub.KindWebhook, Address: r.URL("/hook"), State: hub.SubActive})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Publish(ctx, "news", "owner@example.org", []hub.Entry{{ID: "a", Title: "A",
		Payload: []byte(`<entry xmlns="http://www.w3.org/2005/Atom"><id>a</id><title>A</title></entry>`)}}); err != nil {
		t.Fatal(err)
	}
	// The earlier process of this name claimed it for an hour and died.
	if got, err := st.ClaimDeliveries(ctx, time.Now(), 0, 10, "web1", time.Now().Add(time.Hour)); err != nil || len(got) != 1 {
		t.Fatalf("claim as the process that dies: %d, %v", len(got), err)
	}
	e, err := New(Config{Store: st, Instance: "web1", Logger: quietLogger(), PollInterval: 10 * time.Millisecond,
		Senders: map[hub.Kind]Sender{hub.KindWebhook: &Webhook{HTTPSender: HTTPSender{
			Client: netguard.NewClient(netguard.Options{AllowPrivate: true}), PublicURL: testPublicURL, UserAgent: "pingd/test",
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = e.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	t.Cleanup(func() {
		if t.Failed() {
			s, _ := st.Subscription(ctx, sub.ID)
			t.Logf("lease %q until %v", s.LeaseOwner, s.LeaseUntil)
		}
	})
	testenv.WaitFor(t, 5*time.Second, "the delivery within 5s of the restart", func() bool { return len(r.deliveries("/hook")) > 0 })
}
