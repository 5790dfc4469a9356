package component

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

func TestBounceCondition(t *testing.T) {
	for _, c := range []struct {
		stanza, cond, reason string
		permanent            bool
	}{
		{`<message type="error" id="x"><error type="cancel"><item-not-found xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/></error></message>`,
			"item-not-found", "item-not-found", true},
		{`<message type="error" id="x"><error type="cancel"><service-unavailable xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/>` +
			`<text xmlns="urn:ietf:params:xml:ns:xmpp-stanzas">The user does not exist</text></error></message>`,
			"service-unavailable", "service-unavailable: The user does not exist", false},
		{`<message type="error" id="x"><error type="auth"><registration-required xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/></error></message>`,
			"registration-required", "registration-required", true},
		{`<message type="error" id="x"><error type="wait"><remote-server-timeout xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/></error></message>`,
			"remote-server-timeout", "remote-server-timeout", false},
		{`<message type="error" id="x"><error type="cancel"/></message>`, "", "an error without a condition", false},
		{`<message type="error" id="x"/>`, "", "an error without a condition", false},
	} {
		cond, reason := bounceCondition(mustParse(t, c.stanza))
		if string(cond) != c.cond || reason != c.reason || permanentBounces[cond] != c.permanent {
			t.Errorf("%s: %q, %q (permanent %v); want %q, %q (%v)", c.stanza, cond, reason, permanentBounces[cond], c.cond, c.reason, c.permanent)
		}
	}
	if !permanentBounces[stanza.Gone] || permanentBounces[stanza.ServiceUnavailable] {
		t.Error("gone must end a subscription at once, service-unavailable must be counted")
	}
}

// TestBouncesEndSubscriptions: errors answering notifications reach
// their subscription. Prosody answers a notification to an account that
// does not exist with service-unavailable, which is counted: the
// subscription ends after BounceLimit bounces over BounceWindow. An error
// that says the address is gone ends a subscription at once. A chat
// command clears its sender's count.
func TestBouncesEndSubscriptions(t *testing.T) {
	testenv.RequireProsody(t)
	clock := testenv.NewClock(time.Now())
	e := newEnv(t, envOptions{hub: func(c *hub.Config) { c.Now = clock.Now }})
	n := e.createNode("demo", "Demo feed", hub.AccessOpen)
	alice := e.dial("alice", "bounce")
	subOf := func(addr string) *hub.Subscription {
		t.Helper()
		subs, err := e.hub.Subscriptions(e.ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP, Address: addr})
		if err != nil {
			t.Fatal(err)
		}
		if len(subs) == 0 {
			return nil
		}
		return &subs[0]
	}
	// A reader's subscription for an account that does not exist (plain
	// chat messages, which Prosody answers with an error).
	const ghost = "ghost@localhost"
	if _, _, err := e.hub.Subscribe(e.ctx, hub.Subscription{NodeName: "demo", Kind: hub.KindXMPP, Address: ghost, BareJID: ghost,
		Options: hub.Options{Format: hub.FormatMessage}}); err != nil {
		t.Fatal(err)
	}
	bounces := func(want int) *hub.Subscription {
		t.Helper()
		var s *hub.Subscription
		testenv.WaitFor(t, 10*time.Second, fmt.Sprintf("%d bounces of %s", want, ghost), func() bool {
			s = subOf(ghost)
			return s != nil && s.ConsecutiveErrors == want
		})
		return s
	}
	e.publish("demo", "g1")
	s := bounces(1)
	// /metrics counts the bounce (pingd_xmpp_notifications_bounced_total).
	if uni, _, bounced := e.comp.NotificationCounts(); bounced != 1 || uni < 1 {
		t.Errorf("notification counts: %d sent, %d bounced; want at least 1 and 1", uni, bounced)
	}
	if !strings.Contains(s.LastError, "service-unavailable") || !s.FirstFailureAt.Equal(clock.Now().Truncate(time.Microsecond)) {
		t.Errorf("after one bounce: errors %d since %v, %q", s.ConsecutiveErrors, s.FirstFailureAt, s.LastError)
	}
	first := s.FirstFailureAt
	clock.Advance(hub.BounceWindow + time.Hour)
	e.publish("demo", "g2")
	if s := bounces(2); !s.FirstFailureAt.Equal(first) {
		t.Errorf("the second bounce moved the first bounce's time to %v", s.FirstFailureAt)
	}
	e.publish("demo", "g3") // the third, more than a day after the first: the end
	testenv.WaitFor(t, 10*time.Second, "the bouncing subscription to end", func() bool { return subOf(ghost) == nil })
	if !strings.Contains(e.logs.String(), "XMPP subscription ended: its notifications bounce") {
		t.Errorf("the end was not logged")
	}

	// Bounces within a day do not end a subscription, however many (five
	// here, with the next one).
	if _, _, err := e.hub.Subscribe(e.ctx, hub.Subscription{NodeName: "demo", Kind: hub.KindXMPP, Address: ghost, BareJID: ghost,
		Options: hub.Options{Format: hub.FormatMessage}}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		e.publish("demo", fmt.Sprintf("h%d", i))
		bounces(i + 1)
	}

	// Alice's client refuses a notification with item-not-found: her
	// subscription ends at once. An error naming no notification, or from
	// someone else, changes nothing.
	result(t, e.request(alice, "set", subscribePayload("demo", alice.JID.String())))
	testenv.WaitFor(t, 10*time.Second, "alice's subscription", func() bool { return subOf(alice.JID.String()) != nil })
	nextEvent(t, alice, 10*time.Second) // the newest item, sent to a new subscription
	e.publish("demo", "a1")
	bounces(5)
	ev := nextEvent(t, alice, 10*time.Second)
	id := ev.msg.attr("id")
	refuse := func(id, cond string) {
		t.Helper()
		if _, err := alice.SendRaw(e.ctx, fmt.Sprintf(`<message type="error" id=%q to=%q><error type="cancel"><%s xmlns=%q/></error></message>`,
			id, e.p.ComponentDomain, cond, nsStanzaErrors)); err != nil {
			t.Fatal(err)
		}
	}
	refuse("no-notification", "item-not-found")
	refuse(strings.Replace(id, "n"+strconv.FormatInt(n.ID, 36)+".", "n99999.", 1), "item-not-found") // another node
	refuse(id, "service-unavailable")
	testenv.WaitFor(t, 10*time.Second, "alice's bounce to be counted", func() bool {
		s := subOf(alice.JID.String())
		return s != nil && s.ConsecutiveErrors == 1
	})
	// A chat command shows alice is there: her count is cleared.
	chatSay(t, e, alice, "list")
	if s := subOf(alice.JID.String()); s == nil || s.ConsecutiveErrors != 0 || s.LastError != "" || !s.FirstFailureAt.IsZero() {
		t.Errorf("after a chat command alice's subscription is %+v", s)
	}
	refuse(id, "item-not-found")
	testenv.WaitFor(t, 10*time.Second, "alice's subscription to end", func() bool { return subOf(alice.JID.String()) == nil })
	if s := subOf(ghost); s == nil || s.ConsecutiveErrors != 5 {
		t.Errorf("another subscriber's bounces changed: %+v", s)
	}
	// Subscribing again clears the count too.
	if s, existed, err := e.hub.Subscribe(e.ctx, hub.Subscription{NodeName: "demo", Kind: hub.KindXMPP, Address: ghost, BareJID: ghost}); err != nil ||
		!existed || s.ConsecutiveErrors != 0 {
		t.Fatalf("subscribing again: %+v, %v, %v", s, existed, err)
	}
	if s := subOf(ghost); s.ConsecutiveErrors != 0 || s.LastError != "" {
		t.Errorf("after subscribing again the subscription is %+v", s)
	}
}

