package component

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// bigAtomEntry is an Atom entry of about size bytes, most of it content.
func bigAtomEntry(id, title string, size int) []byte {
	words := strings.Repeat("All work and no play makes Jack a dull boy. ", size/44+1)
	return []byte(fmt.Sprintf(`<entry xmlns="http://www.w3.org/2005/Atom"><id>%s</id><title>%s</title>`+
		`<link href="http://example.org/%s"/><updated>2024-01-02T03:04:05Z</updated><content type="text">%s</content></entry>`,
		id, title, id, words[:size]))
}

// An owner's publish of a payload over the entry limit is refused with
// XEP-0060's payload-too-big, and nothing is stored or sent; one at the
// limit's side is published.
func TestOversizedPublishIsRefused(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("news", "News", hub.AccessOpen)
	admin := e.dial("admin", "r")
	alice := e.dial("alice", "r")
	result(t, e.request(alice, "set", subscribePayload("news", alice.JID.Bare().String())))

	refused := stanzaErr(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><publish node="news"><item id="huge">`+
		string(bigAtomEntry("huge", "Huge", hub.MaxEntryPayloadBytes+1024))+`</item></publish></pubsub>`), "modify", "not-acceptable", "payload-too-big")
	if txt := refused.child(nsStanzaErrors, "text"); txt == nil || !strings.Contains(txt.text(), fmt.Sprint(hub.MaxEntryPayloadBytes)) {
		t.Errorf("the refusal does not say the limit: %s", refused.standalone())
	}
	n, err := e.hub.Node(e.ctx, "news")
	if err != nil {
		t.Fatal(err)
	}
	if items, _ := e.hub.Items(e.ctx, n, []string{"huge"}, 0); len(items) != 0 {
		t.Fatalf("a refused payload was stored")
	}
	noEvents(t, alice, 500*time.Millisecond)

	result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><publish node="news"><item id="fits">`+
		string(bigAtomEntry("fits", "Fits", hub.MaxEntryPayloadBytes-4096))+`</item></publish></pubsub>`))
	if got := collectItems(t, alice, "news", 1); got[0] != (receivedItem{"fits", "Fits"}) {
		t.Fatalf("alice got %v", got)
	}

	// The hub keeps the limit for every publisher.
	_, err = e.hub.Publish(e.ctx, "news", "", []hub.Entry{{ID: "direct", Payload: bigAtomEntry("direct", "Direct", hub.MaxEntryPayloadBytes+1)}})
	if err == nil || !strings.Contains(err.Error(), "payload") {
		t.Errorf("hub.Publish of an oversized payload: %v", err)
	}
}

// connections counts the component's connections in its log.
func (e *env) connections() int { return strings.Count(e.logs.String(), "connected to XMPP server") }

// publishLarge publishes count entries of about size bytes each in one
// append, as one fetch of a feed would.
func (e *env) publishLarge(node, prefix string, count, size int) []string {
	e.t.Helper()
	var entries []hub.Entry
	var ids []string
	for i := range count {
		id := fmt.Sprintf("%s%02d", prefix, i)
		ids = append(ids, id)
		entries = append(entries, hub.Entry{ID: id, Title: "Title " + id, Link: "http://example.org/" + id, Payload: bigAtomEntry(id, "Title "+id, size)})
	}
	if _, err := e.hub.Publish(e.ctx, node, "", entries); err != nil {
		e.t.Fatal(err)
	}
	return ids
}

