package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// bigFeed serves an RSS feed whose items may carry a large description.
type bigFeed struct {
	*httptest.Server
	mu    sync.Mutex
	items []bigFeedItem
}

type bigFeedItem struct {
	guid, title string
	bodyBytes   int
}

func newBigFeed(t *testing.T, items ...bigFeedItem) *bigFeed {
	f := &bigFeed{items: items}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		w.Header().Set("Content-Type", "application/rss+xml")
		fmt.Fprint(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>Big</title><link>http://127.0.0.1/site</link><description>d</description>`)
		for i := len(f.items) - 1; i >= 0; i-- {
			it := f.items[i]
			fmt.Fprintf(w, `<item><title>%s</title><link>http://127.0.0.1/%s</link><guid isPermaLink="false">%s</guid>`, it.title, it.guid, it.guid)
			if it.bodyBytes > 0 {
				unit := "&lt;p&gt;All work and no play makes Jack a dull boy.&lt;/p&gt;\n"
				fmt.Fprintf(w, `<description>%s</description>`, strings.Repeat(unit, it.bodyBytes/len(unit)+1))
			}
			fmt.Fprint(w, `</item>`)
		}
		fmt.Fprint(w, `</channel></rss>`)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *bigFeed) add(items ...bigFeedItem) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items = append(f.items, items...)
}

// A feed entry of several MiB reaches an XMPP subscriber without its
// content, the component stays connected (Prosody ends a component
// stream that brings a stanza over 512 KiB), and later entries flow.
func TestHugeFeedEntryKeepsTheComponentUp(t *testing.T) {
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")
	feed := newBigFeed(t, bigFeedItem{guid: "old", title: "Old"})
	d := newDaemon(t, p)
	d.Start(true)
	if code := d.api("POST", "/api/nodes", map[string]string{"node": "big", "source": feed.URL + "/feed.xml", "title": "Big"}, nil); code != 201 {
		t.Fatalf("create node: HTTP %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reader := testenv.Dial(ctx, t, p, "reader", "pw", "e2e")
	if resp := subscribe(t, ctx, reader, p.ComponentDomain, "big"); !strings.Contains(resp, `subscription="subscribed"`) {
		t.Fatalf("subscribe answer: %s", resp)
	}
	collectItems(t, reader, 1, 5*time.Second, 200*time.Millisecond) // the newest item, sent on subscribing

	// One entry of several MiB, one just over Prosody's limit.
	feed.add(bigFeedItem{guid: "huge", title: "Huge", bodyBytes: 4 << 20}, bigFeedItem{guid: "large", title: "Large", bodyBytes: 600 << 10})
	d.xmlrpc("rssCloud.ping", feed.URL+"/feed.xml")
	for _, id := range []string{"huge", "large"} {
		var raw []byte
		select {
		case raw = <-reader.Stanzas:
		case <-time.After(90 * time.Second): // parsing MiB under the race detector is slow
			t.Fatalf("no notification of the entry %q; pingd logs:\n%s", id, tail(d.logs.String(), 4000))
		}
		title := strings.ToUpper(id[:1]) + id[1:]
		if !strings.Contains(string(raw), `id="`+id+`"`) || !strings.Contains(string(raw), ">"+title+"</title>") {
			t.Fatalf("want the notification of %q with its title, got %.500s", id, raw)
		}
		if len(raw) > 72<<10 {
			t.Errorf("the notification of %q is %d bytes: it carries the content", id, len(raw))
		}
		if !strings.Contains(string(raw), `src="http://127.0.0.1/`+id+`"`) {
			t.Errorf("the content of %q does not point at its page: %.2000s", id, raw)
		}
	}

	feed.add(bigFeedItem{guid: "after", title: "After"})
	d.xmlrpc("rssCloud.ping", feed.URL+"/feed.xml")
	got := collectItems(t, reader, 1, 90*time.Second, 500*time.Millisecond)
	if want := []receivedItem{{"big", "after", "After"}}; !slices.Equal(got, want) {
		t.Fatalf("after the huge entry the subscriber got %v, want %v", got, want)
	}
	if n := strings.Count(d.logs.String(), "connected to XMPP server"); n != 1 {
		t.Errorf("the component connected %d times, want once; Prosody's log:\n%s", n, tail(p.Log(), 3000))
	}
}
