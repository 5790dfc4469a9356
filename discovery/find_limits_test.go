package discovery

import (
	"bytes"
	"runtime"
	"testing"
)

// TestHostileXMLCostsLittle: a start tag of megabytes of valueless
// attributes made encoding/xml spend about 25 bytes of memory per byte
// before the parsers here could look at it (780 MB for 10 MiB). Feeds
// (FromFeed gets bodies up to the fetcher's 10 MiB) and XRDS documents
// (up to DefaultMaxBodyBytes) are now read under a start tag limit.
func TestHostileXMLCostsLittle(t *testing.T) {
	fill := func(head, attr string, size int) []byte {
		var b bytes.Buffer
		b.WriteString(head)
		for b.Len() < size {
			b.WriteString(attr)
		}
		b.WriteString("/>")
		return b.Bytes()
	}
	allocated := func(f func()) uint64 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	feed := fill(`<rss version="2.0"><channel><cloud`, " b", 10<<20)
	if n := allocated(func() {
		if f := FromFeed("http://example.org/feed", feed); f == nil || len(f.Clouds) != 0 {
			t.Errorf("FromFeed: %+v", f)
		}
	}); n > 32<<20 {
		t.Errorf("FromFeed of 10 MiB allocated %d MiB", n>>20)
	}
	// XRDS documents are read strictly: attributes need values.
	xrds := fill(`<xrds:XRDS xmlns:xrds="xri://$xrds"><XRD`, ` b=""`, DefaultMaxBodyBytes)
	if n := allocated(func() {
		if svcs, err := parseXRDS("http://example.org/xrds", xrds); err == nil {
			t.Errorf("parseXRDS: %v, no error", svcs)
		}
	}); n > 32<<20 {
		t.Errorf("parseXRDS of %d MiB allocated %d MiB", DefaultMaxBodyBytes>>20, n>>20)
	}
}
