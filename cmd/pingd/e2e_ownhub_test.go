package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// TestPublisherUsingPingdAsItsHub: a publisher that uses pingd as its
// WebSub hub names pingd's own hub in its feed (spelled otherwise than the
// public URL: an upper-case scheme, a trailing slash). pingd, following the
// feed for an XMPP reader, never subscribes to itself upstream, and the
// publisher's publish request brings the new entry to the reader.
func TestPublisherUsingPingdAsItsHub(t *testing.T) {
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")
	var d *daemon
	var publicURL atomic.Value // d.URL, read by the feed's handler
	var mu sync.Mutex
	entries := []string{"e0"}
	feeds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		base := "http://" + r.Host
		ownHub := strings.Replace(publicURL.Load().(string), "http://", "HTTP://", 1) + "/websub/"
		w.Header().Set("Content-Type", "application/atom+xml")
		fmt.Fprintf(w, `<feed xmlns="http://www.w3.org/2005/Atom"><title>Own</title><id>urn:own</id><updated>2031-01-01T00:00:00Z</updated>`+
			`<link rel="hub" href="%s"/><link rel="self" href="%s/atom"/>`, ownHub, base)
		for _, e := range entries {
			fmt.Fprintf(w, `<entry><id>urn:%s</id><title>Own %s</title><updated>2031-01-01T00:00:00Z</updated><link href="%s/%s"/></entry>`, e, e, base, e)
		}
		fmt.Fprint(w, `</feed>`)
	}))
	defer feeds.Close()

	d = newDaemon(t, p, "PINGD_UPSTREAM_CHECK=1s")
	publicURL.Store(d.URL)
	d.Start(true)
	if code := d.api("POST", "/api/nodes", map[string]string{"node": "own", "source": feeds.URL + "/atom"}, nil); code != 201 {
		t.Fatalf("create the node: HTTP %d", code)
	}
	d.waitBaselined("own")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	reader := testenv.Dial(ctx, t, p, "reader", "pw", "e2e")
	if resp := subscribe(t, ctx, reader, p.ComponentDomain, "own"); !strings.Contains(resp, `subscription="subscribed"`) {
		t.Fatalf("subscribe: %s", resp)
	}
	// The feed's entry at the first fetch is the node's newest item, sent
	// to the new subscription.
	wantNewestOnSubscribe(t, reader, receivedItem{"own", "urn:e0", "Own e0"})
	// A publish request from the publisher, as WebSub §7 has it.
	publish := func() {
		t.Helper()
		resp, err := http.PostForm(d.URL+"/websub", url.Values{"hub.mode": {"publish"}, "hub.url": {feeds.URL + "/atom"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("publish: HTTP %d", resp.StatusCode)
		}
	}
	// A fetch after the reader came (the upstream check looks at what
	// fetches advertise), then an upstream check (one a second), which
	// logs its decision about the feed's hub.
	publish()
	testenv.WaitFor(t, 20*time.Second, "the upstream check's decision about the feed's hub", func() bool {
		logs := d.logs.String()
		return strings.Contains(logs, "names pingd itself as its hub") || strings.Contains(logs, "upstream subscription ")
	})
	var status struct {
		Upstream []struct {
			Kind     string `json:"kind"`
			State    string `json:"state"`
			Endpoint string `json:"endpoint"`
		} `json:"upstream"`
	}
	if code := d.api("GET", "/api/nodes/own/status", nil, &status); code != 200 {
		t.Fatalf("node status: HTTP %d", code)
	}
	if len(status.Upstream) != 0 {
		t.Fatalf("pingd subscribed upstream to itself: %+v", status.Upstream)
	}
	if logs := d.logs.String(); strings.Contains(logs, "upstream subscription requested") {
		t.Fatal("pingd asked itself for an upstream subscription")
	}

	mu.Lock()
	entries = append(entries, "e1")
	mu.Unlock()
	publish()
	got := collectItems(t, reader, 1, 20*time.Second, 500*time.Millisecond)
	if len(got) != 1 || got[0].Title != "Own e1" {
		t.Fatalf("after the publish request: %+v", got)
	}
}
