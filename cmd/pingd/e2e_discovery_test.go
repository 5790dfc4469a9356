package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// homepage serves an HTML page linking to feeds, and a page without any.
func homepage(t *testing.T, feeds ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<!doctype html><html><head><title>A weblog</title>`)
			for _, f := range feeds {
				typ := "application/rss+xml"
				if strings.HasSuffix(f, ".atom") {
					typ = "application/atom+xml"
				}
				fmt.Fprintf(w, `<link rel="alternate" type=%q href=%q>`, typ, f)
			}
			fmt.Fprint(w, `</head><body>Hello</body></html>`)
		case "/nofeeds":
			fmt.Fprint(w, `<!doctype html><html><head><title>Nothing</title></head><body></body></html>`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestPagesStandForTheirFeeds: a homepage handed to pingd where a feed is
// expected — as a node's source, in a ping, in a chat subscription, to
// pingd discover — stands for the feed it links to.
func TestPagesStandForTheirFeeds(t *testing.T) {
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")
	feed := newFeedServer(t, feedItem{"old-1", "Old one"})
	feedURL := feed.URL + "/feed.xml"
	home := homepage(t, "/comments.rss", feedURL, "/other.atom")
	// The feed's own channel link (http://127.0.0.1/site) is not the
	// homepage, so only discovery connects a ping of the homepage to it.
	d := newDaemon(t, p, "PINGD_OPEN_SOURCES=1")
	d.Start(true)

	var created struct {
		Source     string `json:"source"`
		Discovered *struct {
			From         string   `json:"from"`
			Feed         string   `json:"feed"`
			Alternatives []string `json:"alternatives"`
		} `json:"discovered"`
	}
	if code := d.api("POST", "/api/nodes", map[string]string{"node": "blog", "source": home.URL + "/"}, &created); code != 201 {
		t.Fatalf("create node from a homepage: HTTP %d", code)
	}
	// Atom ranks before RSS, comment feeds last: the page's Atom feed is
	// /other.atom, which is not the followed one; the test page lists it
	// to check the ranking, so the chosen feed is it.
	if created.Discovered == nil || created.Discovered.From != home.URL+"/" || created.Discovered.Feed != home.URL+"/other.atom" ||
		created.Source != home.URL+"/other.atom" ||
		strings.Join(created.Discovered.Alternatives, " ") != feedURL+" "+home.URL+"/comments.rss" {
		t.Fatalf("discovered %+v, source %q", created.Discovered, created.Source)
	}
	var errBody map[string]any
	if code := d.api("POST", "/api/nodes", map[string]string{"node": "nothing", "source": home.URL + "/nofeeds"}, &errBody); code != 422 {
		t.Errorf("a page without feeds: HTTP %d %v, want 422", code, errBody)
	}
	if code := d.api("POST", "/api/nodes", map[string]string{"node": "later", "source": "http://127.0.0.1:9/feed.xml"}, nil); code != 201 {
		t.Errorf("an unreachable source: HTTP %d, want 201 (kept as given)", code)
	}

	// A node following the real feed, and a chat subscriber to it by the
	// homepage whose best feed it is not: a page with one feed.
	single := homepage(t, feedURL)
	if code := d.api("POST", "/api/nodes", map[string]string{"node": "news", "source": feedURL}, nil); code != 201 {
		t.Fatalf("create news: HTTP %d", code)
	}
	d.waitBaselined("news")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reader := testenv.Dial(ctx, t, p, "reader", "pw", "phone")
	var b strings.Builder
	fmt.Fprintf(&b, `<message type="chat" to=%q><body>subscribe %s/</body></message>`, p.ComponentDomain, single.URL)
	if _, err := reader.SendRaw(ctx, b.String()); err != nil {
		t.Fatal(err)
	}
	if m := nextChat(t, reader, 15*time.Second); !strings.Contains(m.Body, `Subscribed to "news"`) {
		t.Fatalf("chat subscribe by homepage answered %q", m.Body)
	}
	// The node's newest item (the feed's entry at its first fetch) follows.
	if m := nextChat(t, reader, 15*time.Second); !strings.Contains(m.Body, "Old one") {
		t.Fatalf("the newest entry after subscribing: %q", m.Body)
	}

	// A weblogUpdates.ping naming the homepage reaches the feed's node.
	feed.Add(feedItem{"new-1", "Pinged by its homepage"})
	body := d.xmlrpc("weblogUpdates.ping", "A weblog", single.URL+"/")
	if !strings.Contains(body, "flerror") {
		t.Fatalf("ping answer: %s", body)
	}
	m := nextChat(t, reader, 20*time.Second)
	if !strings.Contains(m.Body, "Pinged by its homepage") {
		t.Fatalf("notification after a homepage ping: %q", m.Body)
	}
	// A second ping of the homepage moments later reaches the feed too:
	// the page's feed is remembered, though the page is not read again.
	feed.Add(feedItem{"new-2", "Pinged again within minutes"})
	if body := d.xmlrpc("weblogUpdates.ping", "A weblog", single.URL+"/"); !strings.Contains(body, "flerror") {
		t.Fatalf("second ping answer: %s", body)
	}
	if m := nextChat(t, reader, 20*time.Second); !strings.Contains(m.Body, "Pinged again within minutes") {
		t.Fatalf("notification after a second homepage ping: %q", m.Body)
	}

	// pingd discover, human and JSON.
	out, err := exec.Command(pingdBinary(t), "discover", "--allow-private", home.URL+"/").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Feeds, best first") || !strings.Contains(string(out), home.URL+"/other.atom  application/atom+xml  (chosen)") {
		t.Errorf("pingd discover: %v\n%s", err, out)
	}
	out, err = exec.Command(pingdBinary(t), "discover", "--json", "--allow-private", feedURL).Output()
	var found struct {
		Kind string `json:"kind"`
	}
	if err != nil || json.Unmarshal(out, &found) != nil || found.Kind != "feed" {
		t.Errorf("pingd discover --json on a feed: %v\n%s", err, out)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(pingdBinary(t), "discover", home.URL+"/")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "refused") {
		t.Errorf("pingd discover of a loopback page without --allow-private: %v %s", err, stderr.String())
	}
}
