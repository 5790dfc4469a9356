package hub_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// These tests run the hub's fetch loop against feeds served on loopback and
// check what it stored: the source's state and the nodes' logs.

func TestFirstFetchIsABaseline(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.origin.serve("/feed", rss{title: "Feed", ttl: 30, items: items("b", "a")}.String(), false)
	e.run()
	n := e.createNode("n", "/feed")
	src := e.waitFetched(n.SourceID)
	if !src.Baselined || src.LastStatus != http.StatusOK || !src.IsFeed || src.Title != "Feed" || src.LastNewItems != 0 {
		t.Errorf("after the first fetch: %+v", src.SourceState)
	}
	if evs := e.events(n.ID); len(evs) != 0 {
		t.Errorf("the baseline published %v", kinds(evs))
	}
	if e.rec.wakesOf(n.ID) != 0 {
		t.Errorf("the baseline woke the transports")
	}
	if !src.NextFetchAt.After(e.clock.Now()) {
		t.Errorf("next fetch %v is not after the baseline", src.NextFetchAt)
	}
}

// TestAChangeRightAfterLearningOfASourceIsNew: creating a node and
// subscribing return once the source's baseline is stored, so a change
// made right after they return is new and the next ping publishes it.
// They used to return as soon as the baseline fetch was due; an origin that
// answered a moment later gave the changed feed as the baseline, and the
// ping was accepted and published nothing.
func TestAChangeRightAfterLearningOfASourceIsNew(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	var broken atomic.Bool
	// slow serves a changeable feed read a moment after each request came,
	// as a busy origin does; while broken is set it answers 500.
	slow := func(path string) *feedDoc {
		doc := &feedDoc{body: rss{title: "Feed", items: items("old")}.String()}
		e.origin.handle(path, func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(200 * time.Millisecond)
			if broken.Load() {
				http.Error(w, "down", http.StatusInternalServerError)
				return
			}
			doc.ServeHTTP(w, r)
		})
		return doc
	}
	e.run()

	doc := slow("/created")
	n := e.createNode("created", "/created")
	doc.set(rss{title: "Feed", items: items("new", "old")}.String())
	e.ping(n.SourceID, e.origin.url("/created"), nil)
	if got := itemIDs(e.events(n.ID)); !slices.Equal(got, []string{"new"}) {
		t.Errorf("a change made once CreateNode returned, then a ping: items %v, want [new]", got)
	}

	// A node whose source could not be fetched when it was created: a
	// subscription (a while later) waits for the baseline the same way.
	doc = slow("/subscribed")
	broken.Store(true)
	n = e.createNode("subscribed", "/subscribed")
	if src := e.waitFetched(n.SourceID); src.Baselined || src.LastStatus != http.StatusInternalServerError {
		t.Fatalf("after a failed first fetch: %+v", src.SourceState)
	}
	broken.Store(false)
	e.clock.Advance(2 * time.Minute) // a failed source is hurried again only after a minute
	if _, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: n.Name, Kind: hub.KindXMPP,
		Address: "a@example.org/x", BareJID: "a@example.org"}); err != nil {
		t.Fatal(err)
	}
	doc.set(rss{title: "Feed", items: items("new", "old")}.String())
	e.ping(n.SourceID, e.origin.url("/subscribed"), nil)
	if got := itemIDs(e.events(n.ID)); !slices.Equal(got, []string{"new"}) {
		t.Errorf("a change made once Subscribe returned, then a ping: items %v, want [new]", got)
	}
}

// TestLearningOfASourceWaitsForItsBaselineOnlySoLong: an origin that does
// not answer holds node creation up to Config.BaselineWait, no longer, and
// its fetch goes on.
func TestLearningOfASourceWaitsForItsBaselineOnlySoLong(t *testing.T) {
	e := newEnv(t, envOptions{baselineWait: 300 * time.Millisecond})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the origin closes: Cleanup runs last in, first out
	doc := &feedDoc{body: rss{title: "Feed", items: items("a")}.String()}
	e.origin.handle("/hangs", func(w http.ResponseWriter, r *http.Request) {
		<-release
		doc.ServeHTTP(w, r)
	})
	e.run()
	began := time.Now()
	n := e.createNode("n", "/hangs")
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("CreateNode took %v with a 300ms baseline wait", took)
	}
	if src := e.source(n.SourceID); src.Baselined || src.LeaseOwner == "" {
		t.Errorf("CreateNode returned with the fetch not in flight: %+v", src.SourceState)
	}
	release <- struct{}{}
	if src := e.waitFetched(n.SourceID); !src.Baselined {
		t.Errorf("the fetch that outlived the wait stored no baseline: %+v", src.SourceState)
	}
}

