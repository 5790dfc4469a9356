package component

import (
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// TestWhitelistSourceStaysPrivate: a whitelist node's source is in its
// disco#info only for its members and owners; and with open sources, a
// subscription by chat naming that source in any spelling finds the
// whitelist node and is refused, instead of creating an open node that
// would hand the feed to anyone.
func TestWhitelistSourceStaysPrivate(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.stop()
	e.startComponentWith(func(cfg *Config) { cfg.OpenSources = true })
	const source = "http://127.0.0.1:9/private/feed.xml"
	cfg := hub.DefaultNodeConfig()
	cfg.AccessModel = hub.AccessWhitelist
	n, _, err := e.hub.CreateNode(e.ctx, hub.NodeSpec{Name: "private", Source: source, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	alice, bob := e.dial("alice", "member"), e.dial("bob", "stranger")
	if err := e.hub.SetAffiliation(e.ctx, n, alice.JID.Bare().String(), hub.AffMember); err != nil {
		t.Fatal(err)
	}
	admin := e.dial("admin", "owner")

	description := func(who string, c *testenv.Client) string {
		t.Helper()
		info := result(t, e.request(c, "get", `<query xmlns="http://jabber.org/protocol/disco#info" node="private"/>`))
		if strings.Contains(string(info.standalone()), "127.0.0.1:9") && who == "bob" {
			t.Errorf("disco#info to a non-member names the source: %s", info.standalone())
		}
		form, serr := parseForm(info.child(nsDiscoInfo, "query").child(nsDataForms, "x"))
		if serr != nil {
			t.Fatalf("%s: meta-data form: %v", who, serr)
		}
		return strings.Join(form.Values["pubsub#description"], "")
	}
	if got := description("bob", bob); got != "" {
		t.Errorf("a non-member reads the description %q", got)
	}
	for who, c := range map[string]*testenv.Client{"alice": alice, "admin": admin} {
		if got := description(who, c); got != "Items of "+source {
			t.Errorf("%s (member or owner) reads the description %q, want the source", who, got)
		}
	}

	for _, spelling := range []string{
		source, source + "?", "HTTP://127.0.0.1:9/private/feed.xml", "http://127.0.0.1:9/./private/feed.xml",
		"http://127.0.0.1:09/private/feed.xml#x", "http://127.0.0.1.:9/private/%66eed.xml",
	} {
		got := chatSay(t, e, bob, "subscribe "+spelling)
		if !strings.Contains(got, `"private" is closed`) {
			t.Errorf("subscribe %s answered %q; want the whitelist node's refusal", spelling, got)
		}
	}
	nodes, err := e.hub.Nodes(e.ctx)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes after the refused subscriptions = %d, %v; want only the whitelist node", len(nodes), err)
	}
	if subs, _ := e.hub.Subscriptions(e.ctx, hub.SubscriptionFilter{BareJID: bob.JID.Bare().String()}); len(subs) != 0 {
		t.Errorf("bob has subscriptions %+v", subs)
	}
}
