package feed

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/xml"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

// fuzzOrigin is the loopback origin of FuzzFetchPath: every host name
// dials it, so redirects (HTTP and XML) to anywhere stay on loopback, and
// every path serves the case under test.
var fuzzOrigin struct {
	once    sync.Once
	srv     *httptest.Server
	fetcher *Fetcher

	mu   sync.Mutex
	body []byte
	ct   string
	enc  string
	im   bool // answer a request for a delta with 226 IM: feed
}

// fuzzMaxBody is the fetcher's cap in the fuzz target: large enough for
// every limit of limits.go to be reached, small enough for quick runs.
const fuzzMaxBody = 1 << 20

func fuzzFetcher() (*httptest.Server, *Fetcher) {
	o := &fuzzOrigin
	o.once.Do(func() {
		o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			o.mu.Lock()
			body, ct, enc, im := o.body, o.ct, o.enc, o.im
			o.mu.Unlock()
			w.Header().Set("Content-Type", ct)
			w.Header().Set("ETag", `"v2"`)
			if enc != "" {
				w.Header().Set("Content-Encoding", enc)
			}
			if im && hasToken(r.Header.Values("A-IM"), "feed") {
				w.Header().Set("IM", "feed")
				w.WriteHeader(http.StatusIMUsed)
			}
			_, _ = w.Write(body)
		}))
		addr := o.srv.Listener.Addr().String()
		dialer := &net.Dialer{Timeout: 5 * time.Second}
		client := &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, network, addr)
			},
		}}
		o.fetcher = NewFetcher(FetcherConfig{Client: client, MaxBodyBytes: fuzzMaxBody, Timeout: 10 * time.Second,
			Now: func() time.Time { return clock }})
	})
	return o.srv, o.fetcher
}

// fuzzBody is head, unit repeated n times (up to the fuzz cap), then tail:
// the fuzzer mutates a short unit and a count where it could never type
// out a million nested elements.
func fuzzBody(head, unit, tail string, n uint32) []byte {
	if unit != "" {
		n = min(n, uint32(fuzzMaxBody/len(unit)+1))
	} else {
		n = 0
	}
	var b bytes.Buffer
	b.Grow(len(head) + int(n)*len(unit) + len(tail))
	b.WriteString(head)
	for range n {
		b.WriteString(unit)
	}
	b.WriteString(tail)
	return b.Bytes()
}

// encodeBody applies a content coding: 0 none, 1 gzip, 2 deflate (zlib),
// 3 a gzip header on a body that is not gzip.
func encodeBody(body []byte, coding uint8) ([]byte, string) {
	var b bytes.Buffer
	switch coding % 4 {
	case 1:
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		_ = zw.Close()
		return b.Bytes(), "gzip"
	case 2:
		zw := zlib.NewWriter(&b)
		_, _ = zw.Write(body)
		_ = zw.Close()
		return b.Bytes(), "deflate"
	case 3:
		return body, "gzip"
	}
	return body, ""
}

// fetchSeed is one starting point of FuzzFetchPath.
type fetchSeed struct {
	head, unit, tail string
	n                uint32
	previous         string
	ct               string
	coding           uint8
	delta            bool
}

const (
	seedChannel = `<?xml version="1.0"?><rss version="2.0" xmlns:x="urn:x"><channel><title>T</title><link>http://e.org/</link>`
	seedEnd     = `</channel></rss>`
)

