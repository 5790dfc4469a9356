package feed

import (
	"compress/gzip"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pingd/pingd/hub"
)

// pollOrigin is a well-behaved feed origin for the bandwidth benchmark: a
// 20-entry RSS feed with an ETag per version, 304 for the current ETag,
// RFC 3229 feed deltas against any earlier version, and gzip when asked
// (unless compression is off).
type pollOrigin struct {
	mu          sync.Mutex
	versions    [][]int // entry numbers, newest first, per version
	compression bool
}

const feedWindow = 20

func newPollOrigin(compression bool) *pollOrigin {
	var first []int
	for i := feedWindow; i >= 1; i-- {
		first = append(first, i)
	}
	return &pollOrigin{versions: [][]int{first}, compression: compression}
}

func (o *pollOrigin) publish() {
	o.mu.Lock()
	defer o.mu.Unlock()
	cur := o.versions[len(o.versions)-1]
	next := append([]int{cur[0] + 1}, cur...)
	o.versions = append(o.versions, next[:feedWindow])
}

var benchWords = strings.Fields(`the a feed reader polls origin server bandwidth entry post weblog
	update change notify subscriber publisher cache header compress delta version item title link
	today week people write read code network client hub ping cloud morning evening coffee river`)

// benchItem is entry n with about 700 bytes of prose that compresses like
// text, not like a repeated line.
func benchItem(n int) string {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	var desc strings.Builder
	for desc.Len() < 700 {
		desc.WriteString(benchWords[rng.IntN(len(benchWords))])
		desc.WriteByte(' ')
	}
	return fmt.Sprintf(`<item><title>Entry number %d</title><link>https://blog.example/posts/%d</link><guid>https://blog.example/posts/%d</guid><pubDate>Mon, 04 Mar 2024 10:00:00 GMT</pubDate><description>%s</description></item>`,
		n, n, n, desc.String())
}

func benchDoc(entries []int) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>A blog</title><link>https://blog.example/</link><description>Posts</description>`)
	for _, n := range entries {
		b.WriteString(benchItem(n))
	}
	b.WriteString(`</channel></rss>`)
	return b.String()
}

func (o *pollOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	n := len(o.versions) - 1
	cur := o.versions[n]
	var base []int
	var baseOK bool
	var v int
	if _, err := fmt.Sscanf(r.Header.Get("If-None-Match"), `"v%d"`, &v); err == nil && v >= 0 && v <= n {
		base, baseOK = o.versions[v], true
	}
	o.mu.Unlock()
	etag := fmt.Sprintf(`"v%d"`, n)
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Type", "application/rss+xml; charset=utf-8")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := benchDoc(cur)
	status := http.StatusOK
	if baseOK && hasToken(r.Header.Values("A-IM"), "feed") {
		var fresh []int
		for _, e := range cur {
			if !slices.Contains(base, e) {
				fresh = append(fresh, e)
			}
		}
		body, status = benchDoc(fresh), http.StatusIMUsed
		w.Header().Set("IM", "feed")
		w.Header().Set("Cache-Control", "no-store, im")
	}
	if o.compression && hasToken(r.Header.Values("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(status)
		zw := gzip.NewWriter(w)
		zw.Write([]byte(body))
		zw.Close()
		return
	}
	w.WriteHeader(status)
	w.Write([]byte(body))
}

// countingConn counts the bytes read from and written to a connection.
type countingConn struct {
	net.Conn
	read, written *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (c countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// BenchmarkPollBytes measures what 100 polls of one feed cost on the wire
// (server to client, and client to server), for an unchanged feed and for
// a slowly changing one (a new entry every 10 polls), with a plain GET,
// with gzip, with conditional GET and with RFC 3229 A-IM: feed. Run:
//
//	go test -run '^$' -bench PollBytes -benchtime 3x ./feed/
func BenchmarkPollBytes(b *testing.B) {
	type mode struct {
		name        string
		compression bool
		conditional bool
		delta       bool
	}
	modes := []mode{
		{"full GET", false, false, false},
		{"full GET gzip", true, false, false},
		{"conditional GET gzip", true, true, false},
		{"A-IM feed gzip", true, true, true},
	}
	for _, changeEvery := range []int{0, 10} {
		scenario := "unchanged"
		if changeEvery > 0 {
			scenario = fmt.Sprintf("new entry every %d polls", changeEvery)
		}
		for _, m := range modes {
			b.Run(scenario+"/"+m.name, func(b *testing.B) {
				var down, up int64
				for range b.N {
					d, u := pollCost(b, m.compression, m.conditional, m.delta, changeEvery)
					down += d
					up += u
				}
				b.ReportMetric(float64(down)/float64(b.N), "bytes-down/100polls")
				b.ReportMetric(float64(up)/float64(b.N), "bytes-up/100polls")
			})
		}
	}
}

func pollCost(b *testing.B, compression, conditional, delta bool, changeEvery int) (down, up int64) {
	b.Helper()
	origin := newPollOrigin(compression)
	srv := httptest.NewServer(origin)
	defer srv.Close()
	// Counted on the client's side: a fetch returns only after it read its
	// whole answer, so the counts are exact per poll.
	var read, written atomic.Int64
	tr := http.DefaultTransport.(*http.Transport).Clone()
	dialer := &net.Dialer{}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, read: &read, written: &written}, nil
	}
	defer tr.CloseIdleConnections()
	f := testFetcher(FetcherConfig{Client: &http.Client{Transport: tr}})
	ctx := context.Background()
	var state hub.FetchRequest
	state.URL = srv.URL
	// The first fetch is the baseline every mode needs; it is not counted.
	res, err := f.Fetch(ctx, state)
	if err != nil {
		b.Fatal(err)
	}
	read.Store(0)
	written.Store(0)
	for i := 1; i <= 100; i++ {
		if changeEvery > 0 && i%changeEvery == 0 {
			origin.publish()
		}
		if conditional && !res.NotModified {
			state.ETag, state.LastModified = res.ETag, res.LastModified
			if delta {
				state.Previous = res.Body
			}
		}
		res, err = f.Fetch(ctx, state)
		if err != nil {
			b.Fatal(err)
		}
		if !res.NotModified && len(res.Entries) < feedWindow {
			b.Fatalf("poll %d: %d entries", i, len(res.Entries))
		}
	}
	return read.Load(), written.Load()
}
