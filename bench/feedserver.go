package bench

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// feedServer serves RSS feeds on loopback that a measurement changes at
// will, with ETag validators so pingd's fetches are conditional.
type feedServer struct {
	URL   string
	mu    sync.Mutex
	feeds map[string]*benchFeed
	hits  map[string]int
}

type benchFeed struct {
	items   []feedItem // newest first
	version int
}

type feedItem struct {
	guid  string
	title string
	at    time.Time
}

// maxFeedItems is how many entries a feed document keeps.
const maxFeedItems = 20

func startFeedServer(t testing.TB) *feedServer {
	t.Helper()
	fs := &feedServer{feeds: map[string]*benchFeed{}, hits: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs.URL = "http://" + ln.Addr().String()
	srv := &http.Server{Handler: fs, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("feed server: %v", err)
		}
	}()
	t.Cleanup(func() { _ = srv.Close() })
	return fs
}

// FeedURL returns the URL of the named feed, creating it with one entry.
func (fs *feedServer) FeedURL(name string) string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.feeds[name] == nil {
		fs.feeds[name] = &benchFeed{items: []feedItem{{guid: "urn:bench:" + name + "-first", title: "First", at: time.Now().Add(-time.Hour)}}}
	}
	return fs.URL + "/feed/" + name
}

// Add puts a new entry at the top of the named feed.
func (fs *feedServer) Add(name, guid string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := fs.feeds[name]
	f.items = append([]feedItem{{guid: guid, title: "Entry " + guid, at: time.Now()}}, f.items...)
	if len(f.items) > maxFeedItems {
		f.items = f.items[:maxFeedItems]
	}
	f.version++
}

// Hits returns how often the named feed was requested.
func (fs *feedServer) Hits(name string) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.hits[name]
}

func (fs *feedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/feed/")
	fs.mu.Lock()
	f := fs.feeds[name]
	if !ok || f == nil {
		fs.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	fs.hits[name]++
	etag := `"` + strconv.Itoa(f.version) + `"`
	if r.Header.Get("If-None-Match") == etag {
		fs.mu.Unlock()
		w.WriteHeader(http.StatusNotModified)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>Feed %s</title><link>http://bench.example/%s</link><description>A benchmark feed</description>`, name, name)
	for _, it := range f.items {
		fmt.Fprintf(&b, `<item><title>%s</title><link>http://bench.example/%s/%s</link><guid isPermaLink="false">%s</guid><pubDate>%s</pubDate><description>%s</description></item>`,
			xmlEscape(it.title), name, xmlEscape(it.guid), xmlEscape(it.guid), it.at.UTC().Format(http.TimeFormat), itemSummary)
	}
	b.WriteString(`</channel></rss>`)
	fs.mu.Unlock()
	w.Header().Set("Content-Type", "application/rss+xml")
	w.Header().Set("ETag", etag)
	_, _ = w.Write([]byte(b.String()))
}
