package component

import (
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// TestReadableBodiesDropNonWebLinks: an item whose link is not http(s)
// (stored before feed parsing dropped such links, or published so) is
// told in readable notifications and in the chat's "last" without it.
func TestReadableBodiesDropNonWebLinks(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("demo", "Demo feed", hub.AccessOpen)
	alice := e.dial("alice", "plain")
	if got := chatSay(t, e, alice, "subscribe demo"); !strings.Contains(got, `Subscribed to "demo"`) {
		t.Fatalf("subscribe answered %q", got)
	}
	if _, err := e.hub.Publish(e.ctx, "demo", "", []hub.Entry{{
		ID: "x1", Title: "Click me", Link: "javascript:alert(document.cookie)",
		Payload: atomEntry("x1", "Click me"),
	}}); err != nil {
		t.Fatal(err)
	}
	msg := nextMessage(t, alice, 10*time.Second, func(el *element) bool { return strings.Contains(bodyOf(el), "Click me") })
	if body := bodyOf(msg); strings.Contains(strings.ToLower(body), "javascript:") {
		t.Errorf("the notification's body carries the javascript: link: %q", body)
	}
	if got := chatSay(t, e, alice, "last demo"); !strings.Contains(got, "Click me") || strings.Contains(strings.ToLower(got), "javascript:") {
		t.Errorf("last demo answered %q: want the item without its javascript: link", got)
	}
}
