package hub_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestReadResource: a URL no node follows is fetched once and judged by
// its answer; one a node follows is judged by its source's state while
// that says enough, so that registrations repeated against a failing
// origin do not hammer it.
func TestReadResource(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.run()
	ctx := t.Context()
	e.origin.handle("/feed.xml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		fmt.Fprint(w, rss{title: "feed"}.String())
	})

	if err := e.hub.ReadResource(ctx, e.origin.url("/page")); err == nil {
		t.Fatal("a 404 was read")
	}
	if err := e.hub.ReadResource(ctx, e.origin.url("/feed.xml")); err != nil {
		t.Fatalf("a readable resource: %v", err)
	}
	if n := e.origin.hitCount("/feed.xml"); n != 1 {
		t.Fatalf("fetched %d times, want once", n)
	}
	if err := e.hub.ReadResource(ctx, "ftp://x.example/"); err == nil {
		t.Fatal("an invalid URL was read")
	}

	// Followed and fetched: no new fetch.
	n := e.createNode("feed", "/feed.xml")
	if src := e.source(n.SourceID); !src.Baselined {
		t.Fatalf("no baseline: %+v", src.SourceState)
	}
	before := e.origin.hitCount("/feed.xml")
	if err := e.hub.ReadResource(ctx, e.origin.url("/feed.xml")); err != nil || e.origin.hitCount("/feed.xml") != before {
		t.Fatalf("followed source: %v, %d fetches more", err, e.origin.hitCount("/feed.xml")-before)
	}

	// Followed, and its fetch just failed: refused without a fetch; a
	// minute later it is fetched again.
	broken := e.createNode("broken", "/broken.xml")
	if src := e.source(broken.SourceID); src.ConsecutiveErrors == 0 {
		t.Fatalf("the baseline of a 404 did not fail: %+v", src.SourceState)
	}
	before = e.origin.hitCount("/broken.xml")
	if err := e.hub.ReadResource(ctx, e.origin.url("/broken.xml")); err == nil || e.origin.hitCount("/broken.xml") != before {
		t.Fatalf("recently failed source: %v, %d fetches more", err, e.origin.hitCount("/broken.xml")-before)
	}
	e.clock.Advance(2 * time.Minute)
	if err := e.hub.ReadResource(ctx, e.origin.url("/broken.xml")); err == nil || e.origin.hitCount("/broken.xml") != before+1 {
		t.Fatalf("failing source a minute later: %v, %d fetches more", err, e.origin.hitCount("/broken.xml")-before)
	}
}

// TestReadResourceRepeated: registrations repeated for one URL read it at
// most once a minute, whoever asks: a URL no node follows, and one whose
// source is failing (past the minute its own last fetch covers).
func TestReadResourceRepeated(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.run()
	ctx := t.Context()
	for i := range 5 {
		if err := e.hub.ReadResource(ctx, e.origin.url("/missing")); err == nil {
			t.Fatalf("read %d: a 404 was read", i)
		}
	}
	if n := e.origin.hitCount("/missing"); n != 1 {
		t.Fatalf("an unfollowed 404 fetched %d times by 5 reads within a minute, want once", n)
	}
	e.clock.Advance(2 * time.Minute)
	if err := e.hub.ReadResource(ctx, e.origin.url("/missing")); err == nil || e.origin.hitCount("/missing") != 2 {
		t.Fatalf("a minute later: %v, %d fetches in all, want 2", err, e.origin.hitCount("/missing"))
	}

	broken := e.createNode("broken", "/broken.xml")
	if src := e.source(broken.SourceID); src.ConsecutiveErrors == 0 {
		t.Fatalf("the baseline of a 404 did not fail: %+v", src.SourceState)
	}
	before := e.origin.hitCount("/broken.xml")
	e.clock.Advance(2 * time.Minute)
	for i := range 5 {
		if err := e.hub.ReadResource(ctx, e.origin.url("/broken.xml")); err == nil {
			t.Fatalf("read %d: a failing source was read", i)
		}
	}
	if n := e.origin.hitCount("/broken.xml") - before; n != 1 {
		t.Fatalf("a failing followed source fetched %d times by 5 reads within a minute, want once", n)
	}
}
