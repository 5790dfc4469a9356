package hub_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// TestBaselineEntriesBecomeItemsTellingNoOne: a node made for a feed has
// the entries of the feed's first fetch as its items at once (at most its
// max_items), and nobody subscribed before that fetch is told of them:
// its XMPP cursor and the HTTP subscriptions' cursors are past them, and
// its transports are not woken. The feed's next new entry is the one
// thing told. A node made for the URL is titled as the feed.
func TestBaselineEntriesBecomeItemsTellingNoOne(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	doc := e.origin.serve("/feed", rss{title: "The Feed", items: items("c", "b", "a")}.String(), false)

	// Made and subscribed to before the fetch loop runs: the baseline
	// comes after the subscriptions.
	implicit, err := e.hub.NodeForURL(ctx, e.origin.url("/feed"), true)
	if err != nil {
		t.Fatal(err)
	}
	cfg := hub.DefaultNodeConfig()
	cfg.MaxItems = 2
	if _, _, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: "two", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.hub.SetNodeSourceURL(ctx, "two", e.origin.url("/feed")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: implicit.Name, Kind: hub.KindXMPP,
		Address: "r@example.org/x", BareJID: "r@example.org"}); err != nil {
		t.Fatal(err)
	}
	hook := &hub.Subscription{NodeID: implicit.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1:9/hook", State: hub.SubActive}
	if _, err := e.store.PutSubscription(ctx, hook); err != nil {
		t.Fatal(err)
	}
	e.run()
	e.clock.Advance(time.Second)
	if _, err := e.hub.Changed(ctx, e.origin.url("/feed"), nil); err != nil {
		t.Fatal(err)
	}
	src := e.waitFetched(implicit.SourceID)
	if !src.Baselined {
		t.Fatalf("no baseline: %+v", src.SourceState)
	}

	for name, want := range map[string][]string{implicit.Name: {"c", "b", "a"}, "two": {"c", "b"}} {
		n := e.node(name)
		got, err := e.hub.Items(ctx, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if ids := itemIDs(got); !slices.Equal(ids, want) {
			t.Errorf("node %q: items %v after the baseline, want %v", name, ids, want)
		}
		if n.XMPPSeq != n.LastSeq {
			t.Errorf("node %q: XMPP cursor %d behind the log at %d: the baseline would be told", name, n.XMPPSeq, n.LastSeq)
		}
		if w := e.rec.wakesOf(n.ID); w != 0 {
			t.Errorf("node %q: the baseline woke its transports %d times", name, w)
		}
	}
	if got, err := e.store.Subscription(ctx, hook.ID); err != nil || got.Cursor != e.node(implicit.Name).LastSeq {
		t.Errorf("webhook cursor %d (%v), want past the kept items", got.Cursor, err)
	}
	if n := e.node(implicit.Name); n.Title != "The Feed" {
		t.Errorf("the node made for the URL is titled %q, want the feed's title", n.Title)
	}
	if n := e.node("two"); n.Title != "" {
		t.Errorf("an owner's node was titled %q", n.Title)
	}

	// The next fetch tells one new entry, and only it.
	n := e.node(implicit.Name)
	doc.set(rss{title: "The Feed", items: items("d", "c", "b", "a")}.String())
	e.ping(n.SourceID, e.origin.url("/feed"), nil)
	// The fetch the ping waited for may be one the first Changed started
	// (the loop had already claimed the source for its baseline) that read
	// the document before it changed; the ping's own fetch follows it.
	var evs []hub.Event
	testenv.WaitFor(t, 20*time.Second, "the new entry in the node's log", func() bool {
		var err error
		if evs, err = e.store.EventsAfter(ctx, n.ID, n.XMPPSeq, 0); err != nil {
			t.Fatal(err)
		}
		return len(evs) > 0
	})
	time.Sleep(100 * time.Millisecond) // room for a second copy to show
	if evs, err := e.store.EventsAfter(ctx, n.ID, n.XMPPSeq, 0); err != nil || !slices.Equal(itemIDs(evs), []string{"d"}) || len(evs) != 1 {
		t.Errorf("told after the change: %v (%v, %v), want [d]", itemIDs(evs), kinds(evs), err)
	}
	testenv.WaitFor(t, 20*time.Second, "the change to wake the node's transports", func() bool { return e.rec.wakesOf(n.ID) > 0 })
}

// TestANewNodeOfABaselinedFeedKeepsItsEntries: a node made for a feed
// that another node follows already (its baseline taken) has the feed's
// current entries as its items (here from that node's items: a feed
// served as RSS keeps no body, hub.KeepsBody), told to no one,
// and, made for the URL, the feed's title.
func TestANewNodeOfABaselinedFeedKeepsItsEntries(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	e.origin.serve("/feed", rss{title: "The Feed", items: items("c", "b", "a")}.String(), false)
	e.run()
	first := e.createNode("first", "/feed")
	if !e.source(first.SourceID).Baselined {
		t.Fatal("no baseline")
	}
	hits := e.origin.hitCount("/feed")

	for _, c := range []struct {
		make func() *hub.Node
		want []string
	}{
		{func() *hub.Node { return e.createNode("second", "/feed") }, []string{"c", "b", "a"}},
		{func() *hub.Node {
			n, err := e.hub.NodeForURL(ctx, e.origin.url("/feed"), true)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}, nil}, // found: the owner's node follows the URL already
	} {
		n := c.make()
		if c.want == nil {
			if n.Name != "first" {
				t.Errorf("NodeForURL made %q although an owner's node follows the URL", n.Name)
			}
			continue
		}
		got, err := e.hub.Items(ctx, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if ids := itemIDs(got); !slices.Equal(ids, c.want) {
			t.Errorf("node %q: items %v, want %v", n.Name, ids, c.want)
		}
		if n.LastSeq == 0 || n.XMPPSeq != n.LastSeq {
			t.Errorf("node %q returned with log %d and XMPP cursor %d", n.Name, n.LastSeq, n.XMPPSeq)
		}
	}
	if got := e.origin.hitCount("/feed"); got != hits {
		t.Errorf("the new node fetched the feed again (%d requests, %d before)", got, hits)
	}
}

// TestANewNodeTakesTheFeedsEntriesFromWhereTheyAreKept: a feed served as
// RSS keeps no body (hub.KeepsBody), so a new node of it takes its first
// items from the node already following it, the newest up to its own
// max_items, and no more than that node keeps, leaving out the items an
// owner published to that node; a feed served as generic XML keeps its
// body, and a new node reads every current entry from it. Neither
// fetches the feed again.
func TestANewNodeTakesTheFeedsEntriesFromWhereTheyAreKept(t *testing.T) {
	for _, c := range []struct {
		contentType string
		keepsBody   bool
		want        []string
	}{
		{"application/rss+xml", false, []string{"d"}}, // first keeps [owned d]
		{"text/xml", true, []string{"d", "c", "b", "a"}},
	} {
		t.Run(c.contentType, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			ctx := t.Context()
			doc := rss{title: "The Feed", items: items("d", "c", "b", "a")}.String()
			e.origin.handle("/feed", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", c.contentType)
				w.Write([]byte(doc))
			})
			e.run()
			cfg := hub.DefaultNodeConfig()
			cfg.MaxItems = 2
			first, _, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: "first", Config: cfg, Source: e.origin.url("/feed")})
			if err != nil {
				t.Fatal(err)
			}
			if src := e.waitFetched(first.SourceID); !src.Baselined || (len(src.Body) > 0) != c.keepsBody {
				t.Fatalf("baseline: baselined %v, a body of %d bytes; want one kept: %v", src.Baselined, len(src.Body), c.keepsBody)
			}
			if _, err := e.hub.Publish(ctx, "first", "owner@example.org", []hub.Entry{{ID: "owned", Title: "The owner's"}}); err != nil {
				t.Fatal(err)
			}
			hits := e.origin.hitCount("/feed")
			second := e.createNode("second", "/feed")
			got, err := e.hub.Items(ctx, second, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			if ids := itemIDs(got); !slices.Equal(ids, c.want) {
				t.Errorf("items %v, want %v", ids, c.want)
			}
			if second.LastSeq == 0 || second.XMPPSeq != second.LastSeq {
				t.Errorf("returned with log %d and XMPP cursor %d: the items would be told", second.LastSeq, second.XMPPSeq)
			}
			if got := e.origin.hitCount("/feed"); got != hits {
				t.Errorf("the new node fetched the feed again (%d requests, %d before)", got, hits)
			}
		})
	}
}
