package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mmcdole/gofeed"
	gfatom "github.com/mmcdole/gofeed/atom"
	gfrss "github.com/mmcdole/gofeed/rss"

	"github.com/pingd/pingd/hub"
)

// publish appends items with Atom payloads to the node, as an owner's
// XEP-0060 publish does.
func (e *env) publish(node string, ids ...string) {
	e.t.Helper()
	entries := make([]hub.Entry, 0, len(ids))
	for _, id := range ids {
		entries = append(entries, hub.Entry{
			ID:    id,
			Title: "Title " + id,
			Link:  "https://example.org/" + id,
			Payload: []byte(`<entry xmlns="http://www.w3.org/2005/Atom"><id>` + id + `</id><title>Title ` + id +
				`</title><link href="https://example.org/` + id + `"/><updated>2026-01-02T03:04:05Z</updated>` +
				`<summary>About ` + id + `</summary></entry>`),
		})
	}
	if _, err := e.hub.Publish(context.Background(), node, "owner@example.org", entries); err != nil {
		e.t.Fatal(err)
	}
}

// rawDo is env.do with a client that leaves content codings alone.
func (e *env) rawDo(method, path, token string, header ...string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close(); client.CloseIdleConnections() })
	return resp
}

func itemIDs(prefix string, from, to int) []string {
	var ids []string
	for i := from; i <= to; i++ {
		ids = append(ids, fmt.Sprintf("tag:example.org,2026:%s-%d", prefix, i))
	}
	return ids
}

// get fetches a node feed with request headers (name, value pairs) and
// returns the response with its decoded body.
// The client does not add Accept-Encoding itself, so the tests see what
// pingd sends.
func (e *env) getFeed(method, path, token string, header ...string) (*http.Response, []byte) {
	e.t.Helper()
	resp := e.rawDo(method, path, token, header...)
	body := readBody(e.t, resp)
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			e.t.Fatalf("gzip: %v", err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			e.t.Fatalf("gunzip: %v", err)
		}
	}
	return resp, body
}

// entryIDs parses a feed with gofeed and returns its entry ids in order.
func entryIDs(t *testing.T, body []byte) []string {
	t.Helper()
	f, err := gofeed.NewParser().Parse(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("gofeed: %v\n%s", err, body)
	}
	ids := make([]string, 0, len(f.Items))
	for _, it := range f.Items {
		ids = append(ids, it.GUID)
	}
	return ids
}

func reversed(ids []string) []string {
	out := slices.Clone(ids)
	slices.Reverse(out)
	return out
}

