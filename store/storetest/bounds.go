package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// testCountImplicitNodes: only implicit nodes are counted, and a deleted
// one no longer is.
func testCountImplicitNodes(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	if n := must(s.CountImplicitNodes(ctx))(t); n != 0 {
		t.Fatalf("empty store counts %d implicit nodes", n)
	}
	newNode(t, s, "owned")
	newNode(t, s, "implicit-1", func(n *hub.Node) { n.Implicit = true })
	newNode(t, s, "implicit-2", func(n *hub.Node) { n.Implicit = true })
	if n := must(s.CountImplicitNodes(ctx))(t); n != 2 {
		t.Fatalf("CountImplicitNodes = %d, want 2", n)
	}
	noErr(t, s.DeleteNode(ctx, "implicit-1"))
	if n := must(s.CountImplicitNodes(ctx))(t); n != 1 {
		t.Fatalf("CountImplicitNodes after a deletion = %d, want 1", n)
	}
}

// testDeleteUnused: an implicit node is deleted, with its log, once it has
// had no subscription for the grace period, counted from the first pass
// that found it without; a subscription stored meanwhile (even one gone
// again) starts the count anew. Owners' nodes and implicit nodes with a
// subscription of any state stay. A source no node follows goes, with its
// seen ids, after its own grace; one followed again stays.
func testDeleteUnused(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	const day = 24 * time.Hour
	implicit := func(n *hub.Node) { n.Implicit = true }
	idleSrc, _ := must2(s.EnsureSource(ctx, "https://idle.example/feed"))(t)
	idle := newNode(t, s, "idle", withSource(idleSrc.ID), implicit)
	appendEvents(t, s, idle.ID, item("a", "<a/>"))
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: idleSrc.ID, State: idleSrc.SourceState, Entries: []hub.Entry{{ID: "e1"}}}))(t)
	ownedSrc, owned := newSource(t, s, "https://owned.example/feed", "owned")
	subscribed := newNode(t, s, "subscribed", implicit)
	must(s.PutSubscription(ctx, &hub.Subscription{NodeID: subscribed.ID, Kind: hub.KindXMPP, Address: "a@example.org", BareJID: "a@example.org"}))(t)
	pending := newNode(t, s, "pending", implicit)
	must(s.RequestSubscription(ctx, &hub.Subscription{NodeID: pending.ID, Kind: hub.KindWebSub, Address: "http://127.0.0.1/cb#t"}))(t)
	back := newNode(t, s, "back", implicit)
	lonelySrc, _ := must2(s.EnsureSource(ctx, "https://lonely.example/feed"))(t)

	deleted := func(at, nodesBefore, sourcesBefore time.Time, wantNodes, wantSources int64) {
		t.Helper()
		n, src := must2(s.DeleteUnused(ctx, at, nodesBefore, sourcesBefore))(t)
		if n != wantNodes || src != wantSources {
			t.Fatalf("DeleteUnused at %s = %d nodes, %d sources; want %d, %d", at, n, src, wantNodes, wantSources)
		}
	}
	// The first pass marks; nothing was unused before it.
	deleted(t0, t0.Add(-day), t0.Add(-time.Hour), 0, 0)
	// "back" is subscribed to and left again within the day: its count
	// starts anew at the next pass.
	sub := &hub.Subscription{NodeID: back.ID, Kind: hub.KindCNWS, Address: "http://127.0.0.1/cnws#t"}
	must(s.PutSubscription(ctx, sub))(t)
	must(s.DeleteSubscriptions(ctx, hub.SubscriptionFilter{NodeID: back.ID}))(t)

	at := t0.Add(day + time.Minute)
	deleted(at, at.Add(-day), at.Add(-time.Hour), 1, 1) // idle, and the lonely source
	wantErr(t, errOf(s.Node(ctx, "idle")), hub.ErrNotFound)
	if evs := must(s.EventsAfter(ctx, idle.ID, 0, 0))(t); len(evs) != 0 {
		t.Fatalf("the deleted node's log survived: %+v", evs)
	}
	for _, name := range []string{"owned", "subscribed", "pending", "back"} {
		must(s.Node(ctx, name))(t)
	}
	wantErr(t, errOf(s.Source(ctx, lonelySrc.ID)), hub.ErrNotFound)
	// idle's source lost its node only now: it stays for its grace.
	must(s.Source(ctx, idleSrc.ID))(t)
	must(s.Source(ctx, ownedSrc.ID))(t)

	at = at.Add(2 * time.Hour)
	deleted(at, at.Add(-day), at.Add(-time.Hour), 0, 1)
	wantErr(t, errOf(s.Source(ctx, idleSrc.ID)), hub.ErrNotFound)
	// Its seen ids went with it: a source made again for the URL starts afresh.
	again, _ := must2(s.EnsureSource(ctx, "https://idle.example/feed"))(t)
	applied := must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: again.ID, State: again.SourceState, Changed: true, Entries: []hub.Entry{{ID: "e1"}}}))(t)
	if again.Baselined || len(applied.New) != 0 {
		t.Fatalf("a source made again kept state: %+v, applied %+v", again, applied)
	}
	// A source followed again before its grace ends stays.
	must2(s.DeleteUnused(ctx, at, at.Add(-day), at.Add(-time.Hour)))(t)
	newNode(t, s, "again", withSource(again.ID))
	at = at.Add(2 * time.Hour)
	deleted(at, at.Add(-day), at.Add(-time.Hour), 0, 0)
	must(s.Source(ctx, again.ID))(t)

	// A day after the pass that found "back" without subscriptions, it goes.
	at = t0.Add(2*day + time.Hour)
	deleted(at, at.Add(-day), at.Add(-time.Hour), 1, 0)
	wantErr(t, errOf(s.Node(ctx, "back")), hub.ErrNotFound)
	for _, name := range []string{"owned", "subscribed", "pending", "again"} {
		must(s.Node(ctx, name))(t)
	}
	_ = owned
}

