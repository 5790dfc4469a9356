package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/weblogs"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// followedSource creates a node following feedURL and makes its source
// look fetched: baselined, with siteURL, and not due for an hour.
func (e *env) followedSource(node, feedURL, siteURL string) *hub.Source {
	e.t.Helper()
	ctx := context.Background()
	wantStatus(e.t, e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": node, "source": feedURL}), http.StatusCreated)
	n, err := e.hub.Node(ctx, node)
	if err != nil {
		e.t.Fatal(err)
	}
	src, err := e.hub.Source(ctx, n.SourceID)
	if err != nil {
		e.t.Fatal(err)
	}
	state := src.SourceState
	state.Baselined = true
	state.SiteURL = siteURL
	state.LastFetchAt = e.clock.Now()
	state.LastStatus = http.StatusOK
	state.NextFetchAt = e.clock.Now().Add(time.Hour)
	state.NextFetchReason = "ttl"
	if _, err := e.store.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: state, Changed: true}); err != nil {
		e.t.Fatal(err)
	}
	src, err = e.hub.Source(ctx, n.SourceID)
	if err != nil {
		e.t.Fatal(err)
	}
	if !src.NextFetchAt.After(e.clock.Now()) {
		e.t.Fatalf("source is due before any ping: next fetch %v, now %v", src.NextFetchAt, e.clock.Now())
	}
	return src
}

// wantDue checks that the source was marked due by a ping at the clock's now.
func (e *env) wantDue(id int64, due bool) {
	e.t.Helper()
	src, err := e.hub.Source(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	now := e.clock.Now()
	if got := !src.NextFetchAt.After(now) && src.LastPingAt.Equal(now); got != due {
		e.t.Fatalf("source %s due = %v, want %v (next fetch %v, last ping %v, now %v)",
			src.URL, got, due, src.NextFetchAt, src.LastPingAt, now)
	}
}

func (e *env) pings() []hub.Ping {
	e.t.Helper()
	pings, _, err := e.hub.Pings(context.Background(), time.Time{}, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	return pings
}

func wantFlerror(t *testing.T, v any, flerror bool) string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("answer is %#v, not a struct", v)
	}
	msg, _ := m["message"].(string)
	if m["flerror"] != flerror || msg == "" || len(m) != 2 {
		t.Fatalf("answer = %#v, want flerror %v and a message", m, flerror)
	}
	return msg
}

func TestWeblogUpdatesPing(t *testing.T) {
	e := newEnv(t)
	src := e.followedSource("blog", "http://127.0.0.1:1/feed.xml", "http://127.0.0.1:1/")
	e.clock.Advance(time.Minute)

	// The site URL is matched too.
	resp, v, err := e.rpc("weblogUpdates.ping", "My Blog", "http://127.0.0.1:1/")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, resp, http.StatusOK)
	if msg := wantFlerror(t, v, false); !strings.Contains(msg, "1 followed source") {
		t.Errorf("message = %q", msg)
	}
	e.wantDue(src.ID, true)

	pings := e.pings()
	if len(pings) != 1 || pings[0].Dialect != DialectWeblogUpdates || pings[0].Name != "My Blog" ||
		pings[0].URL != "http://127.0.0.1:1/" || pings[0].Remote != "127.0.0.1" {
		t.Errorf("recorded pings = %+v", pings)
	}

	// An unknown URL is recorded and acknowledged, and fetches nothing.
	_, v, err = e.rpc("weblogUpdates.ping", "Other", "http://other.example/")
	if err != nil {
		t.Fatal(err)
	}
	if msg := wantFlerror(t, v, false); strings.Contains(msg, "fetched") {
		t.Errorf("message = %q", msg)
	}
	if p := e.pings(); len(p) != 2 || p[0].URL != "http://other.example/" {
		t.Errorf("recorded pings = %+v", p)
	}

	// A URL that is not one is refused in-band.
	_, v, err = e.rpc("weblogUpdates.ping", "x", "not a url")
	if err != nil {
		t.Fatal(err)
	}
	wantFlerror(t, v, true)
	_, v, err = e.rpc("weblogUpdates.ping", strings.Repeat("n", weblogs.MaxNameBytes+1), "http://other.example/")
	if err != nil {
		t.Fatal(err)
	}
	wantFlerror(t, v, true)
	if p := e.pings(); len(p) != 2 {
		t.Errorf("refused pings were recorded: %+v", p)
	}
}

