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
