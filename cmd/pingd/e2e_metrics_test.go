package main

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// TestMetricsAfterWork scrapes /metrics after the work an operator wants
// to watch: pings accepted and answered 429, an XMPP notification, a
// WebSub delivery; and reads /api/status with the status page's Basic
// credentials.
func TestMetricsAfterWork(t *testing.T) {
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")
	feed := newFeedServer(t, feedItem{"old-1", "Old one"})
	d := newDaemon(t, p, "PINGD_PING_BURST=2", "PINGD_PING_RATE=0.01")
	d.Start(true)
	feedURL := feed.URL + "/feed.xml"
	if code := d.api("POST", "/api/nodes", map[string]string{"node": "news", "source": feedURL, "title": "News"}, nil); code != 201 {
		t.Fatalf("create node: HTTP %d", code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reader := testenv.Dial(ctx, t, p, "reader", "pw", "metrics")
	subscribe(t, ctx, reader, p.ComponentDomain, "news")

	// A WebSub subscriber of the node's feed.
	hook := newHookServer(t)
	resp, err := http.PostForm(d.URL+"/websub", url.Values{"hub.mode": {"subscribe"}, "hub.topic": {d.URL + "/atom/news"}, "hub.callback": {hook.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("WebSub subscribe: HTTP %d", resp.StatusCode)
	}
	testenv.WaitFor(t, 15*time.Second, "the WebSub subscription verified", func() bool {
		hook.mu.Lock()
		defer hook.mu.Unlock()
		return len(hook.checks) > 0
	})
	testenv.WaitFor(t, 15*time.Second, "the WebSub subscription active", func() bool {
		for _, s := range d.nodeSubscribers("news") {
			if s.Kind == "websub" && s.State == "active" {
				return true
			}
		}
		return false
	})

	feed.Add(feedItem{"new-1", "New one"})
	codes := map[int]int{}
	for range 3 {
		resp, err := http.PostForm(d.URL+"/ping", url.Values{"url": {feedURL}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	if codes[200] != 2 || codes[429] != 1 {
		t.Fatalf("ping answers %v, want two 200 and one 429", codes)
	}
	collectItems(t, reader, 1, 15*time.Second, 200*time.Millisecond)
	testenv.WaitFor(t, 15*time.Second, "the WebSub delivery", func() bool { return len(hook.titles()) > 0 })

	scrape := func() string {
		resp, err := http.Get(d.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	var body string
	want := []string{
		`pingd_pings_total{dialect="rest",outcome="accepted"} 2`,
		`pingd_pings_total{dialect="rest",outcome="rate_limited"} 1`,
		`pingd_xmpp_notifications_sent_total{via="unicast"}`,
		`pingd_xmpp_notifications_bounced_total 0`,
		`pingd_notifications_total{outcome="delivered",transport="websub"} 1`,
		`pingd_subscriptions{kind="xmpp"} 1`,
		`pingd_subscriptions{kind="websub"} 1`,
		`pingd_sources_followed 1`,
		`pingd_sources_late 0`,
		`pingd_delivery_backlog_events 0`,
		`pingd_upstream_subscriptions{state="active"} 0`,
		"\ngo_goroutines ",
		"\nprocess_resident_memory_bytes ",
	}
	// The database's figures are read at most every 10 s.
	testenv.WaitFor(t, 30*time.Second, "the series after the work", func() bool {
		body = scrape()
		for _, w := range want {
			if !strings.Contains(body, w) {
				return false
			}
		}
		return true
	})
	if strings.Contains(body, `pingd_xmpp_notifications_sent_total{via="unicast"} 0`) {
		t.Errorf("no XMPP notification counted:\n%s", body)
	}

	// /api/status takes what the status page's admin view asks for.
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/api/status", nil)
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("admin:"+testAdminToken)))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"connected": true`) {
		t.Fatalf("/api/status with Basic credentials: HTTP %d\n%s", resp.StatusCode, b)
	}
}