// TestNotificationErrorsTakeRequestTokens: an error answering a
// notification costs pingd a store write, and anyone can send errors
// naming a notification id; they were held to the sender's pending share
// only, not to its request rate, so one user could make pingd write at
// the speed of its stream. They take tokens of the sender's bucket like
// its requests; beyond it they are dropped.
func TestNotificationErrorsTakeRequestTokens(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.stop()
	const burst = 5
	e.configure = func(c *Config) { c.IQRate, c.IQBurst = 0.01, burst } // no token comes back during the test
	e.startComponent(envOptions{level: slog.LevelDebug})
	n := e.createNode("bouncy", "", hub.AccessOpen)
	alice := e.dial("alice", "flood")
	result(t, e.request(alice, "set", subscribePayload("bouncy", alice.JID.String()))) // one token

	const sent = 30
	for i := range sent {
		sendNoWait(t, e.ctx, alice, fmt.Sprintf(`<message type="error" to=%q id="forged-n%s.%d">`+
			`<error type="wait"><resource-constraint xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/></error></message>`,
			e.p.ComponentDomain, strconv.FormatInt(n.ID, 36), i+1))
	}
	bounces := func() int {
		subs, err := e.store.Subscriptions(e.ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP})
		if err != nil || len(subs) != 1 {
			t.Fatalf("subscriptions %v, %v", subs, err)
		}
		return subs[0].ConsecutiveErrors
	}
	refused := func() int { return strings.Count(e.logs.String(), "request refused: per-JID rate") }
	testenv.WaitFor(t, 20*time.Second, "every error to be recorded or refused", func() bool { return bounces()+refused() >= sent })
	if got := bounces(); got > burst-1 {
		t.Errorf("%d of %d errors recorded, want at most the %d tokens left", got, sent, burst-1)
	}
}