// TestSlowWaitIsReported: a WaitObserver in the context hears when learning
// of a source starts waiting for its baseline fetch and when that wait ends;
// a call that does not wait (the source has its baseline) tells it nothing.
func TestSlowWaitIsReported(t *testing.T) {
	e := newEnv(t, envOptions{baselineWait: time.Minute})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	doc := &feedDoc{body: rss{title: "Feed", items: items("a")}.String()}
	e.origin.handle("/hangs", func(w http.ResponseWriter, r *http.Request) {
		<-release
		doc.ServeHTTP(w, r)
	})
	e.run()
	var started, ended atomic.Int32
	ctx := hub.WithWaitObserver(t.Context(), func() func() {
		started.Add(1)
		return func() { ended.Add(1) }
	})
	created := make(chan *hub.Node, 1)
	go func() {
		n, _, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: "n", Source: e.origin.url("/hangs"), Config: hub.DefaultNodeConfig()})
		if err != nil {
			t.Errorf("CreateNode: %v", err)
		}
		created <- n
	}()
	testenv.WaitFor(t, 20*time.Second, "the observer to hear of the wait", func() bool { return started.Load() == 1 })
	if ended.Load() != 0 {
		t.Fatalf("the wait was reported over while the fetch hangs")
	}
	release <- struct{}{}
	n := <-created
	if started.Load() != 1 || ended.Load() != 1 {
		t.Errorf("after the baseline: %d waits started, %d ended; want 1 and 1", started.Load(), ended.Load())
	}
	if n == nil {
		return
	}
	if _, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: n.Name, Kind: hub.KindXMPP, Address: "a@example.org", BareJID: "a@example.org"}); err != nil {
		t.Fatal(err)
	}
	if started.Load() != 1 {
		t.Errorf("subscribing to a node whose source has its baseline reported a wait")
	}
}

