package httpapi

import (
	"compress/gzip"
	"encoding/xml"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

type weblogUpdates struct {
	XMLName xml.Name `xml:"weblogUpdates"`
	Version string   `xml:"version,attr"`
	Updated string   `xml:"updated,attr"`
	Count   string   `xml:"count,attr"`
	Weblogs []struct {
		Name   string `xml:"name,attr"`
		URL    string `xml:"url,attr"`
		RSSURL string `xml:"rssUrl,attr"`
		When   string `xml:"when,attr"`
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

// TestListsShowWhatWasSubmitted: each <weblog> of changes.xml carries
// "the name and url submitted in the ping request" (seed 003), whatever
// the dialect: extendedPing's url (its feedUrl only when url is not a URL)
// with the feed as rssUrl (weblogs.com's changes.xml version 2), and the
// URL of pingd's own node feed that a CNWS or WebSub publisher named, not
// the node's source, which stays fetched. The ping of a node without a
// source is recorded too.
func TestListsShowWhatWasSubmitted(t *testing.T) {
	e := newEnv(t)
	followed := e.followedSource("followed", "http://127.0.0.1:1/feed.xml", "")
	wantStatus(t, e.admin(http.MethodPost, "/api/nodes", map[string]any{
		"node": "closed", "source": "http://127.0.0.1:2/secret.xml", "access_model": "whitelist"}), http.StatusCreated)
	e.createNode("sourceless", hub.AccessOpen)
	own := func(kind, node string) string { return "http://pingd.test:8080/" + kind + "/" + node }
	e.clock.Advance(time.Minute)

	rpc := func(method string, params ...any) {
		t.Helper()
		_, v, err := e.rpc(method, params...)
		if err != nil {
			t.Fatal(err)
		}
		if b, ok := v.(bool); !ok || !b {
			wantFlerror(t, v, false)
		}
	}
	rpc("weblogUpdates.ping", "Plain", "http://plain.example/")
	rpc("weblogUpdates.extendedPing", "Extended", "http://ext.example/", "http://ext.example/changed", "http://ext.example/feed.xml", "go")
	rpc("weblogUpdates.extendedPing", "Three", "http://wp.example/", "http://wp.example/feed/")
	rpc("weblogUpdates.extendedPing", "Junk site", "not a url", "", "http://junk.example/feed")
	rpc("rssCloud.ping", "http://cloud.example/rss.xml")
	wantStatus(t, e.do(http.MethodPost, "/ping", "", strings.NewReader("name=REST&url="+url.QueryEscape("http://rest.example/")),
		"Content-Type", "application/x-www-form-urlencoded"), http.StatusOK)
	wantStatus(t, e.do(http.MethodGet, "/ping?name=GET&url="+url.QueryEscape("http://get.example/"), "", nil), http.StatusOK)
	wantStatus(t, e.do(http.MethodGet, "/pingSiteForm?name=Form&url="+url.QueryEscape("http://form.example/"), "", nil), http.StatusOK)
	cnws := func(resource string) {
		t.Helper()
		doc := `<?xml version="1.0"?><notification version="1.0"><resourceChange><resourceID>` +
			resource + `</resourceID><changeTime>Mon, 07 Apr 2003 22:59:33 BST</changeTime></resourceChange></notification>`
		resp := e.do(http.MethodPost, "/cnws", "", strings.NewReader(doc), "Content-Type", "text/xml")
		if body := readBody(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "true") {
			t.Fatalf("CNWS resourceChange of %s: %d %s", resource, resp.StatusCode, body)
		}
	}
	cnws(own("rss", "followed"))
	e.wantDue(followed.ID, true)
	cnws(own("rss", "closed"))
	cnws(own("atom", "sourceless"))
	e.clock.Advance(time.Minute)
	webSub := func(topic string) {
		t.Helper()
		wantStatus(t, e.do(http.MethodPost, "/websub", "", strings.NewReader(url.Values{"hub.mode": {"publish"}, "hub.url": {topic}}.Encode()),
			"Content-Type", "application/x-www-form-urlencoded"), http.StatusNoContent)
	}
	webSub(own("atom", "followed"))
	e.wantDue(followed.ID, true)
	webSub(own("atom", "sourceless"))

	type listed struct{ url, rssURL string }
	want := map[string]listed{
		"Plain":     {"http://plain.example/", ""},
		"Extended":  {"http://ext.example/", "http://ext.example/feed.xml"},
		"Three":     {"http://wp.example/", "http://wp.example/feed/"},
		"Junk site": {"http://junk.example/feed", "http://junk.example/feed"},
		"":          {},
		"REST":      {"http://rest.example/", ""},
		"GET":       {"http://get.example/", ""},
		"Form":      {"http://form.example/", ""},
	}
	_, doc := e.getChanges("/changes.xml")
	got := map[string]listed{}
	var unnamed []string
	for _, w := range doc.Weblogs {
		if w.Name == "" {
			if w.RSSURL != "" {
				t.Errorf("%s is listed with rssUrl %q", w.URL, w.RSSURL)
			}
			unnamed = append(unnamed, w.URL)
			continue
		}
		got[w.Name] = listed{w.URL, w.RSSURL}
	}
	got[""] = listed{}
	if !maps.Equal(got, want) {
		t.Errorf("named weblogs listed %v, want %v", got, want)
	}
	wantUnnamed := []string{own("atom", "sourceless"), own("atom", "followed"), own("atom", "sourceless"), own("rss", "closed"),
		own("rss", "followed"), "http://cloud.example/rss.xml"}
	if !slices.Equal(unnamed, wantUnnamed) {
		t.Errorf("pings without a name listed %v, want %v (newest first)", unnamed, wantUnnamed)
	}
	// A whitelist node's source is for its members: naming the node's feed
	// does not publish it.
	resp := e.do(http.MethodGet, "/changes.xml", "", nil, "Accept-Encoding", "identity")
	if body := readBody(t, resp); strings.Contains(string(body), "127.0.0.1:2") || strings.Contains(string(body), "127.0.0.1:1") {
		t.Errorf("changes.xml lists a node's source:\n%s", body)
	}
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
