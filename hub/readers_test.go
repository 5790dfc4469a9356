package hub_test

import (
	"testing"

	"github.com/pingd/pingd/hub"
)

// TestSendLastPublished: a new XMPP subscription is sent a copy of the
// node's newest item, addressed to it alone, unless the node says never
// or has no item; an owner's grant sends it too.
func TestSendLastPublished(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	n := e.createNode("news", "")
	sub := func(addr string) *hub.Subscription {
		t.Helper()
		s, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "news", Kind: hub.KindXMPP, Address: addr, BareJID: addr})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if sent, err := e.hub.SendLastPublished(ctx, sub("early@example.org")); err != nil || sent {
		t.Errorf("a node without items: sent %v, %v", sent, err)
	}
	if _, err := e.hub.Publish(ctx, "news", "", []hub.Entry{{ID: "a", Title: "A"}, {ID: "b", Title: "B", Link: "http://example.org/b"}}); err != nil {
		t.Fatal(err)
	}
	before := e.node("news").LastSeq
	if sent, err := e.hub.SendLastPublished(ctx, sub("reader@example.org")); err != nil || !sent {
		t.Fatalf("sent %v, %v", sent, err)
	}
	evs := e.events(n.ID)
	last := evs[len(evs)-1]
	if last.Seq != before+1 || last.Kind != hub.EventLast || last.Address != "reader@example.org" || last.ItemID != "b" ||
		last.Title != "B" || last.Link != "http://example.org/b" || last.Updated.IsZero() {
		t.Errorf("last-item event %+v", last)
	}
	items, err := e.hub.Items(ctx, n, nil, 0)
	if err != nil || len(items) != 2 || items[0].ItemID != "b" {
		t.Errorf("the copy changed the node's items: %v, %v", itemIDs(items), err)
	}

	// An owner's grant: told, and sent the newest item.
	if _, _, err := e.hub.GrantSubscription(ctx, hub.Subscription{NodeName: "news", Kind: hub.KindXMPP,
		Address: "granted@example.org", BareJID: "granted@example.org"}); err != nil {
		t.Fatal(err)
	}
	evs = e.events(n.ID)
	if k := kinds(evs[len(evs)-2:]); k[0] != hub.EventSubscribed || k[1] != hub.EventLast || evs[len(evs)-1].Address != "granted@example.org" {
		t.Errorf("a grant appended %v", k)
	}

	cfg := e.node("news").NodeConfig
	cfg.SendLastPublished = hub.SendLastNever
	if err := e.hub.ConfigureNode(ctx, "news", cfg); err != nil {
		t.Fatal(err)
	}
	if sent, err := e.hub.SendLastPublished(ctx, sub("late@example.org")); err != nil || sent {
		t.Errorf("a node that says never: sent %v, %v", sent, err)
	}
}
