package bench

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// originFarm is the web the polling measurement follows: many origin
// hosts, each its own loopback address (127.77.x.y, so pingd's per-host
// limit sees them apart), serving feeds that answer a matching validator
// with 304 and, on a fixed share of polls, change by one new entry.
//
// The two sides of the measurement (pingd and the plain fetcher, told
// apart by their User-Agent) each see their own copy of every feed, so
// the one does not find a change the other caused: poll k of feed i
// changes it on both sides or on neither (changesAt).
type originFarm struct {
	hosts   []string // base URLs, one per listener
	servers []*http.Server
	feeds   []originFeed
	// changeShare is the share of polls that find the feed changed.
	changeShare float64

	requests   [2]atomic.Int64
	changed    [2]atomic.Int64 // 200 answers to a conditional request
	full       [2]atomic.Int64 // 200 answers (changed or first fetches)
	bodyBytes  [2]atomic.Int64
	unexpected [2]atomic.Int64 // requests for no known feed
}

// originFeed is one feed's state per side. Version v holds entries v-19
// to v, newest first; a feed starts at version maxFeedItems-1.
type originFeed struct {
	version [2]atomic.Int64
	polls   [2]atomic.Int64
	// firstAt is when the side's first request of the feed since the last
	// resetArrivals arrived (Unix ns; 0: none), for lateness.
	firstAt [2]atomic.Int64
}

const (
	sidePingd = 0
	sidePlain = 1
)

// plainUserAgent names the plain fetcher to the origins.
const plainUserAgent = "plain-fetcher/1.0"

// originEntries and originEntryText make a feed document of about 20 KB:
// typical feeds are 20–200 KB, and a blog's RSS of its last 20 posts with
// summaries of a paragraph or two is at the small end of that.
const (
	originEntries   = maxFeedItems
	originEntryText = 850
)

// startOriginFarm listens on hosts loopback addresses and serves feeds
// feeds spread over them round-robin (feed i on host i % hosts).
func startOriginFarm(t testing.TB, hosts, feeds int, changeShare float64) *originFarm {
	t.Helper()
	if hosts > 200*250 {
		t.Fatalf("%d origin hosts: at most %d loopback addresses are used", hosts, 200*250)
	}
	f := &originFarm{feeds: make([]originFeed, feeds), changeShare: changeShare}
	for i := range f.feeds {
		for s := range 2 {
			f.feeds[i].version[s].Store(originEntries - 1)
		}
	}
	for i := range hosts {
		// Never 0.0.0.0 and never outside 127.0.0.0/8.
		addr := fmt.Sprintf("127.77.%d.%d:0", 1+i/250, 1+i%250)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("origin host %d: %v", i, err)
		}
		f.hosts = append(f.hosts, "http://"+ln.Addr().String())
		srv := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 5 * time.Minute}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("origin host: %v", err)
			}
		}()
		f.servers = append(f.servers, srv)
	}
	t.Cleanup(f.Close)
	return f
}

// Close stops every origin host.
func (f *originFarm) Close() {
	for _, srv := range f.servers {
		_ = srv.Close()
	}
}

// FeedURL is the URL of feed i.
func (f *originFarm) FeedURL(i int) string {
	return f.hosts[i%len(f.hosts)] + "/feeds/" + strconv.Itoa(i) + ".xml"
}

// changesAt says whether poll k (counted from 1) of feed i finds it
// changed: a hash of both under the share, the same on both sides.
func (f *originFarm) changesAt(i int, k int64) bool {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d", i, k)
	return float64(h.Sum64()%1_000_000) < f.changeShare*1_000_000
}

// validators of version v of feed i: an ETag and a Last-Modified that
// change with each version.
func originETag(i int, v int64) string { return fmt.Sprintf(`"f%d-v%d"`, i, v) }

func originLastModified(v int64) string {
	return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(v) * time.Minute).Format(http.TimeFormat)
}

func (f *originFarm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	side := sidePingd
	if r.Header.Get("User-Agent") == plainUserAgent {
		side = sidePlain
	}
	f.requests[side].Add(1)
	name, ok := strings.CutPrefix(r.URL.Path, "/feeds/")
	name, ok2 := strings.CutSuffix(name, ".xml")
	i, err := strconv.Atoi(name)
	if !ok || !ok2 || err != nil || i < 0 || i >= len(f.feeds) {
		f.unexpected[side].Add(1)
		http.NotFound(w, r)
		return
	}
	feed := &f.feeds[i]
	feed.firstAt[side].CompareAndSwap(0, time.Now().UnixNano())
	k := feed.polls[side].Add(1)
	v := feed.version[side].Load()
	etag, lastMod := originETag(i, v), originLastModified(v)
	conditional := r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != ""
	matches := r.Header.Get("If-None-Match") == etag ||
		(r.Header.Get("If-None-Match") == "" && r.Header.Get("If-Modified-Since") == lastMod)
	if matches && f.changesAt(i, k) {
		v = feed.version[side].Add(1)
		etag, lastMod, matches = originETag(i, v), originLastModified(v), false
	}
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Last-Modified", lastMod)
	if matches {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if conditional {
		f.changed[side].Add(1)
	}
	f.full[side].Add(1)
	body := originDocument(i, v)
	f.bodyBytes[side].Add(int64(len(body)))
	h.Set("Content-Type", "application/rss+xml; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// resetArrivals forgets the first-request times of every feed.
func (f *originFarm) resetArrivals(side int) {
	for i := range f.feeds {
		f.feeds[i].firstAt[side].Store(0)
	}
}

// originWords are what the deterministic entry texts are made of.
var originWords = strings.Fields(`the a feed poll change notification server client subscriber entry
	update publish site page weblog news article story note release version project report review
	morning evening week month today yesterday about with from into over under after before while
	network protocol message service people city river market music garden kitchen travel science`)

// originDocument renders version v of feed i: RSS 2.0 with the entries
// v-19 to v, newest first, each with a title, link, guid, date and a
// summary of originEntryText bytes, all derived from (i, entry number).
func originDocument(i int, v int64) []byte {
	var b strings.Builder
	b.Grow(originEntries * (originEntryText + 400))
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel><title>Origin feed %d</title><link>http://origin.bench.example/%d/</link><description>A weblog that changes now and then.</description><language>en</language>
`, i, i)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for e := v; e > v-originEntries && e >= 0; e-- {
		seed := uint64(i)*1_000_003 + uint64(e)*7_919 + 1
		next := func() uint64 {
			seed ^= seed << 13
			seed ^= seed >> 7
			seed ^= seed << 17
			return seed
		}
		title := make([]string, 6)
		for w := range title {
			title[w] = originWords[next()%uint64(len(originWords))]
		}
		fmt.Fprintf(&b, "<item><title>Post %d: %s</title><link>http://origin.bench.example/%d/posts/%d.html</link>"+
			"<guid isPermaLink=\"true\">http://origin.bench.example/%d/posts/%d.html</guid><pubDate>%s</pubDate><description>",
			e, strings.Join(title, " "), i, e, i, e, base.Add(time.Duration(e)*time.Minute).Format(time.RFC1123Z))
		start := b.Len()
		for b.Len()-start < originEntryText {
			b.WriteString(originWords[next()%uint64(len(originWords))])
			b.WriteByte(' ')
		}
		b.WriteString("</description></item>\n")
	}
	b.WriteString("</channel></rss>\n")
	return []byte(b.String())
}