func TestNodeFeedAtom(t *testing.T) {
	e := newEnv(t)
	e.createNode("feeds/demo", hub.AccessOpen)
	ids := itemIDs("a", 1, 3)
	e.publish("feeds/demo", ids...)

	resp, body := e.getFeed(http.MethodGet, "/atom/feeds%2Fdemo", "")
	wantStatus(t, resp, http.StatusOK)
	h := resp.Header
	if ct := h.Get("Content-Type"); ct != "application/atom+xml; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	etag := h.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) {
		t.Errorf("ETag %q is not a strong tag", etag)
	}
	lm, err := http.ParseTime(h.Get("Last-Modified"))
	if err != nil || time.Since(lm) > time.Minute || time.Until(lm) > time.Second {
		t.Errorf("Last-Modified %q: %v", h.Get("Last-Modified"), err)
	}
	if v := h.Values("Vary"); !slices.Contains(v, "Accept-Encoding") {
		t.Errorf("Vary = %q", v)
	}

	f, err := (&gfatom.Parser{}).Parse(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("Atom: %v\n%s", err, body)
	}
	if f.Title != "Title of feeds/demo" || f.ID != "http://pingd.test:8080/atom/feeds%2Fdemo" {
		t.Errorf("title %q id %q", f.Title, f.ID)
	}
	rels := map[string]string{}
	for _, l := range f.Links {
		rels[l.Rel] = l.Href
	}
	if rels["self"] != "http://pingd.test:8080/atom/feeds%2Fdemo" || rels["hub"] != "http://pingd.test:8080/websub" {
		t.Errorf("links = %v", rels)
	}
	// The feed's updated is the Last-Modified time.
	if f.UpdatedParsed == nil || !f.UpdatedParsed.Equal(lm) {
		t.Errorf("updated %v, Last-Modified %v", f.UpdatedParsed, lm)
	}
	var got []string
	for _, en := range f.Entries {
		got = append(got, en.ID)
		if en.Title != "Title "+en.ID || len(en.Links) == 0 || en.Links[0].Href != "https://example.org/"+en.ID {
			t.Errorf("entry %+v", en)
		}
	}
	if want := reversed(ids); !slices.Equal(got, want) {
		t.Errorf("entries %v, want newest first %v", got, want)
	}

	// The same state gives the same bytes and the same tag.
	resp2, body2 := e.getFeed(http.MethodGet, "/atom/feeds%2Fdemo", "")
	if resp2.Header.Get("ETag") != etag || !bytes.Equal(body, body2) {
		t.Error("two fetches of the same state differ")
	}

	// HEAD: same headers, no body.
	head, hb := e.getFeed(http.MethodHead, "/atom/feeds%2Fdemo", "")
	wantStatus(t, head, http.StatusOK)
	if len(hb) != 0 || head.Header.Get("ETag") != etag || head.ContentLength != int64(len(body)) ||
		head.Header.Get("Last-Modified") != h.Get("Last-Modified") {
		t.Errorf("HEAD: %d bytes, tag %q, length %d", len(hb), head.Header.Get("ETag"), head.ContentLength)
	}

	// max_items bounds the feed.
	e.publish("feeds/demo", itemIDs("b", 1, hub.DefaultMaxItems)...)
	_, body = e.getFeed(http.MethodGet, "/atom/feeds%2Fdemo", "")
	if n := len(entryIDs(t, body)); n != hub.DefaultMaxItems {
		t.Errorf("%d entries, want max_items %d", n, hub.DefaultMaxItems)
	}
}

func TestNodeFeedRSS(t *testing.T) {
	e := newEnv(t)
	e.createNode("news", hub.AccessOpen)
	ids := itemIDs("r", 1, 2)
	e.publish("news", ids...)

	resp, body := e.getFeed(http.MethodGet, "/rss/news", "")
	wantStatus(t, resp, http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); ct != "application/rss+xml; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	f, err := (&gfrss.Parser{}).Parse(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("RSS: %v\n%s", err, body)
	}
	if f.Version != "2.0" || f.Title != "Title of news" {
		t.Errorf("version %q title %q", f.Version, f.Title)
	}
	c := f.Cloud
	if c == nil || c.Domain != "pingd.test" || c.Port != "8080" || c.Path != "/pleaseNotify" ||
		c.RegisterProcedure != "rssCloud.pleaseNotify" || c.Protocol != "http-post" {
		t.Errorf("cloud = %+v", c)
	}
	if f.TTL != strconv.Itoa(NodeFeedTTLMinutes) {
		t.Errorf("ttl = %q", f.TTL)
	}
	rels := map[string]string{}
	for _, l := range f.Extensions["atom"]["link"] {
		rels[l.Attrs["rel"]] = l.Attrs["href"]
	}
	if rels["self"] != "http://pingd.test:8080/rss/news" || rels["hub"] != "http://pingd.test:8080/websub" {
		t.Errorf("atom:links = %v", rels)
	}
	var guids []string
	for _, it := range f.Items {
		guids = append(guids, it.GUID.Value)
		if it.Title != "Title "+it.GUID.Value || it.Link != "https://example.org/"+it.GUID.Value {
			t.Errorf("item %+v", it)
		}
	}
	if want := reversed(ids); !slices.Equal(guids, want) {
		t.Errorf("items %v, want %v", guids, want)
	}
	lm, _ := http.ParseTime(resp.Header.Get("Last-Modified"))
	if f.LastBuildDateParsed == nil || !f.LastBuildDateParsed.Equal(lm) {
		t.Errorf("lastBuildDate %v, Last-Modified %v", f.LastBuildDateParsed, lm)
	}
	// The Atom and RSS feeds have different tags.
	atomResp, _ := e.getFeed(http.MethodGet, "/atom/news", "")
	if atomResp.Header.Get("ETag") == resp.Header.Get("ETag") {
		t.Error("Atom and RSS share an entity tag")
	}
}

