package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

func testSubscriberCount(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, a := newSource(t, s, "https://example.org/feed", "a")
	b := newNode(t, s, "b", withSource(src.ID))
	other := newNode(t, s, "other")
	if n := must(s.SubscriberCount(ctx, src.ID))(t); n != 0 {
		t.Fatalf("count = %d", n)
	}
	for i, k := range hub.Kinds {
		must(s.PutSubscription(ctx, &hub.Subscription{NodeID: a.ID, Kind: k, Address: fmt.Sprintf("addr-%d", i), BareJID: "x@example.org"}))(t)
	}
	must(s.PutSubscription(ctx, &hub.Subscription{NodeID: b.ID, Kind: hub.KindWebSub, Address: "http://127.0.0.1/ws", State: hub.SubPending}))(t)
	must(s.PutSubscription(ctx, &hub.Subscription{NodeID: other.ID, Kind: hub.KindWebSub, Address: "http://127.0.0.1/ws"}))(t)
	if n := must(s.SubscriberCount(ctx, src.ID))(t); n != len(hub.Kinds)+1 {
		t.Fatalf("count = %d, want %d", n, len(hub.Kinds)+1)
	}
}

func testPutSubscription(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	expires := t0.Add(24 * time.Hour)
	sub := &hub.Subscription{
		NodeID: n.ID, Kind: hub.KindWebSub, Address: "http://127.0.0.1:9/cb", State: hub.SubPending,
		Options: hub.Options{Secret: "s3cret", Topic: "https://example.org/feed", LeaseSeconds: 86400,
			SigAlgo: "sha256", Verify: map[string]string{"hub.verify_token": "tok"}},
		ExpiresAt: expires,
	}
	sub.Cursor = 5
	created := must(s.PutSubscription(ctx, sub))(t)
	if !created || sub.ID == 0 || sub.NodeName != "n" || sub.CreatedAt.IsZero() {
		t.Fatalf("created %v sub %+v", created, sub)
	}
	got := must(s.Subscription(ctx, sub.ID))(t)
	if got.NodeName != "n" || got.Kind != hub.KindWebSub || got.State != hub.SubPending || got.Cursor != 5 ||
		got.Options.Secret != "s3cret" || got.Options.Verify["hub.verify_token"] != "tok" ||
		got.Options.LeaseSeconds != 86400 || !got.ExpiresAt.Equal(expires) {
		t.Fatalf("stored %+v", got)
	}

	// The same node, kind and address updates in place, keeping the cursor.
	noErr(t, s.SaveDeliveryState(ctx, sub.ID, hub.DeliveryState{Cursor: 9}))
	upd := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebSub, Address: "http://127.0.0.1:9/cb",
		State: hub.SubActive, Options: hub.Options{Secret: "new"}, SubID: "sid"}
	upd.Cursor = 1
	created = must(s.PutSubscription(ctx, upd))(t)
	if created || upd.ID != sub.ID {
		t.Fatalf("update created %v id %d (want %d)", created, upd.ID, sub.ID)
	}
	got = must(s.Subscription(ctx, sub.ID))(t)
	if got.State != hub.SubActive || got.Options.Secret != "new" || got.Options.Topic != "" || got.SubID != "sid" ||
		got.Cursor != 9 || !got.ExpiresAt.IsZero() {
		t.Fatalf("updated %+v", got)
	}
	if upd.Cursor != 9 {
		t.Fatalf("PutSubscription left the caller's cursor at %d, stored %d", upd.Cursor, got.Cursor)
	}
	// Another kind or address is another subscription.
	other := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1:9/cb"}
	if !must(s.PutSubscription(ctx, other))(t) || other.ID == sub.ID {
		t.Fatal("another kind did not create a subscription")
	}
	if other.State != hub.SubActive {
		t.Fatalf("default state = %q", other.State)
	}

	_, err := s.Subscription(ctx, 999999)
	wantErr(t, err, hub.ErrNotFound)
	_, err = s.PutSubscription(ctx, &hub.Subscription{NodeID: n.ID + 1000, Kind: hub.KindWebhook, Address: "x"})
	wantErr(t, err, hub.ErrNotFound)
	_, err = s.PutSubscription(ctx, &hub.Subscription{NodeID: n.ID, Kind: "carrier-pigeon", Address: "x"})
	wantErr(t, err, hub.ErrInvalid)
}