// TestSubscribingDoesNotHurryAFailingSource: a source whose first fetch
// failed waits for its backoff; within a minute of the failure a
// subscription (which anyone may make, again and again) does not make it due
// at once, nor does naming its URL. After that minute one does, once.
func TestSubscribingDoesNotHurryAFailingSource(t *testing.T) {
	e := newEnv(t, envOptions{})
	var gets atomic.Int32
	e.origin.handle("/fails", func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		http.Error(w, "down", http.StatusInternalServerError)
	})
	e.run()
	n := e.createNode("n", "/fails")
	failed := e.source(n.SourceID)
	if failed.Baselined || failed.ConsecutiveErrors != 1 || !failed.NextFetchAt.After(e.clock.Now()) {
		t.Fatalf("after a failed first fetch: %+v", failed.SourceState)
	}
	for i := range 3 {
		addr := fmt.Sprintf("http://127.0.0.1:9/cb%d", i)
		if _, _, err := e.hub.Subscribe(t.Context(), hub.Subscription{NodeName: "n", Kind: hub.KindWebhook, Address: addr}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.hub.NodeForURL(t.Context(), e.origin.url("/fails"), true); err != nil {
		t.Fatal(err)
	}
	if src := e.source(n.SourceID); !src.NextFetchAt.Equal(failed.NextFetchAt) || src.NextFetchReason != failed.NextFetchReason {
		t.Errorf("subscriptions moved the failing source's next fetch from %v (%s) to %v (%s)",
			failed.NextFetchAt, failed.NextFetchReason, src.NextFetchAt, src.NextFetchReason)
	}
	if got := gets.Load(); got != 1 {
		t.Errorf("the failing origin was fetched %d times, want 1", got)
	}
	e.clock.Advance(time.Minute)
	for i := range 3 {
		addr := fmt.Sprintf("http://127.0.0.1:9/later%d", i)
		if _, _, err := e.hub.Subscribe(t.Context(), hub.Subscription{NodeName: "n", Kind: hub.KindWebhook, Address: addr}); err != nil {
			t.Fatal(err)
		}
	}
	if got := gets.Load(); got != 2 {
		t.Errorf("a minute after the failure, three subscriptions fetched the failing origin %d times in all, want 2", got)
	}
}

func TestChangePublishesOnlyNewEntriesOldestFirst(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	ago := func(m int) time.Time { return t0.Add(-time.Duration(m) * time.Minute) }
	a, b, c, d := item{id: "a", date: ago(300)}, item{id: "b", date: ago(200)}, item{id: "c", date: ago(60)}, item{id: "d", date: ago(30)}
	doc := e.origin.serve("/feed", rss{title: "Feed", items: []item{b, a}}.String(), true)
	e.run()

	// Two nodes follow the source: one pingd made for a URL subscription,
	// one an owner made.
	implicit, err := e.hub.NodeForURL(ctx, e.origin.url("/feed"), true)
	if err != nil {
		t.Fatal(err)
	}
	owned := e.createNode("owned", "/feed")
	if owned.SourceID != implicit.SourceID {
		t.Fatalf("the nodes follow different sources")
	}
	srcID := owned.SourceID
	e.waitFetched(srcID)

	// New entries appear at the top, newest first.
	doc.set(rss{title: "Feed", items: []item{d, c, b, a}}.String())
	src := e.ping(srcID, e.origin.url("/feed"), nil)
	if src.LastNewItems != 2 || src.Unchanged != 0 || !src.LastChangeAt.Equal(e.clock.Now()) {
		t.Errorf("source after the change: %+v", src.SourceState)
	}
	for _, n := range []*hub.Node{implicit, owned} {
		evs := e.events(n.ID)
		if got := itemIDs(evs); !slices.Equal(got, []string{"c", "d"}) {
			t.Errorf("node %q got items %v, want [c d]", n.Name, got)
			continue
		}
		if evs[1].Title != "Item d" || !evs[1].Updated.Equal(d.date) ||
			!strings.Contains(string(evs[1].Payload), `<entry xmlns="http://www.w3.org/2005/Atom">`) {
			t.Errorf("node %q: event %+v lost the entry", n.Name, evs[1])
		}
		// The loop wakes the transports once the outcome is stored.
		testenv.WaitFor(t, 20*time.Second, "node "+n.Name+"'s transports to be woken", func() bool { return e.rec.wakesOf(n.ID) > 0 })
		if cur := e.node(n.Name); cur.LastSeq != 4 || cur.XMPPSeq != 2 {
			t.Errorf("node %q at %d, its XMPP cursor at %d; want 4 (the baseline's 2 kept, 2 new) and 2", n.Name, cur.LastSeq, cur.XMPPSeq)
		}
	}

	// An edited entry is a change without new items: one change event for
	// the URL-level subscribers, no item.
	d.title = "Item d, corrected"
	doc.set(rss{title: "Feed", items: []item{d, c, b, a}}.String())
	src = e.ping(srcID, e.origin.url("/feed"), nil)
	if src.LastNewItems != 0 {
		t.Errorf("an edit counted %d new items", src.LastNewItems)
	}
	if k := kinds(e.events(owned.ID)); !slices.Equal(k, []hub.EventKind{hub.EventItem, hub.EventItem, hub.EventChange}) {
		t.Errorf("log after an edit: %v", k)
	}

	// Entries that scroll off are not removals, and only the new one is sent.
	doc.set(rss{title: "Feed", items: []item{{id: "e", date: ago(1)}, d, c}}.String())
	e.ping(srcID, e.origin.url("/feed"), nil)
	if got := itemIDs(e.events(owned.ID)); !slices.Equal(got, []string{"c", "d", "e"}) {
		t.Errorf("items %v, want [c d e]", got)
	}
	if k := kinds(e.events(owned.ID)); slices.Contains(k, hub.EventRetract) {
		t.Errorf("entries that scrolled off were retracted: %v", k)
	}
}

func TestUnchangedPublishesNothing(t *testing.T) {
	for _, c := range []struct {
		name       string
		etags      bool
		wantStatus int
	}{
		{"304 to a conditional GET", true, http.StatusNotModified},
		{"identical body", false, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			e.origin.serve("/feed", rss{title: "Feed", items: items("b", "a")}.String(), c.etags)
			e.run()
			n := e.createNode("n", "/feed")
			base := e.waitFetched(n.SourceID)
			for i := 1; i <= 2; i++ {
				src := e.ping(n.SourceID, e.origin.url("/feed"), nil)
				if src.LastStatus != c.wantStatus || src.Unchanged != i || src.ConsecutiveErrors != 0 || src.LastNewItems != 0 {
					t.Errorf("fetch %d: status %d, unchanged %d, errors %d, new %d; want %d, %d, 0, 0",
						i+1, src.LastStatus, src.Unchanged, src.ConsecutiveErrors, src.LastNewItems, c.wantStatus, i)
				}
				// A feed keeps its representation's hash (its body only
				// where a later fetch needs it, hub.KeepsBody).
				if !src.Baselined || src.BodyHash == "" || src.BodyHash != base.BodyHash {
					t.Errorf("fetch %d lost the stored representation: %+v", i+1, src.SourceState)
				}
			}
			if evs := e.events(n.ID); len(evs) != 0 {
				t.Errorf("an unchanged source published %v", kinds(evs))
			}
			if e.rec.wakesOf(n.ID) != 0 {
				t.Errorf("an unchanged source woke the transports")
			}
		})
	}
}

