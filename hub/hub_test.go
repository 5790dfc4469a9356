package hub_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

func TestCreateNodeValidatesNames(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	cases := []struct {
		name string
		ok   bool
	}{
		{"", false},
		{strings.Repeat("n", hub.MaxNodeNameBytes), true},
		{strings.Repeat("n", hub.MaxNodeNameBytes+1), false},
		{strings.Repeat("é", hub.MaxNodeNameBytes/2) + "x", true}, // 255 bytes of two-byte runes
		{strings.Repeat("é", hub.MaxNodeNameBytes/2+1), false},    // 256 bytes
		{"bad\xffutf8", false},
		{"line\nbreak", false},
		{"nul\x00", false},
		{"feeds/demo", true},
		{"with space and ünïcode ✓", true},
		// The prefix of the component's ad-hoc command nodes.
		{"pingd#subscribe", false},
		{"pingd#mine", false},
		{"PINGD#mine", true},
		{"my-pingd#node", true},
	}
	for _, c := range cases {
		n, token, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: c.name, Config: hub.DefaultNodeConfig()})
		if c.ok {
			if err != nil {
				t.Errorf("CreateNode(%q): %v", c.name, err)
				continue
			}
			if n.ID == 0 || n.Name != c.name || token == "" {
				t.Errorf("CreateNode(%q) = %+v, token %q", c.name, n, token)
			}
			continue
		}
		if !errors.Is(err, hub.ErrInvalid) {
			t.Errorf("CreateNode(%q): error %v, want ErrInvalid", c.name, err)
		}
	}
	nodes, err := e.hub.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want int
	for _, c := range cases {
		if c.ok {
			want++
		}
	}
	if len(nodes) != want {
		t.Errorf("%d nodes stored, want %d (refused names must store nothing)", len(nodes), want)
	}

	_, _, err = e.hub.CreateNode(ctx, hub.NodeSpec{Name: "feeds/demo"})
	mustErrIs(t, "second node of the same name", err, hub.ErrExists)
}

func TestCreateNodeValidatesSourceURLs(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	for i, u := range []string{
		"ftp://example.org/feed",
		"example.org/feed",
		"http://",
		"http://exa mple.org/",
		"/relative/feed.xml",
		"mailto:someone@example.org",
		"http://example.org/" + strings.Repeat("a", hub.MaxURLBytes),
	} {
		_, _, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: "n" + string(rune('a'+i)), Source: u})
		if !errors.Is(err, hub.ErrInvalid) {
			t.Errorf("source %.60q: error %v, want ErrInvalid", u, err)
		}
	}
	if nodes, _ := e.hub.Nodes(ctx); len(nodes) != 0 {
		t.Errorf("nodes with refused sources were stored: %v", nodes)
	}
	if srcs, _ := e.hub.Sources(ctx); len(srcs) != 0 {
		t.Errorf("sources were stored for refused URLs: %v", srcs)
	}
}

func TestCreateNodeConfigDefaultsAndBounds(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()

	// Zero values take the defaults.
	n, _, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: "zero"})
	if err != nil {
		t.Fatal(err)
	}
	stored := e.node("zero")
	for _, got := range []*hub.Node{n, stored} {
		if got.AccessModel != hub.AccessOpen || got.MaxItems != hub.DefaultMaxItems || got.NotificationType != hub.NotifyHeadline ||
			got.SendLastPublished != hub.SendLastOnSub {
			t.Errorf("zero config became %+v, want open, %d, headline", got.NodeConfig, hub.DefaultMaxItems)
		}
	}

	// What an owner sets is kept.
	cfg := hub.NodeConfig{Title: "Mine", AccessModel: hub.AccessWhitelist, MaxItems: hub.MaxItemsLimit,
		DeliverPayloads: true, NotificationType: hub.NotifyNormal, SendLastPublished: hub.SendLastNever,
		Polling: hub.FeedPolling{TTLMinutes: 15, SkipDays: []string{"Saturday"}, UpdatePeriod: "hourly", UpdateFrequency: 4}}
	if _, _, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: "set", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if got := e.node("set").NodeConfig; !reflect.DeepEqual(got, cfg) {
		t.Errorf("stored config %+v, want %+v", got, cfg)
	}

	bad := []hub.NodeConfig{
		{AccessModel: "presence"},
		{AccessModel: "OPEN"},
		{MaxItems: -1},
		{MaxItems: hub.MaxItemsLimit + 1},
		{NotificationType: "chat"},
		{SendLastPublished: hub.SendLastOnSubAndPresence},
		{SendLastPublished: "sometimes"},
		{Title: strings.Repeat("t", 1025)},
		{Polling: hub.FeedPolling{SkipHours: []int{24}}},
		{Polling: hub.FeedPolling{SkipHours: []int{3, 3}}},
		{Polling: hub.FeedPolling{SkipDays: []string{"Funday"}}},
		{Polling: hub.FeedPolling{UpdatePeriod: "fortnightly"}},
		{Polling: hub.FeedPolling{UpdateFrequency: 2}},
		{Polling: hub.FeedPolling{TTLMinutes: -1}},
	}
	for i, c := range bad {
		_, _, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: "bad" + string(rune('a'+i)), Config: c})
		if !errors.Is(err, hub.ErrInvalid) {
			t.Errorf("config %+v: error %v, want ErrInvalid", c, err)
		}
	}
	if _, err := e.store.Node(ctx, "bada"); !errors.Is(err, hub.ErrNotFound) {
		t.Errorf("a node with a refused config was stored (%v)", err)
	}

	// ConfigureNode applies the same rules.
	if err := e.hub.ConfigureNode(ctx, "set", hub.NodeConfig{MaxItems: 0}); err != nil {
		t.Fatalf("ConfigureNode with zero values: %v", err)
	}
	if got := e.node("set"); got.MaxItems != hub.DefaultMaxItems || got.AccessModel != hub.AccessOpen {
		t.Errorf("reconfigured to %+v, want the defaults", got.NodeConfig)
	}
	mustErrIs(t, "ConfigureNode max_items 0..", e.hub.ConfigureNode(ctx, "set", hub.NodeConfig{MaxItems: -5}), hub.ErrInvalid)
	mustErrIs(t, "ConfigureNode of a missing node", e.hub.ConfigureNode(ctx, "nope", hub.NodeConfig{}), hub.ErrNotFound)
}