func testSubscriptionFilters(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	a := newNode(t, s, "a")
	b := newNode(t, s, "b")
	subs := []*hub.Subscription{
		{NodeID: a.ID, Kind: hub.KindXMPP, Address: "x@example.org/r1", BareJID: "x@example.org", State: hub.SubActive},
		{NodeID: a.ID, Kind: hub.KindXMPP, Address: "x@example.org/r2", BareJID: "x@example.org", State: hub.SubPending},
		{NodeID: b.ID, Kind: hub.KindXMPP, Address: "x@example.org/r1", BareJID: "x@example.org", State: hub.SubActive},
		{NodeID: a.ID, Kind: hub.KindRSSCloud, Address: "http://127.0.0.1/notify", State: hub.SubActive},
		{NodeID: b.ID, Kind: hub.KindCNWS, Address: "http://127.0.0.1/notify", State: hub.SubSuspended},
	}
	for _, sub := range subs {
		must(s.PutSubscription(ctx, sub))(t)
	}
	ids := func(f hub.SubscriptionFilter) []int64 {
		var out []int64
		for _, sub := range must(s.Subscriptions(ctx, f))(t) {
			if sub.NodeName == "" {
				t.Fatalf("subscription %d without node name", sub.ID)
			}
			out = append(out, sub.ID)
		}
		return out
	}
	cases := []struct {
		f    hub.SubscriptionFilter
		want []int
	}{
		{hub.SubscriptionFilter{}, []int{0, 1, 2, 3, 4}},
		{hub.SubscriptionFilter{NodeID: a.ID}, []int{0, 1, 3}},
		{hub.SubscriptionFilter{Kind: hub.KindXMPP}, []int{0, 1, 2}},
		{hub.SubscriptionFilter{Address: "http://127.0.0.1/notify"}, []int{3, 4}},
		{hub.SubscriptionFilter{BareJID: "x@example.org", NodeID: a.ID}, []int{0, 1}},
		{hub.SubscriptionFilter{State: hub.SubActive}, []int{0, 2, 3}},
		{hub.SubscriptionFilter{NodeID: b.ID, Kind: hub.KindCNWS, Address: "http://127.0.0.1/notify", State: hub.SubSuspended}, []int{4}},
		{hub.SubscriptionFilter{NodeID: b.ID, Kind: hub.KindWebhook}, nil},
	}
	for _, c := range cases {
		var want []int64
		for _, i := range c.want {
			want = append(want, subs[i].ID)
		}
		if got := ids(c.f); !slices.Equal(got, want) {
			t.Errorf("filter %+v = %v, want %v", c.f, got, want)
		}
	}
}

