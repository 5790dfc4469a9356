package upstream

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// TestNeverSubscribesToItself: a feed whose publisher uses pingd as its
// WebSub hub names pingd's own hub endpoint (here spelled another way:
// upper-case scheme and host, a trailing slash) and, in an RSS feed, pingd
// as its cloud. pingd sends no subscription or registration to itself and
// stores no upstream subscription; the publisher's publish (a ping, as
// WebSub publish requests are) still brings the new entry; an upstream
// stored by an older pingd is dropped.
func TestNeverSubscribesToItself(t *testing.T) {
	// pingd's public URL: whatever reaches it here is pingd calling
	// itself (the callbacks are not needed: no subscription is made).
	var toItself atomic.Int64
	self := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		toItself.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(self.Close)
	e := newEnvWith(t, func(c *Config) { c.PublicURL = self.URL + "/" })
	u, _ := url.Parse(self.URL)
	ownHub := "HTTP://" + strings.ToUpper(u.Hostname()) + ":" + u.Port() + "/websub/"

	site := newFeedSite(t)
	site.hubURL = ownHub
	n, _ := e.follow(t, "news", site.URL+"/feed.atom", site.gets.Load)
	// The baseline fetch told the tracker what the feed advertises, and
	// Check sends its requests itself: once it returns, a request to pingd
	// would have arrived and a subscription would be stored.
	for range 3 {
		e.m.Check(e.ctx)
	}
	if got := e.upstreams(t, n.SourceID); len(got) != 0 {
		t.Fatalf("upstream subscriptions to pingd itself: %+v", got)
	}
	if got := toItself.Load(); got != 0 {
		t.Fatalf("pingd sent %d requests to its own endpoints", got)
	}

	// The publisher's publish request reaches pingd as a ping of the topic.
	site.add("published")
	if _, err := e.hub.Ping(e.ctx, hub.Ping{Dialect: "websub", URL: site.URL + "/feed.atom"}, []string{site.URL + "/feed.atom"}, nil); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 15*time.Second, "the published entry", func() bool {
		return strings.Contains(strings.Join(e.items(t, n), " "), "urn:published")
	})

	// An RSS feed naming pingd as its cloud: no registration either.
	cloudSite := newFeedSite(t)
	cloudSite.cloud = u.Host
	m, _ := e.follow(t, "clouded", cloudSite.URL+"/feed.rss", cloudSite.gets.Load)
	e.m.Check(e.ctx)
	if got := e.upstreams(t, m.SourceID); len(got) != 0 || toItself.Load() != 0 {
		t.Fatalf("registered with pingd's own cloud: %+v, %d requests", got, toItself.Load())
	}

	// One made before pingd recognised itself goes at the next pass,
	// without a request.
	old := &hub.Upstream{SourceID: n.SourceID, Kind: hub.UpstreamWebSub, Endpoint: ownHub, Topic: site.URL + "/feed.atom",
		State: hub.UpstreamActive, Secret: "s", NextRenewAt: e.clock.Now().Add(-time.Minute)}
	if err := e.st.PutUpstream(e.ctx, old); err != nil {
		t.Fatal(err)
	}
	e.m.Check(e.ctx)
	if got := e.upstreams(t, n.SourceID); len(got) != 0 || toItself.Load() != 0 {
		t.Fatalf("a stored subscription to pingd itself kept: %+v, %d requests", got, toItself.Load())
	}
}