func TestCreateNodeWithSourceSchedulesItsBaseline(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	u := e.origin.url("/feed")
	n, _, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: "demo", Source: u})
	if err != nil {
		t.Fatal(err)
	}
	if n.SourceID == 0 || n.SourceURL != u {
		t.Fatalf("node follows %d %q, want a source at %s", n.SourceID, n.SourceURL, u)
	}
	src := e.source(n.SourceID)
	if src.OriginalURL != u || src.Baselined || !src.NextFetchAt.Equal(e.clock.Now()) || src.NextFetchReason != "new source" {
		t.Errorf("source %+v: want %s due now for its baseline", src.SourceState, u)
	}

	// Neither learning of the source nor a subscription is a ping: a
	// source that pings is polled only as a safety net.
	if _, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "demo", Kind: hub.KindXMPP,
		Address: "a@example.org/x", BareJID: "a@example.org"}); err != nil {
		t.Fatal(err)
	}
	if src := e.source(n.SourceID); !src.LastPingAt.IsZero() || !src.NextFetchAt.Equal(e.clock.Now()) {
		t.Errorf("after creation and a subscription: last ping %v, next fetch %v; want no ping, due now",
			src.LastPingAt, src.NextFetchAt)
	}

	// A second node of the same URL shares the source.
	n2, _, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: "demo2", Source: u})
	if err != nil {
		t.Fatal(err)
	}
	if n2.SourceID != n.SourceID {
		t.Errorf("second node follows source %d, want the shared %d", n2.SourceID, n.SourceID)
	}
}

func TestTokens(t *testing.T) {
	e := newEnv(t, envOptions{adminToken: "the-admin-token"})
	ctx := t.Context()
	a, tokenA, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	_, tokenB, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	stored := e.node("a")
	if !bytes.Equal(stored.TokenHash, hub.HashToken(tokenA)) || bytes.Contains(stored.TokenHash, []byte(tokenA)) {
		t.Errorf("the store keeps %x, want only the SHA-256 of the token", stored.TokenHash)
	}
	if len(tokenA) < 32 || tokenA == tokenB {
		t.Errorf("tokens %q and %q: want long random tokens", tokenA, tokenB)
	}

	for _, c := range []struct {
		token string
		want  bool
	}{
		{tokenA, true},
		{"the-admin-token", true},
		{tokenB, false}, // another node's token
		{"wrong", false},
		{"", false},
		{tokenA + " ", false},
	} {
		if got := e.hub.Authorize(stored, c.token); got != c.want {
			t.Errorf("Authorize(a, %q) = %v, want %v", c.token, got, c.want)
		}
	}
	if !e.hub.Authorize(a, tokenA) {
		t.Errorf("the node CreateNode returned does not accept its own token")
	}

	newToken, err := e.hub.RotateToken(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	rotated := e.node("a")
	if e.hub.Authorize(rotated, tokenA) {
		t.Errorf("the old token still authorises after RotateToken")
	}
	if !e.hub.Authorize(rotated, newToken) || newToken == tokenA {
		t.Errorf("the new token %q does not authorise", newToken)
	}
	if !e.hub.Authorize(rotated, "the-admin-token") {
		t.Errorf("the admin token stopped authorising after RotateToken")
	}
	_, err = e.hub.RotateToken(ctx, "missing")
	mustErrIs(t, "RotateToken of a missing node", err, hub.ErrNotFound)

	// Without an admin token configured, no token is the admin token, the
	// empty one least of all.
	noAdmin := newEnv(t, envOptions{})
	if noAdmin.hub.IsAdminToken("") || noAdmin.hub.IsAdminToken("the-admin-token") {
		t.Errorf("a hub without an admin token accepts one")
	}
	if noAdmin.hub.Authorize(&hub.Node{Name: "tokenless"}, "") {
		t.Errorf("an empty token authorises a node without a token hash")
	}
}

func TestSubscribeXMPP(t *testing.T) {
	e := newEnv(t, envOptions{admins: []string{"admin@example.org"}})
	ctx := t.Context()
	e.createNode("open", "")
	wl := hub.DefaultNodeConfig()
	wl.AccessModel = hub.AccessWhitelist
	if _, _, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: "wl", Config: wl}); err != nil {
		t.Fatal(err)
	}
	xmpp := func(node, full string) hub.Subscription {
		bare, _, _ := strings.Cut(full, "/")
		return hub.Subscription{NodeName: node, Kind: hub.KindXMPP, Address: full, BareJID: bare}
	}

	// Anyone may subscribe to an open node.
	sub, existed, err := e.hub.Subscribe(ctx, xmpp("open", "alice@example.org/phone"))
	if err != nil || existed {
		t.Fatalf("subscribe to an open node: %v (existed %v)", err, existed)
	}
	if sub.ID == 0 || sub.SubID == "" || sub.State != hub.SubActive || sub.NodeName != "open" {
		t.Errorf("subscription %+v: want an active one with a subid", sub)
	}

	// Subscribing again gives the same subscription back.
	again, existed, err := e.hub.Subscribe(ctx, xmpp("open", "alice@example.org/phone"))
	if err != nil || !existed {
		t.Fatalf("subscribe again: %v (existed %v)", err, existed)
	}
	if again.ID != sub.ID || again.SubID != sub.SubID {
		t.Errorf("subscribing again gave %d/%s, want the existing %d/%s", again.ID, again.SubID, sub.ID, sub.SubID)
	}
	if subs, _ := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: sub.NodeID}); len(subs) != 1 {
		t.Errorf("%d subscriptions after subscribing twice, want 1", len(subs))
	}

	// A whitelist node takes members, owners and admins, nobody else.
	_, _, err = e.hub.Subscribe(ctx, xmpp("wl", "bob@example.org/pc"))
	mustErrIs(t, "non-member on a whitelist node", err, hub.ErrNotMember)
	wlNode := e.node("wl")
	if err := e.hub.SetAffiliation(ctx, wlNode, "bob@example.org", hub.AffMember); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.hub.Subscribe(ctx, xmpp("wl", "bob@example.org/pc")); err != nil {
		t.Errorf("member on a whitelist node: %v", err)
	}
	if err := e.hub.SetAffiliation(ctx, wlNode, "owner@example.org", hub.AffOwner); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.hub.Subscribe(ctx, xmpp("wl", "owner@example.org/pc")); err != nil {
		t.Errorf("owner on a whitelist node: %v", err)
	}
	if _, _, err := e.hub.Subscribe(ctx, xmpp("wl", "admin@example.org/desk")); err != nil {
		t.Errorf("admin on a whitelist node: %v", err)
	}
	if aff, _ := e.hub.AffiliationOf(ctx, wlNode, "admin@example.org"); aff != hub.AffOwner {
		t.Errorf("admin's affiliation is %q, want owner", aff)
	}
	if ok, _ := e.hub.IsOwner(ctx, wlNode, "admin@example.org"); !ok {
		t.Errorf("an admin does not own the node")
	}
	if ok, _ := e.hub.IsOwner(ctx, wlNode, "bob@example.org"); ok {
		t.Errorf("a member owns the node")
	}

	// An outcast may not subscribe, even to an open node.
	openNode := e.node("open")
	if err := e.hub.SetAffiliation(ctx, openNode, "mallory@example.org", hub.AffOutcast); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.hub.Subscribe(ctx, xmpp("open", "mallory@example.org/x"))
	mustErrIs(t, "outcast on an open node", err, hub.ErrForbidden)
	if errors.Is(err, hub.ErrNotMember) {
		t.Errorf("an outcast is told %v; it is banned, not merely missing from a whitelist", err)
	}

	// Malformed requests.
	noBare := xmpp("open", "carol@example.org/x")
	noBare.BareJID = ""
	_, _, err = e.hub.Subscribe(ctx, noBare)
	mustErrIs(t, "XMPP subscription without a bare JID", err, hub.ErrInvalid)
	_, _, err = e.hub.Subscribe(ctx, hub.Subscription{NodeName: "open", Kind: "smoke-signal", Address: "hill"})
	mustErrIs(t, "unknown kind", err, hub.ErrInvalid)
	_, _, err = e.hub.Subscribe(ctx, hub.Subscription{NodeName: "open", Kind: hub.KindWebhook})
	mustErrIs(t, "empty address", err, hub.ErrInvalid)
	_, _, err = e.hub.Subscribe(ctx, xmpp("missing", "alice@example.org/phone"))
	mustErrIs(t, "missing node", err, hub.ErrNotFound)
}

