package component

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// keptFeed is an RSS document a test changes: its entries newest first.
type keptFeed struct {
	mu      sync.Mutex
	entries []string
}

func (f *keptFeed) set(entries ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = entries
}

func (f *keptFeed) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/rss+xml")
	fmt.Fprint(w, `<rss version="2.0"><channel><title>Other Feed</title><link>http://example.org/</link>`)
	for _, e := range f.entries {
		id := strings.ReplaceAll(strings.ToLower(e), " ", "-")
		fmt.Fprintf(w, `<item><guid isPermaLink="false">%s</guid><title>%s</title><link>http://example.org/%s</link></item>`, id, e, id)
	}
	fmt.Fprint(w, `</channel></rss>`)
}

// TestANodeMadeForAFeedIsNeverEmpty: a reader who names a feed by chat
// gets a node titled as the feed, holding the feed's entries at once: the
// newest comes right after the answer, "last" shows it, an XEP-0060
// subscriber is sent it on subscribing and retrieves every entry (with
// RSM too). Nobody is notified of those entries as new; the feed's next
// entry is the one notification, read "[Other Feed] Third entry".
func TestANodeMadeForAFeedIsNeverEmpty(t *testing.T) {
	testenv.RequireProsody(t)
	doc := &keptFeed{}
	doc.set("Second entry", "First entry")
	origin := httptest.NewServer(doc)
	defer origin.Close()
	feedURL := origin.URL + "/other.xml"

	e := newEnv(t, envOptions{hub: func(c *hub.Config) {
		c.Fetcher = feed.NewFetcher(feed.FetcherConfig{AllowPrivate: true})
	}})
	e.stop()
	e.configure = func(cfg *Config) { cfg.LocalSources = true }
	e.startComponent(envOptions{hub: func(c *hub.Config) {
		c.Fetcher = feed.NewFetcher(feed.FetcherConfig{AllowPrivate: true})
	}})
	alice := e.dial("alice", "chat")
	bob := e.dial("bob", "pubsub")

	got := chatSay(t, e, alice, "subscribe "+feedURL)
	if !strings.Contains(got, "Subscribed to") || !strings.Contains(got, "(Other Feed)") || !strings.Contains(got, "Its newest entry follows") {
		t.Fatalf("subscribing by chat to a new feed answered %q", got)
	}
	msg := nextMessage(t, alice, 10*time.Second, isNotification)
	if body := bodyOf(msg); !strings.Contains(body, "[Other Feed] Second entry") {
		t.Errorf("the newest entry sent on subscribing reads %q, want [Other Feed] Second entry", body)
	}
	n, err := e.hub.NodeForURL(e.ctx, feedURL, false)
	if err != nil {
		t.Fatal(err)
	}
	if n.Title != "Other Feed" {
		t.Errorf("the node is titled %q", n.Title)
	}
	if got := chatSay(t, e, alice, "last "+n.Name); !strings.Contains(got, "Second entry") || strings.Contains(got, "no items") {
		t.Errorf("last answered %q", got)
	}

	// An XEP-0060 subscriber is sent the newest entry at once.
	result(t, e.request(bob, "set", subscribePayload(n.Name, bob.JID.String())))
	if items := itemsOf(t, nextEvent(t, bob, 10*time.Second), n.Name); len(items) != 1 || items[0].title != "Second entry" {
		t.Errorf("sent on subscribing: %+v", items)
	}
	retrieve := func(set string) []string {
		t.Helper()
		ps := find(result(t, e.request(bob, "get", fmt.Sprintf(`<pubsub xmlns=%q><items node=%q/>%s</pubsub>`, nsPubsub, n.Name, set))), "pubsub")
		var titles []string
		for _, it := range ps.child(nsPubsub, "items").childrenNamed(nsPubsub, "item") {
			titles = append(titles, it.child(nsAtom, "entry").child(nsAtom, "title").text())
		}
		return titles
	}
	if titles := retrieve(""); !slices.Equal(titles, []string{"Second entry", "First entry"}) {
		t.Errorf("items retrieved: %v", titles)
	}
	if titles := retrieve(fmt.Sprintf(`<set xmlns=%q><max>1</max></set>`, nsRSM)); !slices.Equal(titles, []string{"Second entry"}) {
		t.Errorf("items retrieved with RSM max 1: %v", titles)
	}

	// The next entry is the one thing told, to both.
	doc.set("Third entry", "Second entry", "First entry")
	if _, err := e.hub.Changed(e.ctx, feedURL, nil); err != nil {
		t.Fatal(err)
	}
	msg = nextMessage(t, alice, 20*time.Second, isNotification)
	if body := bodyOf(msg); !strings.Contains(body, "[Other Feed] Third entry") {
		t.Errorf("the change reads %q, want [Other Feed] Third entry", body)
	}
	if items := itemsOf(t, nextEvent(t, bob, 20*time.Second), n.Name); len(items) != 1 || items[0].title != "Third entry" {
		t.Errorf("the change sent %+v", items)
	}
	noEvents(t, bob, time.Second)
	select {
	case raw := <-alice.Stanzas:
		t.Errorf("alice got more: %s", raw)
	case <-time.After(500 * time.Millisecond):
	}
}