func TestNodeFeedConditionalAndGzip(t *testing.T) {
	e := newEnv(t)
	e.createNode("news", hub.AccessOpen)
	e.publish("news", itemIDs("c", 1, 2)...)
	for _, path := range []string{"/atom/news", "/rss/news"} {
		t.Run(path, func(t *testing.T) {
			resp, body := e.getFeed(http.MethodGet, path, "")
			etag, lm := resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")

			// If-None-Match, also weak and in a list.
			for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
				r, b := e.getFeed(http.MethodGet, path, "", "If-None-Match", inm)
				wantStatus(t, r, http.StatusNotModified)
				if len(b) != 0 || r.Header.Get("ETag") != etag {
					t.Errorf("304 for %q: body %d bytes, ETag %q", inm, len(b), r.Header.Get("ETag"))
				}
			}
			// If-Modified-Since, equal or later; earlier gets the feed.
			wantStatus(t, e.rawDo(http.MethodGet, path, "", "If-Modified-Since", lm), http.StatusNotModified)
			later := mustTime(t, lm).Add(time.Hour).Format(http.TimeFormat)
			wantStatus(t, e.rawDo(http.MethodGet, path, "", "If-Modified-Since", later), http.StatusNotModified)
			earlier := mustTime(t, lm).Add(-time.Second).Format(http.TimeFormat)
			wantStatus(t, e.rawDo(http.MethodGet, path, "", "If-Modified-Since", earlier), http.StatusOK)
			// If-None-Match wins over If-Modified-Since.
			wantStatus(t, e.rawDo(http.MethodGet, path, "", "If-None-Match", `"other"`, "If-Modified-Since", lm), http.StatusOK)

			// gzip when asked, with its own tag; the plain tag still matches.
			gz, gzBody := e.getFeed(http.MethodGet, path, "", "Accept-Encoding", "gzip")
			wantStatus(t, gz, http.StatusOK)
			if gz.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(gzBody, body) {
				t.Errorf("gzip: encoding %q, same body %v", gz.Header.Get("Content-Encoding"), bytes.Equal(gzBody, body))
			}
			if gz.Header.Get("ETag") == etag {
				t.Error("the gzip encoding has the identity encoding's tag")
			}
			if !slices.Contains(gz.Header.Values("Vary"), "Accept-Encoding") {
				t.Errorf("Vary = %q", gz.Header.Values("Vary"))
			}
			wantStatus(t, e.rawDo(http.MethodGet, path, "", "Accept-Encoding", "gzip", "If-None-Match", etag), http.StatusNotModified)
			wantStatus(t, e.rawDo(http.MethodGet, path, "", "If-None-Match", gz.Header.Get("ETag")), http.StatusNotModified)
			if r := e.rawDo(http.MethodGet, path, "", "Accept-Encoding", "gzip;q=0, identity"); r.Header.Get("Content-Encoding") != "" {
				t.Error("gzip sent though refused")
			}
			gzHead := e.rawDo(http.MethodHead, path, "", "Accept-Encoding", "gzip")
			if gzHead.ContentLength != gz.ContentLength || gzHead.Header.Get("Content-Encoding") != "gzip" {
				t.Errorf("gzip HEAD length %d, GET %d", gzHead.ContentLength, gz.ContentLength)
			}

			// A change makes the old validators stale.
			e.publish("news", fmt.Sprintf("tag:example.org,2026:%s-new", strings.Trim(path, "/")))
			wantStatus(t, e.rawDo(http.MethodGet, path, "", "If-None-Match", etag), http.StatusOK)
		})
	}

	// A configuration change too: its tag no longer matches.
	resp, _ := e.getFeed(http.MethodGet, "/atom/news", "")
	etag := resp.Header.Get("ETag")
	cfg := e.nodeOf("news").NodeConfig
	cfg.Title = "Renamed"
	if err := e.hub.ConfigureNode(context.Background(), "news", cfg); err != nil {
		t.Fatal(err)
	}
	resp, body := e.getFeed(http.MethodGet, "/atom/news", "", "If-None-Match", etag, "A-IM", "feed")
	wantStatus(t, resp, http.StatusOK)
	if !bytes.Contains(body, []byte("Renamed")) {
		t.Error("the new title is not served")
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := http.ParseTime(s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestNodeFeedDelta(t *testing.T) {
	e := newEnv(t)
	e.createNode("news", hub.AccessOpen)
	e.publish("news", itemIDs("d", 1, 3)...)
	for _, format := range []string{"atom", "rss"} {
		t.Run(format, func(t *testing.T) {
			path := "/" + format + "/news"
			resp, _ := e.getFeed(http.MethodGet, path, "")
			base := resp.Header.Get("ETag")
			added := itemIDs(format+"-delta", 1, 2)
			e.publish("news", added...)
			full, fullBody := e.getFeed(http.MethodGet, path, "")

			for _, gzip := range []bool{false, true} {
				header := []string{"A-IM", "feed", "If-None-Match", base}
				if gzip {
					header = append(header, "Accept-Encoding", "gzip")
				}
				resp, body := e.getFeed(http.MethodGet, path, "", header...)
				wantStatus(t, resp, http.StatusIMUsed)
				h := resp.Header
				if h.Get("IM") != "feed" || h.Get("Cache-Control") != "no-store, im" || h.Get("Delta-Base") != base {
					t.Errorf("226 headers: IM %q Cache-Control %q Delta-Base %q", h.Get("IM"), h.Get("Cache-Control"), h.Get("Delta-Base"))
				}
				if v := h.Values("Vary"); len(v) == 0 || v[0] != "A-IM, If-None-Match" || !slices.Contains(v, "Accept-Encoding") {
					t.Errorf("226 Vary = %q", v)
				}
				wantTag := full.Header.Get("ETag")
				if gzip {
					wantTag = strings.TrimSuffix(wantTag, `"`) + `.gz"`
				}
				if h.Get("ETag") != wantTag || h.Get("Last-Modified") != full.Header.Get("Last-Modified") {
					t.Errorf("226 ETag %q Last-Modified %q, full feed's %q %q", h.Get("ETag"), h.Get("Last-Modified"), wantTag, full.Header.Get("Last-Modified"))
				}
				if got, want := entryIDs(t, body), reversed(added); !slices.Equal(got, want) {
					t.Errorf("delta entries %v, want only %v", got, want)
				}
			}

			// No A-IM, an unknown or foreign tag: the full feed.
			for _, header := range [][]string{
				{"If-None-Match", base},
				{"A-IM", "feed", "If-None-Match", `"unknown"`},
				{"A-IM", "feed", "If-None-Match", `"1.2.notours"`},
				{"A-IM", "feed;q=0", "If-None-Match", base},
				{"A-IM", "vcdiff", "If-None-Match", base},
			} {
				resp, body := e.getFeed(http.MethodGet, path, "", header...)
				wantStatus(t, resp, http.StatusOK)
				if !bytes.Equal(body, fullBody) || resp.Header.Get("IM") != "" {
					t.Errorf("%q: not the full feed", header)
				}
			}
			// The current tag: 304 even with A-IM.
			wantStatus(t, e.rawDo(http.MethodGet, path, "", "A-IM", "feed", "If-None-Match", full.Header.Get("ETag")), http.StatusNotModified)
		})
	}

	// The other format's tag is not a base for this one.
	rssResp, _ := e.getFeed(http.MethodGet, "/rss/news", "")
	rssTag := rssResp.Header.Get("ETag")
	e.publish("news", "tag:example.org,2026:cross")
	wantStatus(t, e.rawDo(http.MethodGet, "/atom/news", "", "A-IM", "feed", "If-None-Match", rssTag), http.StatusOK)

	// A retraction cannot be told as new entries: the full feed.
	resp, _ := e.getFeed(http.MethodGet, "/atom/news", "")
	base := resp.Header.Get("ETag")
	e.publish("news", "tag:example.org,2026:after-base")
	if _, err := e.hub.Retract(context.Background(), "news", "owner@example.org", []string{itemIDs("d", 1, 1)[0]}); err != nil {
		t.Fatal(err)
	}
	resp, body := e.getFeed(http.MethodGet, "/atom/news", "", "A-IM", "feed", "If-None-Match", base)
	wantStatus(t, resp, http.StatusOK)
	if ids := entryIDs(t, body); slices.Contains(ids, itemIDs("d", 1, 1)[0]) || !slices.Contains(ids, "tag:example.org,2026:after-base") {
		t.Errorf("after retraction: %v", ids)
	}
}

// TestNodeFeedDeltaClient is a reader that polls with A-IM: feed, merges
// each 226 delta into what it has, and ends with the entries a full fetch
// gives.
func TestNodeFeedDeltaClient(t *testing.T) {
	e := newEnv(t)
	e.createNode("news", hub.AccessOpen)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, format := range []string{"atom", "rss"} {
		t.Run(format, func(t *testing.T) {
			path := "/" + format + "/news"
			var have []string // newest first, as the feed lists them
			etag := ""
			counts := map[int]int{}
			next := 0
			for round := range 40 {
				// Between polls: nothing, or a few new items.
				n := rng.IntN(4)
				if round%7 == 0 {
					n = 0
				}
				var ids []string
				for range n {
					next++
					ids = append(ids, fmt.Sprintf("tag:example.org,2026:%s-loop-%d", format, next))
				}
				if len(ids) > 0 {
					e.publish("news", ids...)
				}
				header := []string{"A-IM", "feed", "Accept-Encoding", "gzip"}
				if etag != "" {
					header = append(header, "If-None-Match", etag)
				}
				resp, body := e.getFeed(http.MethodGet, path, "", header...)
				counts[resp.StatusCode]++
				switch resp.StatusCode {
				case http.StatusNotModified:
					if len(ids) != 0 {
						t.Fatalf("round %d: 304 after %d new items", round, len(ids))
					}
				case http.StatusIMUsed:
					delta := entryIDs(t, body)
					if !slices.Equal(delta, reversed(ids)) {
						t.Fatalf("round %d: delta %v, want %v", round, delta, reversed(ids))
					}
					have = append(delta, have...)
				case http.StatusOK:
					have = entryIDs(t, body)
				default:
					t.Fatalf("round %d: status %d", round, resp.StatusCode)
				}
				etag = resp.Header.Get("ETag")
			}
			if counts[http.StatusIMUsed] == 0 || counts[http.StatusNotModified] == 0 {
				t.Errorf("statuses %v: want 226s and 304s", counts)
			}
			_, full := e.getFeed(http.MethodGet, path, "")
			want := entryIDs(t, full)
			if len(have) > len(want) {
				have = have[:len(want)] // entries beyond max_items scrolled off the full feed
			}
			if !slices.Equal(have, want) {
				t.Errorf("the client has\n%v\nthe full feed\n%v", have, want)
			}
		})
	}
}

func TestNodeFeedOfWhitelistNodeNeedsToken(t *testing.T) {
	e := newEnv(t)
	token := e.createNode("private", hub.AccessWhitelist)
	other := e.createNode("other", hub.AccessWhitelist)
	e.publish("private", itemIDs("p", 1, 1)...)
	for _, path := range []string{"/atom/private", "/rss/private"} {
		for name, tok := range map[string]string{"no": "", "a wrong": "wrong", "another node's": other} {
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				resp, body := e.getFeed(method, path, tok)
				wantStatus(t, resp, http.StatusUnauthorized)
				if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") || bytes.Contains(body, []byte("tag:example.org")) {
					t.Errorf("%s %s with %s token: %q %s", method, path, name, resp.Header.Get("WWW-Authenticate"), body)
				}
				if resp.Header.Get("ETag") != "" {
					t.Errorf("%s %s with %s token leaks the ETag", method, path, name)
				}
			}
		}
		for _, tok := range []string{token, testAdminToken} {
			resp, body := e.getFeed(http.MethodGet, path, tok)
			wantStatus(t, resp, http.StatusOK)
			if ids := entryIDs(t, body); !slices.Equal(ids, itemIDs("p", 1, 1)) {
				t.Errorf("%s: %v", path, ids)
			}
			if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "private") {
				t.Errorf("%s Cache-Control %q", path, cc)
			}
		}
	}
}