func TestSubscribeStartsAtTheNodesLastEvent(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	e.createNode("n", "")
	if _, err := e.hub.Publish(ctx, "n", "owner@example.org", []hub.Entry{{ID: "1"}, {ID: "2"}, {ID: "3"}}); err != nil {
		t.Fatal(err)
	}
	sub, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindXMPP, Address: "a@example.org", BareJID: "a@example.org"})
	if err != nil {
		t.Fatal(err)
	}
	hook, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindWebhook, Address: "http://127.0.0.1:1/hook",
		State: hub.SubPending, Options: hub.Options{Method: "POST", Secret: "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*hub.Subscription{sub, hook} {
		stored, err := e.store.Subscription(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Cursor != 3 {
			t.Errorf("%s subscription starts at %d, want the node's last event 3", s.Kind, stored.Cursor)
		}
	}

	// An HTTP subscription is stored in the state it was given, with its
	// options, and its transport is woken to verify it.
	stored, _ := e.store.Subscription(ctx, hook.ID)
	if stored.State != hub.SubPending || stored.Options.Method != "POST" || stored.Options.Secret != "s3cret" {
		t.Errorf("webhook stored as %s %+v, want pending with its options", stored.State, stored.Options)
	}
	n := e.node("n")
	if e.rec.wakesOf(n.ID) == 0 {
		t.Errorf("the transports were not woken for a new webhook subscription")
	}

	// A renewal after more events keeps the cursor (nothing is skipped or
	// sent twice) and takes the new state.
	if _, err := e.hub.Publish(ctx, "n", "", []hub.Entry{{ID: "4"}}); err != nil {
		t.Fatal(err)
	}
	renewed, existed, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindWebhook,
		Address: "http://127.0.0.1:1/hook", State: hub.SubActive})
	if err != nil || !existed {
		t.Fatalf("renew: %v (existed %v)", err, existed)
	}
	if renewed.ID != hook.ID || renewed.Cursor != 3 || renewed.State != hub.SubActive {
		t.Errorf("renewed subscription %d at %d, %s; want %d kept at 3, active", renewed.ID, renewed.Cursor, renewed.State, hook.ID)
	}

	// A new subscription without a state is active.
	cloud, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindRSSCloud, Address: "http://127.0.0.1:1/notify"})
	if err != nil {
		t.Fatal(err)
	}
	if cloud.State != hub.SubActive || cloud.Cursor != 4 {
		t.Errorf("rssCloud subscription %s at %d, want active at 4", cloud.State, cloud.Cursor)
	}
}

// TestRequestSubscription: a request about a subscription that its
// subscriber verifies creates it pending, or replaces one not verified
// yet; about a verified one it is only a pending change, and the
// subscription, its cursor included, stays as it is.
func TestRequestSubscription(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	e.createNode("n", "")
	if _, err := e.hub.Publish(ctx, "n", "owner@example.org", []hub.Entry{{ID: "1"}, {ID: "2"}, {ID: "3"}}); err != nil {
		t.Fatal(err)
	}
	n := e.node("n")
	const cb = "http://127.0.0.1:1/hook"
	request := func(secret string) (*hub.Subscription, hub.RequestOutcome) {
		t.Helper()
		sub, outcome, err := e.hub.RequestSubscription(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindWebhook, Address: cb,
			State: hub.SubActive, Options: hub.Options{Secret: secret}})
		if err != nil {
			t.Fatal(err)
		}
		return sub, outcome
	}
	wakes := e.rec.wakesOf(n.ID)
	sub, outcome := request("victim")
	if outcome != hub.RequestCreated || sub.State != hub.SubPending || sub.Cursor != 3 || sub.Options.Secret != "victim" {
		t.Fatalf("new request: %q %+v", outcome, sub)
	}
	if e.rec.wakesOf(n.ID) == wakes {
		t.Error("the transports were not woken to verify the request")
	}
	if ok, err := e.store.ApplySubscriptionChange(ctx, sub.ID, sub.Change.ID, time.Time{}); err != nil || !ok {
		t.Fatalf("verify: %v %v", ok, err)
	}
	if _, err := e.hub.Publish(ctx, "n", "", []hub.Entry{{ID: "4"}}); err != nil {
		t.Fatal(err)
	}
	wakes = e.rec.wakesOf(n.ID)
	changed, outcome := request("stranger")
	if outcome != hub.RequestChangePending || changed.ID != sub.ID || changed.State != hub.SubActive ||
		changed.Options.Secret != "victim" || changed.Cursor != 3 || changed.Change.Options.Secret != "stranger" {
		t.Fatalf("request about a verified subscription: %q %+v", outcome, changed)
	}
	if e.rec.wakesOf(n.ID) == wakes {
		t.Error("the transports were not woken to verify the change")
	}

	left, outcome, err := e.hub.RequestUnsubscription(ctx, "n", hub.KindWebhook, cb)
	if err != nil || outcome != hub.RequestChangePending || left.Change.Mode != hub.ChangeUnsubscribe || left.State != hub.SubActive {
		t.Fatalf("unsubscribing a verified subscription: %q %+v %v", outcome, left, err)
	}
	fresh, _, err := e.hub.RequestSubscription(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindWebSub, Address: cb})
	if err != nil {
		t.Fatal(err)
	}
	if _, outcome, err := e.hub.RequestUnsubscription(ctx, "n", hub.KindWebSub, cb); err != nil || outcome != hub.RequestCancelled {
		t.Fatalf("unsubscribing a subscription not verified: %q %v", outcome, err)
	}
	if _, err := e.store.Subscription(ctx, fresh.ID); !errors.Is(err, hub.ErrNotFound) {
		t.Fatalf("the cancelled subscription is still there: %v", err)
	}
	_, _, err = e.hub.RequestUnsubscription(ctx, "n", hub.KindWebSub, cb)
	mustErrIs(t, "unsubscribing nothing", err, hub.ErrNotFound)

	for _, kind := range []hub.Kind{hub.KindXMPP, hub.KindCNWS, "smoke-signal"} {
		_, _, err = e.hub.RequestSubscription(ctx, hub.Subscription{NodeName: "n", Kind: kind, Address: "x@example.org", BareJID: "x@example.org"})
		mustErrIs(t, string(kind)+" request", err, hub.ErrInvalid)
	}
	_, _, err = e.hub.RequestSubscription(ctx, hub.Subscription{NodeName: "missing", Kind: hub.KindWebhook, Address: cb})
	mustErrIs(t, "request to a missing node", err, hub.ErrNotFound)
}

