package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// What anyone may ask for lists of nodes is read a page, a JID or an
// account at a time, never the whole table (disco#items, the chat command
// "nodes", retrieving affiliations, the bounds on XMPP subscriptions).

// testNodesPage: pages of the nodes in name order, forwards from a name,
// backwards from a name or from the end, and by offset; each the page
// asked for, whatever the order the nodes were created in.
func testNodesPage(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	if got := must(s.NodesPage(ctx, hub.NodePage{Limit: 10}))(t); len(got) != 0 {
		t.Fatalf("empty store: %v", got)
	}
	var all []string
	for i := range 25 {
		all = append(all, fmt.Sprintf("n%02d", (i*7)%25)) // created out of order
	}
	for _, name := range all {
		newNode(t, s, name, func(n *hub.Node) { n.Title = "title of " + name })
	}
	slices.Sort(all)
	names := func(p hub.NodePage) []string {
		t.Helper()
		var out []string
		for _, n := range must(s.NodesPage(ctx, p))(t) {
			if n.Title != "title of "+n.Name || n.ID == 0 {
				t.Fatalf("node read as %+v", n)
			}
			out = append(out, n.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		p    hub.NodePage
		want []string
	}{
		{"first page", hub.NodePage{Limit: 3}, all[:3]},
		{"after a name", hub.NodePage{After: "n09", Limit: 3}, all[10:13]},
		{"after a name that is none", hub.NodePage{After: "n09x", Limit: 2}, all[10:12]},
		{"the end", hub.NodePage{After: "n22", Limit: 5}, all[23:]},
		{"past the end", hub.NodePage{After: "n24", Limit: 5}, nil},
		{"offset", hub.NodePage{Offset: 4, Limit: 2}, all[4:6]},
		{"offset after a name", hub.NodePage{After: "n10", Offset: 1, Limit: 2}, all[12:14]},
		{"last page", hub.NodePage{Backward: true, Limit: 4}, all[21:]},
		{"before a name", hub.NodePage{Backward: true, Before: "n10", Limit: 3}, all[7:10]},
		{"before the start", hub.NodePage{Backward: true, Before: "n02", Limit: 5}, all[:2]},
		{"no limit", hub.NodePage{}, nil},
	} {
		if got := names(tc.p); !slices.Equal(got, tc.want) {
			t.Errorf("%s (%+v): %v, want %v", tc.name, tc.p, got, tc.want)
		}
	}
	if n := must(s.CountNodes(ctx))(t); n != 25 {
		t.Errorf("CountNodes = %d, want 25", n)
	}
	noErr(t, s.DeleteNode(ctx, "n00"))
	if got := names(hub.NodePage{Limit: 1}); !slices.Equal(got, []string{"n01"}) {
		t.Errorf("after deleting n00, the first page: %v", got)
	}
	if n := must(s.CountNodes(ctx))(t); n != 24 {
		t.Errorf("CountNodes after a deletion = %d, want 24", n)
	}
}

// testJIDAffiliations: a JID's affiliations on every node, by node name,
// and none of another JID's; a removed affiliation or node goes.
func testJIDAffiliations(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	if got := must(s.JIDAffiliations(ctx, "a@example.org"))(t); len(got) != 0 {
		t.Fatalf("empty store: %v", got)
	}
	b, a, c, d := newNode(t, s, "b"), newNode(t, s, "a"), newNode(t, s, "c"), newNode(t, s, "d")
	noErr(t, s.SetAffiliation(ctx, b.ID, "a@example.org", hub.AffOwner))
	noErr(t, s.SetAffiliation(ctx, a.ID, "a@example.org", hub.AffMember))
	noErr(t, s.SetAffiliation(ctx, c.ID, "a@example.org", hub.AffOutcast))
	noErr(t, s.SetAffiliation(ctx, d.ID, "a@example.org", hub.AffPublisher))
	noErr(t, s.SetAffiliation(ctx, a.ID, "b@example.org", hub.AffOwner))
	noErr(t, s.SetAffiliation(ctx, d.ID, "a@example.org", hub.AffNone))
	want := []hub.NodeAffiliation{{Node: "a", Affiliation: hub.AffMember}, {Node: "b", Affiliation: hub.AffOwner}, {Node: "c", Affiliation: hub.AffOutcast}}
	if got := must(s.JIDAffiliations(ctx, "a@example.org"))(t); !slices.Equal(got, want) {
		t.Fatalf("JIDAffiliations = %v, want %v", got, want)
	}
	noErr(t, s.DeleteNode(ctx, "b"))
	if got := must(s.JIDAffiliations(ctx, "a@example.org"))(t); !slices.Equal(got, []hub.NodeAffiliation{{Node: "a", Affiliation: hub.AffMember}, {Node: "c", Affiliation: hub.AffOutcast}}) {
		t.Fatalf("after deleting b: %v", got)
	}
	if got := must(s.JIDAffiliations(ctx, "b@example.org"))(t); !slices.Equal(got, []hub.NodeAffiliation{{Node: "a", Affiliation: hub.AffOwner}}) {
		t.Fatalf("b's: %v", got)
	}
}

// testCountXMPPSubscriptions: an account's XMPP subscriptions, all its
// resources together, to one node or to all; other accounts and HTTP
// subscriptions are not counted.
func testCountXMPPSubscriptions(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	a, b := newNode(t, s, "a"), newNode(t, s, "b")
	for _, sub := range []*hub.Subscription{
		{NodeID: a.ID, Kind: hub.KindXMPP, Address: "leo@example.org", BareJID: "leo@example.org"},
		{NodeID: a.ID, Kind: hub.KindXMPP, Address: "leo@example.org/p1", BareJID: "leo@example.org"},
		{NodeID: a.ID, Kind: hub.KindXMPP, Address: "leo@example.org/p2", BareJID: "leo@example.org"},
		{NodeID: b.ID, Kind: hub.KindXMPP, Address: "leo@example.org/p1", BareJID: "leo@example.org"},
		{NodeID: a.ID, Kind: hub.KindXMPP, Address: "ann@example.org/p1", BareJID: "ann@example.org"},
		{NodeID: a.ID, Kind: hub.KindWebhook, Address: "http://leo.example.org/hook"},
	} {
		must(s.PutSubscription(ctx, sub))(t)
	}
	for _, tc := range []struct {
		jid  string
		node int64
		want int
	}{
		{"leo@example.org", 0, 4}, {"leo@example.org", a.ID, 3}, {"leo@example.org", b.ID, 1},
		{"ann@example.org", 0, 1}, {"ann@example.org", b.ID, 0}, {"none@example.org", 0, 0}, {"", 0, 0},
	} {
		if got := must(s.CountXMPPSubscriptions(ctx, tc.jid, tc.node))(t); got != tc.want {
			t.Errorf("CountXMPPSubscriptions(%q, %d) = %d, want %d", tc.jid, tc.node, got, tc.want)
		}
	}
	must(s.DeleteSubscriptions(ctx, hub.SubscriptionFilter{NodeID: a.ID, Address: "leo@example.org/p2"}))(t)
	if got := must(s.CountXMPPSubscriptions(ctx, "leo@example.org", 0))(t); got != 3 {
		t.Errorf("after an unsubscription: %d, want 3", got)
	}
}
