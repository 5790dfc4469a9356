package feed

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mmcdole/gofeed"

	"github.com/pingd/pingd/hub"
)

const channelHead = `<?xml version="1.0"?><rss version="2.0" xmlns:x="urn:x"><channel><title>T</title><link>http://e.org/</link><description/>`

// fill repeats unit after head until the document has size bytes, then
// adds tail.
func fill(head, unit, tail string, size int) []byte {
	var b bytes.Buffer
	b.Grow(size + len(tail))
	b.WriteString(head)
	for b.Len()+len(unit)+len(tail) <= size {
		b.WriteString(unit)
	}
	b.WriteString(tail)
	return b.Bytes()
}

// repeat is head, n times unit, then tail.
func repeat(head, unit string, n int, tail string) []byte {
	return []byte(head + strings.Repeat(unit, n) + tail)
}

func withNamespaces(n int) []byte {
	var b strings.Builder
	b.WriteString(`<rss version="2.0"><channel`)
	for i := range n {
		fmt.Fprintf(&b, ` xmlns:p%d="urn:p%d"`, i, i)
	}
	b.WriteString(`><title>T</title><item><guid>1</guid></item></channel></rss>`)
	return []byte(b.String())
}

func items(n int) []byte {
	var b strings.Builder
	b.WriteString(channelHead)
	for i := range n {
		fmt.Fprintf(&b, "<item><guid>%d</guid></item>", i)
	}
	b.WriteString("</channel></rss>")
	return []byte(b.String())
}

// allocated returns the bytes f allocated: a bound on the memory it held
// at any time.
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// peakHeap returns the most heap memory (live objects and garbage not yet
// swept) seen above what was in use before f, sampled while f runs. A
// sample can miss a short peak, never invent one.
func peakHeap(f func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	<-stopped
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// hostileDocuments are feeds within the 10 MiB body cap that crashed
// pingd (the first: gofeed's recursive extension parser overflowed the
// stack) or made one parse take gigabytes or minutes.
var hostileDocuments = []struct {
	name, refusal string
	body          func() []byte
}{
	{"10 MiB of open extension elements", "nesting depth", func() []byte {
		return fill(channelHead+`<a xmlns="urn:x">`, "<a>", "", DefaultMaxBodyBytes)
	}},
	{"a million nested extension elements, closed", "nesting depth", func() []byte {
		return repeat(channelHead+`<a xmlns="urn:x">`+strings.Repeat("<a>", 1_000_000), "</a>", 1_000_000, "</a></channel></rss>")
	}},
	{"a million sibling extension elements in an item", "elements and attributes", func() []byte {
		return repeat(channelHead+"<item><guid>1</guid>", "<x:a/>", 1_000_000, "</item></channel></rss>")
	}},
	{"an extension element of 10 MiB of valueless attributes", "start tag bytes", func() []byte {
		return fill(channelHead+"<item><guid>1</guid><x:a", " b", "/></item></channel></rss>", DefaultMaxBodyBytes)
	}},
	{"2,000 namespaces in scope of 100,000 elements", "namespace declarations in scope", func() []byte {
		return repeat(string(withNamespaces(2000)[:len(withNamespaces(2000))-len("</channel></rss>")]), "<a/>", 100_000, "</channel></rss>")
	}},
	{"extension text in 100,000 pieces", "text concatenation bytes", func() []byte {
		return repeat(channelHead+"<item><guid>1</guid><x:a>", "<![CDATA[0123456789]]>", 100_000, "</x:a></item></channel></rss>")
	}},
	{"50,000 entries", fmt.Sprintf("more than %d entries", MaxEntries), func() []byte { return items(50_000) }},
}

// TestHostileDocumentsAreRefused: each is refused by the streaming check
// before a parser builds anything, with an error naming the limit, and
// refusing it costs a bounded amount of memory.
func TestHostileDocumentsAreRefused(t *testing.T) {
	for _, tt := range hostileDocuments {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body()
			var (
				d   *Document
				err error
			)
			n := allocated(func() { d, err = Parse(body, "http://e.org/feed", fetchTime) })
			if !errors.Is(err, ErrDocumentRefused) || !strings.Contains(err.Error(), tt.refusal) {
				t.Fatalf("Parse of %d bytes: %v, %v; want ErrDocumentRefused for %q", len(body), d, err, tt.refusal)
			}
			t.Logf("%d KiB: %v (%d MiB allocated)", len(body)>>10, err, n>>20)
			if n > 64<<20 {
				t.Errorf("refusing it allocated %d MiB", n>>20)
			}
		})
	}
}