// TestRepeatedCNWSSubscribeChangesNothing: CNWS has no verification, so a
// repeated subscribe returns the subscription as it is.
func TestRepeatedCNWSSubscribeChangesNothing(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	e.createNode("n", "")
	cnws := hub.Subscription{NodeName: "n", Kind: hub.KindCNWS, Address: "http://127.0.0.1:1/cnws#x", State: hub.SubActive,
		Options: hub.Options{Topic: "http://example.org/x"}}
	first, existed, err := e.hub.Subscribe(ctx, cnws)
	if err != nil || existed {
		t.Fatalf("subscribe: %v (existed %v)", err, existed)
	}
	record := hub.DeliveryState{Attempts: 2, ConsecutiveErrors: 1, FirstFailureAt: t0, NextAttemptAt: t0.Add(time.Minute), LastError: "HTTP 503"}
	if err := e.store.SaveDeliveryState(ctx, first.ID, record); err != nil {
		t.Fatal(err)
	}
	before, _ := e.store.Subscription(ctx, first.ID)
	again, existed, err := e.hub.Subscribe(ctx, cnws)
	if err != nil || !existed || again.ID != first.ID {
		t.Fatalf("repeated subscribe: %+v %v (existed %v)", again, err, existed)
	}
	after, _ := e.store.Subscription(ctx, first.ID)
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("a repeated subscribe changed the subscription:\n got %+v\nwant %+v", after, before)
	}
}

func TestUnsubscribe(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	e.createNode("n", "")
	for _, s := range []hub.Subscription{
		{NodeName: "n", Kind: hub.KindXMPP, Address: "a@example.org/1", BareJID: "a@example.org"},
		{NodeName: "n", Kind: hub.KindXMPP, Address: "a@example.org/2", BareJID: "a@example.org"},
		{NodeName: "n", Kind: hub.KindWebSub, Address: "http://127.0.0.1:1/a@example.org/1"},
	} {
		if _, _, err := e.hub.Subscribe(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := e.hub.Unsubscribe(ctx, "n", hub.KindXMPP, "a@example.org/1")
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0].Address != "a@example.org/1" {
		t.Errorf("removed %+v, want the one subscription", removed)
	}
	left, _ := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: e.node("n").ID})
	if len(left) != 2 {
		t.Errorf("%d subscriptions left, want the other resource and the WebSub one", len(left))
	}
	_, err = e.hub.Unsubscribe(ctx, "n", hub.KindXMPP, "a@example.org/1")
	mustErrIs(t, "unsubscribing twice", err, hub.ErrNotFound)
	_, err = e.hub.Unsubscribe(ctx, "missing", hub.KindXMPP, "a@example.org/2")
	mustErrIs(t, "unsubscribing from a missing node", err, hub.ErrNotFound)
}

func TestSetAffiliationRevokesSubscriptions(t *testing.T) {
	e := newEnv(t, envOptions{admins: []string{"admin@example.org"}})
	ctx := t.Context()
	wl := hub.DefaultNodeConfig()
	wl.AccessModel = hub.AccessWhitelist
	if _, _, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: "wl", Config: wl}); err != nil {
		t.Fatal(err)
	}
	node := e.node("wl")
	for _, jid := range []string{"alice@example.org", "bob@example.org"} {
		if err := e.hub.SetAffiliation(ctx, node, jid, hub.AffMember); err != nil {
			t.Fatal(err)
		}
	}
	subscribe := func(node, full string) {
		t.Helper()
		bare, _, _ := strings.Cut(full, "/")
		if _, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: node, Kind: hub.KindXMPP, Address: full, BareJID: bare}); err != nil {
			t.Fatalf("subscribe %s to %s: %v", full, node, err)
		}
	}
	subscribe("wl", "alice@example.org/phone")
	subscribe("wl", "alice@example.org/desk")
	subscribe("wl", "bob@example.org/pc")
	subscribe("wl", "admin@example.org/desk")
	wakes := e.rec.wakesOf(node.ID)

	// Leaving the whitelist removes every subscription of that bare JID
	// and records one revoke event per subscription.
	if err := e.hub.SetAffiliation(ctx, node, "alice@example.org", hub.AffNone); err != nil {
		t.Fatal(err)
	}
	if subs, _ := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: node.ID, BareJID: "alice@example.org"}); len(subs) != 0 {
		t.Errorf("alice keeps %d subscriptions after leaving the whitelist", len(subs))
	}
	evs := e.events(node.ID)
	var revoked []string
	for _, ev := range evs {
		if ev.Kind == hub.EventRevoke {
			revoked = append(revoked, ev.Address)
		}
	}
	slices.Sort(revoked)
	if !slices.Equal(revoked, []string{"alice@example.org/desk", "alice@example.org/phone"}) {
		t.Errorf("revoke events for %v, want both of alice's subscriptions", revoked)
	}
	if e.rec.wakesOf(node.ID) == wakes {
		t.Errorf("the XMPP transport was not woken to tell alice")
	}
	if subs, _ := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: node.ID, BareJID: "bob@example.org"}); len(subs) != 1 {
		t.Errorf("bob lost his subscription when alice left")
	}

	// An admin keeps its subscriptions whatever its stored affiliation.
	if err := e.hub.SetAffiliation(ctx, node, "admin@example.org", hub.AffNone); err != nil {
		t.Fatal(err)
	}
	if subs, _ := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: node.ID, BareJID: "admin@example.org"}); len(subs) != 1 {
		t.Errorf("the admin's subscription was revoked")
	}

	// On an open node, dropping to none keeps the subscription; an outcast
	// loses it.
	e.createNode("open", "")
	open := e.node("open")
	subscribe("open", "carol@example.org/x")
	if err := e.hub.SetAffiliation(ctx, open, "carol@example.org", hub.AffNone); err != nil {
		t.Fatal(err)
	}
	if subs, _ := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: open.ID}); len(subs) != 1 {
		t.Fatalf("affiliation none on an open node removed the subscription")
	}
	if err := e.hub.SetAffiliation(ctx, open, "carol@example.org", hub.AffOutcast); err != nil {
		t.Fatal(err)
	}
	if subs, _ := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: open.ID}); len(subs) != 0 {
		t.Errorf("an outcast keeps its subscription")
	}
	if k := kinds(e.events(open.ID)); !slices.Equal(k, []hub.EventKind{hub.EventRevoke}) {
		t.Errorf("open node's log %v, want one revoke", k)
	}

	mustErrIs(t, "unknown affiliation", e.hub.SetAffiliation(ctx, open, "x@example.org", "boss"), hub.ErrInvalid)
	mustErrIs(t, "full JID", e.hub.SetAffiliation(ctx, open, "x@example.org/res", hub.AffMember), hub.ErrInvalid)
	mustErrIs(t, "empty JID", e.hub.SetAffiliation(ctx, open, "", hub.AffMember), hub.ErrInvalid)
}