func TestExtendedPing(t *testing.T) {
	e := newEnv(t)
	byFeed := e.followedSource("feed", "http://127.0.0.1:1/feed.xml", "")
	bySite := e.followedSource("site", "http://127.0.0.1:2/atom.xml", "http://127.0.0.1:2/")
	byChanges := e.followedSource("changes", "http://127.0.0.1:3/post.xml", "")
	untouched := e.followedSource("other", "http://127.0.0.1:4/feed.xml", "")
	e.clock.Advance(time.Minute)

	_, v, err := e.rpc("weblogUpdates.extendedPing", "Blog", "http://127.0.0.1:2/", "http://127.0.0.1:3/post.xml",
		"http://127.0.0.1:1/feed.xml", "rss|opml")
	if err != nil {
		t.Fatal(err)
	}
	if msg := wantFlerror(t, v, false); !strings.Contains(msg, "3 followed sources") {
		t.Errorf("message = %q", msg)
	}
	e.wantDue(byFeed.ID, true)
	e.wantDue(bySite.ID, true)
	e.wantDue(byChanges.ID, true)
	e.wantDue(untouched.ID, false)
	p := e.pings()
	if len(p) != 1 || p[0].URL != "http://127.0.0.1:2/" || p[0].FeedURL != "http://127.0.0.1:1/feed.xml" ||
		p[0].Dialect != DialectExtendedPing || p[0].Name != "Blog" {
		t.Errorf("recorded pings = %+v", p)
	}

	// WordPress's three parameters: (name, url, feedUrl).
	e.clock.Advance(time.Minute)
	_, v, err = e.rpc("weblogUpdates.extendedPing", "Blog", "http://127.0.0.1:9/", "http://127.0.0.1:4/feed.xml")
	if err != nil {
		t.Fatal(err)
	}
	wantFlerror(t, v, false)
	e.wantDue(untouched.ID, true)
	if p := e.pings(); len(p) != 2 || p[0].URL != "http://127.0.0.1:9/" || p[0].FeedURL != "http://127.0.0.1:4/feed.xml" {
		t.Errorf("three-parameter ping recorded as %+v", p)
	}

	// Four parameters; an unknown feedUrl is recorded; a bad site URL is
	// skipped, and the feed stands for it.
	_, v, err = e.rpc("weblogUpdates.extendedPing", "Blog", "junk", "", "http://new.example/feed")
	if err != nil {
		t.Fatal(err)
	}
	wantFlerror(t, v, false)
	if p := e.pings(); len(p) != 3 || p[0].URL != "http://new.example/feed" || p[0].FeedURL != "http://new.example/feed" {
		t.Errorf("recorded pings = %+v", p)
	}

	// The feedUrl must be a URL.
	_, v, err = e.rpc("weblogUpdates.extendedPing", "Blog", "http://127.0.0.1:2/", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if msg := wantFlerror(t, v, true); !strings.Contains(msg, "feedUrl") {
		t.Errorf("message = %q", msg)
	}
}

func TestRSSCloudPing(t *testing.T) {
	e := newEnv(t)
	src := e.followedSource("cloud", "http://127.0.0.1:1/rss.xml", "")
	e.clock.Advance(time.Minute)
	resp, v, err := e.rpc("rssCloud.ping", "http://127.0.0.1:1/rss.xml")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, resp, http.StatusOK)
	if v != true {
		t.Fatalf("answer = %#v, want true", v)
	}
	e.wantDue(src.ID, true)
	if p := e.pings(); len(p) != 1 || p[0].Dialect != DialectRSSCloud {
		t.Errorf("recorded pings = %+v", p)
	}
	_, _, err = e.rpc("rssCloud.ping", "mailto:x@example.org")
	var f *xmlrpc.Fault
	if !errors.As(err, &f) || f.Code != xmlrpc.FaultInvalidParams {
		t.Errorf("bad URL: err = %v, want an invalid-params fault", err)
	}
}

