package storetest

import (
	"slices"
	"testing"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// testFetchBaselineKeepsItems: the baseline of a feed leaves its entries
// as the items of every node following it (at most each node's
// max_items), past every cursor that stood at the end of the log, so no
// one is told of them; the next new entry is all there is to tell.
func testFetchBaselineKeepsItems(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, n := newSource(t, s, "https://example.org/feed", "n")
	small := newNode(t, s, "small", withSource(src.ID), withMaxItems(2))
	implicit := newNode(t, s, "https://example.org/feed", withSource(src.ID), func(n *hub.Node) { n.Implicit = true })
	titled := newNode(t, s, "titled", withSource(src.ID), func(n *hub.Node) { n.Implicit, n.Title = true, "Mine" })
	hook := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1:9/hook", State: hub.SubActive}
	must(s.PutSubscription(ctx, hook))(t)
	pending := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebSub, Address: "http://127.0.0.1:9/ws", State: hub.SubPending}
	must(s.PutSubscription(ctx, pending))(t)

	out := fetchOutcome(src, entry("1"), entry("2"), entry("3"))
	out.State.Title = "  The   Feed "
	applied := must(s.ApplyFetch(ctx, out))(t)
	if !applied.Baseline || applied.Published != 0 || len(applied.Nodes) != 0 || applied.Kept != 3+2+3+3 {
		t.Fatalf("baseline applied = %+v, want nothing told and 11 items kept", applied)
	}
	for _, c := range []struct {
		node *hub.Node
		want []string
	}{{n, []string{"3", "2", "1"}}, {small, []string{"3", "2"}}, {implicit, []string{"3", "2", "1"}}} {
		items := must(s.Items(ctx, c.node.ID, nil, 0))(t)
		equalStrings(t, "items of "+c.node.Name, itemIDs(items), c.want)
		if items[0].Title != "T 3" || items[0].Link != "https://example.org/3" || !items[0].Updated.Equal(t0) {
			t.Fatalf("node %s: kept item %+v lost its entry", c.node.Name, items[0])
		}
		got := must(s.NodeByID(ctx, c.node.ID))(t)
		if got.XMPPSeq != got.LastSeq || got.LastSeq == 0 {
			t.Fatalf("node %s: XMPP cursor %d, log at %d: the kept items would be told", c.node.Name, got.XMPPSeq, got.LastSeq)
		}
	}
	for _, sub := range []*hub.Subscription{hook, pending} {
		if got := must(s.Subscription(ctx, sub.ID))(t); got.Cursor != 3 {
			t.Fatalf("%s subscription at %d, want 3: the kept items would be delivered", got.Kind, got.Cursor)
		}
	}
	if got := must(s.NodeByID(ctx, implicit.ID))(t); got.Title != "The Feed" {
		t.Fatalf("implicit node titled %q, want the feed's title", got.Title)
	}
	for _, other := range []*hub.Node{n, titled} {
		if got := must(s.NodeByID(ctx, other.ID))(t); got.Title != other.Title {
			t.Fatalf("node %s retitled %q", other.Name, got.Title)
		}
	}

	// A delivery or verification claimed before the baseline saves the
	// cursor it had: the cursor stays past the kept items.
	noErr(t, s.SaveDeliveryState(ctx, pending.ID, hub.DeliveryState{Cursor: 0, Attempts: 1}))
	noErr(t, s.SaveDeliveryStates(ctx, []hub.SavedDeliveryState{{ID: hook.ID, State: hub.DeliveryState{Cursor: 1}}}))
	for _, sub := range []*hub.Subscription{hook, pending} {
		if got := must(s.Subscription(ctx, sub.ID))(t); got.Cursor != 3 {
			t.Fatalf("%s subscription taken back to %d", got.Kind, got.Cursor)
		}
	}

	// The next fetch tells its one new entry, and only that.
	src = must(s.Source(ctx, src.ID))(t)
	applied = must(s.ApplyFetch(ctx, fetchOutcome(src, entry("1"), entry("2"), entry("3"), entry("4"))))(t)
	if applied.Baseline || applied.Kept != 0 || len(applied.New) != 1 || !slices.Contains(applied.Nodes, n.ID) {
		t.Fatalf("next fetch applied = %+v", applied)
	}
	got := must(s.NodeByID(ctx, n.ID))(t)
	equalStrings(t, "told after the baseline", itemIDs(must(s.EventsAfter(ctx, n.ID, got.XMPPSeq, 0))(t)), []string{"4"})
	equalStrings(t, "items after the change", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"4", "3", "2", "1"})
}

// testKeepItems: KeepItems gives a node without items the events as its
// items, past the cursors at the end of its log; a cursor behind stays,
// and a node that has items is left as it is.
func testKeepItems(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	appendEvents(t, s, n.ID, hub.Event{Kind: hub.EventChange})
	noErr(t, s.SetXMPPSeq(ctx, n.ID, 1))
	caughtUp := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebSub, Address: "http://127.0.0.1:9/a", State: hub.SubActive}
	caughtUp.Cursor = 1
	must(s.PutSubscription(ctx, caughtUp))(t)
	behind := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebSub, Address: "http://127.0.0.1:9/b", State: hub.SubActive}
	must(s.PutSubscription(ctx, behind))(t)

	kept := must(s.KeepItems(ctx, n.ID, []hub.Event{item("a", "<a/>"), item("b", "<b/>")}))(t)
	if kept != 2 {
		t.Fatalf("kept %d, want 2", kept)
	}
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"b", "a"})
	got := must(s.NodeByID(ctx, n.ID))(t)
	if got.LastSeq != 3 || got.XMPPSeq != 3 {
		t.Fatalf("log at %d, XMPP cursor %d; want both at 3", got.LastSeq, got.XMPPSeq)
	}
	if c := must(s.Subscription(ctx, caughtUp.ID))(t).Cursor; c != 3 {
		t.Fatalf("caught-up cursor at %d, want 3", c)
	}
	if c := must(s.Subscription(ctx, behind.ID))(t).Cursor; c != 0 {
		t.Fatalf("cursor behind moved to %d", c)
	}

	if kept := must(s.KeepItems(ctx, n.ID, []hub.Event{item("c", "<c/>")}))(t); kept != 0 {
		t.Fatalf("a node with items kept %d more", kept)
	}
	_, err := s.KeepItems(ctx, n.ID, []hub.Event{{Kind: hub.EventRetract, ItemID: "a"}})
	wantErr(t, err, hub.ErrInvalid)
	_, err = s.KeepItems(ctx, n.ID+1000, []hub.Event{item("c", "<c/>")})
	wantErr(t, err, hub.ErrNotFound)
}