func TestOwnerSubscriptionChangesAreLogged(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	node := e.createNode("n", "")
	sub := hub.Subscription{NodeName: "n", Kind: hub.KindXMPP, Address: "bob@example.org", BareJID: "bob@example.org"}
	wakes := e.rec.wakesOf(node.ID)

	// A new subscription is one subscribed event for that address, and
	// the XMPP transport is woken to tell it.
	got, existed, err := e.hub.GrantSubscription(ctx, sub)
	if err != nil || existed || got.SubID == "" {
		t.Fatalf("GrantSubscription = %+v, existed %v, %v; want a new subscription", got, existed, err)
	}
	evs := e.events(node.ID)
	if len(evs) != 1 || evs[0].Kind != hub.EventSubscribed || evs[0].Address != "bob@example.org" {
		t.Fatalf("log after granting %+v, want one subscribed event for bob@example.org", evs)
	}
	if e.rec.wakesOf(node.ID) == wakes {
		t.Error("the XMPP transport was not woken to tell bob")
	}
	// Granting again changes nothing and tells nobody.
	if again, existed, err := e.hub.GrantSubscription(ctx, sub); err != nil || !existed || again.SubID != got.SubID {
		t.Fatalf("granting again = %+v, existed %v, %v; want the same subscription", again, existed, err)
	}
	if n := len(e.events(node.ID)); n != 1 {
		t.Errorf("granting an existing subscription logged %d events, want still 1", n)
	}

	// Revoking takes exactly that address: bob's other resource stays.
	if _, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindXMPP, Address: "bob@example.org/desk", BareJID: "bob@example.org"}); err != nil {
		t.Fatal(err)
	}
	if err := e.hub.RevokeSubscription(ctx, node, "bob@example.org"); err != nil {
		t.Fatal(err)
	}
	left, _ := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: node.ID})
	if len(left) != 1 || left[0].Address != "bob@example.org/desk" {
		t.Errorf("subscriptions after revoking bob@example.org: %+v, want only bob@example.org/desk", left)
	}
	evs = e.events(node.ID)
	if last := evs[len(evs)-1]; len(evs) != 2 || last.Kind != hub.EventRevoke || last.Address != "bob@example.org" {
		t.Errorf("log after revoking %+v, want a revoke event for bob@example.org last", evs)
	}
	// Nothing to revoke: no event.
	if err := e.hub.RevokeSubscription(ctx, node, "bob@example.org"); err != nil {
		t.Fatal(err)
	}
	if n := len(e.events(node.ID)); n != 2 {
		t.Errorf("revoking a subscription that is not there logged %d events, want still 2", n)
	}
	mustErrIs(t, "empty address", e.hub.RevokeSubscription(ctx, node, ""), hub.ErrInvalid)
	_, _, err = e.hub.GrantSubscription(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindWebhook, Address: "http://example.org/cb"})
	mustErrIs(t, "a webhook", err, hub.ErrInvalid)
}

func TestNodeForURL(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	u := e.origin.url("/feed.xml")

	_, err := e.hub.NodeForURL(ctx, u, false)
	mustErrIs(t, "no node and no creation", err, hub.ErrNotFound)
	_, err = e.hub.NodeForURL(ctx, "not a url", true)
	mustErrIs(t, "invalid URL", err, hub.ErrInvalid)

	// An implicit node is created, named after the URL, open, and its
	// source is due for its baseline.
	implicit, err := e.hub.NodeForURL(ctx, u, true)
	if err != nil {
		t.Fatal(err)
	}
	if implicit.Name != u || !implicit.Implicit || implicit.AccessModel != hub.AccessOpen || implicit.SourceURL != u {
		t.Errorf("implicit node %+v, want an open implicit node named %s", implicit, u)
	}
	if src := e.source(implicit.SourceID); src.Baselined || !src.NextFetchAt.Equal(e.clock.Now()) || !src.LastPingAt.IsZero() {
		t.Errorf("implicit node's source is not due for its baseline: %+v", src.SourceState)
	}
	again, err := e.hub.NodeForURL(ctx, u, true)
	if err != nil || again.ID != implicit.ID {
		t.Errorf("second NodeForURL gave %v, %v; want the same node", again, err)
	}

	// A node an owner created for the URL is preferred.
	explicit := e.createNode("owned", "/feed.xml")
	got, err := e.hub.NodeForURL(ctx, u, true)
	if err != nil || got.ID != explicit.ID {
		t.Errorf("NodeForURL gave %+v, %v; want the owner's node %d", got, err, explicit.ID)
	}

	// A URL too long to be a node name gets a url: name.
	long := e.origin.url("/" + strings.Repeat("x", 300))
	ln, err := e.hub.NodeForURL(ctx, long, true)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(long))
	if want := "url:" + hex.EncodeToString(sum[:]); ln.Name != want || ln.SourceURL != long {
		t.Errorf("long URL's node is %q following %q, want %q", ln.Name, ln.SourceURL, want)
	}
	if err := hub.ValidNodeName(ln.Name); err != nil {
		t.Errorf("implicit name: %v", err)
	}
}