func TestRPCFaults(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		method string
		params []any
		code   int
	}{
		{"unknown method", "weblogUpdates.nope", nil, xmlrpc.FaultMethodNotFound},
		{"ping without params", "weblogUpdates.ping", nil, xmlrpc.FaultInvalidParams},
		{"ping with one param", "weblogUpdates.ping", []any{"name"}, xmlrpc.FaultInvalidParams},
		{"ping with three params", "weblogUpdates.ping", []any{"a", "http://x.example/", "c"}, xmlrpc.FaultInvalidParams},
		{"ping url not a string", "weblogUpdates.ping", []any{"a", 42}, xmlrpc.FaultInvalidParams},
		{"ping name a struct", "weblogUpdates.ping", []any{map[string]any{}, "http://x.example/"}, xmlrpc.FaultInvalidParams},
		{"extended with two", "weblogUpdates.extendedPing", []any{"a", "b"}, xmlrpc.FaultInvalidParams},
		{"extended with six", "weblogUpdates.extendedPing", []any{"a", "b", "c", "d", "e", "f"}, xmlrpc.FaultInvalidParams},
		{"extended tags not a string", "weblogUpdates.extendedPing", []any{"a", "b", "c", "http://x.example/", true}, xmlrpc.FaultInvalidParams},
		{"rssCloud without url", "rssCloud.ping", nil, xmlrpc.FaultInvalidParams},
		{"rssCloud url an array", "rssCloud.ping", []any{[]any{"http://x.example/"}}, xmlrpc.FaultInvalidParams},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, _, err := e.rpc(tc.method, tc.params...)
			wantStatus(t, resp, http.StatusOK)
			var f *xmlrpc.Fault
			if !errors.As(err, &f) || f.Code != tc.code || f.Message == "" {
				t.Fatalf("err = %v, want fault %d", err, tc.code)
			}
		})
	}
	malformed := map[string]string{
		"not XML":        "hello",
		"empty":          "",
		"wrong root":     "<methodResponse/>",
		"doctype":        `<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><methodCall><methodName>rssCloud.ping</methodName><params><param><value>&a;</value></param></params></methodCall>`,
		"invalid UTF-8":  "<methodCall><methodName>rssCloud.ping</methodName><params><param><value>\xff</value></param></params></methodCall>",
		"unclosed":       "<methodCall><methodName>rssCloud.ping</methodName>",
		"deeply nested":  "<methodCall><methodName>rssCloud.ping</methodName><params><param><value>" + strings.Repeat("<array><data><value>", 100) + "</value></param></params></methodCall>",
		"bad value type": "<methodCall><methodName>rssCloud.ping</methodName><params><param><value><url>x</url></value></param></params></methodCall>",
	}
	for name, doc := range malformed {
		t.Run(name, func(t *testing.T) {
			resp, _, err := e.rpcRaw([]byte(doc))
			wantStatus(t, resp, http.StatusOK)
			var f *xmlrpc.Fault
			if !errors.As(err, &f) || f.Code != xmlrpc.FaultParse {
				t.Fatalf("err = %v, want a parse fault", err)
			}
		})
	}
	if p := e.pings(); len(p) != 0 {
		t.Errorf("faulty calls recorded pings: %+v", p)
	}
	resp := e.do(http.MethodGet, "/RPC2", "", nil)
	wantStatus(t, resp, http.StatusMethodNotAllowed)
	if allow := resp.Header.Get("Allow"); allow != "POST" {
		t.Errorf("Allow = %q", allow)
	}
}

func TestSeedPingDocuments(t *testing.T) {
	e := newEnv(t)
	for _, file := range []string{"weblogupdates-ping.xml", "weblogupdates-extendedping.xml"} {
		doc, err := os.ReadFile(filepath.Join("..", "internal", "xmlrpc", "testdata", "spec", file))
		if err != nil {
			t.Fatal(err)
		}
		resp, v, err := e.rpcRaw(doc)
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, resp, http.StatusOK)
		wantFlerror(t, v, false)
	}
	p := e.pings()
	// Both as submitted: the weblog's url, and extendedPing's feed beside it.
	if len(p) != 2 || p[1].URL != "https://rssweblog.com/" || p[0].URL != "https://rssweblog.com/" ||
		p[0].FeedURL != "http://feeds.feedburner.com/TheRssBlog" || p[0].Name != "The RSS Blog" || p[1].FeedURL != "" {
		t.Errorf("recorded pings = %+v", p)
	}
}