// A digest of 50 items of 60 KiB (3 MiB together) comes as several
// digests within the stanza budget, carrying every item once, and items
// retrieval of them pages: a cut answer carries a result set to go on
// from. The component stays connected throughout.
func TestManyLargeItems(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	cfg := hub.DefaultNodeConfig()
	cfg.Title, cfg.MaxItems = "Big", 100
	if _, _, err := e.hub.CreateNode(e.ctx, hub.NodeSpec{Name: "big", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	bob := e.dial("bob", "digest")
	result(t, e.request(bob, "set", fmt.Sprintf(`<pubsub xmlns=%q><subscribe node="big" jid=%q/><options>%s</options></pubsub>`,
		nsPubsub, bob.JID, digestOptions("1000"))))
	want := e.publishLarge("big", "d", 50, 60<<10)

	seen := map[string]int{}
	digests := 0
	for len(seen) < len(want) {
		var raw []byte
		select {
		case raw = <-bob.Stanzas:
		case <-time.After(20 * time.Second):
			t.Fatalf("after %d digests bob has %d of %d items; connections: %d", digests, len(seen), len(want), e.connections())
		}
		el, err := parseDocument(raw)
		if err != nil || el.child(nsPubsubEvent, "event") == nil {
			continue
		}
		digests++
		if len(raw) > stanzaBudget {
			t.Errorf("a digest of %d bytes, over the %d budget", len(raw), stanzaBudget)
		}
		for _, it := range itemsOf(t, &event{msg: el, ev: el.child(nsPubsubEvent, "event")}, "big") {
			seen[it.id]++
			if it.title == "" {
				t.Errorf("item %s of a digest came without its payload", it.id)
			}
		}
	}
	if digests < 2 {
		t.Errorf("50 items of 60 KiB came in %d digest(s)", digests)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("item %s came %d times", id, n)
		}
	}

	// Items retrieval: pages cut to the budget, with a result set.
	got := map[string]bool{}
	after := ""
	for pages := 0; len(got) < len(want); pages++ {
		if pages > len(want) {
			t.Fatalf("paging does not end: %d of %d items", len(got), len(want))
		}
		set := ""
		if after != "" {
			set = fmt.Sprintf(`<set xmlns=%q><after>%s</after></set>`, nsRSM, after)
		}
		ans := result(t, e.request(bob, "get", fmt.Sprintf(`<pubsub xmlns=%q><items node="big"/>%s</pubsub>`, nsPubsub, set)))
		if n := len(ans.standalone()); n > stanzaBudget {
			t.Errorf("an items answer of %d bytes, over the %d budget", n, stanzaBudget)
		}
		items := find(ans, "pubsub", "items")
		for _, it := range items.Children {
			if it.child(nsAtom, "entry") == nil {
				t.Errorf("item %s retrieved without its payload", it.attr("id"))
			}
			got[it.attr("id")] = true
		}
		rs := find(ans, "pubsub", "set")
		if len(got) < len(want) {
			if rs == nil || find(rs, "last") == nil || find(rs, "count").text() != "50" {
				t.Fatalf("a cut items answer (%d items) without a result set to page on from: %.300s", len(items.Children), ans.standalone())
			}
			after = find(rs, "last").text()
		}
	}
	if n := e.connections(); n != 1 {
		t.Errorf("the component connected %d times, want once", n)
	}
}

// An item stored before the entry limit, larger than the stanza budget
// (and than Prosody's limit), is notified without its payload and
// retrieved without it; the component stays connected and the next item
// flows.
func TestOversizedStoredItemGoesWithoutPayload(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	n := e.createNode("news", "News", hub.AccessOpen)
	alice := e.dial("alice", "r")
	result(t, e.request(alice, "set", subscribePayload("news", alice.JID.Bare().String())))
	if _, err := e.store.Append(e.ctx, n.ID, []hub.Event{{Kind: hub.EventItem, ItemID: "legacy", Title: "Legacy", Link: "http://example.org/legacy",
		Payload: bigAtomEntry("legacy", "Legacy", 600<<10)}}); err != nil {
		t.Fatal(err)
	}
	e.comp.Wake(n.ID)
	ev := nextEvent(t, alice, 15*time.Second)
	items := itemsOf(t, ev, "news")
	if len(items) != 1 || items[0].id != "legacy" || items[0].title != "" {
		t.Fatalf("want legacy without its payload, got %v", items)
	}
	e.publish("news", "next")
	if got := collectItems(t, alice, "news", 1); got[0] != (receivedItem{"next", "Title next"}) {
		t.Fatalf("after the oversized item alice got %v", got)
	}
	ans := result(t, e.request(alice, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="news"/></pubsub>`))
	if its := find(ans, "pubsub", "items"); its == nil || len(its.Children) != 2 {
		t.Fatalf("items retrieval: %.500s", ans.standalone())
	}
	if n := e.connections(); n != 1 {
		t.Errorf("the component connected %d times, want once", n)
	}
	if !strings.Contains(e.logs.String(), "without its item's payload") {
		t.Error("sending the item without its payload was not logged")
	}
}

// An ejabberd whose operator set the component listener's max_stanza_size
// to 32 KiB, under the stanza budget, ends the stream when a notification
// over it arrives (ejabberd's count is loose near its limit, so the test
// stays well away from it). pingd does not write it again for ever: after that one
// refusal its budget comes down, the notification goes without its
// payload on the next connection, and the items after it flow.
func TestRefusedStanzaLowersTheBudget(t *testing.T) {
	testenv.RequireEjabberd(t)
	e := newEjabberdEnvWith(t, Config{}, testenv.EjabberdOptions{LogLevel: "warning", ComponentMaxStanzaSize: 32 << 10})
	if _, _, err := e.hub.CreateNode(e.ctx, hub.NodeSpec{Name: "news", Config: hub.DefaultNodeConfig()}); err != nil {
		t.Fatal(err)
	}
	reader := e.subscribers("news", 1)[0]
	// An entry within the entry limit, twice ejabberd's.
	if _, err := e.hub.Publish(e.ctx, "news", "", []hub.Entry{{ID: "big", Title: "Big", Payload: bigAtomEntry("big", "Big", 60<<10)}}); err != nil {
		t.Fatal(err)
	}
	e.publish("news", "next")
	var got []receivedItem
	for len(got) < 2 {
		got = append(got, itemsOf(t, nextEvent(t, reader, 30*time.Second), "news")...)
	}
	if got[0].id != "big" || got[0].title != "" || got[1] != (receivedItem{"next", "Title next"}) {
		t.Fatalf("the reader got %v, want big without its payload, then next", got)
	}
	budget, _ := e.comp.StanzaBudget()
	if budget >= 60<<10 {
		t.Errorf("the stanza budget is %d bytes, not under the server's limit", budget)
	}
	if n := strings.Count(e.logs.String(), "connected to XMPP server"); n != 2 {
		t.Errorf("the component connected %d times, want twice (one refusal)", n)
	}
	if !strings.Contains(e.logs.String(), "its limit is taken to be lower") {
		t.Error("the lowered budget was not logged")
	}
	// More large items now go small at once, with no more refusals.
	if _, err := e.hub.Publish(e.ctx, "news", "", []hub.Entry{{ID: "big2", Title: "Big 2", Payload: bigAtomEntry("big2", "Big 2", 60<<10)}}); err != nil {
		t.Fatal(err)
	}
	if got := itemsOf(t, nextEvent(t, reader, 15*time.Second), "news"); len(got) != 1 || got[0].id != "big2" {
		t.Fatalf("then the reader got %v, want big2", got)
	}
	if n := strings.Count(e.logs.String(), "connected to XMPP server"); n != 2 {
		t.Errorf("the component connected %d times, want twice", n)
	}
}
