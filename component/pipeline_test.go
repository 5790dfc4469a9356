package component

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"testing"
	"time"

	"mellium.im/xmlstream"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// sendNoWait writes a stanza without waiting for an IQ's answer; the answer
// then arrives on the client's Stanzas like any other stanza.
func sendNoWait(t testing.TB, ctx context.Context, c *testenv.Client, raw string) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewBufferString(raw))
	tok, err := d.Token()
	if err != nil {
		t.Fatal(err)
	}
	start := tok.(xml.StartElement)
	r := xmlstream.MultiReader(xmlstream.Token(start), xmlstream.Inner(d), xmlstream.Token(start.End()))
	if err := c.Session.Send(ctx, r); err != nil {
		t.Fatalf("send %s: %v", raw, err)
	}
}

// collectAnswers reads IQ answers from the client until it has one for
// every id in want (failing on a second answer to any id) and returns them.
func collectAnswers(t testing.TB, c *testenv.Client, want map[string]bool, d time.Duration) map[string]*element {
	t.Helper()
	got := map[string]*element{}
	timeout := time.After(d)
	for len(got) < len(want) {
		select {
		case raw := <-c.Stanzas:
			el, err := parseDocument(raw)
			if err != nil {
				t.Fatalf("unparsable stanza %q: %v", raw, err)
			}
			if el.Name.Local != "iq" {
				continue
			}
			id := el.attr("id")
			if !want[id] {
				t.Fatalf("answer to an IQ never sent: %s", raw)
			}
			if _, dup := got[id]; dup {
				t.Fatalf("IQ %s answered twice: %s", id, raw)
			}
			got[id] = el
		case <-timeout:
			t.Fatalf("%d of %d IQs answered within %s", len(got), len(want), d)
		}
	}
	return got
}

// TestPipelinedRequests sends many requests without waiting for answers:
// publishes to two nodes interleaved with queries. Every IQ is answered
// exactly once, each publish with its own item id, and subscribers get
// every item once, in the order each node's items were published, however
// the component grouped them.
func TestPipelinedRequests(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("one", "", hub.AccessOpen)
	e.createNode("two", "", hub.AccessOpen)
	admin := e.dial("admin", "pipe")
	alice := e.dial("alice", "r")
	bob := e.dial("bob", "r")
	result(t, e.request(alice, "set", subscribePayload("one", alice.JID.String())))
	result(t, e.request(alice, "set", subscribePayload("two", alice.JID.String())))
	result(t, e.request(bob, "set", subscribePayload("two", bob.JID.String())))

	const perNode = 60
	want := map[string]bool{}
	itemOf := map[string]string{} // IQ id → item id published
	for i := range perNode {
		for _, node := range []string{"one", "two"} {
			id := fmt.Sprintf("p-%s-%d", node, i)
			item := fmt.Sprintf("%s-%03d", node, i)
			want[id], itemOf[id] = true, item
			sendNoWait(t, e.ctx, admin, fmt.Sprintf(`<iq type="set" to=%q id=%q><pubsub xmlns="%s"><publish node=%q>`+
				`<item id=%q>%s</item></publish></pubsub></iq>`, e.p.ComponentDomain, id, nsPubsub, node, item, atomEntry(item, "T "+item)))
		}
		if i%10 == 0 {
			id := fmt.Sprintf("q-%d", i)
			want[id] = true
			sendNoWait(t, e.ctx, admin, fmt.Sprintf(`<iq type="get" to=%q id=%q><query xmlns="%s"/></iq>`,
				e.p.ComponentDomain, id, nsDiscoItems))
		}
	}
	answers := collectAnswers(t, admin, want, 60*time.Second)
	for id, el := range answers {
		result(t, el)
		if item, ok := itemOf[id]; ok {
			got := find(el, "pubsub", "publish", "item")
			if got == nil || got.attr("id") != item {
				t.Errorf("publish %s answered %s, want item %s", id, el.standalone(), item)
			}
		}
	}

	check := func(c *testenv.Client, nodes ...string) {
		t.Helper()
		next := map[string]int{}
		for range perNode * len(nodes) {
			ev := nextEvent(t, c, 20*time.Second)
			items := ev.ev.child(nsPubsubEvent, "items")
			node := items.attr("node")
			for _, it := range items.childrenNamed(nsPubsubEvent, "item") {
				if want := fmt.Sprintf("%s-%03d", node, next[node]); it.attr("id") != want {
					t.Fatalf("%s: got item %s of %q, want %s", c.JID, it.attr("id"), node, want)
				}
				next[node]++
			}
		}
		noEvents(t, c, 300*time.Millisecond)
	}
	check(alice, "one", "two")
	check(bob, "two")
}
