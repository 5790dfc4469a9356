package discovery

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/internal/weblogs"
	"github.com/pingd/pingd/store"
)

// pingSite is a loopback weblog: its homepage at / links /feed.xml, whose
// own <link> names another address (as feeds often do), so only the page
// connects a ping of the homepage to the feed. /slow/ waits for release.
type pingSite struct {
	*httptest.Server
	mu      sync.Mutex
	hits    map[string]int
	release chan struct{}
}

func newPingSite(t *testing.T) *pingSite {
	s := &pingSite{hits: map[string]int{}, release: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		switch r.URL.Path {
		case "/", "/other/", "/slow/":
			if r.URL.Path == "/slow/" {
				<-s.release
			}
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><head><link rel="alternate" type="application/rss+xml" href="/feed.xml"></head></html>`)
		case "/feed.xml":
			w.Header().Set("Content-Type", "application/rss+xml")
			fmt.Fprint(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>A weblog</title><link>http://weblog.example/</link>`+
				`<item><guid>1</guid><title>One</title></item></channel></rss>`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(func() {
		select {
		case <-s.release:
		default:
			close(s.release)
		}
		s.Close()
	})
	return s
}

func (s *pingSite) hitsOf(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// pingHub is a hub on a fresh SQLite store, with pp listening to its pings.
func pingHub(t *testing.T) (*hub.Hub, *PagePings) {
	t.Helper()
	return pingHubAt(t, time.Now)
}

// pingHubAt is pingHub with the hub reading the time from now.
func pingHubAt(t *testing.T, now func() time.Time) (*hub.Hub, *PagePings) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "pingd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	pp := NewPagePings(ctx, h, testClient(), nil)
	h.AddPingListener(pp)
	t.Cleanup(func() {
		pp.Close()
		st.Close()
	})
	return h, pp
}

func weblogPing(t *testing.T, h *hub.Hub, pageURL, remote string) {
	t.Helper()
	if _, err := h.Ping(context.Background(), hub.Ping{Dialect: weblogs.DialectWeblogUpdates, Remote: remote}, []string{pageURL}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestEveryPingOfAHomepageReachesItsFeed: the page's feed is remembered,
// so a second weblogUpdates.ping of the homepage a moment after the first
// makes the feed due again (its ping time moves on), while the page itself
// is read only once in pageRecheck.
func TestEveryPingOfAHomepageReachesItsFeed(t *testing.T) {
	ctx := context.Background()
	site := newPingSite(t)
	clock := testenv.NewClock(time.Now())
	h, _ := pingHubAt(t, clock.Now)
	n, _, err := h.CreateNode(ctx, hub.NodeSpec{Name: "blog", Source: site.URL + "/feed.xml", Config: hub.DefaultNodeConfig()})
	if err != nil {
		t.Fatal(err)
	}
	pingedAfter := func(after time.Time) {
		t.Helper()
		testenv.WaitFor(t, 10*time.Second, "the ping of the homepage to reach its feed", func() bool {
			src, err := h.Source(ctx, n.SourceID)
			if err != nil {
				t.Fatal(err)
			}
			return src.LastPingAt.After(after)
		})
	}
	for i := range 3 {
		var last time.Time
		if i > 0 {
			src, err := h.Source(ctx, n.SourceID)
			if err != nil {
				t.Fatal(err)
			}
			last = src.LastPingAt
			clock.Advance(time.Second) // a distinct ping time
		}
		weblogPing(t, h, site.URL+"/", "127.0.0.1")
		pingedAfter(last)
	}
	if got := site.hitsOf("/"); got != 1 {
		t.Errorf("the homepage was read %d times for three pings in a minute, want 1", got)
	}
}

// TestPagePingsBoundPerAddress: one client address reads one page at a
// time; a ping refused for that is not remembered as read, so the next
// ping of that page, once the address's look-up is over, reads it.
func TestPagePingsBoundPerAddress(t *testing.T) {
	site := newPingSite(t)
	h, _ := pingHub(t)
	weblogPing(t, h, site.URL+"/slow/", "192.0.2.7")
	testenv.WaitFor(t, 10*time.Second, "the first page read", func() bool { return site.hitsOf("/slow/") > 0 })
	// The second ping of the address decides before it returns: the
	// address is busy, so no look-up starts. One that did would take the
	// second of the two places in all, and the other address's below
	// would never start.
	weblogPing(t, h, site.URL+"/other/", "192.0.2.7")
	// Another address is not held up by the first one's look-up.
	weblogPing(t, h, site.URL+"/", "192.0.2.8")
	testenv.WaitFor(t, 10*time.Second, "another address's page read", func() bool { return site.hitsOf("/") > 0 })
	if got := site.hitsOf("/other/"); got != 0 {
		t.Fatalf("one address had %d look-ups run beside its first", got)
	}
	// The refusal is not remembered as a reading: once the address's
	// look-up is over, a ping of the page reads it (a reading remembered
	// would hold it off for ten minutes).
	close(site.release)
	testenv.WaitFor(t, 10*time.Second, "the page refused before read on a later ping", func() bool {
		if site.hitsOf("/other/") > 0 {
			return true
		}
		weblogPing(t, h, site.URL+"/other/", "192.0.2.7")
		return false
	})
}