func TestNodeForURLDoesNotTakeAnUnrelatedNodeOfThatName(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	u := e.origin.url("/feed.xml")
	// An owner named a node like the URL but made it follow another feed.
	other := e.createNode(u, "/other.xml")

	n, err := e.hub.NodeForURL(ctx, u, true)
	if err != nil {
		t.Fatal(err)
	}
	if n.ID == other.ID {
		t.Fatalf("NodeForURL(%s) gave the node that follows %s", u, other.SourceURL)
	}
	if n.SourceURL != u || !n.Implicit {
		t.Errorf("NodeForURL(%s) gave %q following %q, want an implicit node following the URL", u, n.Name, n.SourceURL)
	}
	again, err := e.hub.NodeForURL(ctx, u, true)
	if err != nil || again.ID != n.ID {
		t.Errorf("asking again gave %+v, %v; want node %d", again, err, n.ID)
	}
}

func TestPublishRetractPurge(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	n := e.createNode("n", "")
	updated := t0.Add(-time.Hour)
	evs, err := e.hub.Publish(ctx, "n", "owner@example.org", []hub.Entry{
		{ID: "a", Title: "A", Payload: []byte(`<entry xmlns="http://www.w3.org/2005/Atom"><id>a</id></entry>`), Updated: updated},
		{Title: "no id"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Seq != 1 || evs[1].Seq != 2 || evs[0].ItemID != "a" || evs[1].ItemID == "" {
		t.Fatalf("published %+v, want a at 1 and a generated id at 2", evs)
	}
	if evs[0].Publisher != "owner@example.org" || !evs[0].Updated.Equal(updated) || evs[0].Title != "A" {
		t.Errorf("event %+v lost what was published", evs[0])
	}
	generated := evs[1].ItemID
	if e.rec.wakesOf(n.ID) == 0 {
		t.Errorf("publishing woke no transport")
	}
	_, err = e.hub.Publish(ctx, "missing", "", []hub.Entry{{ID: "x"}})
	mustErrIs(t, "publish to a missing node", err, hub.ErrNotFound)

	// PublishTo publishes to a node the caller has read, and fails once
	// that node is deleted.
	gone := e.createNode("gone", "")
	wakes := e.rec.wakesOf(gone.ID)
	to, err := e.hub.PublishTo(ctx, gone, "owner@example.org", []hub.Entry{{ID: "g"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(to) != 1 || to[0].Seq != 1 || to[0].ItemID != "g" || to[0].NodeID != gone.ID {
		t.Fatalf("PublishTo published %+v, want g at 1 on node %d", to, gone.ID)
	}
	if e.rec.wakesOf(gone.ID) == wakes {
		t.Errorf("PublishTo woke no transport")
	}
	if err := e.hub.DeleteNode(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	_, err = e.hub.PublishTo(ctx, gone, "owner@example.org", []hub.Entry{{ID: "h"}})
	mustErrIs(t, "publish to a node deleted since it was read", err, hub.ErrNotFound)

	// Retracting a missing item fails and removes nothing.
	_, err = e.hub.Retract(ctx, "n", "owner@example.org", []string{"a", "missing"})
	mustErrIs(t, "retract with a missing id", err, hub.ErrNotFound)
	if cur, _ := e.hub.Items(ctx, n, nil, 0); len(cur) != 2 {
		t.Errorf("%d items after a failed retraction, want 2", len(cur))
	}
	if got := len(e.events(n.ID)); got != 2 {
		t.Errorf("a failed retraction wrote to the log (%d events)", got)
	}

	out, err := e.hub.Retract(ctx, "n", "owner@example.org", []string{"a", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Kind != hub.EventRetract || out[0].ItemID != "a" {
		t.Errorf("retraction events %+v, want one for a", out)
	}
	cur, _ := e.hub.Items(ctx, n, nil, 0)
	if len(cur) != 1 || cur[0].ItemID != generated {
		t.Errorf("items after retraction %v, want only %s", itemIDs(cur), generated)
	}
	_, err = e.hub.Retract(ctx, "missing", "", []string{"a"})
	mustErrIs(t, "retract from a missing node", err, hub.ErrNotFound)
	_, err = e.hub.RetractFrom(ctx, gone, "owner@example.org", []string{"g"})
	mustErrIs(t, "retract from a node deleted since it was read", err, hub.ErrNotFound)

	if err := e.hub.Purge(ctx, "n", "owner@example.org"); err != nil {
		t.Fatal(err)
	}
	if cur, _ := e.hub.Items(ctx, n, nil, 0); len(cur) != 0 {
		t.Errorf("%d items after purge", len(cur))
	}
	if k := kinds(e.events(n.ID)); !slices.Equal(k, []hub.EventKind{hub.EventItem, hub.EventItem, hub.EventRetract, hub.EventPurge}) {
		t.Errorf("log %v", k)
	}
	mustErrIs(t, "purge a missing node", e.hub.Purge(ctx, "missing", ""), hub.ErrNotFound)
}

func TestRetractNothing(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	n := e.createNode("n", "")
	if _, err := e.hub.Publish(ctx, "n", "", []hub.Entry{{ID: "a"}}); err != nil {
		t.Fatal(err)
	}
	_, err := e.hub.Retract(ctx, "n", "", nil)
	mustErrIs(t, "retracting no ids", err, hub.ErrInvalid)
	_, err = e.hub.Retract(ctx, "n", "", []string{""})
	if err == nil {
		t.Errorf("retracting the empty id succeeded")
	}
	if cur, _ := e.hub.Items(ctx, n, nil, 0); len(cur) != 1 {
		t.Errorf("%d items left, want 1", len(cur))
	}
}

// TestDeleteNodeRecordsDeletion: deleting a node leaves, in the store,
// what its XMPP subscribers are to be told, and wakes the XMPP transport
// for it; a failed delete records nothing.
func TestDeleteNodeRecordsDeletion(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	n := e.createNode("doomed", "")
	e.createNode("kept", "")
	for _, s := range []hub.Subscription{
		{NodeName: "doomed", Kind: hub.KindXMPP, Address: "a@example.org/x", BareJID: "a@example.org"},
		{NodeName: "doomed", Kind: hub.KindWebhook, Address: "http://127.0.0.1:1/hook"},
		{NodeName: "kept", Kind: hub.KindXMPP, Address: "a@example.org/x", BareJID: "a@example.org"},
	} {
		if _, _, err := e.hub.Subscribe(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.hub.Publish(ctx, "doomed", "", []hub.Entry{{ID: "a"}}); err != nil {
		t.Fatal(err)
	}
	wakes := e.rec.wakesOf(n.ID)
	if err := e.hub.DeleteNode(ctx, "doomed"); err != nil {
		t.Fatal(err)
	}
	dels, err := e.store.NodeDeletions(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dels) != 1 || dels[0].Node.ID != n.ID || dels[0].Node.Name != "doomed" ||
		len(dels[0].Subscribers) != 1 || dels[0].Subscribers[0].Address != "a@example.org/x" {
		t.Fatalf("deletions recorded: %+v, want the node with its XMPP subscriber", dels)
	}
	if e.rec.wakesOf(n.ID) <= wakes {
		t.Error("the transports were not woken for the deleted node")
	}
	if _, err := e.store.Node(ctx, "doomed"); !errors.Is(err, hub.ErrNotFound) {
		t.Errorf("node still there: %v", err)
	}
	if subs, _ := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID}); len(subs) != 0 {
		t.Errorf("%d subscriptions of the deleted node left", len(subs))
	}
	if subs, _ := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{}); len(subs) != 1 {
		t.Errorf("%d subscriptions left, want the other node's", len(subs))
	}
	mustErrIs(t, "delete again", e.hub.DeleteNode(ctx, "doomed"), hub.ErrNotFound)
	if dels, _ := e.store.NodeDeletions(ctx, 10); len(dels) != 1 {
		t.Errorf("a failed delete recorded a deletion: %+v", dels)
	}
}

func TestPingIsStoredFirst(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	e.clock.Set(t0.Add(30 * time.Minute))

	// A ping of a URL nobody follows is still recorded.
	n, err := e.hub.Ping(ctx, hub.Ping{Dialect: "rest", Name: "Someone", Remote: "127.0.0.1"},
		[]string{"http://unknown.example/feed"}, nil)
	if err != nil || n != 0 {
		t.Fatalf("Ping of an unknown URL = %d, %v; want 0, nil", n, err)
	}
	pings, total, err := e.hub.Pings(ctx, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if total != 1 || len(pings) != 1 || pings[0].URL != "http://unknown.example/feed" || pings[0].Name != "Someone" ||
		!pings[0].ReceivedAt.Equal(e.clock.Now()) {
		t.Errorf("recorded %+v (total %d)", pings, total)
	}

	// Refused pings record nothing.
	_, err = e.hub.Ping(ctx, hub.Ping{Dialect: "rest"}, nil, nil)
	mustErrIs(t, "ping without URLs", err, hub.ErrInvalid)
	_, err = e.hub.Ping(ctx, hub.Ping{Dialect: "rest"}, []string{"javascript:alert(1)"}, nil)
	mustErrIs(t, "ping of an invalid URL", err, hub.ErrInvalid)
	if _, total, _ := e.hub.Pings(ctx, time.Time{}, 0); total != 1 {
		t.Errorf("refused pings were recorded (total %d)", total)
	}

	// With the store gone the ping is refused, not acknowledged and lost.
	e.store.Close()
	_, err = e.hub.Ping(ctx, hub.Ping{Dialect: "rest"}, []string{"http://unknown.example/feed"}, nil)
	if err == nil {
		t.Fatalf("Ping acknowledged a ping it could not store")
	}
}

// TestPingRecordsTheSubmittedURL: a ping's URL, when set, is recorded as
// the publisher submitted it, whatever is fetched, also when nothing is
// (pingd's own feed of a node without a source); the feed of an
// extendedPing is kept beside it. An invalid one refuses the ping.
func TestPingRecordsTheSubmittedURL(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	if _, err := e.hub.Ping(ctx, hub.Ping{Dialect: "websub", URL: "http://pingd.example/atom/x"},
		[]string{"http://unknown.example/feed"}, nil); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	if n, err := e.hub.Ping(ctx, hub.Ping{Dialect: "cnws", URL: "http://pingd.example/atom/y"}, nil, nil); err != nil || n != 0 {
		t.Fatalf("a ping with nothing to fetch = %d, %v; want it recorded", n, err)
	}
	e.clock.Advance(time.Second)
	if _, err := e.hub.Ping(ctx, hub.Ping{Dialect: "xmlrpc-extended", URL: "http://site.example/", FeedURL: "http://site.example/feed"},
		[]string{"http://site.example/feed", "http://site.example/"}, nil); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]hub.Ping{
		"an invalid URL":      {Dialect: "rest", URL: "javascript:alert(1)"},
		"an invalid feed URL": {Dialect: "xmlrpc-extended", URL: "http://site.example/", FeedURL: "javascript:alert(1)"},
	} {
		_, err := e.hub.Ping(ctx, p, []string{"http://site.example/feed"}, nil)
		mustErrIs(t, name, err, hub.ErrInvalid)
	}
	pings, total, err := e.hub.Pings(ctx, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pings {
		got = append(got, p.URL+" "+p.FeedURL)
	}
	want := []string{"http://site.example/ http://site.example/feed", "http://pingd.example/atom/y ", "http://pingd.example/atom/x "}
	if total != 3 || !slices.Equal(got, want) {
		t.Errorf("recorded (total %d) %q, want %q", total, got, want)
	}
}

func TestPingMatchesSourceAndSiteURLs(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	site := e.origin.url("/blog/")
	doc := e.origin.serve("/feed", rss{title: "Blog", link: site, items: items("a")}.String(), false)
	e.run()
	n := e.createNode("blog", "/feed")
	src := e.waitFetched(n.SourceID)
	if src.SiteURL != site {
		t.Fatalf("site URL %q, want %q", src.SiteURL, site)
	}

	// weblogUpdates.ping names the site; extendedPing names both.
	doc.set(rss{title: "Blog", link: site, items: items("b", "a")}.String())
	e.clock.Advance(time.Second)
	count, err := e.hub.Ping(ctx, hub.Ping{Dialect: "xmlrpc-weblogupdates", Name: "Blog"}, []string{site}, nil)
	if err != nil || count != 1 {
		t.Fatalf("ping of the site = %d, %v; want 1 source", count, err)
	}
	e.waitFetched(n.SourceID)
	if got := itemIDs(e.events(n.ID)); !slices.Equal(got, []string{"b"}) {
		t.Errorf("after a ping of the site: items %v, want [b]", got)
	}

	doc.set(rss{title: "Blog", link: site, items: items("c", "b", "a")}.String())
	e.clock.Advance(time.Second)
	count, err = e.hub.Ping(ctx, hub.Ping{Dialect: "xmlrpc-extended"}, []string{site, n.SourceURL, n.SourceURL}, nil)
	// The one source matches the site and the feed URL (named twice): one
	// source scheduled, counted once, one fetch.
	if err != nil || count != 1 {
		t.Fatalf("extended ping = %d, %v; want 1 source", count, err)
	}
	e.waitFetched(n.SourceID)
	if got := itemIDs(e.events(n.ID)); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("after an extended ping: items %v, want [b c]", got)
	}
	pings, _, _ := e.hub.Pings(ctx, time.Time{}, 0)
	if len(pings) != 2 || pings[0].URL != site || pings[0].Dialect != "xmlrpc-extended" {
		t.Errorf("pings recorded %+v, want two, the newest naming the site", pings)
	}
}

func TestPublishOrder(t *testing.T) {
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	ids := func(es []hub.Entry) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.ID
		}
		return out
	}
	cases := []struct {
		name string
		in   []hub.Entry // document order
		want []string
	}{
		{"empty", nil, []string{}},
		{"dated, newest first", []hub.Entry{{ID: "c", Updated: at(3)}, {ID: "b", Updated: at(2)}, {ID: "a", Updated: at(1)}}, []string{"a", "b", "c"}},
		{"dated, shuffled", []hub.Entry{{ID: "b", Updated: at(2)}, {ID: "c", Updated: at(3)}, {ID: "a", Updated: at(1)}}, []string{"a", "b", "c"}},
		{"dated, oldest first", []hub.Entry{{ID: "a", Updated: at(1)}, {ID: "b", Updated: at(2)}}, []string{"a", "b"}},
		// Equal times keep the feed's meaning: the one listed first is newer.
		{"ties", []hub.Entry{{ID: "y", Updated: at(5)}, {ID: "x", Updated: at(5)}, {ID: "old", Updated: at(1)}}, []string{"old", "x", "y"}},
		{"undated", []hub.Entry{{ID: "c"}, {ID: "b"}, {ID: "a"}}, []string{"a", "b", "c"}},
		// One undated entry makes the dates untrustworthy: document order decides.
		{"partly dated", []hub.Entry{{ID: "c", Updated: at(1)}, {ID: "b"}, {ID: "a", Updated: at(9)}}, []string{"a", "b", "c"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.in)
			got := ids(hub.PublishOrder(in))
			if !slices.Equal(got, c.want) {
				t.Errorf("PublishOrder = %v, want %v", got, c.want)
			}
			if !slices.EqualFunc(in, c.in, func(a, b hub.Entry) bool { return a.ID == b.ID }) {
				t.Errorf("PublishOrder changed its input")
			}
		})
	}
}

func TestImplicitNodeName(t *testing.T) {
	short := "https://example.org/feed.xml"
	if got := hub.ImplicitNodeName(short); got != short {
		t.Errorf("ImplicitNodeName(%q) = %q, want the URL", short, got)
	}
	for _, spelling := range []string{"HTTPS://Example.org:443/./feed.xml", "https://example.org/feed.xml?#top"} {
		if got := hub.ImplicitNodeName(spelling); got != short {
			t.Errorf("ImplicitNodeName(%q) = %q, want the canonical URL %q", spelling, got, short)
		}
	}
	for _, u := range []string{
		"https://example.org/" + strings.Repeat("a", 300),
		"https://example.org/\x7f",
		"https://Example.org/ü" + strings.Repeat("a", 250),
	} {
		got := hub.ImplicitNodeName(u)
		if c, err := hub.CanonicalURL(u); err == nil {
			u = c
		}
		sum := sha256.Sum256([]byte(u))
		if got != "url:"+hex.EncodeToString(sum[:]) {
			t.Errorf("ImplicitNodeName(%.40q) = %q", u, got)
		}
	}
}

func FuzzImplicitNodeName(f *testing.F) {
	f.Add("https://example.org/feed.xml")
	f.Add("http://example.org/" + strings.Repeat("x", 255))
	f.Add("http://example.org/\n")
	f.Add("\xff")
	f.Fuzz(func(t *testing.T, u string) {
		name := hub.ImplicitNodeName(u)
		if err := hub.ValidNodeName(name); err != nil {
			t.Fatalf("ImplicitNodeName(%q) = %q: %v", u, name, err)
		}
		if name != hub.ImplicitNodeName(u) {
			t.Fatalf("ImplicitNodeName is not stable")
		}
		canon, err := hub.CanonicalURL(u)
		if err != nil {
			canon = u
		}
		if name != canon && !strings.HasPrefix(name, "url:") {
			t.Fatalf("ImplicitNodeName(%q) = %q: neither the canonical URL nor a url: name", u, name)
		}
	})
}

// appendedRecorder is a transport that takes what a publish appended.
type appendedRecorder struct {
	recorder
	node   *hub.Node
	events []hub.Event
}

func (r *appendedRecorder) Appended(node *hub.Node, events []hub.Event) {
	r.mu.Lock()
	r.node, r.events = node, events
	r.mu.Unlock()
}

// TestPublishHandsTheAppendedEventsOver: a transport that takes them is
// handed the node, its LastSeq the last event's, and the events as the
// log stored them, instead of a wake; the others are woken as ever.
func TestPublishHandsTheAppendedEventsOver(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	taker := &appendedRecorder{recorder: *newRecorder()}
	e.hub.Register(taker, hub.KindWebhook)
	n := e.createNode("n", "")
	evs, err := e.hub.Publish(ctx, "n", "owner@example.org", []hub.Entry{{ID: "1", Payload: []byte("<entry/>")}, {ID: "2"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.rec.wakesOf(n.ID); got != 1 {
		t.Errorf("the plain transport was woken %d times, want once", got)
	}
	taker.mu.Lock()
	defer taker.mu.Unlock()
	if taker.wakes[n.ID] != 0 || taker.node == nil || taker.node.ID != n.ID || taker.node.LastSeq != evs[1].Seq {
		t.Fatalf("the taker got wakes %v and node %+v, want the node at seq %d and no wake", taker.wakes, taker.node, evs[1].Seq)
	}
	stored, err := e.store.EventsAfter(ctx, n.ID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(taker.events) != 2 || len(stored) != 2 {
		t.Fatalf("handed %d events, the log has %d", len(taker.events), len(stored))
	}
	for i := range stored {
		h, s := taker.events[i], stored[i]
		if h.Seq != s.Seq || h.ItemID != s.ItemID || string(h.Payload) != string(s.Payload) || !h.Updated.Equal(s.Updated) || !h.Created.Equal(s.Created) || h.Publisher != s.Publisher {
			t.Errorf("event %d handed over as %+v, stored as %+v", i, h, s)
		}
	}
}