func TestRPCMethodTable(t *testing.T) {
	e := newEnv(t)
	e.api.HandleRPC("test.echo", func(_ context.Context, req *RPCRequest) (any, error) {
		return []any{req.Method, req.Remote, req.Params}, nil
	})
	e.api.HandleRPC("test.fault", func(context.Context, *RPCRequest) (any, error) {
		return nil, xmlrpc.Errorf(4, "too many parameters")
	})
	e.api.HandleRPC("test.broken", func(context.Context, *RPCRequest) (any, error) {
		return nil, errors.New("database password is hunter2")
	})
	e.api.HandleRPC("test.unencodable", func(context.Context, *RPCRequest) (any, error) {
		return make(chan int), nil
	})
	_, v, err := e.rpc("test.echo", 1, "two")
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"test.echo", "127.0.0.1", []any{1, "two"}}
	if got, _ := v.([]any); len(got) != 3 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("echo = %#v", v)
	}
	_, _, err = e.rpc("test.fault")
	var f *xmlrpc.Fault
	if !errors.As(err, &f) || f.Code != 4 {
		t.Errorf("fault = %v", err)
	}
	_, _, err = e.rpc("test.broken")
	if !errors.As(err, &f) || f.Code != xmlrpc.FaultInternal || strings.Contains(f.Message, "hunter2") {
		t.Errorf("internal error = %v", err)
	}
	_, _, err = e.rpc("test.unencodable")
	if !errors.As(err, &f) || f.Code != xmlrpc.FaultInternal {
		t.Errorf("unencodable result = %v", err)
	}
}

