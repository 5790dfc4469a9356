package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// TestPingToXMPPSubscriber is the product's first whole path: a node
// created over the admin API, a subscriber over XMPP, a feed that changes
// and a ping in each dialect; the subscriber gets exactly the new entries.
func TestPingToXMPPSubscriber(t *testing.T) {
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")
	feed := newFeedServer(t, feedItem{"old-1", "Old one"}, feedItem{"old-2", "Old two"})
	d := newDaemon(t, p)
	d.Start(true)

	var created map[string]any
	if code := d.api("POST", "/api/nodes", map[string]string{"node": "news", "source": feed.URL + "/feed.xml", "title": "News"}, &created); code != 201 {
		t.Fatalf("create node: HTTP %d %v", code, created)
	}
	if tok, _ := created["token"].(string); tok == "" {
		t.Fatalf("no token in %v", created)
	}
	// The 201 comes once the baseline is stored: the feed changes below
	// without waiting, and the first ping after the subscription notifies.
	if st := d.status("news"); st.Source == nil || !st.Source.Baselined {
		t.Fatalf("node created (201) before its source's baseline: %+v", st.Source)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reader := testenv.Dial(ctx, t, p, "reader", "pw", "e2e")
	if resp := subscribe(t, ctx, reader, p.ComponentDomain, "news"); !strings.Contains(resp, `subscription="subscribed"`) {
		t.Fatalf("subscribe answer: %s", resp)
	}
	// The feed's entries at the first fetch are the node's items, told to
	// no one; the newest is sent to the new subscription.
	wantNewestOnSubscribe(t, reader, receivedItem{"news", "old-2", "Old two"})

	pings := []struct {
		name string
		ping func(feedURL string)
	}{
		{"weblogUpdates.extendedPing", func(feedURL string) {
			body := d.xmlrpc("weblogUpdates.extendedPing", "Test blog", "http://127.0.0.1/site", "http://127.0.0.1/site/changed", feedURL)
			if !strings.Contains(body, "flerror") || !strings.Contains(body, "<boolean>0</boolean>") {
				t.Fatalf("extendedPing answer: %s", body)
			}
		}},
		{"rssCloud.ping", func(feedURL string) {
			body := d.xmlrpc("rssCloud.ping", feedURL)
			if !strings.Contains(body, "<boolean>1</boolean>") {
				t.Fatalf("rssCloud.ping answer: %s", body)
			}
		}},
		{"POST /ping", func(feedURL string) {
			resp, err := http.PostForm(d.URL+"/ping", url.Values{"url": {feedURL}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("/ping: HTTP %d", resp.StatusCode)
			}
		}},
	}
	for i, pg := range pings {
		a := feedItem{fmt.Sprintf("new-%d-a", i), fmt.Sprintf("New %d A", i)}
		b := feedItem{fmt.Sprintf("new-%d-b", i), fmt.Sprintf("New %d B", i)}
		feed.Add(a, b)
		pg.ping(feed.URL + "/feed.xml")
		got := collectItems(t, reader, 2, 15*time.Second, 500*time.Millisecond)
		want := []receivedItem{{"news", a.GUID, a.Title}, {"news", b.GUID, b.Title}}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: subscriber got %v, want exactly %v", pg.name, got, want)
		}
	}

	// The work shows in the metrics.
	resp, err := http.Get(d.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"pingd_items_published_total 6", `pingd_fetches_total{class="2xx"}`, "pingd_component_connected 1"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestRestartsLoseNothing restarts pingd between pings and Prosody around
// one: nothing is sent twice, nothing is lost, and pingd reconnects alone.
func TestRestartsLoseNothing(t *testing.T) {
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")
	feed := newFeedServer(t, feedItem{"a", "A"})
	// pingd reaches Prosody through a proxy the test opens only once the
	// subscriber is back online, so the notification cannot race its login.
	proxy := testenv.StartProxy(t, p.ComponentAddr)
	d := newDaemon(t, p, "PINGD_XMPP_ADDR="+proxy.Addr)
	d.Start(true)
	if code := d.api("POST", "/api/nodes", map[string]string{"node": "n", "source": feed.URL}, nil); code != 201 {
		t.Fatalf("create: %d", code)
	}
	d.waitBaselined("n")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	reader := testenv.Dial(ctx, t, p, "reader", "pw", "r1")
	subscribe(t, ctx, reader, p.ComponentDomain, "n")
	wantNewestOnSubscribe(t, reader, receivedItem{"n", "a", "A"})

	ping := func() {
		resp, err := http.PostForm(d.URL+"/ping", url.Values{"url": {feed.URL}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/ping: HTTP %d", resp.StatusCode)
		}
	}

	feed.Add(feedItem{"b", "B"})
	ping()
	if got := collectItems(t, reader, 1, 15*time.Second, 300*time.Millisecond); !slices.Equal(got, []receivedItem{{"n", "b", "B"}}) {
		t.Fatalf("before restart: got %v", got)
	}

	// Restart pingd: "b" must not come again; "c" must come once.
	d.Stop()
	d.Start(true)
	feed.Add(feedItem{"c", "C"})
	ping()
	if got := collectItems(t, reader, 1, 15*time.Second, time.Second); !slices.Equal(got, []receivedItem{{"n", "c", "C"}}) {
		t.Fatalf("after pingd restart: got %v, want only c", got)
	}

	// Stop Prosody, ping, start Prosody: pingd reconnects by itself.
	proxy.Block()
	p.Stop()
	testenv.WaitFor(t, 20*time.Second, "readyz to fail", func() bool {
		resp, err := http.Get(d.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 503
	})
	// "d" reaches the node's log while XMPP is down. (Counting feed hits
	// told nothing: the look at the source at node creation is one.)
	seq := d.status("n").LastSeq
	feed.Add(feedItem{"d", "D"})
	ping()
	testenv.WaitFor(t, 10*time.Second, "fetch while XMPP is down", func() bool { return d.status("n").LastSeq > seq })
	p.Start()
	reader2 := testenv.Dial(ctx, t, p, "reader", "pw", "r2")
	proxy.Allow()
	testenv.WaitFor(t, 60*time.Second, "readyz after Prosody restart", func() bool {
		resp, err := http.Get(d.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	if got := collectItems(t, reader2, 1, 20*time.Second, time.Second); !slices.Equal(got, []receivedItem{{"n", "d", "D"}}) {
		t.Fatalf("after Prosody restart: got %v, want d", got)
	}
}