func testDeleteSubscriptions(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	a := newNode(t, s, "a")
	b := newNode(t, s, "b")
	put := func(node int64, kind hub.Kind, addr, bare string) *hub.Subscription {
		sub := &hub.Subscription{NodeID: node, Kind: kind, Address: addr, BareJID: bare}
		must(s.PutSubscription(ctx, sub))(t)
		return sub
	}
	x1 := put(a.ID, hub.KindXMPP, "x@example.org/1", "x@example.org")
	x2 := put(b.ID, hub.KindXMPP, "x@example.org/1", "x@example.org")
	y := put(a.ID, hub.KindXMPP, "y@example.org/1", "y@example.org")
	hook := put(a.ID, hub.KindWebhook, "http://127.0.0.1/hook", "")

	_, err := s.DeleteSubscriptions(ctx, hub.SubscriptionFilter{Kind: hub.KindXMPP})
	wantErr(t, err, hub.ErrInvalid)

	removed := must(s.DeleteSubscriptions(ctx, hub.SubscriptionFilter{BareJID: "x@example.org"}))(t)
	if len(removed) != 2 || removed[0].ID != x1.ID || removed[1].ID != x2.ID || removed[0].NodeName != "a" || removed[1].NodeName != "b" {
		t.Fatalf("removed %+v", removed)
	}
	for _, id := range []int64{x1.ID, x2.ID} {
		_, err := s.Subscription(ctx, id)
		wantErr(t, err, hub.ErrNotFound)
	}
	removed = must(s.DeleteSubscriptions(ctx, hub.SubscriptionFilter{NodeID: a.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/hook"}))(t)
	if len(removed) != 1 || removed[0].ID != hook.ID {
		t.Fatalf("removed %+v", removed)
	}
	if removed := must(s.DeleteSubscriptions(ctx, hub.SubscriptionFilter{NodeID: b.ID}))(t); len(removed) != 0 {
		t.Fatalf("removed again: %+v", removed)
	}
	must(s.Subscription(ctx, y.ID))(t)

	noErr(t, s.DeleteSubscription(ctx, y.ID))
	wantErr(t, s.DeleteSubscription(ctx, y.ID), hub.ErrNotFound)
}

func testSubscriptionState(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindRSSCloud, Address: "http://127.0.0.1/cb", State: hub.SubActive, ExpiresAt: t0}
	must(s.PutSubscription(ctx, sub))(t)
	noErr(t, s.SetSubscriptionState(ctx, sub.ID, hub.SubSuspended, t0.Add(time.Hour)))
	got := must(s.Subscription(ctx, sub.ID))(t)
	if got.State != hub.SubSuspended || !got.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("state %q expires %v", got.State, got.ExpiresAt)
	}
	noErr(t, s.SetSubscriptionState(ctx, sub.ID, hub.SubActive, time.Time{}))
	if got := must(s.Subscription(ctx, sub.ID))(t); got.State != hub.SubActive || !got.ExpiresAt.IsZero() {
		t.Fatalf("state %q expires %v", got.State, got.ExpiresAt)
	}
	wantErr(t, s.SetSubscriptionState(ctx, sub.ID+1000, hub.SubActive, time.Time{}), hub.ErrNotFound)
}

func testDeleteExpired(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	put := func(addr string, expires time.Time) *hub.Subscription {
		sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebSub, Address: addr, ExpiresAt: expires}
		must(s.PutSubscription(ctx, sub))(t)
		return sub
	}
	old := put("http://127.0.0.1/old", t0.Add(-time.Second))
	exact := put("http://127.0.0.1/exact", t0)
	fresh := put("http://127.0.0.1/fresh", t0.Add(time.Second))
	forever := put("http://127.0.0.1/forever", time.Time{})
	removed := must(s.DeleteExpiredSubscriptions(ctx, t0))(t)
	var ids []int64
	for _, r := range removed {
		ids = append(ids, r.ID)
		if r.NodeName != "n" {
			t.Fatalf("removed without node name: %+v", r)
		}
	}
	if !slices.Equal(ids, []int64{old.ID, exact.ID}) {
		t.Fatalf("removed %v, want [%d %d]", ids, old.ID, exact.ID)
	}
	must(s.Subscription(ctx, fresh.ID))(t)
	must(s.Subscription(ctx, forever.ID))(t)
}

func subIDs(subs []hub.Subscription) []int64 {
	out := make([]int64, 0, len(subs))
	for _, s := range subs {
		out = append(out, s.ID)
	}
	return out
}

// testSubscriptionIDsNotReused: the id of a deleted subscription, even
// the highest, is never given to a new one, so that a delivery state
// saved for the old one cannot land on the new one.
func testSubscriptionIDsNotReused(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	var last int64
	for i := range 3 {
		sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: fmt.Sprintf("http://127.0.0.1/%d", i), State: hub.SubActive}
		must(s.PutSubscription(ctx, sub))(t)
		if sub.ID <= last {
			t.Fatalf("subscription %d got id %d after %d", i, sub.ID, last)
		}
		noErr(t, s.DeleteSubscription(ctx, sub.ID))
		last = sub.ID
	}
}