// TestDocumentsAtTheLimitsParse: documents exactly at each limit are
// parsed, and the worst of them keeps the parse within a bounded multiple
// of the body cap.
func TestDocumentsAtTheLimitsParse(t *testing.T) {
	ext := func(n int) []byte { // an item with n - 5 sibling extension elements: n nodes
		return repeat(`<rss xmlns:x="urn:x"><channel><item><guid>1</guid>`, "<x:a/>", n-5, "</item></channel></rss>")
	}
	pieces := func(k int) []byte { // k pieces of 1 KiB: 1 KiB·k(k+1)/2 of copying
		return repeat(channelHead+"<item><guid>1</guid><x:a>", "<![CDATA["+strings.Repeat("y", 1024)+"]]>", k, "</x:a></item></channel></rss>")
	}
	maxPieces := 1 // the most 1 KiB pieces within MaxTextWork
	for (maxPieces+1)*(maxPieces+2)/2*1024 <= MaxTextWork {
		maxPieces++
	}
	for _, tt := range []struct {
		name    string
		body    []byte
		entries int
	}{
		{"nesting", repeat(channelHead+"<item><guid>1</guid>"+strings.Repeat("<x:a>", MaxDepth-3), "</x:a>", MaxDepth-3, "</item></channel></rss>"), 1},
		{"elements and attributes", ext(MaxNodes), 1},
		{"namespaces", withNamespaces(MaxNamespacesInScope), 1},
		{"text pieces", pieces(maxPieces), 1},
		{"entries", items(MaxEntries), MaxEntries},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var (
				d   *Document
				err error
			)
			peak := peakHeap(func() { d, err = Parse(tt.body, "http://e.org/feed", fetchTime) })
			if err != nil || !d.IsFeed || len(d.Entries) != tt.entries {
				t.Fatalf("Parse: %v; want a feed of %d entries", err, tt.entries)
			}
			t.Logf("%d KiB parsed, heap peak %d MiB", len(tt.body)>>10, peak>>20)
			if peak > 16*DefaultMaxBodyBytes {
				t.Errorf("parsing it took %d MiB of heap", peak>>20)
			}
		})
	}
	for _, over := range [][]byte{
		ext(MaxNodes + 1), withNamespaces(MaxNamespacesInScope + 1), pieces(maxPieces + 1), items(MaxEntries + 1),
		repeat(channelHead+"<item><guid>1</guid>"+strings.Repeat("<x:a>", MaxDepth-2), "</x:a>", MaxDepth-2, "</item></channel></rss>"),
	} {
		if _, err := Parse(over, "http://e.org/feed", fetchTime); !errors.Is(err, ErrDocumentRefused) {
			t.Errorf("one past a limit: %v", err)
		}
	}
}