func TestFeedValidators(t *testing.T) {
	v := feedVersion{seq: 12, count: 3, modified: 1700000000, fp: "abc_-DEF"}
	for _, gz := range []bool{false, true} {
		got, ok := parseFeedTag(v.tag(gz))
		if !ok || got != v {
			t.Errorf("tag %s reads back as %+v, %v", v.tag(gz), got, ok)
		}
	}
	if !v.matchedBy(`"x", W/` + v.tag(true)) {
		t.Error("a weak gzip tag in a list does not match")
	}
	if v.matchedBy(`"12.2.1700000000.abc_-DEF"`) {
		t.Error("a tag of another count (an item retracted since) matches")
	}
	base, raw, ok := v.deltaBase(`"3.1.1.abc_-DEF", "9.2.5.abc_-DEF.gz", "11.3.5.other", "12.3.5.abc_-DEF", "x"`)
	if !ok || base.seq != 9 || raw != `"9.2.5.abc_-DEF.gz"` {
		t.Errorf("deltaBase = %+v %q %v", base, raw, ok)
	}
	for _, bad := range []string{``, `"`, `12.1.1.a`, `"12.1.1"`, `"a.1.1.b"`, `"-1.1.1.b"`, `"1.-1.1.b"`, `"1.1.1."`,
		`"1.1.1.b.zip"`, `"1.1.b"`} {
		if _, ok := parseFeedTag(bad); ok {
			t.Errorf("parseFeedTag(%q) accepted", bad)
		}
	}
	for header, want := range map[string]bool{
		"feed": true, "FEED": true, "vcdiff, feed;q=0.5": true, " gzip , feed ": true,
		"": false, "feed;q=0": false, "feed;q=x": false, "feeds": false, "vcdiff": false,
	} {
		if got := acceptsFeedIM(header); got != want {
			t.Errorf("acceptsFeedIM(%q) = %v", header, got)
		}
	}
}

