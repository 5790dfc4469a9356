package httpapi

import (
	"compress/gzip"
	"encoding/xml"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

type weblogUpdates struct {
	XMLName xml.Name `xml:"weblogUpdates"`
	Version string   `xml:"version,attr"`
	Updated string   `xml:"updated,attr"`
	Count   string   `xml:"count,attr"`
	Weblogs []struct {
		Name string `xml:"name,attr"`
		URL  string `xml:"url,attr"`
		When string `xml:"when,attr"`
	} `xml:"weblog"`
}

func (e *env) getChanges(path string, header ...string) (*http.Response, *weblogUpdates) {
	e.t.Helper()
	resp := e.do(http.MethodGet, path, "", nil, header...)
	if resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	var r io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			e.t.Fatal(err)
		}
		r = zr
	}
	var doc weblogUpdates
	if err := xml.NewDecoder(r).Decode(&doc); err != nil {
		e.t.Fatal(err)
	}
	return resp, &doc
}

func TestChanges(t *testing.T) {
	e := newEnv(t)
	ping := func(name, u string) {
		t.Helper()
		_, v, err := e.rpc("weblogUpdates.ping", name, u)
		if err != nil {
			t.Fatal(err)
		}
		wantFlerror(t, v, false)
	}
	ping("Old", "http://old.example/")
	e.clock.Advance(61 * time.Minute)
	ping(`Tom & "Jerry" <3>`, "http://a.example/?x=1&y=2")
	e.clock.Advance(7 * time.Minute)
	ping("Recent", "http://b.example/")
	e.clock.Advance(90 * time.Second)

	resp, doc := e.getChanges("/changes.xml")
	wantStatus(t, resp, http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/xml") {
		t.Errorf("Content-Type = %q", ct)
	}
	if doc.Version != "2" || doc.Count != "3" {
		t.Errorf("version %q count %q, want 2 and 3 (every ping ever)", doc.Version, doc.Count)
	}
	updated, err := time.Parse(http.TimeFormat, doc.Updated)
	if err != nil || !updated.Equal(e.clock.Now()) || !strings.HasSuffix(doc.Updated, " GMT") {
		t.Errorf("updated = %q (%v), want %v in RFC 1123 GMT", doc.Updated, err, e.clock.Now())
	}
	if len(doc.Weblogs) != 2 {
		t.Fatalf("weblogs = %+v, want the 2 pings of the last hour", doc.Weblogs)
	}
	if w := doc.Weblogs[0]; w.Name != "Recent" || w.URL != "http://b.example/" || w.When != "1" {
		t.Errorf("newest = %+v", w)
	}
	if w := doc.Weblogs[1]; w.Name != `Tom & "Jerry" <3>` || w.URL != "http://a.example/?x=1&y=2" || w.When != "8" {
		t.Errorf("older = %+v", w)
	}

	_, short := e.getChanges("/shortChanges.xml")
	if len(short.Weblogs) != 1 || short.Weblogs[0].Name != "Recent" || short.Count != "3" {
		t.Errorf("shortChanges = %+v", short)
	}

	resp = e.do(http.MethodPost, "/changes.xml", "", nil)
	wantStatus(t, resp, http.StatusMethodNotAllowed)
}

