package hub_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/hub/fetching"
)

// A fetch a process had claimed when it stopped goes to the next process at
// once, not when its lease runs out (twice the fetch timeout).

// startHub runs a second hub on the env's store until the returned stop.
func (e *env) startHub(instance string, exclusive bool) (stop func()) {
	e.t.Helper()
	h, _ := newFetchingHub(e.t, e.store, hub.Config{
		Now: e.clock.Now, Instance: instance, Logger: testLogger(e.t),
		Fetcher: feed.NewFetcher(feed.FetcherConfig{AllowPrivate: true, Now: e.clock.Now}),
	}, fetching.Config{Exclusive: exclusive, FetchTimeout: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	e.t.Cleanup(stop)
	return stop
}

// TestShutdownGivesBackAFetchInFlight: a fetch cut off by shutdown stores
// nothing but its source's release, due at once; the next process fetches
// it without waiting for the lease.
func TestShutdownGivesBackAFetchInFlight(t *testing.T) {
	e := newEnv(t, envOptions{})
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	e.origin.handle("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case started <- struct{}{}:
		default:
		}
		select {
		case <-release:
			w.Header().Set("Content-Type", "application/rss+xml")
			w.Write([]byte(rss{title: "Slow", items: items("a")}.String()))
		case <-r.Context().Done():
		}
	})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	stop := e.startHub("first", false)
	n := e.createNode("n", "/slow")
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the fetch did not start")
	}
	stop()

	src := e.source(n.SourceID)
	if src.LeaseOwner != "" || src.NextFetchReason != hub.ReasonInterrupted || src.NextFetchAt.After(e.clock.Now()) {
		t.Fatalf("after the interrupted fetch: lease %q until %v, next fetch %v (%s)",
			src.LeaseOwner, src.LeaseUntil, src.NextFetchAt, src.NextFetchReason)
	}
	if src.Baselined || !src.LastFetchAt.IsZero() {
		t.Fatalf("the interrupted fetch stored a result: %+v", src.SourceState)
	}

	open()
	e.startHub("second", false)
	// The clock has not moved: only a released lease lets this happen.
	if src := e.waitFetched(n.SourceID); !src.Baselined {
		t.Errorf("the second process did not baseline the source: %+v", src.SourceState)
	}
}

// TestExclusiveHubTakesBackDeadLeases: fetch leases left by a killed
// process are taken back at start by a hub that is the store's only user
// and respected by one that shares the store.
func TestExclusiveHubTakesBackDeadLeases(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.origin.handle("/feed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		w.Write([]byte(rss{title: "Feed", items: items("a")}.String()))
	})
	n := e.createNode("n", "/feed")
	now := e.clock.Now()
	claimed, err := e.store.ClaimDueSources(t.Context(), now, 10, "killed-process", now.Add(time.Minute))
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}

	stop := e.startHub("shared", false)
	time.Sleep(300 * time.Millisecond)
	stop()
	if src := e.source(n.SourceID); src.LeaseOwner != "killed-process" || e.origin.hitCount("/feed") != 0 {
		t.Fatalf("a hub sharing the store took a live lease: owner %q, %d fetches", src.LeaseOwner, e.origin.hitCount("/feed"))
	}

	e.startHub("sole", true)
	if src := e.waitFetched(n.SourceID); !src.Baselined {
		t.Errorf("not baselined after the lease was taken back: %+v", src.SourceState)
	}
}

// TestTakenBackLeaseKeepsTheBody: a lease taken back from a dead process
// gives the source back as it was read, without its body (lists of
// sources leave it out); that release and the unchanged fetch after it
// keep the stored body. (An RSS feed served as generic XML keeps its
// body, hub.KeepsBody: WebSub tells its format from it.)
func TestTakenBackLeaseKeepsTheBody(t *testing.T) {
	e := newEnv(t, envOptions{})
	doc := rss{title: "Feed", items: items("a")}.String()
	e.origin.handle("/feed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		w.Write([]byte(doc))
	})
	n := e.createNode("n", "/feed")
	stop := e.startHub("first", true)
	if src := e.waitFetched(n.SourceID); string(src.Body) != doc {
		t.Fatalf("baseline body %q", src.Body)
	}
	stop()

	e.clock.Advance(time.Second)
	now := e.clock.Now()
	if err := e.store.MarkSourceDue(t.Context(), n.SourceID, now, nil); err != nil {
		t.Fatal(err)
	}
	if claimed, err := e.store.ClaimDueSources(t.Context(), now, 10, "killed-process", now.Add(time.Minute)); err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	e.startHub("sole", true)
	if src := e.waitFetched(n.SourceID); string(src.Body) != doc || src.Unchanged != 1 {
		t.Fatalf("after the lease was taken back: unchanged %d, body %q", src.Unchanged, src.Body)
	}
}
