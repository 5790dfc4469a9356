package component

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// TestAccountSubscriptionCapsOverXMPP: one account subscribing 2,000 of
// its resources (never online) to a node by XEP-0060 gets
// hub.DefaultMaxNodeResources subscriptions and policy-violation (type
// cancel) for the rest, so that each new item does not cost the server
// 2,000 stanzas; renewing one that exists is never refused, a chat
// subscription past the bound is answered with a sentence, and another
// user subscribes as usual.
func TestAccountSubscriptionCapsOverXMPP(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("n", "N", hub.AccessOpen)
	// The per-JID request rate would refuse most of this burst before the
	// bounds under test are reached: it is off here.
	e.stop()
	e.startComponentWith(func(c *Config) { c.IQRate = -1 })
	leoJID := e.p.Register("leo", password)
	leo := e.dial("leo", "main")
	bob := e.dial("bob", "main")

	const resources = 2000
	var accepted, refused atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1); i <= resources; i = next.Add(1) {
				el := e.request(leo, "set", subscribePayload("n", fmt.Sprintf("%s/p%d", leoJID, i)))
				switch errEl := el.child(el.Name.Space, "error"); {
				case el.attr("type") == "result":
					accepted.Add(1)
				case errEl != nil && errEl.attr("type") == "cancel" && errEl.child(nsStanzaErrors, "policy-violation") != nil:
					refused.Add(1)
				default:
					t.Errorf("subscription %d answered %s", i, el.standalone())
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d subscribe requests for resources of one account answered in %v: %d accepted, %d refused",
		resources, time.Since(start).Round(10*time.Millisecond), accepted.Load(), refused.Load())
	if accepted.Load() != hub.DefaultMaxNodeResources || refused.Load() != resources-hub.DefaultMaxNodeResources {
		t.Fatalf("%d accepted, %d refused; want %d and the rest", accepted.Load(), refused.Load(), hub.DefaultMaxNodeResources)
	}
	n, err := e.hub.Node(e.ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	subs, err := e.hub.Subscriptions(e.ctx, hub.SubscriptionFilter{NodeID: n.ID})
	if err != nil || len(subs) != hub.DefaultMaxNodeResources {
		t.Fatalf("node n has %d subscriptions (%v), want %d", len(subs), err, hub.DefaultMaxNodeResources)
	}
	// Renewing one that exists is never refused.
	result(t, e.request(leo, "set", subscribePayload("n", subs[0].Address)))
	// Another user subscribes as usual.
	result(t, e.request(bob, "set", subscribePayload("n", bob.JID.String())))
	// By chat, the account's bare JID would be one more address on n.
	if got := chatSay(t, e, leo, "subscribe n"); !strings.Contains(got, `You cannot subscribe to "n" from one more address`) {
		t.Fatalf("a chat subscription past the bound answered %q", got)
	}
	if got := chatSay(t, e, bob, "subscribe n"); !strings.Contains(got, `Subscribed to "n"`) {
		t.Fatalf("bob's chat subscription answered %q", got)
	}
	// An owner's change that would take the account past the bound is
	// refused as a whole (XEP-0060 §8.8.2.4): not-acceptable, every entry
	// returned as it stands, none made.
	admin := e.dial("admin", "r")
	carolBare := e.p.Register("carol", password)
	ans := e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><subscriptions node="n">`+
		`<subscription jid="`+carolBare+`" subscription="subscribed"/>`+
		`<subscription jid="`+leoJID+`/granted" subscription="subscribed"/></subscriptions></pubsub>`)
	if errEl := stanzaErr(t, ans, "modify", "not-acceptable", ""); !strings.Contains(errEl.child(nsStanzaErrors, "text").text(), "too many resources") {
		t.Errorf("the refusal does not say why: %s", ans.standalone())
	}
	if subs, err := e.hub.Subscriptions(e.ctx, hub.SubscriptionFilter{NodeID: n.ID, BareJID: carolBare}); err != nil || len(subs) != 0 {
		t.Fatalf("the other entry was made anyway: %v, %v", subs, err)
	}
}