// xmlRedirect is the RSS Feed State redirect document.
func xmlRedirect(to string) string {
	return `<?xml version="1.0"?>` + "\n<redirect>\n<newLocation>" + to + "</newLocation>\n</redirect>\n"
}

// redirectTo answers every request with a redirect of the given kind:
// an HTTP status, or "xml" for an XML redirect document.
func redirectTo(kind, target string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if kind == "xml" {
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprint(w, xmlRedirect(target))
			return
		}
		var code int
		fmt.Sscan(kind, &code)
		http.Redirect(w, r, target, code)
	}
}

func TestPermanentRedirectsMoveTheSource(t *testing.T) {
	for _, kind := range []string{"301", "308", "xml"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			oldURL, newURL := e.origin.url("/old"), e.origin.url("/new")
			e.origin.serve("/old", rss{title: "Feed", items: items("b", "a")}.String(), false)
			e.run()
			n := e.createNode("moving", "/old")
			e.waitFetched(n.SourceID)

			// The feed moves and gains an entry on the way.
			e.origin.handle("/old", redirectTo(kind, newURL))
			moved := e.origin.serve("/new", rss{title: "Feed", items: items("c", "b", "a")}.String(), false)
			src := e.ping(n.SourceID, oldURL, nil)
			if src.URL != newURL || src.MovedFrom != oldURL || !src.MovedAt.Equal(e.clock.Now()) || src.OriginalURL != oldURL {
				t.Errorf("after the move: url %s, moved from %q at %v, original %s", src.URL, src.MovedFrom, src.MovedAt, src.OriginalURL)
			}
			if got := itemIDs(e.events(n.ID)); !slices.Equal(got, []string{"c"}) {
				t.Errorf("items after the move %v, want only the new one [c]: seen ids must survive a move", got)
			}
			// The node keeps its name and now shows the new URL.
			if got := e.node("moving"); got.SourceURL != newURL || got.SourceID != n.SourceID {
				t.Errorf("node follows %d %s, want %d %s", got.SourceID, got.SourceURL, n.SourceID, newURL)
			}

			// Later fetches go to the new URL; pings of either URL reach it.
			oldHits := e.origin.hitCount("/old")
			moved.set(rss{title: "Feed", items: items("d", "c", "b", "a")}.String())
			e.ping(n.SourceID, newURL, nil)
			e.ping(n.SourceID, oldURL, nil)
			if got := e.origin.hitCount("/old"); got != oldHits {
				t.Errorf("the old URL was fetched %d more times after the move", got-oldHits)
			}
			if got := itemIDs(e.events(n.ID)); !slices.Equal(got, []string{"c", "d"}) {
				t.Errorf("items %v, want [c d]", got)
			}
			if src := e.source(n.SourceID); src.MovedFrom != oldURL || src.URL != newURL {
				t.Errorf("a fetch at the new URL forgot the move: %q → %q", src.MovedFrom, src.URL)
			}
		})
	}
}

