package component

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// TestClientFeaturesChooseTheFormat: a plain XEP-0060 subscribe from a
// full JID whose client announces XEP-0163 +notify features, none for
// Atom (what Gajim 1.7 announces: it drops every pubsub event), gets plain
// chat messages, the newest entry first; a client announcing no +notify
// (a pubsub library), or Atom's, keeps the pubsub event.
func TestClientFeaturesChooseTheFormat(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("demo", "Demo feed", hub.AccessOpen)
	e.publish("demo", "f1")
	dial := func(user string, features ...string) *testenv.Client {
		t.Helper()
		c, err := testenv.DialFeatures(e.ctx, e.p.C2SAddr, user+"@"+e.p.Domain+"/desk", password, features)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	e.p.Register("gui", password)
	e.p.Register("lib", password)
	e.p.Register("atom", password)
	gui := dial("gui", nsDiscoInfo, "urn:xmpp:avatar:metadata+notify", "http://jabber.org/protocol/nick+notify")
	lib := dial("lib", nsDiscoInfo, nsPubsub)
	atom := dial("atom", nsDiscoInfo, "urn:xmpp:avatar:metadata+notify", atomNotify)
	// Gajim names its bare JID in the request: its full JID is asked.
	result(t, e.request(gui, "set", subscribePayload("demo", gui.JID.Bare().String())))
	for _, c := range []*testenv.Client{lib, atom} {
		result(t, e.request(c, "set", subscribePayload("demo", c.JID.String())))
	}
	last := nextMessage(t, gui, 10*time.Second, isNotification)
	if !isPlain(last) || last.attr("type") != hub.NotifyChat || !strings.Contains(bodyOf(last), "Title f1") {
		t.Errorf("the newest entry reached the client without Atom+notify as %s, want a plain chat message", last.standalone())
	}
	for name, c := range map[string]*testenv.Client{"library": lib, "atom+notify": atom} {
		if m := nextMessage(t, c, 10*time.Second, isNotification); !isEvent(m) {
			t.Errorf("%s client: the newest entry came as %s, want the pubsub event", name, m.standalone())
		}
	}
	e.publish("demo", "f2")
	if m := nextMessage(t, gui, 10*time.Second, isNotification); !isPlain(m) || !strings.Contains(bodyOf(m), "Title f2") {
		t.Errorf("a new entry reached the client without Atom+notify as %s, want a plain message", m.standalone())
	}
	if m := nextMessage(t, lib, 10*time.Second, isNotification); !isEvent(m) {
		t.Errorf("library client: a new entry came as %s, want the pubsub event", m.standalone())
	}
}

// TestSilentClientsDelayNoOneElse: a client that never answers the
// disco#info a plain subscribe asks it holds its own requests up to
// clientProbeTimeout, not the request workers: with more such subscribes
// pending than there are workers, another user's disco#info is still
// answered at once.
func TestSilentClientsDelayNoOneElse(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	const subscribes = 2 * requestWorkers
	for i := range subscribes {
		e.createNode(fmt.Sprintf("n%d", i), "N", hub.AccessOpen)
	}
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	defer release()
	silent, err := testenv.DialHolding(e.ctx, e.p.C2SAddr, "alice@"+e.p.Domain+"/silent", password, hold)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(silent.Close)
	bob := e.dial("bob", "main")
	var wg sync.WaitGroup
	for i := range subscribes {
		wg.Go(func() {
			e.request(silent, "set", subscribePayload(fmt.Sprintf("n%d", i), silent.JID.String()))
		})
	}
	testenv.WaitFor(t, 10*time.Second, "every subscribe to wait for its probe", func() bool {
		return e.pendingQueries() == subscribes
	})
	start := time.Now()
	result(t, e.request(bob, "get", `<query xmlns="http://jabber.org/protocol/disco#info"/>`))
	if took := time.Since(start); took > time.Second {
		t.Errorf("bob's disco#info took %v while %d subscribes waited for a silent client, want under 1s", took.Round(time.Millisecond), subscribes)
	}
	release() // the client reads again: the subscribes' answers reach it
	wg.Wait()
}

// TestSilentClientHoldsANodeOnce: requests about one node are carried out
// in order, so a stranger's subscribes to a node, each waiting for its
// client's disco#info, would hold the owner's publish behind all of them.
// A client that let one probe time out is not asked again for a while:
// the owner's publish, sent after five such subscribes, is answered after
// at most one probe's wait, not five.
func TestSilentClientHoldsANodeOnce(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("news", "News", hub.AccessOpen)
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	defer release()
	silent, err := testenv.DialHolding(e.ctx, e.p.C2SAddr, "alice@"+e.p.Domain+"/silent", password, hold)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(silent.Close)
	admin := e.dial("admin", "r")
	const subscribes = 5
	var wg sync.WaitGroup
	for range subscribes {
		wg.Go(func() { e.request(silent, "set", subscribePayload("news", silent.JID.String())) })
	}
	time.Sleep(300 * time.Millisecond) // the subscribes are queued on the node
	start := time.Now()
	result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><publish node="news"><item id="e1">`+
		string(atomEntry("e1", "First"))+`</item></publish></pubsub>`))
	if took := time.Since(start); took > clientProbeTimeout+2*time.Second {
		t.Errorf("the owner's publish took %v behind %d subscribes of a silent client, want one probe's wait (%v) at most",
			took.Round(time.Millisecond), subscribes, clientProbeTimeout)
	}
	release()
	wg.Wait()
}
