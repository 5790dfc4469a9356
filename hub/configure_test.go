package hub_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
)

// TestConfigureNodeToWhitelistRevokesNonMembers: making an open node
// whitelist-only ends the XMPP subscriptions of everyone who may not read
// it any more, with a revoke event each, whoever changes the configuration;
// members, owners, admins and the node's other kinds of subscription stay.
// Opening the node again removes nobody.
func TestConfigureNodeToWhitelistRevokesNonMembers(t *testing.T) {
	e := newEnv(t, envOptions{admins: []string{"admin@example.org"}})
	ctx := t.Context()
	e.createNode("n", "")
	node := e.node("n")
	if err := e.hub.SetAffiliation(ctx, node, "member@example.org", hub.AffMember); err != nil {
		t.Fatal(err)
	}
	if err := e.hub.SetAffiliation(ctx, node, "owner@example.org", hub.AffOwner); err != nil {
		t.Fatal(err)
	}
	for _, full := range []string{"stranger@example.org/a", "stranger@example.org/b", "member@example.org/x",
		"owner@example.org/y", "admin@example.org/z"} {
		bare, _, _ := strings.Cut(full, "/")
		if _, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindXMPP, Address: full, BareJID: bare}); err != nil {
			t.Fatalf("subscribe %s: %v", full, err)
		}
	}
	if _, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindWebhook, Address: "http://127.0.0.1:9/hook"}); err != nil {
		t.Fatal(err)
	}
	wakes := e.rec.wakesOf(node.ID)

	cfg := node.NodeConfig
	cfg.AccessModel = hub.AccessWhitelist
	if err := e.hub.ConfigureNode(ctx, "n", cfg); err != nil {
		t.Fatal(err)
	}
	if got := e.node("n").AccessModel; got != hub.AccessWhitelist {
		t.Fatalf("access model %q after configuring whitelist", got)
	}
	subs, err := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: node.ID})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, s := range subs {
		left = append(left, s.Address)
	}
	slices.Sort(left)
	want := []string{"admin@example.org/z", "http://127.0.0.1:9/hook", "member@example.org/x", "owner@example.org/y"}
	if !slices.Equal(left, want) {
		t.Errorf("subscriptions left %v, want %v", left, want)
	}
	var revoked []string
	for _, ev := range e.events(node.ID) {
		if ev.Kind == hub.EventRevoke {
			revoked = append(revoked, ev.Address)
		}
	}
	slices.Sort(revoked)
	if !slices.Equal(revoked, []string{"stranger@example.org/a", "stranger@example.org/b"}) {
		t.Errorf("revoke events for %v, want both of the stranger's subscriptions", revoked)
	}
	if e.rec.wakesOf(node.ID) == wakes {
		t.Error("the XMPP transport was not woken to tell the stranger")
	}

	// Back to open and to whitelist again: nobody left to remove, nothing
	// more revoked.
	cfg.AccessModel = hub.AccessOpen
	if err := e.hub.ConfigureNode(ctx, "n", cfg); err != nil {
		t.Fatal(err)
	}
	cfg.AccessModel = hub.AccessWhitelist
	if err := e.hub.ConfigureNode(ctx, "n", cfg); err != nil {
		t.Fatal(err)
	}
	if subs, _ := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: node.ID}); len(subs) != len(want) {
		t.Errorf("%d subscriptions after reopening and closing again, want %d", len(subs), len(want))
	}

	cfg.AccessModel = "secret"
	mustErrIs(t, "an unknown access model", e.hub.ConfigureNode(ctx, "n", cfg), hub.ErrInvalid)
	mustErrIs(t, "a missing node", e.hub.ConfigureNode(ctx, "missing", hub.DefaultNodeConfig()), hub.ErrNotFound)
}

// TestRevokeCarriesPlainType: a revoke event says in what message type
// the removed subscription got plain messages, whichever way it ended
// (the owner's word, leaving the whitelist, the node made whitelist-only),
// so the reader can be told in words after its subscription is gone; an
// XEP-0060 subscription's revoke carries none.
func TestRevokeCarriesPlainType(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	e.createNode("n", "")
	node := e.node("n")
	subscribe := func(full string, opts hub.Options) {
		t.Helper()
		bare, _, _ := strings.Cut(full, "/")
		if _, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindXMPP, Address: full, BareJID: bare, Options: opts}); err != nil {
			t.Fatalf("subscribe %s: %v", full, err)
		}
	}
	subscribe("chat@example.org", hub.Options{Format: hub.FormatMessage})
	subscribe("normal@example.org", hub.Options{Format: hub.FormatMessage, MessageType: hub.NotifyNormal})
	subscribe("pubsub@example.org", hub.Options{})
	subscribe("owned@example.org", hub.Options{Format: hub.FormatMessage})
	subscribe("outcast@example.org", hub.Options{Format: hub.FormatMessage})

	if err := e.hub.RevokeSubscription(ctx, node, "owned@example.org"); err != nil {
		t.Fatal(err)
	}
	if err := e.hub.SetAffiliation(ctx, node, "outcast@example.org", hub.AffOutcast); err != nil {
		t.Fatal(err)
	}
	cfg := node.NodeConfig
	cfg.AccessModel = hub.AccessWhitelist
	if err := e.hub.ConfigureNode(ctx, "n", cfg); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, ev := range e.events(node.ID) {
		if ev.Kind == hub.EventRevoke {
			got[ev.Address] = ev.PlainType
		}
	}
	want := map[string]string{"chat@example.org": hub.NotifyChat, "normal@example.org": hub.NotifyNormal,
		"pubsub@example.org": "", "owned@example.org": hub.NotifyChat, "outcast@example.org": hub.NotifyChat}
	if !maps.Equal(got, want) {
		t.Errorf("revoke events' plain types %v, want %v", got, want)
	}
}