func TestTemporaryRedirectsDoNotMoveTheSource(t *testing.T) {
	for _, code := range []string{"302", "303", "307"} {
		t.Run(code, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			oldURL := e.origin.url("/feed")
			e.origin.serve("/feed", rss{title: "Feed", items: items("a")}.String(), false)
			e.run()
			n := e.createNode("n", "/feed")
			e.waitFetched(n.SourceID)

			e.origin.handle("/feed", redirectTo(code, e.origin.url("/elsewhere")))
			e.origin.serve("/elsewhere", rss{title: "Feed", items: items("b", "a")}.String(), false)
			src := e.ping(n.SourceID, oldURL, nil)
			if src.URL != oldURL || src.MovedFrom != "" || !src.MovedAt.IsZero() {
				t.Errorf("a %s moved the source: url %s, moved from %q", code, src.URL, src.MovedFrom)
			}
			if got := itemIDs(e.events(n.ID)); !slices.Equal(got, []string{"b"}) {
				t.Errorf("items %v, want [b]", got)
			}
			before := e.origin.hitCount("/feed")
			e.ping(n.SourceID, oldURL, nil)
			if e.origin.hitCount("/feed") != before+1 {
				t.Errorf("the next fetch did not go to the original URL")
			}
		})
	}
}

func TestGoneStopsPolling(t *testing.T) {
	cases := map[string]http.HandlerFunc{
		"410": func(w http.ResponseWriter, r *http.Request) { http.Error(w, "gone", http.StatusGone) },
		"empty newLocation": func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "<redirect><newLocation></newLocation></redirect>")
		},
		"self-closed newLocation": func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "<redirect><newLocation/></redirect>")
		},
	}
	for name, gone := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			ctx := t.Context()
			u := e.origin.url("/feed")
			e.origin.serve("/feed", rss{title: "Feed", items: items("a")}.String(), false)
			e.run()
			sentinel := e.createNode("sentinel", "/sentinel")
			e.waitFetched(sentinel.SourceID)
			n := e.createNode("n", "/feed")
			e.waitFetched(n.SourceID)
			for _, s := range []hub.Subscription{
				{NodeName: "n", Kind: hub.KindXMPP, Address: "a@example.org/x", BareJID: "a@example.org"},
				{NodeName: "n", Kind: hub.KindRSSCloud, Address: "http://127.0.0.1:1/notify"},
			} {
				if _, _, err := e.hub.Subscribe(ctx, s); err != nil {
					t.Fatal(err)
				}
			}

			e.origin.handle("/feed", gone)
			src := e.ping(n.SourceID, u, nil)
			if !src.Gone || !src.NextFetchAt.IsZero() || src.NextFetchReason != "gone" {
				t.Errorf("after %s: gone %v, next fetch %v (%s)", name, src.Gone, src.NextFetchAt, src.NextFetchReason)
			}
			if evs := e.events(n.ID); len(evs) != 0 {
				t.Errorf("going away published %v", kinds(evs))
			}

			// It is not fetched again: not by a ping, not by time.
			hits := e.origin.hitCount("/feed")
			if count, err := e.hub.Changed(ctx, u, nil); err != nil || count != 0 {
				t.Errorf("a ping of a gone source scheduled %d fetches (%v)", count, err)
			}
			e.clock.Advance(48 * time.Hour)
			e.settle(sentinel.SourceID)
			if got := e.origin.hitCount("/feed"); got != hits {
				t.Errorf("a gone source was fetched %d more times", got-hits)
			}
			// Its node and subscribers stay: the status shows what happened.
			if got := e.node("n"); got.SourceID != n.SourceID {
				t.Errorf("the node lost its source")
			}
			if subs, _ := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID}); len(subs) != 2 {
				t.Errorf("%d subscriptions left, want both", len(subs))
			}

			// The feed is back, and a new node asks for it: it is fetched
			// again, and its new entry published.
			e.origin.serve("/feed", rss{title: "Feed", items: items("a", "b")}.String(), false)
			e.clock.Advance(time.Second)
			again := e.createNode("again", "/feed")
			if again.SourceID != n.SourceID {
				t.Fatalf("the new node follows source %d, not the gone one (%d)", again.SourceID, n.SourceID)
			}
			src = e.waitFetched(again.SourceID)
			if src.Gone || src.NextFetchAt.IsZero() {
				t.Errorf("after a new node: gone %v, next fetch %v", src.Gone, src.NextFetchAt)
			}
			if evs := e.events(n.ID); len(evs) != 1 || evs[0].ItemID == "" {
				t.Errorf("the revived source published %v, want the new entry", kinds(evs))
			}
		})
	}
}