// testDeleteUnusedConcurrent: subscriptions stored while unused nodes are
// being deleted (by two deleters at once, as two processes sharing one
// database do) are never lost: each one either finds its node gone and
// fails, or is stored and its node stays.
func testDeleteUnusedConcurrent(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	const nodes = 40
	ids := make([]int64, nodes)
	for i := range ids {
		ids[i] = newNode(t, s, fmt.Sprintf("n%d", i), func(n *hub.Node) { n.Implicit = true }).ID
	}
	must2(s.DeleteUnused(ctx, t0, t0.Add(-time.Hour), t0.Add(-time.Hour)))(t)
	later := t0.Add(48 * time.Hour)
	var wg sync.WaitGroup
	stored := make([]bool, nodes)
	for range 2 {
		wg.Go(func() {
			if _, _, err := s.DeleteUnused(ctx, later, later.Add(-24*time.Hour), later.Add(-time.Hour)); err != nil {
				t.Errorf("DeleteUnused: %v", err)
			}
		})
	}
	for i, id := range ids {
		wg.Go(func() {
			sub := &hub.Subscription{NodeID: id, Kind: hub.KindWebhook, Address: "http://127.0.0.1/cb", State: hub.SubActive}
			_, err := s.PutSubscription(ctx, sub)
			stored[i] = err == nil
		})
	}
	wg.Wait()
	for i, id := range ids {
		if !stored[i] {
			continue
		}
		subs := must(s.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: id}))(t)
		if len(subs) != 1 {
			t.Errorf("node %d: the subscription stored during the deletion is gone", i)
		}
	}
}

func errOf[T any](_ T, err error) error { return err }

// testCountCallbackHostSubscriptions: HTTP subscriptions of every kind and
// state are counted under their callback's host name, whatever its port
// or spelling; XMPP subscriptions and other hosts are not.
func testCountCallbackHostSubscriptions(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	a, b := newNode(t, s, "a"), newNode(t, s, "b")
	for _, sub := range []*hub.Subscription{
		{NodeID: a.ID, Kind: hub.KindWebhook, Address: "http://hooks.example/1"},
		{NodeID: b.ID, Kind: hub.KindCNWS, Address: "http://hooks.example:8080/2#https%3A%2F%2Fx.example%2F"},
		{NodeID: a.ID, Kind: hub.KindXMPP, Address: "hooks.example", BareJID: "hooks.example"},
		{NodeID: a.ID, Kind: hub.KindWebhook, Address: "http://other.example/1"},
	} {
		must(s.PutSubscription(ctx, sub))(t)
	}
	must(s.RequestSubscription(ctx, &hub.Subscription{NodeID: b.ID, Kind: hub.KindWebSub, Address: "https://hooks.example/3#t"}))(t)
	for host, want := range map[string]int{"hooks.example": 3, "other.example": 1, "none.example": 0} {
		if got := must(s.CountCallbackHostSubscriptions(ctx, host))(t); got != want {
			t.Errorf("CountCallbackHostSubscriptions(%s) = %d, want %d", host, got, want)
		}
	}
	must(s.DeleteSubscriptions(ctx, hub.SubscriptionFilter{NodeID: a.ID}))(t)
	if got := must(s.CountCallbackHostSubscriptions(ctx, "hooks.example"))(t); got != 2 {
		t.Errorf("after a deletion: %d, want 2", got)
	}
}