func TestRESTPings(t *testing.T) {
	e := newEnv(t)
	src := e.followedSource("blog", "http://127.0.0.1:1/feed.xml", "")
	e.clock.Advance(time.Minute)

	// A browser (text/html preferred) gets a page; rssCloud clients get
	// <result/> (TestRESTPingRSSCloudAnswers).
	form := url.Values{"url": {"http://127.0.0.1:1/feed.xml"}, "name": {"<Blog & Co>"}}
	resp := e.do(http.MethodPost, "/ping", "", strings.NewReader(form.Encode()), "Content-Type", "application/x-www-form-urlencoded", "Accept", browserAccept)
	wantStatus(t, resp, http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if b := string(readBody(t, resp)); !strings.Contains(b, "Thanks for the ping") || !strings.Contains(b, "<!DOCTYPE html>") {
		t.Errorf("page = %s", b)
	}
	e.wantDue(src.ID, true)
	if p := e.pings(); len(p) != 1 || p[0].Dialect != DialectREST || p[0].Name != "<Blog & Co>" || p[0].Remote != "127.0.0.1" {
		t.Errorf("recorded pings = %+v", p)
	}

	e.clock.Advance(time.Minute)
	q := url.Values{"name": {"Blog"}, "url": {"http://127.0.0.1:1/feed.xml"}}
	resp = e.do(http.MethodGet, "/pingSiteForm?"+q.Encode(), "", nil)
	wantStatus(t, resp, http.StatusOK)
	e.wantDue(src.ID, true)
	if p := e.pings(); len(p) != 2 || p[0].Dialect != DialectForm || p[0].Name != "Blog" {
		t.Errorf("recorded pings = %+v", p)
	}

	// Multipart forms work too.
	var mp bytes.Buffer
	mw := newMultipart(&mp, map[string]string{"url": "http://multi.example/"})
	resp = e.do(http.MethodPost, "/ping", "", &mp, "Content-Type", mw)
	wantStatus(t, resp, http.StatusOK)

	// An XML-RPC call posted to /ping is served as one.
	call, err := xmlrpc.MarshalCall("weblogUpdates.ping", "Blog", "http://xmlrpc.example/")
	if err != nil {
		t.Fatal(err)
	}
	resp = e.do(http.MethodPost, "/ping", "", bytes.NewReader(call), "Content-Type", "text/xml; charset=utf-8")
	wantStatus(t, resp, http.StatusOK)
	v, err := xmlrpc.DecodeResponse(resp.Body, xmlrpc.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	wantFlerror(t, v, false)
	if p := e.pings(); len(p) != 4 || p[0].Dialect != DialectWeblogUpdates {
		t.Errorf("recorded pings = %+v", p)
	}

	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPost, "/ping", ""},
		{http.MethodPost, "/ping", "url=" + url.QueryEscape("javascript:alert(1)")},
		{http.MethodPost, "/ping", "url=%zz"},
		{http.MethodGet, "/pingSiteForm?name=x", ""},
		{http.MethodGet, "/pingSiteForm?url=" + url.QueryEscape("<script>x</script>"), ""},
	} {
		resp := e.do(tc.method, tc.path, "", strings.NewReader(tc.body), "Content-Type", "application/x-www-form-urlencoded", "Accept", browserAccept)
		wantStatus(t, resp, http.StatusBadRequest)
		b := string(readBody(t, resp))
		if !strings.Contains(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(b, "<h1>") || strings.Contains(b, "<script>") {
			t.Errorf("%s %s: error page %q", tc.method, tc.path, b)
		}
	}
	if p := e.pings(); len(p) != 4 {
		t.Errorf("refused pings were recorded: %+v", p)
	}
	resp = e.do(http.MethodPut, "/ping", "", nil)
	wantStatus(t, resp, http.StatusMethodNotAllowed)
	if allow := resp.Header.Get("Allow"); allow != "GET, HEAD, POST" {
		t.Errorf("Allow = %q", allow)
	}
}

// browserAccept is the Accept header browsers send with a page request.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

// TestRESTPingRSSCloudAnswers: POST /ping as rssCloud clients send it (a
// form, with no Accept, */*, or Accept: application/json) is answered
// <result success="…" msg="…"/> in text/xml, or {"success", "msg"} in
// JSON; without url it is HTTP 200 with success false (a url that is not
// one is a 400 with success false). Browsers still get
// the page, and the weblogs.com GET forms are untouched (TestGETPing,
// TestRESTPings).
func TestRESTPingRSSCloudAnswers(t *testing.T) {
	e := newEnv(t)
	const feed = "http://127.0.0.1:1/feed.xml"
	src := e.followedSource("blog", feed, "")
	type result struct {
		XMLName xml.Name `xml:"result"`
		Success string   `xml:"success,attr"`
		Msg     string   `xml:"msg,attr"`
	}
	post := func(body string, accept ...string) *http.Response {
		h := []string{"Content-Type", "application/x-www-form-urlencoded"}
		if len(accept) > 0 {
			h = append(h, "Accept", accept[0])
		}
		return e.do(http.MethodPost, "/ping", "", strings.NewReader(body), h...)
	}
	xmlAnswer := func(name string, resp *http.Response, code int, success, msg string) {
		t.Helper()
		b := readBody(t, resp)
		var r result
		if err := xml.Unmarshal(b, &r); err != nil || resp.StatusCode != code || r.Success != success || r.Msg != msg ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/xml") {
			t.Errorf("%s: HTTP %d %s %q (%v); want %d success=%s msg=%q", name, resp.StatusCode, resp.Header.Get("Content-Type"), b, err, code, success, msg)
		}
	}
	jsonAnswer := func(name string, resp *http.Response, code int, success bool, msg string) {
		t.Helper()
		b := readBody(t, resp)
		var r map[string]any
		if err := json.Unmarshal(b, &r); err != nil || resp.StatusCode != code || len(r) != 2 || r["success"] != success || r["msg"] != msg ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s: HTTP %d %s %q (%v); want %d {success: %v, msg: %q}", name, resp.StatusCode, resp.Header.Get("Content-Type"), b, err, code, success, msg)
		}
	}
	body := url.Values{"url": {feed}}.Encode()
	for i, accept := range []string{"", "*/*", "text/xml", "application/xml, text/xml"} {
		e.clock.Advance(time.Minute)
		var resp *http.Response
		if accept == "" {
			resp = post(body)
		} else {
			resp = post(body, accept)
		}
		xmlAnswer("Accept "+accept, resp, 200, "true", "Thanks for the ping.")
		if p := e.pings(); len(p) != i+1 || p[0].Dialect != DialectREST {
			t.Fatalf("Accept %q: recorded pings %+v", accept, p)
		}
	}
	e.wantDue(src.ID, true)
	e.clock.Advance(time.Minute)
	jsonAnswer("JSON", post(body, "application/json"), 200, true, "Thanks for the ping.")

	const missing = "The following parameters were missing from the request body: url."
	xmlAnswer("no url", post(""), 200, "false", missing)
	jsonAnswer("no url, JSON", post("", "application/json"), 200, false, missing)
	resp := post("url="+url.QueryEscape("javascript:alert(1)"), "application/json")
	if b := readBody(t, resp); resp.StatusCode != 400 || !strings.Contains(string(b), `"success":false`) {
		t.Errorf("invalid url, JSON: HTTP %d %s", resp.StatusCode, b)
	}
	if p := e.pings(); len(p) != 5 {
		t.Errorf("refused pings were recorded: %+v", p)
	}

	// A browser still gets the page, with the page's statuses.
	resp = post("", browserAccept)
	wantStatus(t, resp, http.StatusBadRequest)
	if b := string(readBody(t, resp)); !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(b, "<h1>Ping refused</h1>") {
		t.Errorf("browser without url: %s", b)
	}
	if v := resp.Header.Values("Vary"); !slices.Contains(v, "Accept") {
		t.Errorf("Vary = %q", v)
	}
}