func TestFetchErrorsBackOff(t *testing.T) {
	e := newEnv(t, envOptions{})
	u := e.origin.url("/feed")
	doc := &feedDoc{body: rss{title: "Feed", items: items("a")}.String()}
	broken := true
	e.origin.handle("/feed", doc.ServeHTTP)
	e.run()
	sentinel := e.createNode("sentinel", "/sentinel")
	e.waitFetched(sentinel.SourceID)
	n := e.createNode("n", "/feed")
	base := e.waitFetched(n.SourceID)

	e.origin.handle("/feed", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "database on fire", http.StatusInternalServerError)
	})
	src := e.ping(n.SourceID, u, nil)
	if src.ConsecutiveErrors != 1 || src.LastStatus != http.StatusInternalServerError || !strings.Contains(src.LastError, "500") {
		t.Errorf("after an error: %d errors, status %d, error %q", src.ConsecutiveErrors, src.LastStatus, src.LastError)
	}
	if !src.Baselined || src.BodyHash == "" || src.BodyHash != base.BodyHash {
		t.Errorf("an error lost the stored representation")
	}
	// The scheduler's error backoff: 5 minutes, doubling.
	for i, wait := range []time.Duration{5 * time.Minute, 10 * time.Minute, 20 * time.Minute} {
		if want := e.clock.Now().Add(wait); !src.NextFetchAt.Equal(want) || src.NextFetchReason != "error backoff" {
			t.Fatalf("after error %d: next fetch %v (%s), want %v (error backoff)", i+1, src.NextFetchAt, src.NextFetchReason, want)
		}
		hits := e.origin.hitCount("/feed")
		e.clock.Set(src.NextFetchAt.Add(-time.Second))
		e.settle(sentinel.SourceID)
		if e.origin.hitCount("/feed") != hits {
			t.Fatalf("fetched again before the backoff ended")
		}
		e.clock.Set(src.NextFetchAt)
		if i == 2 {
			broken = false
			doc.set(rss{title: "Feed", items: items("b", "a")}.String())
			e.origin.handle("/feed", doc.ServeHTTP)
		}
		e.hub.WakeFetcher()
		src = e.waitFetched(n.SourceID)
		if broken && src.ConsecutiveErrors != i+2 {
			t.Fatalf("after error %d: %d errors in a row", i+2, src.ConsecutiveErrors)
		}
	}
	// Recovery resets the count and publishes what is new.
	if src.ConsecutiveErrors != 0 || src.LastError != "" || src.LastStatus != http.StatusOK {
		t.Errorf("after recovery: %d errors, %q, status %d", src.ConsecutiveErrors, src.LastError, src.LastStatus)
	}
	if got := itemIDs(e.events(n.ID)); !slices.Equal(got, []string{"b"}) {
		t.Errorf("items after recovery %v, want [b]", got)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	cases := []struct {
		name   string
		status int
		header func(now time.Time) string
		wait   time.Duration
	}{
		{"503 with seconds", http.StatusServiceUnavailable, func(time.Time) string { return "7200" }, 2 * time.Hour},
		{"429 with a date", http.StatusTooManyRequests, func(now time.Time) string { return now.Add(3 * time.Hour).Format(http.TimeFormat) }, 3 * time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			e.origin.serve("/feed", rss{title: "Feed", items: items("a")}.String(), false)
			e.run()
			sentinel := e.createNode("sentinel", "/sentinel")
			e.waitFetched(sentinel.SourceID)
			n := e.createNode("n", "/feed")
			e.waitFetched(n.SourceID)

			e.origin.handle("/feed", func(w http.ResponseWriter, r *http.Request) {
				// The ping below moves the clock by a second before the fetch.
				w.Header().Set("Retry-After", c.header(e.clock.Now()))
				http.Error(w, "slow down", c.status)
			})
			src := e.ping(n.SourceID, e.origin.url("/feed"), nil)
			want := e.clock.Now().Add(c.wait)
			if !src.NextFetchAt.Equal(want) || src.NextFetchReason != "retry-after" || src.ConsecutiveErrors != 1 {
				t.Errorf("next fetch %v (%s) after %d errors, want %v (retry-after)", src.NextFetchAt, src.NextFetchReason, src.ConsecutiveErrors, want)
			}
			hits := e.origin.hitCount("/feed")
			e.clock.Set(want.Add(-time.Minute))
			e.settle(sentinel.SourceID)
			if e.origin.hitCount("/feed") != hits {
				t.Errorf("fetched before Retry-After")
			}
			// A ping meanwhile is taken, but the fetch still waits.
			if count, err := e.hub.Changed(t.Context(), e.origin.url("/feed"), nil); err != nil || count != 1 {
				t.Fatalf("ping during Retry-After: %d sources, %v", count, err)
			}
			e.settle(sentinel.SourceID)
			// The ping made the source due now; the fetcher, which may
			// have claimed it beside the sentinel, puts it back to the
			// Retry-After time without fetching.
			testenv.WaitFor(t, 20*time.Second, "the fetch put off until Retry-After", func() bool {
				src = e.source(n.SourceID)
				return src.LeaseOwner == "" && src.NextFetchAt.Equal(want)
			})
			if e.origin.hitCount("/feed") != hits {
				t.Errorf("a ping made pingd fetch before Retry-After")
			}
			if src.NextFetchReason != "retry-after" || src.LastPingAt.IsZero() {
				t.Errorf("after the ping: next fetch %v (%s), last ping %v; want %v (retry-after)", src.NextFetchAt, src.NextFetchReason, src.LastPingAt, want)
			}
			e.clock.Set(want)
			e.hub.WakeFetcher()
			e.waitFetched(n.SourceID)
		})
	}
}