func FuzzFeedValidators(f *testing.F) {
	f.Add(`"3.2.1700000000.abc", W/"4.2.1.abc.gz", *`, "feed;q=0.5, vcdiff")
	f.Add(`"9223372036854775807.0.-1.x"`, "FEED")
	f.Fuzz(func(t *testing.T, inm, aim string) {
		_ = acceptsFeedIM(aim)
		v := feedVersion{seq: 5, count: 2, modified: 1, fp: "abc"}
		matched := v.matchedBy(inm)
		if base, raw, ok := v.deltaBase(inm); ok {
			if base.seq >= v.seq || base.fp != v.fp || !strings.Contains(inm, raw) {
				t.Fatalf("deltaBase(%q) = %+v %q", inm, base, raw)
			}
		}
		for _, tag := range splitTags(inm) {
			if got, ok := parseFeedTag(tag); ok {
				if again, ok := parseFeedTag(got.tag(false)); !ok || again != got {
					t.Fatalf("tag %q does not round-trip: %+v", tag, got)
				}
				if got == v && !matched {
					t.Fatalf("%q names the current version but does not match", inm)
				}
			}
		}
	})
}

// TestNodeFeedValidatorsFollowItemsOnly: a node feed's ETag, Last-Modified
// and <updated> change with its items, not with its subscriptions (an
// XMPP subscription appends its last-item event to the log, an
// unsubscription by the owner a revocation): feed readers do not
// download it again for them. A new item and a retraction do change it,
// and a reader holding the current validators is answered 304.
func TestNodeFeedValidatorsFollowItemsOnly(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.createNode("news", hub.AccessOpen)
	e.publish("news", itemIDs("v", 1, 2)...)
	type validators struct{ etag, lm, updated string }
	read := func(path string) validators {
		t.Helper()
		resp, body := e.getFeed(http.MethodGet, path, "")
		wantStatus(t, resp, http.StatusOK)
		f, err := gofeed.NewParser().ParseString(string(body))
		if err != nil {
			t.Fatal(err)
		}
		return validators{resp.Header.Get("ETag"), resp.Header.Get("Last-Modified"), f.Updated}
	}
	before := map[string]validators{"/atom/news": read("/atom/news"), "/rss/news": read("/rss/news")}
	seqBefore := e.nodeOf("news").LastSeq

	time.Sleep(1100 * time.Millisecond) // a second later, so a time would differ
	sub, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "news", Kind: hub.KindXMPP,
		Address: "reader@example.org/x", BareJID: "reader@example.org"})
	if err != nil {
		t.Fatal(err)
	}
	if sent, err := e.hub.SendLastPublished(ctx, sub); err != nil || !sent {
		t.Fatalf("SendLastPublished: %v, %v", sent, err)
	}
	if _, err := e.hub.Unsubscribe(ctx, "news", hub.KindXMPP, sub.Address); err != nil {
		t.Fatal(err)
	}
	if e.nodeOf("news").LastSeq == seqBefore {
		t.Fatal("the subscription left the log as it was: the test tests nothing")
	}
	for path, was := range before {
		if now := read(path); now != was {
			t.Errorf("%s: a subscription changed the validators from %+v to %+v", path, was, now)
		}
		resp := e.rawDo(http.MethodGet, path, "", "If-None-Match", was.etag)
		wantStatus(t, resp, http.StatusNotModified)
		wantStatus(t, e.rawDo(http.MethodGet, path, "", "If-Modified-Since", was.lm), http.StatusNotModified)
	}

	// A retraction and a new item each change them.
	if _, err := e.hub.Retract(ctx, "news", "owner@example.org", itemIDs("v", 1, 1)); err != nil {
		t.Fatal(err)
	}
	retracted := read("/atom/news")
	if retracted.etag == before["/atom/news"].etag {
		t.Error("a retraction left the ETag as it was")
	}
	wantStatus(t, e.rawDo(http.MethodGet, "/atom/news", "", "If-None-Match", before["/atom/news"].etag), http.StatusOK)
	e.publish("news", itemIDs("v", 3, 3)...)
	published := read("/atom/news")
	if published.etag == retracted.etag || published.lm == before["/atom/news"].lm || published.updated == before["/atom/news"].updated {
		t.Errorf("a new item left the validators: %+v, before %+v", published, before["/atom/news"])
	}
	wantStatus(t, e.rawDo(http.MethodGet, "/atom/news", "", "If-None-Match", published.etag), http.StatusNotModified)
}
