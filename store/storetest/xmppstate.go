package storetest

import (
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// testXMPPState: an XMPP subscription's digest and bounces (a table of
// their own) are stored with a new subscription, kept when it is renewed,
// moved with the kept items like any cursor, gone with the subscription,
// and never taken for an HTTP delivery's: its bounces are no failing
// delivery on the status report, and its digest due time makes no
// delivery claim.
func testXMPPState(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "xmpp-state")
	appendEvents(t, s, n.ID, hub.Event{Kind: hub.EventChange})
	noErr(t, s.SetXMPPSeq(ctx, n.ID, 1))
	opts := hub.Options{Digest: true, DigestFrequencyMS: 60000}
	// Subscribing with digests stores the cursor and due time it comes
	// with (hub.Subscribe sets them).
	x := &hub.Subscription{NodeID: n.ID, Kind: hub.KindXMPP, Address: "x@example.org/r", BareJID: "x@example.org",
		State: hub.SubActive, Options: opts}
	x.Cursor, x.NextAttemptAt = 1, t0
	must(s.PutSubscription(ctx, x))(t)
	if x.Cursor != 1 || !x.NextAttemptAt.Equal(t0) || x.ConsecutiveErrors != 0 {
		t.Fatalf("a new digest subscription reads back as %+v", x.DeliveryState)
	}
	if due := must(s.DueDigests(ctx, t0, 10))(t); len(due) != 1 || due[0].ID != x.ID {
		t.Fatalf("due digests = %v, want %d", subIDs(due), x.ID)
	}
	for i := range 2 {
		_, _, err := s.RecordBounce(ctx, x.ID, "recipient-unavailable", t0.Add(time.Duration(i)*time.Minute))
		noErr(t, err)
	}
	hook := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1:9/hook", State: hub.SubActive}
	hook.Cursor = 1
	must(s.PutSubscription(ctx, hook))(t)

	// Renewed, it keeps its digest and bounces.
	again := &hub.Subscription{NodeID: n.ID, Kind: hub.KindXMPP, Address: x.Address, BareJID: x.BareJID,
		State: hub.SubActive, Options: opts}
	if created := must(s.PutSubscription(ctx, again))(t); created {
		t.Fatal("the renewal made a new subscription")
	}
	if again.ID != x.ID || again.Cursor != 1 || !again.NextAttemptAt.Equal(t0) || again.ConsecutiveErrors != 2 ||
		!again.FirstFailureAt.Equal(t0) || again.LastError != "recipient-unavailable" {
		t.Fatalf("after a renewal: %+v", again.DeliveryState)
	}

	// Bounces are not an HTTP delivery's failures; the caught-up webhook
	// and the XMPP subscription have nothing to claim.
	rep := must(s.StatusReport(ctx, store.StatusQuery{}))(t)
	if rep.BouncingTotal != 1 || len(rep.Bouncing) != 1 || rep.Bouncing[0].ID != x.ID || rep.Bouncing[0].Bounces != 2 ||
		!rep.Bouncing[0].FirstBounce.Equal(t0) {
		t.Errorf("bouncing: %d, %+v", rep.BouncingTotal, rep.Bouncing)
	}
	if q := rep.Queue; q.Subscriptions != 1 || q.Failing != 0 || q.Behind != 0 || q.Problems != 0 || len(rep.Deliveries) != 0 {
		t.Errorf("HTTP deliveries: %+v, problems %+v", q, rep.Deliveries)
	}
	for _, ns := range rep.Nodes {
		if ns.ID == n.ID && (ns.Failing != 0 || ns.Behind != 0 || ns.Subscribers[hub.KindXMPP] != 1 || ns.Subscribers[hub.KindWebhook] != 1) {
			t.Errorf("node on the status report: %+v", ns)
		}
	}
	if claimed := must(s.ClaimDeliveries(ctx, t0.Add(time.Hour), n.ID, 10, "me", t0.Add(2*time.Hour)))(t); len(claimed) != 0 {
		t.Errorf("claimed %v with nothing to deliver", subIDs(claimed))
	}

	// Items kept on a baseline move the digest cursor standing at the end
	// of the log past them, as they do the webhook's.
	must(s.KeepItems(ctx, n.ID, []hub.Event{item("a", "<a/>"), item("b", "<b/>")}))(t)
	if c := must(s.Subscription(ctx, x.ID))(t).Cursor; c != 3 {
		t.Errorf("digest cursor at %d after the kept items, want 3", c)
	}
	if c := must(s.Subscription(ctx, hook.ID))(t).Cursor; c != 3 {
		t.Errorf("webhook cursor at %d after the kept items, want 3", c)
	}

	// Gone with its subscription: subscribing again starts afresh.
	must(s.DeleteSubscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP}))(t)
	if due := must(s.DueDigests(ctx, t0.Add(time.Hour), 10))(t); len(due) != 0 {
		t.Errorf("due digests of a deleted subscription: %v", subIDs(due))
	}
	fresh := &hub.Subscription{NodeID: n.ID, Kind: hub.KindXMPP, Address: x.Address, BareJID: x.BareJID, State: hub.SubActive}
	must(s.PutSubscription(ctx, fresh))(t)
	if fresh.ConsecutiveErrors != 0 || !fresh.FirstFailureAt.IsZero() || !fresh.NextAttemptAt.IsZero() || fresh.Cursor != 0 {
		t.Errorf("a new subscription of the same address: %+v", fresh.DeliveryState)
	}
	if rep := must(s.StatusReport(ctx, store.StatusQuery{}))(t); rep.BouncingTotal != 0 {
		t.Errorf("bouncing after the subscription ended: %+v", rep.Bouncing)
	}
}