// TestGETPing: GET /ping?url=…[&name=…] is the HTTP GET ping of the ping
// sinks the RSS Feed State seed lists; it is answered like /pingSiteForm.
func TestGETPing(t *testing.T) {
	e := newEnv(t)
	src := e.followedSource("blog", "http://127.0.0.1:1/feed.xml", "")
	e.clock.Advance(time.Minute)

	resp := e.do(http.MethodGet, "/ping?url="+url.QueryEscape("http://127.0.0.1:1/feed.xml"), "", nil)
	wantStatus(t, resp, http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if b := string(readBody(t, resp)); !strings.Contains(b, "Thanks for the ping") || !strings.Contains(b, "<!DOCTYPE html>") {
		t.Errorf("page = %s", b)
	}
	e.wantDue(src.ID, true)
	if p := e.pings(); len(p) != 1 || p[0].Dialect != DialectREST || p[0].Name != "" || p[0].URL != "http://127.0.0.1:1/feed.xml" {
		t.Errorf("recorded pings = %+v", p)
	}
	q := url.Values{"name": {"Blog"}, "url": {"http://blog.example/"}}
	resp = e.do(http.MethodGet, "/ping?"+q.Encode(), "", nil)
	wantStatus(t, resp, http.StatusOK)
	if p := e.pings(); len(p) != 2 || p[0].Name != "Blog" || p[0].URL != "http://blog.example/" {
		t.Errorf("recorded pings = %+v", p)
	}
	for _, path := range []string{"/ping", "/ping?name=x", "/ping?url=" + url.QueryEscape("javascript:alert(1)")} {
		resp := e.do(http.MethodGet, path, "", nil)
		wantStatus(t, resp, http.StatusBadRequest)
		if b := string(readBody(t, resp)); !strings.Contains(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(b, "<h1>Ping refused</h1>") {
			t.Errorf("GET %s: error page %q", path, b)
		}
	}
	if p := e.pings(); len(p) != 2 {
		t.Errorf("refused pings were recorded: %+v", p)
	}
}

func TestPingRateLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PingRate = 0.001; c.PingBurst = 2 })
	const u = "http://busy.example/feed"
	for range 2 {
		_, v, err := e.rpc("weblogUpdates.ping", "Busy", u)
		if err != nil {
			t.Fatal(err)
		}
		wantFlerror(t, v, false)
	}
	resp, _, err := e.rpc("weblogUpdates.ping", "Busy", u)
	wantStatus(t, resp, http.StatusTooManyRequests)
	if secs, aerr := strconv.Atoi(resp.Header.Get("Retry-After")); aerr != nil || secs < 1 {
		t.Errorf("Retry-After = %q", resp.Header.Get("Retry-After"))
	}
	var f *xmlrpc.Fault
	if !errors.As(err, &f) {
		t.Errorf("429 body is not a fault: %v", err)
	}
	// Every dialect shares the URL's bucket.
	resp, _, _ = e.rpc("rssCloud.ping", u)
	wantStatus(t, resp, http.StatusTooManyRequests)
	resp = e.do(http.MethodGet, "/pingSiteForm?url="+url.QueryEscape(u), "", nil)
	wantStatus(t, resp, http.StatusTooManyRequests)
	if resp.Header.Get("Retry-After") == "" || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("REST 429 headers = %v", resp.Header)
	}
	resp = e.do(http.MethodGet, "/ping?url="+url.QueryEscape(u), "", nil)
	wantStatus(t, resp, http.StatusTooManyRequests)
	if resp.Header.Get("Retry-After") == "" || !strings.Contains(string(readBody(t, resp)), "Too many pings") {
		t.Errorf("GET /ping 429: %v", resp.Header)
	}
	// Another URL has its own bucket.
	_, v, err := e.rpc("weblogUpdates.ping", "Quiet", "http://quiet.example/feed")
	if err != nil {
		t.Fatal(err)
	}
	wantFlerror(t, v, false)
	if p := e.pings(); len(p) != 3 {
		t.Errorf("recorded %d pings, want 3 (limited ones are not recorded)", len(p))
	}
}

