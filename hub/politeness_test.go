package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// The fetch loop at scale: politeness per host (slots, spacing, pauses)
// without a busy host holding workers, and unchanged polls written in
// batches. Each origin is an httptest server of its own: another port is
// another host.

// slowOrigin serves feeds that answer only once the test lets them, and
// counts the requests under way.
type slowOrigin struct {
	*origin
	release chan struct{}
	once    sync.Once
	now     atomic.Int32
}

func newSlowOrigin(t *testing.T) *slowOrigin {
	o := &slowOrigin{origin: newOrigin(t), release: make(chan struct{})}
	t.Cleanup(o.open)
	return o
}

func (o *slowOrigin) open() { o.once.Do(func() { close(o.release) }) }

func (o *slowOrigin) serve(path string) {
	o.handle(path, func(w http.ResponseWriter, r *http.Request) {
		o.now.Add(1)
		defer o.now.Add(-1)
		select {
		case <-o.release:
			w.Header().Set("Content-Type", "application/rss+xml")
			fmt.Fprint(w, rss{title: "Slow", items: items("a")}.String())
		case <-r.Context().Done():
		}
	})
}

// TestASlowHostHoldsNoWorker: with two workers and one fetch per host,
// six due feeds of a host that does not answer leave the other host's
// feeds fetched at once, not after the slow fetches time out.
func TestASlowHostHoldsNoWorker(t *testing.T) {
	e := newEnv(t, envOptions{fetchWorkers: 2, fetchesPerHost: 1})
	slow := newSlowOrigin(t)
	var slowNodes []*hub.Node
	for i := range 6 {
		path := fmt.Sprintf("/slow%d", i)
		slow.serve(path)
		n, _, err := e.hub.CreateNode(t.Context(), hub.NodeSpec{Name: "slow" + fmt.Sprint(i), Source: slow.url(path), Config: hub.DefaultNodeConfig()})
		if err != nil {
			t.Fatal(err)
		}
		slowNodes = append(slowNodes, n)
	}
	// Created after the slow ones: due at the same time, claimed after them.
	e.origin.serve("/fast1", rss{title: "Fast", items: items("a")}.String(), false)
	e.origin.serve("/fast2", rss{title: "Fast", items: items("a")}.String(), false)
	fast := []*hub.Node{e.createNode("fast1", "/fast1"), e.createNode("fast2", "/fast2")}
	e.run()

	deadline := time.Now().Add(5 * time.Second) // half the fetch timeout
	for _, n := range fast {
		for e.source(n.SourceID).LastFetchAt.IsZero() || e.source(n.SourceID).LeaseOwner != "" {
			if time.Now().After(deadline) {
				t.Fatalf("the fast host's %s was not fetched while the slow host held its fetch", n.Name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if got := slow.now.Load(); got != 1 {
		t.Errorf("%d fetches of the slow host under way, want its one slot", got)
	}
	slow.open()
	for _, n := range slowNodes {
		e.waitFetched(n.SourceID)
	}
}

// TestHostSpacing: two fetches of one host start at least the spacing
// apart, on the hub's clock; another host is not held up by it.
func TestHostSpacing(t *testing.T) {
	e := newEnv(t, envOptions{hostSpacing: 30 * time.Second})
	spaced := newOrigin(t)
	for _, p := range []string{"/a", "/b"} {
		spaced.serve(p, rss{title: "Spaced", items: items("x")}.String(), false)
	}
	var nodes []*hub.Node
	for _, p := range []string{"/a", "/b"} {
		n, _, err := e.hub.CreateNode(t.Context(), hub.NodeSpec{Name: "spaced" + p, Source: spaced.url(p), Config: hub.DefaultNodeConfig()})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	e.run()
	testenv.WaitFor(t, 20*time.Second, "the first fetch of the spaced host", func() bool { return spaced.hitCount("/a")+spaced.hitCount("/b") >= 1 })
	// Its outcome is stored before the clock moves: LastFetchAt is the
	// hub's time when the answer is in, not when the request went.
	testenv.WaitFor(t, 20*time.Second, "the first fetch stored", func() bool {
		for _, n := range nodes {
			if src := e.source(n.SourceID); !src.LastFetchAt.IsZero() && src.LeaseOwner == "" {
				return true
			}
		}
		return false
	})

	// 29s later another host's new source is fetched at once (creating
	// its node waits for that), the spaced host's second source is not.
	e.clock.Advance(29 * time.Second)
	other := newOrigin(t)
	other.serve("/c", rss{title: "Other", items: items("x")}.String(), false)
	if _, _, err := e.hub.CreateNode(t.Context(), hub.NodeSpec{Name: "other", Source: other.url("/c"), Config: hub.DefaultNodeConfig()}); err != nil {
		t.Fatal(err)
	}
	if other.hitCount("/c") != 1 {
		t.Fatal("the other host's source was not fetched")
	}
	if got := spaced.hitCount("/a") + spaced.hitCount("/b"); got != 1 {
		t.Fatalf("%d fetches of the host within its 30s spacing, want 1", got)
	}
	e.clock.Advance(time.Second)
	e.hub.WakeFetcher()
	testenv.WaitFor(t, 20*time.Second, "the second fetch after the spacing", func() bool { return spaced.hitCount("/a")+spaced.hitCount("/b") == 2 })
	first, second := e.source(nodes[0].SourceID), e.source(nodes[1].SourceID)
	testenv.WaitFor(t, 20*time.Second, "both fetches stored", func() bool {
		first, second = e.source(nodes[0].SourceID), e.source(nodes[1].SourceID)
		return !first.LastFetchAt.IsZero() && !second.LastFetchAt.IsZero() && first.LeaseOwner == "" && second.LeaseOwner == ""
	})
	if d := second.LastFetchAt.Sub(first.LastFetchAt).Abs(); d < 30*time.Second {
		t.Errorf("fetches of one host %v apart, want at least 30s", d)
	}
}

// TestARetryAfterPausesTheHost: a 429 with Retry-After from a host makes
// its other sources wait until then too; they are given back, due then,
// and fetched when it comes.
func TestARetryAfterPausesTheHost(t *testing.T) {
	e := newEnv(t, envOptions{})
	limited := newOrigin(t)
	limited.serve("/one", rss{title: "One", items: items("a")}.String(), false)
	limited.serve("/two", rss{title: "Two", items: items("a")}.String(), false)
	e.run()
	create := func(name, path string) *hub.Node {
		n, _, err := e.hub.CreateNode(t.Context(), hub.NodeSpec{Name: name, Source: limited.url(path), Config: hub.DefaultNodeConfig()})
		if err != nil {
			t.Fatal(err)
		}
		e.waitFetched(n.SourceID)
		return n
	}
	one, two := create("one", "/one"), create("two", "/two")

	limited.handle("/one", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	})
	e.ping(one.SourceID, limited.url("/one"), nil)
	pauseEnd := e.clock.Now().Add(120 * time.Second)

	hits := limited.hitCount("/two")
	e.clock.Advance(time.Second)
	if _, err := e.hub.Changed(t.Context(), limited.url("/two"), nil); err != nil {
		t.Fatal(err)
	}
	var src *hub.Source
	testenv.WaitFor(t, 20*time.Second, "the other source given back until the host's pause ends", func() bool {
		src = e.source(two.SourceID)
		return src.LeaseOwner == "" && src.NextFetchAt.Equal(pauseEnd)
	})
	if src.NextFetchReason != hub.ReasonHostPaused || limited.hitCount("/two") != hits {
		t.Fatalf("during the host's pause: %d fetches, next fetch %v (%s)", limited.hitCount("/two")-hits, src.NextFetchAt, src.NextFetchReason)
	}
	e.clock.Set(pauseEnd)
	e.hub.WakeFetcher()
	if src := e.waitFetched(two.SourceID); src.LastStatus != http.StatusOK {
		t.Errorf("after the pause: status %d", src.LastStatus)
	}
}

// TestPerHostConcurrencyHoldsWithManySources: twenty due feeds of one host
// never have more than FetchesPerHost fetches under way, and all are
// fetched.
func TestPerHostConcurrencyHoldsWithManySources(t *testing.T) {
	e := newEnv(t, envOptions{fetchWorkers: 8, fetchesPerHost: 2})
	busy := newOrigin(t)
	var now, most atomic.Int32
	var nodes []*hub.Node
	for i := range 20 {
		path := fmt.Sprintf("/f%d", i)
		busy.handle(path, func(w http.ResponseWriter, r *http.Request) {
			n := now.Add(1)
			defer now.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(20 * time.Millisecond)
			w.Header().Set("Content-Type", "application/rss+xml")
			fmt.Fprint(w, rss{title: "Busy", items: items("a")}.String())
		})
		n, _, err := e.hub.CreateNode(t.Context(), hub.NodeSpec{Name: "busy" + fmt.Sprint(i), Source: busy.url(path), Config: hub.DefaultNodeConfig()})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	e.run()
	// Those beyond what the host keeps waiting are given back due at its
	// pace: the clock moves on as time would.
	for _, n := range nodes {
		testenv.WaitFor(t, 20*time.Second, "every source fetched", func() bool {
			e.clock.Advance(100 * time.Millisecond)
			e.hub.WakeFetcher()
			src := e.source(n.SourceID)
			return !src.LastFetchAt.IsZero() && src.LeaseOwner == ""
		})
	}
	if m := most.Load(); m > 2 || m < 1 {
		t.Errorf("at most %d fetches of the host at once, want 2", m)
	}
}

// writeCounter counts the store calls of the fetch path.
type writeCounter struct {
	store.Store
	applyFetch, applyUnchanged, claims atomic.Int64
}

func (c *writeCounter) ApplyFetch(ctx context.Context, o hub.FetchOutcome) (hub.FetchApplied, error) {
	c.applyFetch.Add(1)
	return c.Store.ApplyFetch(ctx, o)
}

func (c *writeCounter) ApplyUnchangedFetches(ctx context.Context, outs []hub.FetchOutcome) error {
	c.applyUnchanged.Add(1)
	return c.Store.ApplyUnchangedFetches(ctx, outs)
}

func (c *writeCounter) ClaimDueSources(ctx context.Context, now time.Time, limit int, owner string, until time.Time) ([]hub.Source, error) {
	c.claims.Add(1)
	return c.Store.ClaimDueSources(ctx, now, limit, owner, until)
}

// TestUnchangedPollsShareWrites: sixty polls answered 304 cost far fewer
// write transactions than sixty, and claims are batches. (No poll counts
// its subscribers apart: the fetch loop does not ask SubscriberCount; the claim
// brings the counts.)
func TestUnchangedPollsShareWrites(t *testing.T) {
	counter := &writeCounter{}
	e := newEnv(t, envOptions{fetchWorkers: 16, fetchesPerHost: 4,
		wrap: func(s store.Store) store.Store { counter.Store = s; return counter }})
	const perHost, hostCount = 15, 4
	var nodes []*hub.Node
	for h := range hostCount {
		o := newOrigin(t)
		for i := range perHost {
			path := fmt.Sprintf("/f%d", i)
			o.serve(path, rss{title: "Feed", items: items("a")}.String(), true)
			n, _, err := e.hub.CreateNode(t.Context(), hub.NodeSpec{Name: fmt.Sprintf("h%d-%d", h, i), Source: o.url(path), Config: hub.DefaultNodeConfig()})
			if err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, n)
		}
	}
	e.run()
	for _, n := range nodes {
		e.waitFetched(n.SourceID)
	}
	counter.applyFetch.Store(0)
	counter.applyUnchanged.Store(0)
	counter.claims.Store(0)

	// A day later every source is due; every answer is a 304.
	e.clock.Advance(25 * time.Hour)
	e.hub.WakeFetcher()
	for _, n := range nodes {
		if src := e.waitFetched(n.SourceID); src.LastStatus != http.StatusNotModified {
			t.Fatalf("source %d: status %d, want 304", n.SourceID, src.LastStatus)
		}
	}
	polls := int64(len(nodes))
	writes := counter.applyFetch.Load() + counter.applyUnchanged.Load()
	t.Logf("%d unchanged polls: %d ApplyFetch, %d ApplyUnchangedFetches, %d claims",
		polls, counter.applyFetch.Load(), counter.applyUnchanged.Load(), counter.claims.Load())
	if writes > polls/4 {
		t.Errorf("%d write transactions for %d unchanged polls, want at most %d", writes, polls, polls/4)
	}
	if c := counter.claims.Load(); c > polls/4 {
		t.Errorf("%d claims for %d polls, want at most %d", c, polls, polls/4)
	}
}
