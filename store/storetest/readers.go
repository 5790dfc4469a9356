package storetest

import (
	"testing"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// The parts of the contract the XMPP readers' features rely on.

// testNodeSendLastPublished: the node's send_last_published_item is
// stored, defaults to on_sub and is changed by UpdateNodeConfig.
func testNodeSendLastPublished(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "last")
	got := must(s.Node(ctx, "last"))(t)
	if got.SendLastPublished != hub.SendLastOnSub {
		t.Errorf("a new node's send_last_published_item is %q, want %q", got.SendLastPublished, hub.SendLastOnSub)
	}
	cfg := got.NodeConfig
	cfg.SendLastPublished = hub.SendLastNever
	noErr(t, s.UpdateNodeConfig(ctx, n.Name, cfg))
	if got := must(s.NodeByID(ctx, n.ID))(t); got.SendLastPublished != hub.SendLastNever {
		t.Errorf("after configuring never: %q", got.SendLastPublished)
	}
}

// testLastEvent: a last-item event is in the log, with its copy of the
// item, and is not an item of the node.
func testLastEvent(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "last-event")
	appendEvents(t, s, n.ID, item("a", "<entry>a</entry>"))
	appendEvents(t, s, n.ID, hub.Event{Kind: hub.EventLast, Address: "r@example.org", ItemID: "a",
		Payload: []byte("<entry>a</entry>"), Title: "title a", Updated: t0})
	evs := must(s.EventsAfter(ctx, n.ID, 1, 0))(t)
	if len(evs) != 1 || evs[0].Kind != hub.EventLast || evs[0].Address != "r@example.org" || evs[0].ItemID != "a" ||
		string(evs[0].Payload) != "<entry>a</entry>" || !evs[0].Updated.Equal(t0) {
		t.Errorf("the last-item event reads back as %+v", evs)
	}
	items := must(s.Items(ctx, n.ID, nil, 0))(t)
	if len(items) != 1 || items[0].Kind != hub.EventItem || items[0].Seq != 1 {
		t.Errorf("current items after a last-item event: %+v", items)
	}
}