func TestUserAgentCountsEverySubscriber(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	e.origin.serve("/feed", rss{title: "Feed", items: items("a")}.String(), true)
	e.run()
	n := e.createNode("n", "/feed")
	e.waitFetched(n.SourceID)
	e.createNode("n2", "/feed")
	e.createNode("unrelated", "/sentinel")

	subs := []hub.Subscription{
		{NodeName: "n", Kind: hub.KindXMPP, Address: "a@example.org/x", BareJID: "a@example.org"},
		{NodeName: "n", Kind: hub.KindXMPP, Address: "b@example.org/y", BareJID: "b@example.org"},
		{NodeName: "n", Kind: hub.KindWebhook, Address: "http://127.0.0.1:1/hook", State: hub.SubPending},
		{NodeName: "n", Kind: hub.KindWebSub, Address: "http://127.0.0.1:1/websub"},
		{NodeName: "n", Kind: hub.KindRSSCloud, Address: "http://127.0.0.1:1/rsscloud"},
		{NodeName: "n", Kind: hub.KindCNWS, Address: "http://127.0.0.1:1/cnws"},
		{NodeName: "n2", Kind: hub.KindXMPP, Address: "a@example.org/x", BareJID: "a@example.org"},
		{NodeName: "unrelated", Kind: hub.KindXMPP, Address: "c@example.org/z", BareJID: "c@example.org"},
	}
	for _, s := range subs {
		if _, _, err := e.hub.Subscribe(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	e.ping(n.SourceID, e.origin.url("/feed"), nil)
	agents := e.origin.userAgents("/feed")
	if len(agents) != 2 {
		t.Fatalf("%d requests, want 2", len(agents))
	}
	if want := "pingd/test (+http://pingd.test; 0 subscribers)"; agents[0] != want {
		t.Errorf("baseline User-Agent %q, want %q", agents[0], want)
	}
	if want := "pingd/test (+http://pingd.test; 7 subscribers)"; agents[1] != want {
		t.Errorf("User-Agent %q, want %q (every kind, every node of the source)", agents[1], want)
	}
}

func TestChangeNoteNotifiesOnce(t *testing.T) {
	e := newEnv(t, envOptions{})
	u := e.origin.url("/feed")
	e.origin.serve("/feed", rss{title: "Feed", items: items("a")}.String(), true)
	e.run()
	n := e.createNode("n", "/feed")
	e.waitFetched(n.SourceID)

	// A publisher's resourceChange is trusted: it notifies although the
	// fetch finds nothing new (a 304 here).
	note := &hub.ChangeNote{Title: "Corrected a typo", Description: "The second paragraph"}
	src := e.ping(n.SourceID, u, note)
	if src.LastStatus != http.StatusNotModified {
		t.Fatalf("fetch status %d, want 304", src.LastStatus)
	}
	if src.PendingNote != nil {
		t.Errorf("the note is still pending after the fetch: %+v", src.PendingNote)
	}
	evs := e.events(n.ID)
	if len(evs) != 1 || evs[0].Kind != hub.EventChange || evs[0].Title != note.Title || evs[0].Summary != note.Description {
		t.Fatalf("log %+v, want one change event carrying the note", evs)
	}
	testenv.WaitFor(t, 20*time.Second, "the transports to be woken", func() bool { return e.rec.wakesOf(n.ID) > 0 })

	// Exactly once: later fetches do not repeat it.
	e.ping(n.SourceID, u, nil)
	e.ping(n.SourceID, u, nil)
	if evs := e.events(n.ID); len(evs) != 1 {
		t.Errorf("%d events after more fetches, want the one change", len(evs))
	}
}

// TestADeltaIsMergedIntoTheStoredBody: an origin that speaks RFC 3229
// answers a fetch with only its new entry (226). The baseline of a feed
// keeps no body (hub.KeepsBody), so the first delta cannot be merged: the
// fetcher asks again for the whole document, which is kept since the
// origin sends deltas. The next delta is merged: the fetch loop claims
// sources without their bodies, so the hub reads the stored body for the
// merge, publishes the new entry alone and stores the merged document as
// the source's body.
func TestADeltaIsMergedIntoTheStoredBody(t *testing.T) {
	e := newEnv(t, envOptions{})
	versions := [][]string{{"b", "a"}}
	var mu sync.Mutex
	var aims []string
	e.origin.handle("/delta", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		aims = append(aims, r.Header.Get("A-IM"))
		n := len(versions) - 1
		w.Header().Set("Content-Type", "application/rss+xml")
		w.Header().Set("ETag", fmt.Sprintf(`"v%d"`, n))
		var base int
		inm := r.Header.Get("If-None-Match")
		switch _, err := fmt.Sscanf(inm, `"v%d"`, &base); {
		case inm == fmt.Sprintf(`"v%d"`, n):
			w.WriteHeader(http.StatusNotModified)
		case err == nil && base < n && r.Header.Get("A-IM") == "feed":
			w.Header().Set("IM", "feed")
			w.WriteHeader(http.StatusIMUsed)
			fmt.Fprint(w, rss{title: "Delta", items: items(versions[n][:len(versions[n])-len(versions[base])]...)}.String())
		default:
			fmt.Fprint(w, rss{title: "Delta", items: items(versions[n]...)}.String())
		}
	})
	e.run()
	n := e.createNode("d", "/delta")
	if src := e.waitFetched(n.SourceID); src.LastStatus != http.StatusOK {
		t.Fatalf("baseline: status %d", src.LastStatus)
	}
	if src := e.source(n.SourceID); len(src.Body) != 0 {
		t.Errorf("the baseline of a feed whose origin sent no delta kept its body: %s", src.Body)
	}
	mu.Lock()
	versions = append(versions, []string{"b2", "b", "a"})
	mu.Unlock()
	src := e.ping(n.SourceID, e.origin.url("/delta"), nil)
	mu.Lock()
	if src.LastStatus != http.StatusOK || !slices.Equal(aims, []string{"", "feed", ""}) {
		t.Fatalf("second fetch: status %d, A-IM headers %q; want a delta asked for, then the whole document", src.LastStatus, aims)
	}
	if !strings.Contains(string(src.Body), "<guid isPermaLink=\"false\">b2</guid>") {
		t.Errorf("the origin sent a delta and the body was not kept: %q", src.Body)
	}
	versions = append(versions, []string{"c", "b2", "b", "a"})
	mu.Unlock()
	src = e.ping(n.SourceID, e.origin.url("/delta"), nil)
	mu.Lock()
	defer mu.Unlock()
	if src.LastStatus != http.StatusIMUsed || !slices.Equal(aims, []string{"", "feed", "", "feed"}) {
		t.Fatalf("third fetch: status %d, A-IM headers %q; want a delta asked for and answered with 226", src.LastStatus, aims)
	}
	if got := itemIDs(e.events(n.ID)); !slices.Equal(got, []string{"b2", "c"}) {
		t.Errorf("published %q, want each new entry alone", got)
	}
	for _, id := range []string{"<guid isPermaLink=\"false\">a</guid>", "<guid isPermaLink=\"false\">c</guid>"} {
		if !strings.Contains(string(src.Body), id) {
			t.Errorf("the stored body lacks %s: %s", id, src.Body)
		}
	}
}
