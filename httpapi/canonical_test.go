package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/nodeurl"
)

// busySpellings are five spellings of one origin: zero-padded ports, a
// trailing dot and upper case.
var busySpellings = []string{
	"http://busy.example:18190/", "http://busy.example:018190/", "http://busy.example:0018190/",
	"http://busy.example.:18190/", "HTTP://BUSY.example:18190/",
}

// TestPingHostLimitFoldsSpellings: every spelling of one host draws on the
// host's one bucket; after its burst the next ping is refused with 429,
// whatever its spelling.
func TestPingHostLimitFoldsSpellings(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PingHostRate = 0.001; c.PingHostBurst = len(busySpellings) })
	for i, base := range busySpellings {
		resp, v, err := e.rpc("weblogUpdates.ping", "Blog", base+string(rune('a'+i)))
		wantStatus(t, resp, http.StatusOK)
		if err != nil {
			t.Fatal(err)
		}
		wantFlerror(t, v, false)
	}
	for _, base := range busySpellings {
		resp, _, _ := e.rpc("weblogUpdates.ping", "Blog", base+"more")
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Errorf("ping of %smore after the host's burst: HTTP %d, Retry-After %q; want 429",
				base, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
}

// TestPingURLLimitFoldsSpellings: one URL spelled several ways (port,
// dot segments, an empty query, escapes, a fragment) is one URL's bucket.
func TestPingURLLimitFoldsSpellings(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PingRate = 0.001; c.PingBurst = 1 })
	resp, _, err := e.rpc("rssCloud.ping", "http://busy.example/feed")
	wantStatus(t, resp, http.StatusOK)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{
		"http://busy.example:80/feed", "http://busy.example/./feed", "http://busy.example/feed?",
		"http://busy.example/%66eed", "http://busy.example/x/../feed#top", "http://Busy.Example./feed",
	} {
		resp, _, _ := e.rpc("rssCloud.ping", u)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("ping of %s after the URL's burst: HTTP %d, want 429", u, resp.StatusCode)
		}
	}
}

// TestCallbackSpellingsAreOneSubscription: a subscriber's callback (and a
// WebSub topic) spelled two ways is one subscription, for GetPingd
// webhooks and WebSub alike.
func TestCallbackSpellingsAreOneSubscription(t *testing.T) {
	e := securityEnv(t)
	for _, href := range []string{"http://127.0.0.1:9/hook", "HTTP://127.0.0.1:09/./hook?#x"} {
		wantStatus(t, e.subscribe("n", typeHTTPSub, "", `<subscribe><url href="`+href+`"/></subscribe>`), http.StatusAccepted)
	}
	if subs := e.webhooks("n"); len(subs) != 1 || subs[0].Address != "http://127.0.0.1:9/hook" {
		t.Errorf("webhooks after two spellings of one callback = %+v; want one, at http://127.0.0.1:9/hook", subs)
	}
	for _, req := range [][2]string{
		{"http://127.0.0.1:9/cb", "http://pingd.test:8080/atom/n"},
		{"http://127.0.0.1:0009/x/../cb", "HTTP://pingd.test:08080/./atom/n?"},
	} {
		form := url.Values{"hub.mode": {"subscribe"}, "hub.callback": {req[0]}, "hub.topic": {req[1]}}
		wantStatus(t, e.do(http.MethodPost, nodeurl.PathWebSub, "", strings.NewReader(form.Encode()),
			"Content-Type", "application/x-www-form-urlencoded"), http.StatusAccepted)
	}
	subs, err := e.hub.Subscriptions(t.Context(), hub.SubscriptionFilter{NodeID: e.nodeOf("n").ID, Kind: hub.KindWebSub})
	if err != nil || len(subs) != 1 {
		t.Errorf("WebSub subscriptions after two spellings of one callback and topic = %+v; want one", subs)
	}
	if nodes, err := e.hub.Nodes(t.Context()); err != nil || len(nodes) != 1 {
		t.Errorf("nodes = %d, %v; a spelling of pingd's own feed URL must not become a node", len(nodes), err)
	}
}

// TestNoOpenNodeForAWhitelistSource: a URL-level subscription (WebSub,
// rssCloud, CNWS) naming a whitelist node's source in another spelling
// finds that node, and never creates an open node that would hand its
// feed to anyone.
func TestNoOpenNodeForAWhitelistSource(t *testing.T) {
	e := securityEnv(t)
	cfg := hub.DefaultNodeConfig()
	cfg.AccessModel = hub.AccessWhitelist
	if _, _, err := e.hub.CreateNode(t.Context(), hub.NodeSpec{Name: "closed", Source: "http://feeds.example/private", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	const callback = "http://127.0.0.1:9/cb"
	topics := []string{"HTTP://feeds.example/./private?", "http://feeds.example:80/private#x", "http://Feeds.Example./%70rivate"}
	for _, topic := range topics {
		form := url.Values{"hub.mode": {"subscribe"}, "hub.callback": {callback}, "hub.topic": {topic}}
		resp := e.do(http.MethodPost, nodeurl.PathWebSub, "", strings.NewReader(form.Encode()),
			"Content-Type", "application/x-www-form-urlencoded")
		if resp.StatusCode >= 500 {
			t.Errorf("WebSub subscribe to %s: HTTP %d", topic, resp.StatusCode)
		}
		rss := url.Values{"notifyProcedure": {""}, "port": {"9"}, "path": {"/rss"}, "protocol": {"http-post"}, "url1": {topic}}
		resp = e.do(http.MethodPost, nodeurl.PathPleaseNotify, "", strings.NewReader(rss.Encode()),
			"Content-Type", "application/x-www-form-urlencoded")
		if resp.StatusCode >= 500 {
			t.Errorf("rssCloud pleaseNotify for %s: HTTP %d", topic, resp.StatusCode)
		}
	}
	nodes, err := e.hub.Nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	if len(nodes) != 2 {
		t.Fatalf("nodes after subscriptions to spellings of a whitelist source = %q; want only n and closed", names)
	}
	// The WebSub requests are for the whitelist node, stored to be denied.
	subs, err := e.hub.Subscriptions(t.Context(), hub.SubscriptionFilter{NodeID: e.nodeOf("closed").ID, Kind: hub.KindWebSub})
	if err != nil || len(subs) != 1 || subs[0].Options.Verify == nil {
		t.Errorf("WebSub subscriptions of the whitelist node = %+v, %v; want one, to be denied", subs, err)
	}
}