func TestPingDefaultRateAllowsBurstOfTen(t *testing.T) {
	e := newEnv(t)
	for i := range 10 {
		_, v, err := e.rpc("rssCloud.ping", "http://burst.example/feed")
		if err != nil || v != true {
			t.Fatalf("ping %d: %v, %v", i+1, v, err)
		}
	}
}

func TestPingBodyLimit(t *testing.T) {
	e := newEnv(t)
	big := append([]byte("<methodCall><methodName>rssCloud.ping</methodName><params><param><value>"),
		bytes.Repeat([]byte("x"), 2<<20)...)
	big = append(big, "</value></param></params></methodCall>"...)
	resp := e.do(http.MethodPost, "/RPC2", "", bytes.NewReader(big))
	wantStatus(t, resp, http.StatusRequestEntityTooLarge)
	if b := string(readBody(t, resp)); !strings.Contains(b, "larger than 1048576 bytes") {
		t.Errorf("413 body = %q", b)
	}
	resp = e.do(http.MethodPost, "/RPC2", "", &unsizedReader{r: bytes.NewReader(big)})
	wantStatus(t, resp, http.StatusRequestEntityTooLarge)

	form := "url=http%3A%2F%2Fx.example%2F&name=" + strings.Repeat("n", 2<<20)
	resp = e.do(http.MethodPost, "/ping", "", &unsizedReader{r: strings.NewReader(form)}, "Content-Type", "application/x-www-form-urlencoded")
	wantStatus(t, resp, http.StatusRequestEntityTooLarge)
	if p := e.pings(); len(p) != 0 {
		t.Errorf("oversized pings were recorded: %+v", p)
	}
}

// A ping the hub cannot store must not be acknowledged.
func TestPingNotStoredIsNotAcknowledged(t *testing.T) {
	e := newEnv(t)
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	_, v, err := e.rpc("weblogUpdates.ping", "Blog", "http://x.example/")
	if err != nil {
		t.Fatal(err)
	}
	wantFlerror(t, v, true)
	_, v, err = e.rpc("weblogUpdates.extendedPing", "Blog", "http://x.example/", "", "http://x.example/feed")
	if err != nil {
		t.Fatal(err)
	}
	wantFlerror(t, v, true)
	_, v, err = e.rpc("rssCloud.ping", "http://x.example/feed")
	var f *xmlrpc.Fault
	if !errors.As(err, &f) || v != nil {
		t.Errorf("rssCloud.ping answered %v, %v; want a fault", v, err)
	}
	resp := e.do(http.MethodPost, "/ping", "", strings.NewReader("url=http%3A%2F%2Fx.example%2F"), "Content-Type", "application/x-www-form-urlencoded")
	wantStatus(t, resp, http.StatusInternalServerError)
	resp = e.do(http.MethodGet, "/pingSiteForm?url=http%3A%2F%2Fx.example%2F", "", nil)
	wantStatus(t, resp, http.StatusInternalServerError)
	if b := string(readBody(t, resp)); strings.Contains(b, "Thanks") {
		t.Errorf("failure page thanks: %s", b)
	}
}

func TestNoSecretsInLogs(t *testing.T) {
	e := newEnv(t)
	resp := e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": "n"})
	wantStatus(t, resp, http.StatusCreated)
	token := decodeJSON[map[string]any](t, resp)["token"].(string)
	resp = e.admin(http.MethodPost, "/api/nodes/n/token", nil)
	wantStatus(t, resp, http.StatusOK)
	rotated := decodeJSON[map[string]string](t, resp)["token"]
	e.do(http.MethodGet, "/api/nodes", "wrong-"+testAdminToken, nil)
	_, _, _ = e.rpc("weblogUpdates.ping", "x", "http://x.example/")
	logs := e.logs.String()
	if !strings.Contains(logs, "http request") {
		t.Fatalf("no access log lines:\n%s", logs)
	}
	for _, secret := range []string{testAdminToken, token, rotated} {
		if strings.Contains(logs, secret) {
			t.Errorf("the logs contain a token:\n%s", logs)
		}
	}
}