// fetchSeeds reach each limit, the byte cap, content codings, charsets,
// an XML redirect and delta merges.
var fetchSeeds = []fetchSeed{
	{seedChannel + `<a xmlns="urn:x">`, "<a>", "", 300_000, "", "application/rss+xml", 0, false}, // open, deep
	{seedChannel + `<x:a>`, "<x:a>", strings.Repeat("</x:a>", 300) + seedEnd, 300, "", "application/rss+xml", 1, false},
	{seedChannel + "<item><guid>1</guid>", "<a/>", "</item>" + seedEnd, 210_000, "", "text/xml", 2, false}, // wide
	{seedChannel + "<item><guid>1</guid><x:a", ` b=""`, "/></item>" + seedEnd, 20_000, "", "text/xml", 0, false},
	{seedChannel + "<item><guid>1</guid><x:a>", "<![CDATA[0123456789]]>", "</x:a></item>" + seedEnd, 20_000, "", "text/xml", 0, false},
	{seedChannel, "<item><guid>g</guid></item>", seedEnd, 12_000, "", "application/rss+xml", 0, false},
	{seedChannel, "<item><title>t</title><link>http://e.org/x</link></item>", seedEnd, 3, rssDoc("a", "b"), "application/rss+xml", 0, true},
	{seedChannel, "<a/>", "<item><guid>d</guid></item>" + seedEnd, 210_000, rssDoc("a"), "application/rss+xml", 1, true}, // a wide delta
	{`<redirect><newLocation>http://elsewhere.example/feed</newLocation></redirect>`, "", "", 0, "", "text/xml", 0, false},
	{`<?xml version="1.0" encoding="ISO-8859-1"?><rss><channel><title>caf` + "\xe9</title>", "<item><guid>\xe9</guid></item>", seedEnd, 2, "", "text/xml", 0, false},
	{atom10, "", "", 0, atom10, "application/atom+xml", 1, true},
	{seedChannel, "x", seedEnd, fuzzMaxBody, "", "application/rss+xml", 3, false}, // over the cap, and not gzip
}

// FuzzFetchPath runs the whole path a fetched body takes: HTTP, content
// decoding, charset conversion, RSS Feed State XML redirects, the merge of
// an RFC 3229 delta with the previous document, the limits and Parse. The
// body is head, unit repeated n times, and tail, so mutations reach deep
// nesting and huge sibling counts. Whatever the body, the fetch ends with
// a result or a *hub.FetchError (never a crash), and a result holds at
// most MaxEntries distinct, non-empty entry ids with well-formed payloads.
func FuzzFetchPath(f *testing.F) {
	for _, s := range fetchSeeds {
		f.Add([]byte(s.head), s.unit, []byte(s.tail), s.n, []byte(s.previous), s.ct, s.coding, s.delta)
	}
	f.Fuzz(func(t *testing.T, head []byte, unit string, tail []byte, n uint32, previous []byte, ct string, coding uint8, delta bool) {
		if len(head)+len(tail)+len(previous) > 1<<16 || len(unit) > 64 {
			return
		}
		srv, fetcher := fuzzFetcher()
		body, enc := encodeBody(fuzzBody(string(head), unit, string(tail), n), coding)
		o := &fuzzOrigin
		o.mu.Lock()
		o.body, o.ct, o.enc, o.im = body, ct, enc, delta
		o.mu.Unlock()

		req := hub.FetchRequest{URL: srv.URL + "/feed"}
		if len(previous) > 0 {
			req.ETag, req.Previous = `"v1"`, previous
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := fetcher.Fetch(ctx, req)
		if err != nil {
			var fe *hub.FetchError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *hub.FetchError", err)
			}
			return
		}
		if len(res.Body) > fuzzMaxBody {
			t.Fatalf("a body of %d bytes passed the cap", len(res.Body))
		}
		if len(res.Entries) > MaxEntries {
			t.Fatalf("%d entries passed the limit", len(res.Entries))
		}
		seen := map[string]bool{}
		for _, e := range res.Entries {
			if e.ID == "" || seen[e.ID] {
				t.Fatalf("empty or repeated entry id %q", e.ID)
			}
			seen[e.ID] = true
			if err := xml.Unmarshal(e.Payload, new(struct{})); err != nil {
				t.Fatalf("payload is not well-formed: %v\n%s", err, e.Payload)
			}
		}
	})
}
