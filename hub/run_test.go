package hub_test

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/hub/fetching"
)

// pingdGoroutines returns the stacks of live goroutines running hub or
// feed code.
func pingdGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/pingd/pingd/hub.") || strings.Contains(g, "github.com/pingd/pingd/feed.") {
			out = append(out, g)
		}
	}
	return out
}

// goroutinesLeft returns pingdGoroutines once none is left, or what is
// still left after a second: a goroutine that has told its owner it is
// done (a WaitGroup's Done, a closed channel) still runs its last return,
// and a check at that instant would take it for a leak.
func goroutinesLeft() []string {
	deadline := time.Now().Add(time.Second)
	for {
		left := pingdGoroutines()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRunStopsWithItsContextAndLeavesNoGoroutine(t *testing.T) {
	if leftover := goroutinesLeft(); len(leftover) > 0 {
		t.Fatalf("goroutines of an earlier test still run:\n%s", strings.Join(leftover, "\n\n"))
	}
	e := newEnv(t, envOptions{})

	// Three sources on one host that answer only when the test lets them:
	// two fetches hang in the origin, the third waits for the per-host
	// limit (2).
	release := make(chan struct{})
	var releaseOnce sync.Once
	open := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(open)
	started := make(chan string, 3)
	for _, path := range []string{"/slow1", "/slow2", "/slow3"} {
		e.origin.handle(path, func(w http.ResponseWriter, r *http.Request) {
			select {
			case started <- r.URL.Path:
			default:
			}
			select {
			case <-release:
				w.Header().Set("Content-Type", "application/rss+xml")
				w.Write([]byte(rss{title: "Slow", items: items("a")}.String()))
			case <-r.Context().Done():
			}
		})
	}
	// The nodes come first: while Run runs, creating one waits for its
	// baseline fetch, which hangs here.
	nodes := []*hub.Node{e.createNode("n1", "/slow1"), e.createNode("n2", "/slow2"), e.createNode("n3", "/slow3")}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.hub.Run(ctx) }()
	for range 2 {
		select {
		case <-started:
		case <-time.After(20 * time.Second):
			t.Fatal("the fetches did not start")
		}
	}
	if len(pingdGoroutines()) == 0 {
		t.Fatal("no hub goroutine seen while Run runs: the leak check below would prove nothing")
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("Run did not return after its context ended:\n%s", strings.Join(pingdGoroutines(), "\n\n"))
	}
	if leftover := goroutinesLeft(); len(leftover) > 0 {
		t.Errorf("goroutines left after Run returned:\n%s", strings.Join(leftover, "\n\n"))
	}

	// The interrupted fetches stored nothing: their leases run out and a
	// new process fetches them (here a new hub on the same database).
	for _, n := range nodes {
		if src := e.source(n.SourceID); src.Baselined || !src.LastFetchAt.IsZero() {
			t.Errorf("an interrupted fetch of %s was stored: %+v", src.URL, src.SourceState)
		}
	}
	open()
	h2, engine2 := newFetchingHub(t, e.store, hub.Config{
		Now: e.clock.Now, Instance: "second", Logger: testLogger(t),
		Fetcher: feed.NewFetcher(feed.FetcherConfig{AllowPrivate: true, Now: e.clock.Now}),
	}, fetching.Config{})
	e.hub, e.engine = h2, engine2
	// The clock moves first: run returns once Run runs, and its first claim
	// must already tell these fetches from the interrupted ones.
	e.clock.Advance(time.Minute) // past the leases (twice the fetch timeout)
	e.run()
	h2.WakeFetcher()
	for _, n := range nodes {
		if src := e.waitFetched(n.SourceID); !src.Baselined {
			t.Errorf("%s not baselined by the second process", src.URL)
		}
	}
}
