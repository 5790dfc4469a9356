package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/netguard"
	"github.com/pingd/pingd/internal/opml"
)

// opmlOutline is an outline of GET /opml with pingd's own attribute.
type opmlOutline struct {
	Type    string `xml:"type,attr"`
	Text    string `xml:"text,attr"`
	Title   string `xml:"title,attr"`
	XMLURL  string `xml:"xmlUrl,attr"`
	HTMLURL string `xml:"htmlUrl,attr"`
	Source  string `xml:"https://github.com/pingd/pingd/opml source,attr"`
}

type opmlDocument struct {
	XMLName  xml.Name      `xml:"opml"`
	Version  string        `xml:"version,attr"`
	Title    string        `xml:"head>title"`
	Outlines []opmlOutline `xml:"body>outline"`
}

func (e *env) getOPML(header ...string) (*http.Response, *opmlDocument) {
	e.t.Helper()
	resp := e.do(http.MethodGet, "/opml", "", nil, header...)
	if resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	var doc opmlDocument
	if err := xml.Unmarshal(readBody(e.t, resp), &doc); err != nil {
		e.t.Fatalf("GET /opml: %v", err)
	}
	return resp, &doc
}

// TestOPMLListsOpenNodes: GET /opml is an OPML 2.0 subscription list of
// the open nodes: xmlUrl the node's Atom feed, htmlUrl its source's site
// (else the node's page), pingd:source the source; whitelist nodes are
// left out. It is rendered once per interval and served with an ETag,
// 304, gzip and nosniff.
func TestOPMLListsOpenNodes(t *testing.T) {
	e := newEnv(t)
	e.followedSource("news", "https://blog.example.org/feed.xml", "https://blog.example.org/")
	wantStatus(t, e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": "own & only", "title": `Published "here"`}), http.StatusCreated)
	wantStatus(t, e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": "club", "source": "https://intranet.example.org/private.xml", "access_model": "whitelist"}), http.StatusCreated)

	resp, doc := e.getOPML()
	wantStatus(t, resp, http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); ct != "text/x-opml; charset=utf-8" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers %v", resp.Header)
	}
	want := []opmlOutline{
		{Type: "rss", Text: "news", Title: "news", XMLURL: "http://pingd.test:8080/atom/news",
			HTMLURL: "https://blog.example.org/", Source: "https://blog.example.org/feed.xml"},
		{Type: "rss", Text: `Published "here"`, Title: `Published "here"`, XMLURL: "http://pingd.test:8080/atom/own%20&%20only",
			HTMLURL: "http://pingd.test:8080/feeds/own%20&%20only"},
	}
	if doc.Version != "2.0" || fmt.Sprint(doc.Outlines) != fmt.Sprint(want) {
		t.Errorf("GET /opml: version %q, outlines\n %+v\nwant\n %+v", doc.Version, doc.Outlines, want)
	}

	// One rendering per interval: a node made meanwhile shows after it.
	etag := resp.Header.Get("ETag")
	wantStatus(t, e.do(http.MethodGet, "/opml", "", nil, "If-None-Match", etag), http.StatusNotModified)
	wantStatus(t, e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": "later"}), http.StatusCreated)
	if _, doc := e.getOPML(); len(doc.Outlines) != 2 {
		t.Errorf("within the interval the list has %d outlines, want the 2 of its rendering", len(doc.Outlines))
	}
	e.clock.Advance(opmlInterval)
	resp, doc = e.getOPML()
	if len(doc.Outlines) != 3 || resp.Header.Get("ETag") == etag {
		t.Errorf("after the interval: %d outlines, ETag %s (was %s)", len(doc.Outlines), resp.Header.Get("ETag"), etag)
	}

	// gzip, made once: the same bytes for every reader.
	gz := e.do(http.MethodGet, "/opml", "", nil, "Accept-Encoding", "gzip")
	if gz.Header.Get("Content-Encoding") != "gzip" || !strings.HasSuffix(gz.Header.Get("ETag"), `-gzip"`) {
		t.Fatalf("gzip answer headers %v", gz.Header)
	}
	zr, err := gzip.NewReader(gz.Body)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil || !bytes.Contains(plain, []byte(`xmlUrl="http://pingd.test:8080/atom/later"`)) {
		t.Errorf("gzip body %q, %v", plain, err)
	}
}

// TestOPMLIsBounded: the list holds at most its cap of outlines, the
// oldest, and says how many there are; readers are limited per client.
func TestOPMLIsBounded(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ListRate, c.ListBurst = 0.001, 3 })
	e.api.lists.opml.maxOutlines = 2
	for _, n := range []string{"a", "b", "c"} {
		wantStatus(t, e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": n}), http.StatusCreated)
	}
	_, doc := e.getOPML()
	if len(doc.Outlines) != 2 || doc.Outlines[1].Text != "b" || !strings.Contains(doc.Title, "the first 2 of 3") {
		t.Errorf("capped list: title %q, outlines %+v", doc.Title, doc.Outlines)
	}
	e.api.lists.opml.maxBytes = 1
	e.clock.Advance(opmlInterval)
	if _, doc := e.getOPML(); len(doc.Outlines) != 0 || !strings.Contains(doc.Title, "the first 0 of 3") {
		t.Errorf("list over its byte cap: title %q, outlines %+v", doc.Title, doc.Outlines)
	}
	e.getOPML()
	resp := e.do(http.MethodGet, "/opml", "", nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("past the readers' limit: HTTP %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestOPMLEmpty: with no open node the list is a whole OPML document,
// its head titled, its body present and empty (docs/protocols.md says why
// no outline is made up).
func TestOPMLEmpty(t *testing.T) {
	e := newEnv(t)
	wantStatus(t, e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": "club", "access_model": "whitelist"}), http.StatusCreated)
	resp := e.do(http.MethodGet, "/opml", "", nil)
	wantStatus(t, resp, http.StatusOK)
	body := string(readBody(t, resp))
	var doc opmlDocument
	if err := xml.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("GET /opml: %v\n%s", err, body)
	}
	if doc.Version != "2.0" || doc.Title == "" || len(doc.Outlines) != 0 || !strings.Contains(body, "<body") {
		t.Errorf("empty list: version %q, title %q, outlines %+v\n%s", doc.Version, doc.Title, doc.Outlines, body)
	}
}

// importOPML posts a document to /api/opml.
func (e *env) importOPML(doc string) *http.Response {
	e.t.Helper()
	return e.do(http.MethodPost, "/api/opml", testAdminToken, strings.NewReader(doc), "Content-Type", "text/x-opml")
}

// TestOPMLImport: POST /api/opml makes an open node for each feed no node
// follows, finds the nodes that follow the others (in any spelling, a
// whitelist node's source included, which never gets an open node), and
// says outline by outline what it did and why it refused.
func TestOPMLImport(t *testing.T) {
	e := newEnv(t)
	e.followedSource("news", "https://blog.example.org/feed.xml", "https://blog.example.org/")
	wantStatus(t, e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": "club", "source": "https://intranet.example.org/private.xml", "access_model": "whitelist"}), http.StatusCreated)
	const doc = `<?xml version="1.0"?>
<opml version="2.0"><head><title>export</title></head><body>
 <outline text="Go blog" type="rss" xmlUrl="https://go.dev/blog/feed.atom" htmlUrl="https://go.dev/blog"/>
 <outline text="Friends">
  <outline text="Blog again" type="rss" xmlUrl="HTTPS://BLOG.example.org:443/feed.xml"/>
  <outline text="Private" type="rss" xmlUrl="https://intranet.example.org/private.xml?"/>
  <outline text="Deep">
   <outline type="rss" xmlUrl="https://deep.example.net/rss"/>
  </outline>
 </outline>
 <outline text="Not a web feed" type="rss" xmlUrl="ftp://files.example.org/feed"/>
 <outline text="A note"/>
 <outline text="Ourselves" type="rss" xmlUrl="http://pingd.test:8080/atom/news"/>
 <outline text="Our missing node" type="rss" xmlUrl="http://pingd.test:8080/atom/nope"/>
</body></opml>`
	resp := e.importOPML(doc)
	wantStatus(t, resp, http.StatusOK)
	got := decodeJSON[opmlImportJSON](t, resp)
	type outcome struct {
		index                int
		result, node, reason string
	}
	want := []outcome{
		{1, "created", "https://go.dev/blog/feed.atom", ""},
		{3, "existed", "news", ""},
		{4, "existed", "club", ""},
		{6, "created", "https://deep.example.net/rss", ""},
		{7, "refused", "", "http"},
		{8, "refused", "", "no xmlUrl"},
		{9, "existed", "news", ""},
		{10, "refused", "", "does not exist"},
	}
	if len(got.Outlines) != len(want) || got.Created != 2 || got.Existed != 3 || got.Refused != 3 {
		t.Fatalf("import answered %+v", got)
	}
	for i, w := range want {
		g := got.Outlines[i]
		if g.Index != w.index || g.Result != w.result || g.Node != w.node || !strings.Contains(g.Reason, w.reason) {
			t.Errorf("outline %d: %+v, want %+v", i, g, w)
		}
	}
	if deep := got.Outlines[3]; strings.Join(deep.Folders, "/") != "Friends/Deep" || deep.Text != "https://deep.example.net/rss" {
		t.Errorf("the nested outline is reported as %+v", deep)
	}
	n, err := e.hub.Node(context.Background(), "https://go.dev/blog/feed.atom")
	if err != nil || n.AccessModel != hub.AccessOpen || n.Title != "Go blog" || n.SourceURL != "https://go.dev/blog/feed.atom" || n.Implicit {
		t.Errorf("created node %+v, %v", n, err)
	}
	nodes, _ := e.hub.Nodes(context.Background())
	if len(nodes) != 4 {
		t.Errorf("%d nodes after the import, want 4 (no open node for the whitelist node's source)", len(nodes))
	}

	// Again: everything that was made exists.
	again := decodeJSON[opmlImportJSON](t, e.importOPML(doc))
	if again.Created != 0 || again.Existed != 5 || again.Refused != 3 {
		t.Errorf("second import answered %+v", again)
	}
}

// TestOPMLImportRefuses: what is not OPML, too large, too many or too deep
// outlines, or comes without the admin token changes nothing; with the
// address check, feeds at private addresses are refused one by one.
func TestOPMLImportRefuses(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBodyBytes = 64 << 10; c.CheckHost = netguard.CheckHost })
	outlines := func(n int) string {
		var b strings.Builder
		b.WriteString(`<opml version="2.0"><body>`)
		for i := range n {
			fmt.Fprintf(&b, `<outline xmlUrl="https://a%d.example/"/>`, i)
		}
		b.WriteString(`</body></opml>`)
		return b.String()
	}
	deep := `<opml><body>` + strings.Repeat(`<outline text="f">`, opml.DefaultLimits.Depth+1) + strings.Repeat(`</outline>`, opml.DefaultLimits.Depth+1) + `</body></opml>`
	for name, tc := range map[string]struct {
		token, body string
		status      int
		says        string
	}{
		"no token":    {"", outlines(1), http.StatusUnauthorized, "bearer"},
		"JSON":        {testAdminToken, `{"feeds": []}`, http.StatusBadRequest, "not an OPML document"},
		"RSS":         {testAdminToken, `<rss version="2.0"><channel/></rss>`, http.StatusBadRequest, "the root element is"},
		"too large":   {testAdminToken, outlines(3000), http.StatusRequestEntityTooLarge, "larger than 65536 bytes"},
		"too deep":    {testAdminToken, deep, http.StatusRequestEntityTooLarge, "outlines at most 16"},
		"private URL": {testAdminToken, `<opml><body><outline xmlUrl="http://10.1.2.3/feed"/><outline xmlUrl="http://127.0.0.1:9/feed"/></body></opml>`, http.StatusOK, `"refused": 2`},
	} {
		resp := e.do(http.MethodPost, "/api/opml", tc.token, strings.NewReader(tc.body))
		body := string(readBody(t, resp))
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("%s: HTTP %d %s; want %d saying %q", name, resp.StatusCode, body, tc.status, tc.says)
		}
	}
	e.api.lists.maxBody = 1 << 20
	if resp := e.importOPML(outlines(opml.DefaultLimits.Outlines + 1)); resp.StatusCode != http.StatusRequestEntityTooLarge ||
		!strings.Contains(string(readBody(t, resp)), "more than 2000 outlines") {
		t.Errorf("too many outlines: HTTP %d", resp.StatusCode)
	}
	if nodes, _ := e.hub.Nodes(context.Background()); len(nodes) != 0 {
		t.Errorf("refused imports made %d nodes", len(nodes))
	}
}
