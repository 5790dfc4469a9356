package component

import (
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// TestDeleteNotificationsAreDurable: a node deleted while no component
// is connected (pingd down, or the delete made by another process that
// does not send notifications) still gets its XMPP subscribers told once
// a component connects: the XEP-0060 <delete/> to a pubsub subscriber, the
// words to a reader of plain messages. Once the server acknowledged them,
// the deletion is forgotten and not sent again.
func TestDeleteNotificationsAreDurable(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("doomed", "Doomed feed", hub.AccessOpen)
	e.createNode("kept", "", hub.AccessOpen)
	alice := e.dial("alice", "reader")
	bob := e.dial("bob", "pubsub")
	if got := chatSay(t, e, alice, "subscribe doomed"); !strings.Contains(got, `Subscribed to "doomed"`) {
		t.Fatalf("subscribe answered %q", got)
	}
	result(t, e.request(bob, "set", subscribePayload("doomed", bob.JID.String())))
	result(t, e.request(bob, "set", subscribePayload("kept", bob.JID.String())))

	// pingd stops; another hub on the same database (a process without
	// the component) deletes the node.
	e.stop()
	other, err := hub.New(hub.Config{Stores: store.HubStores(e.store), Admins: []string{e.admin}})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteNode(e.ctx, "doomed"); err != nil {
		t.Fatal(err)
	}

	e.startComponent(envOptions{})
	ev := nextEvent(t, bob, 10*time.Second)
	if d := ev.ev.child(nsPubsubEvent, "delete"); d == nil || d.attr("node") != "doomed" || ev.msg.attr("id") == "" {
		t.Fatalf("want a delete notification of doomed, got %s", ev.msg.standalone())
	}
	if m := nextMessage(t, alice, 10*time.Second, isNotification); isEvent(m) || !strings.Contains(bodyOf(m), "was deleted") {
		t.Errorf("delete notification to a reader: %s", m.standalone())
	}
	testenv.WaitFor(t, 10*time.Second, "the deletion to be forgotten", func() bool {
		dels, err := e.store.NodeDeletions(e.ctx, 10)
		return err == nil && len(dels) == 0
	})

	// Forgotten: the next process sends it no more; the other node's
	// notifications still flow.
	e.stop()
	e.startComponent(envOptions{})
	e.publish("kept", "k1")
	ev = nextEvent(t, bob, 10*time.Second)
	if ev.ev.child(nsPubsubEvent, "delete") != nil {
		t.Fatalf("the delete notification came again: %s", ev.msg.standalone())
	}
	if items := ev.ev.child(nsPubsubEvent, "items"); items == nil || items.attr("node") != "kept" {
		t.Fatalf("want kept's item, got %s", ev.msg.standalone())
	}
}

// TestAckWindowDeletions: a deletion's notifications written on a
// connection are acknowledged by the marker written after them, like a
// batch of a log, and only then handed to the recorder; one whose row
// could not be forgotten may be written again.
func TestAckWindowDeletions(t *testing.T) {
	w := newAckWindow(time.Minute)
	w.written(1, 5, 1)
	w.writtenDeletion(7)
	if !w.deletionWritten(7) || w.deletionWritten(8) {
		t.Fatal("written deletions not remembered")
	}
	if got, _ := w.take(); got.deletions != nil {
		t.Fatalf("deletions %v acknowledged before their marker", got.deletions)
	}
	id := w.nextMarker(false)
	if id == "" {
		t.Fatal("no marker for the written deletion")
	}
	w.ack(id)
	got, _ := w.take()
	if len(got.cursors) != 1 || got.cursors[1] != 5 {
		t.Fatalf("cursors %v", got.cursors)
	}
	if ids := got.deletions; len(ids) != 1 || ids[0] != 7 {
		t.Fatalf("acknowledged deletions %v, want [7]", ids)
	}
	if again, _ := w.take(); again.deletions != nil {
		t.Fatalf("deletions %v handed over twice", again.deletions)
	}
	w.deletionsNotForgotten([]int64{7})
	if w.deletionWritten(7) {
		t.Fatal("a deletion not forgotten is not written again")
	}
	// Unacknowledged when the connection ends: the next one writes it.
	w.writtenDeletion(9)
	w.close()
	if got, _ := w.take(); got.deletions != nil {
		t.Fatalf("deletions %v acknowledged by a closed connection", got.deletions)
	}
}

// TestDeleteNotificationsOfSuccessiveDeletions: SQLite hands a new row of
// node_deletions the id of the last one once that one is forgotten, so a
// connection that remembered the forgotten id as written skipped the next
// deletion's notifications until it reconnected. Each deletion made while
// connected reaches the subscriber.
func TestDeleteNotificationsOfSuccessiveDeletions(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	bob := e.dial("bob", "pubsub")
	for _, name := range []string{"first", "second", "third"} {
		e.createNode(name, "", hub.AccessOpen)
		result(t, e.request(bob, "set", subscribePayload(name, bob.JID.String())))
		if err := e.hub.DeleteNode(e.ctx, name); err != nil {
			t.Fatal(err)
		}
		ev := nextEvent(t, bob, 10*time.Second)
		if d := ev.ev.child(nsPubsubEvent, "delete"); d == nil || d.attr("node") != name {
			t.Fatalf("want a delete notification of %s, got %s", name, ev.msg.standalone())
		}
		testenv.WaitFor(t, 10*time.Second, "the deletion to be forgotten", func() bool {
			dels, err := e.store.NodeDeletions(e.ctx, 10)
			return err == nil && len(dels) == 0
		})
	}
}
