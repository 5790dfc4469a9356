package component

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

func TestDigestItems(t *testing.T) {
	ev := func(kind hub.EventKind, id string) hub.Event { return hub.Event{Kind: kind, ItemID: id} }
	got := digestItems([]hub.Event{
		ev(hub.EventItem, "gone-before-purge"), ev(hub.EventPurge, ""),
		ev(hub.EventItem, "a"), ev(hub.EventItem, "b"), ev(hub.EventRetract, "b"),
		ev(hub.EventItem, "a"), ev(hub.EventChange, ""), ev(hub.EventItem, "c"),
	})
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ItemID)
	}
	if strings.Join(ids, ",") != "a,c" {
		t.Errorf("digest items %v, want a (its newest version) and c", ids)
	}
}

// digestOptions is a subscription options form asking for digests.
func digestOptions(frequencyMS string) string {
	return fmt.Sprintf(`<x xmlns="jabber:x:data" type="submit"><field var="FORM_TYPE" type="hidden"><value>%s</value></field>`+
		`<field var="pubsub#digest"><value>1</value></field><field var="pubsub#digest_frequency"><value>%s</value></field></x>`,
		formSubscribeOptions, frequencyMS)
}

// TestDigests: a subscriber asking for digests (XEP-0060 pubsub#digest)
// gets one notification per interval carrying the items since the last,
// across a restart of pingd, while the other subscribers get each item at
// once; turning digests off sends what is owed and then each item again.
func TestDigests(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	n := e.createNode("demo", "Demo feed", hub.AccessOpen)
	alice := e.dial("alice", "each")
	bob := e.dial("bob", "digest")
	result(t, e.request(alice, "set", subscribePayload("demo", alice.JID.String())))
	// Too short an interval is refused, and nothing is subscribed.
	stanzaErr(t, e.request(bob, "set", fmt.Sprintf(`<pubsub xmlns=%q><subscribe node="demo" jid=%q/><options>%s</options></pubsub>`,
		nsPubsub, bob.JID, digestOptions("10"))), "modify", "bad-request", "invalid-options")
	ans := result(t, e.request(bob, "set", fmt.Sprintf(`<pubsub xmlns=%q><subscribe node="demo" jid=%q/><options>%s</options></pubsub>`,
		nsPubsub, bob.JID, digestOptions("2000"))))
	if f, serr := parseForm(find(ans, "pubsub", "options", "x")); serr != nil || f.Values[fieldDigest][0] != "1" || f.Values[fieldDigestFrequency][0] != "2000" {
		t.Fatalf("subscribe-and-configure with digests answered %s", ans.standalone())
	}
	subscribed := time.Now()

	e.publish("demo", "d1")
	e.publish("demo", "d2")
	collectItems(t, alice, "demo", 2) // the others get each item at once
	ev := nextEvent(t, bob, 10*time.Second)
	if waited := time.Since(subscribed); waited < 1500*time.Millisecond {
		t.Errorf("the digest came %s after subscribing, before its interval", waited)
	}
	if got := itemsOf(t, ev, "demo"); len(got) != 2 || got[0].id != "d1" || got[1].id != "d2" {
		t.Errorf("the digest carries %v, want d1 and d2", got)
	}
	noEvents(t, bob, 300*time.Millisecond)

	// What a digest is owed survives a restart of pingd and the pruning
	// of the log the node's cursor has passed.
	e.publish("demo", "d3")
	collectItems(t, alice, "demo", 1)
	testenv.WaitFor(t, 10*time.Second, "the node's cursor to pass d3", func() bool {
		nn, err := e.store.Node(e.ctx, "demo")
		return err == nil && nn.XMPPSeq == nn.LastSeq
	})
	e.stop()
	if err := e.store.Prune(e.ctx, time.Time{}); err != nil {
		t.Fatal(err)
	}
	e.startComponent(envOptions{})
	if got := itemsOf(t, nextEvent(t, bob, 10*time.Second), "demo"); len(got) != 1 || got[0].id != "d3" {
		t.Errorf("after a restart the digest carries %v, want d3", got)
	}
	// The digest's state is saved once it is written: wait for it rather
	// than race the save.
	var subs []hub.Subscription
	var err error
	testenv.WaitFor(t, 10*time.Second, "bob's digest state to be saved", func() bool {
		subs, err = e.hub.Subscriptions(e.ctx, hub.SubscriptionFilter{NodeID: n.ID, Address: bob.JID.String()})
		return err == nil && len(subs) == 1 && subs[0].Cursor == n.LastSeq+3
	})
	if len(subs) != 1 || subs[0].Cursor != n.LastSeq+3 || subs[0].NextAttemptAt.IsZero() {
		t.Errorf("bob's subscription after three digested items: %+v, %v", subs, err)
	}

	// Digests off: what is owed comes at once, then each item on its own.
	// (An item the fan-out reaches after the change would come twice:
	// once in the digest, once on its own; d4 is past it before.)
	e.publish("demo", "d4")
	collectItems(t, alice, "demo", 1)
	testenv.WaitFor(t, 10*time.Second, "the node's cursor to pass d4", func() bool {
		nn, err := e.store.Node(e.ctx, "demo")
		return err == nil && nn.XMPPSeq == nn.LastSeq
	})
	result(t, e.request(bob, "set", fmt.Sprintf(`<pubsub xmlns=%q><options node="demo" jid=%q>`+
		`<x xmlns="jabber:x:data" type="submit"><field var="pubsub#digest"><value>0</value></field></x></options></pubsub>`, nsPubsub, bob.JID)))
	if got := itemsOf(t, nextEvent(t, bob, 5*time.Second), "demo"); len(got) != 1 || got[0].id != "d4" {
		t.Errorf("turning digests off sent %v, want d4", got)
	}
	testenv.WaitFor(t, 10*time.Second, "the last digest to be recorded", func() bool {
		s, err := e.hub.Subscriptions(e.ctx, hub.SubscriptionFilter{NodeID: n.ID, Address: bob.JID.String()})
		return err == nil && len(s) == 1 && s[0].NextAttemptAt.IsZero()
	})
	e.publish("demo", "d5")
	if got := itemsOf(t, nextEvent(t, bob, 5*time.Second), "demo"); len(got) != 1 || got[0].id != "d5" {
		t.Errorf("after digests %v, want d5 on its own", got)
	}
	noEvents(t, bob, 1500*time.Millisecond) // d4 and d5 once each
}

// TestDigestForReaders: a reader of plain messages asking for digests
// gets one message listing the entries.
func TestDigestForReaders(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("demo", "Demo feed", hub.AccessOpen)
	alice := e.dial("alice", "reader")
	chatSay(t, e, alice, "subscribe demo")
	result(t, e.request(alice, "set", fmt.Sprintf(`<pubsub xmlns=%q><options node="demo" jid=%q>%s</options></pubsub>`,
		nsPubsub, alice.JID.Bare(), digestOptions("1000"))))
	e.publish("demo", "r1")
	e.publish("demo", "r2")
	m := nextMessage(t, alice, 10*time.Second, isPlain)
	if b := bodyOf(m); !strings.Contains(b, "[Demo feed] 2 new entries") || !strings.Contains(b, "Title r1") || !strings.Contains(b, "Title r2") {
		t.Errorf("a reader's digest: %q", b)
	}
	noNotifications(t, alice, 300*time.Millisecond)
}