func TestChangesETagAndGzip(t *testing.T) {
	e := newEnv(t)
	if _, v, err := e.rpc("rssCloud.ping", "http://a.example/feed"); err != nil || v != true {
		t.Fatal(v, err)
	}
	resp, plain := e.getChanges("/changes.xml", "Accept-Encoding", "identity")
	wantStatus(t, resp, http.StatusOK)
	etag := resp.Header.Get("ETag")
	if etag == "" || resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("ETag %q, Content-Encoding %q", etag, resp.Header.Get("Content-Encoding"))
	}
	if !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
		t.Errorf("Vary = %q", resp.Header.Get("Vary"))
	}

	// Unchanged: 304, also a second later (the "updated" time is not in the tag).
	e.clock.Advance(time.Second)
	resp = e.do(http.MethodGet, "/changes.xml", "", nil, "If-None-Match", etag, "Accept-Encoding", "identity")
	wantStatus(t, resp, http.StatusNotModified)
	if b := readBody(t, resp); len(b) != 0 || resp.Header.Get("ETag") != etag {
		t.Errorf("304 body %q, ETag %q", b, resp.Header.Get("ETag"))
	}
	resp = e.do(http.MethodGet, "/changes.xml", "", nil, "If-None-Match", `"other", `+etag, "Accept-Encoding", "identity")
	wantStatus(t, resp, http.StatusNotModified)
	resp = e.do(http.MethodGet, "/changes.xml", "", nil, "If-None-Match", "*", "Accept-Encoding", "identity")
	wantStatus(t, resp, http.StatusNotModified)

	// gzip: its own tag, same document.
	resp, zipped := e.getChanges("/changes.xml", "Accept-Encoding", "br;q=1, gzip;q=0.5")
	wantStatus(t, resp, http.StatusOK)
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding = %q", resp.Header.Get("Content-Encoding"))
	}
	gzTag := resp.Header.Get("ETag")
	if gzTag == etag || gzTag == "" {
		t.Errorf("gzip ETag %q, identity ETag %q", gzTag, etag)
	}
	if len(zipped.Weblogs) != 1 || zipped.Weblogs[0].URL != plain.Weblogs[0].URL {
		t.Errorf("gzip document = %+v", zipped)
	}
	resp = e.do(http.MethodGet, "/changes.xml", "", nil, "If-None-Match", gzTag, "Accept-Encoding", "gzip")
	wantStatus(t, resp, http.StatusNotModified)
	resp, _ = e.getChanges("/changes.xml", "Accept-Encoding", "gzip;q=0")
	if resp.Header.Get("Content-Encoding") != "" {
		t.Error("gzip sent although refused with q=0")
	}

	// A new ping changes the tag once the list is read again: until then
	// the reading serves.
	if _, v, err := e.rpc("rssCloud.ping", "http://b.example/feed"); err != nil || v != true {
		t.Fatal(v, err)
	}
	resp = e.do(http.MethodGet, "/changes.xml", "", nil, "If-None-Match", etag, "Accept-Encoding", "identity")
	wantStatus(t, resp, http.StatusNotModified)
	e.clock.Advance(listInterval)
	resp = e.do(http.MethodGet, "/changes.xml", "", nil, "If-None-Match", etag, "Accept-Encoding", "identity")
	wantStatus(t, resp, http.StatusOK)
	newTag := resp.Header.Get("ETag")
	if newTag == etag {
		t.Error("the ETag did not change after a ping")
	}
	// So does a minute passing ("when" changes).
	e.clock.Advance(time.Minute)
	resp = e.do(http.MethodGet, "/changes.xml", "", nil, "If-None-Match", newTag, "Accept-Encoding", "identity")
	wantStatus(t, resp, http.StatusOK)

	// HEAD: headers only.
	resp = e.do(http.MethodHead, "/changes.xml", "", nil, "Accept-Encoding", "identity")
	wantStatus(t, resp, http.StatusOK)
	if n, _ := strconv.Atoi(resp.Header.Get("Content-Length")); n == 0 {
		t.Errorf("HEAD Content-Length = %q", resp.Header.Get("Content-Length"))
	}
}

func TestChangesEmpty(t *testing.T) {
	e := newEnv(t)
	resp, doc := e.getChanges("/shortChanges.xml")
	wantStatus(t, resp, http.StatusOK)
	if doc.Count != "0" || len(doc.Weblogs) != 0 {
		t.Errorf("empty changes = %+v", doc)
	}
}

func TestChangesStoreDown(t *testing.T) {
	e := newEnv(t)
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, e.do(http.MethodGet, "/changes.xml", "", nil), http.StatusServiceUnavailable)
}

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"":                       false,
		"gzip":                   true,
		"GZIP":                   true,
		"deflate, gzip":          true,
		"gzip;q=0":               false,
		"gzip; q=0.001":          true,
		"x-gzip":                 true,
		"*":                      true,
		"*;q=0":                  false,
		"*, gzip;q=0":            false,
		"gzip;q=0, *":            false,
		"identity":               false,
		"br, deflate":            false,
		"gzip;q=bogus":           false,
		"gzip;level=9":           true,
		" gzip ; q = 0.5 , br ":  true,
		"gzipx":                  false,
		",,,":                    false,
		"gzip;q=1;foo, gzip;q=0": true,
	} {
		if got := acceptsGzip(header); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", header, got, want)
		}
	}
}

func TestETagMatches(t *testing.T) {
	tag := `W/"abc"`
	for header, want := range map[string]bool{
		"":             false,
		`W/"abc"`:      true,
		`"abc"`:        true,
		`"abd"`:        false,
		`"x", W/"abc"`: true,
		`*`:            true,
		`W/"abc-gzip"`: false,
		` "abc" `:      true,
		`W/"ab", "c"`:  false,
	} {
		if got := etagMatches(header, tag); got != want {
			t.Errorf("etagMatches(%q) = %v, want %v", header, got, want)
		}
	}
}

// FuzzAcceptsGzip checks that no header crashes the parser and that a
// header naming no gzip never accepts it once gzip is refused.
func FuzzAcceptsGzip(f *testing.F) {
	f.Fuzz(func(t *testing.T, header string) {
		_ = acceptsGzip(header)
		if !strings.Contains(strings.ToLower(header), "gzip") && acceptsGzip(header+", gzip;q=0") {
			t.Fatalf("acceptsGzip(%q + gzip;q=0) = true", header)
		}
	})
}