// TestNonFeedsAreNotHeldToFeedLimits: a document that is not a feed is
// hashed, not parsed, so the feed limits do not concern it (past its root
// tag).
func TestNonFeedsAreNotHeldToFeedLimits(t *testing.T) {
	for _, body := range [][]byte{
		repeat(`<?xml version="1.0"?><urlset>`, "<url><loc>http://e.org/</loc></url>", MaxNodes, "</urlset>"),
		fill("<html><body>", "<div>", "", 1<<20),
	} {
		d, err := Parse(body, "http://e.org/page", fetchTime)
		if err != nil || d.IsFeed || len(d.Entries) != 1 {
			t.Errorf("a non-feed of %d bytes: %v, %v", len(body), d, err)
		}
	}
	// Its root tag still is: the decoder collects a tag's attributes
	// before anyone can look at them.
	body := fill("<html", " b", ">", DefaultMaxBodyBytes)
	if _, err := Parse(body, "http://e.org/page", fetchTime); !errors.Is(err, ErrDocumentRefused) {
		t.Errorf("a root tag of 10 MiB: %v", err)
	}
}

// TestFetchRefusesHostileDocuments: a refused document fails the fetch
// with the origin's status and the reason, as plain, gzipped, and as an
// RFC 3229 delta (which is then asked for in full, and refused again).
func TestFetchRefusesHostileDocuments(t *testing.T) {
	deep := fill(channelHead, "<a>", "", DefaultMaxBodyBytes)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(deep)
	_ = zw.Close()

	fs := newFeedServer(t)
	fs.serve("/plain", "application/rss+xml", string(deep))
	fs.handle("/gzip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(gz.Bytes())
	})
	fs.handle("/delta", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v2"`)
		w.Header().Set("Content-Type", "application/rss+xml")
		if hasToken(r.Header.Values("A-IM"), "feed") {
			w.Header().Set("IM", "feed")
			w.WriteHeader(http.StatusIMUsed)
		}
		_, _ = w.Write(deep)
	})
	f := testFetcher(FetcherConfig{})
	for _, path := range []string{"/plain", "/gzip", "/delta"} {
		req := hub.FetchRequest{URL: fs.URL + path}
		if path == "/delta" {
			req.ETag, req.Previous = `"v1"`, []byte(rssDoc("a"))
		}
		res, err := fetch(t, f, req)
		var fe *hub.FetchError
		if !errors.As(err, &fe) || fe.Status != http.StatusOK || !errors.Is(err, ErrDocumentRefused) ||
			!strings.Contains(err.Error(), "nesting depth over the limit of 256") {
			t.Errorf("%s: %v, %v; want a FetchError with status 200 refusing the document", path, res, err)
		}
	}
	if got := len(fs.all()); got != 4 {
		t.Errorf("%d requests, want 4 (the delta asked for again in full)", got)
	}
}

// TestMergeDeltaRefusesHostileDocuments: etree does not read a previous
// document or a delta past the limits.
func TestMergeDeltaRefusesHostileDocuments(t *testing.T) {
	ok := []byte(rssDoc("a"))
	wide := repeat(channelHead, "<x:a/>", MaxNodes, "</channel></rss>")
	for _, pair := range [][2][]byte{{ok, wide}, {wide, ok}} {
		if _, err := mergeDelta(pair[0], pair[1]); !errors.Is(err, ErrBadDelta) || !strings.Contains(err.Error(), "elements and attributes") {
			t.Errorf("mergeDelta: %v", err)
		}
	}
}

// TestFeedRootIsGofeedsDetection: the check tells feeds from other
// documents as gofeed.DetectFeedType does.
func TestFeedRootIsGofeedsDetection(t *testing.T) {
	for _, body := range []string{
		rss2WithGUIDs, atom10, rss10, "\xef\xbb\xbf  \n<rss/>", "\ufeff\t<RSS/>", "<!-- c --><?pi x?><Feed/>",
		"<rdf:RDF xmlns:rdf='u'/>", "text<rss/>", "<html/>", "<rssx/>", "{}", " ",
	} {
		want := gofeed.DetectFeedType(strings.NewReader(body))
		got, err := checkFeed([]byte(body))
		if err != nil || got != (want == gofeed.FeedTypeRSS || want == gofeed.FeedTypeAtom) {
			t.Errorf("%q: checkFeed %v, %v; gofeed detects %v", body, got, err, want)
		}
	}
}
