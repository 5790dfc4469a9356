package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/pingd/pingd/hub"
)

// feedPage fetches /feeds/{node} as a browser does and parses it.
func (e *env) feedPage(path string) (*html.Node, string) {
	e.t.Helper()
	resp := e.do(http.MethodGet, path, "", nil, "Accept", "text/html")
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %s", path, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		e.t.Fatal(err)
	}
	return doc, string(b)
}

// entryLinks returns the entries of the page's list, in order, as
// (link, title) pairs; the link is "" for an entry shown without one.
func entryLinks(doc *html.Node) [][2]string {
	var out [][2]string
	for _, ul := range docFind(doc, docByTag("ul")) {
		if !hasClass(ul, "entries") {
			continue
		}
		for _, li := range docFind(ul, docByTag("li")) {
			for _, t := range docFind(li, func(n *html.Node) bool { return n.Type == html.ElementNode && hasClass(n, "title") }) {
				href := ""
				if t.Data == "a" {
					href = attrOf(t, "href")
				}
				out = append(out, [2]string{href, docText(t)})
			}
		}
	}
	return out
}

func hasClass(n *html.Node, class string) bool {
	return strings.Contains(" "+attrOf(n, "class")+" ", " "+class+" ")
}

func attrOf(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// TestFeedPageListsRecentEntries: the page a reader shares shows the
// node's newest entries (at most ten, newest first) with their links and
// dates, escapes hostile titles, neutralises links of other schemes, and
// offers the ways in: the roster and message URIs, the XEP-0060 URI, the
// node's feeds, with one message about XMPP (no "nothing else is needed"
// under the chat advice).
func TestFeedPageListsRecentEntries(t *testing.T) {
	e := newEnv(t)
	e.createNode("news", hub.AccessOpen)
	t0 := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
	for i := range 12 {
		id := fmt.Sprint(i)
		if _, err := e.hub.Publish(context.Background(), "news", "owner@example.org", []hub.Entry{{
			ID: id, Title: "Entry " + id, Link: "https://blog.example.org/" + id, Updated: t0.Add(time.Duration(i) * time.Hour),
		}}); err != nil {
			t.Fatal(err)
		}
	}
	const hostile = `<script>alert("x")</script> & "quotes"`
	if _, err := e.hub.Publish(context.Background(), "news", "owner@example.org", []hub.Entry{{
		ID: "evil", Title: hostile, Link: "javascript:alert(1)", Updated: t0.Add(24 * time.Hour),
	}}); err != nil {
		t.Fatal(err)
	}

	doc, raw := e.feedPage("/feeds/news")
	links := entryLinks(doc)
	if len(links) != 10 {
		t.Fatalf("the page lists %d entries, want the 10 newest: %q", len(links), links)
	}
	if links[0][1] != hostile {
		t.Errorf("newest entry shows %q, want the title as text %q", links[0][1], hostile)
	}
	if links[0][0] != "" || strings.Contains(raw, "javascript:") {
		t.Errorf("a javascript: link reached the page: %q", links[0][0])
	}
	if strings.Contains(raw, "<script>") {
		t.Error("the hostile title is in the page unescaped")
	}
	if want := [2]string{"https://blog.example.org/11", "Entry 11"}; links[1] != want {
		t.Errorf("second entry = %q, want %q", links[1], want)
	}
	if want := [2]string{"https://blog.example.org/3", "Entry 3"}; links[9] != want {
		t.Errorf("tenth entry = %q, want %q", links[9], want)
	}
	text := strings.Join(strings.Fields(docText(doc)), " ")
	if !strings.Contains(text, "4 March 2026, 16:06 UTC") {
		t.Error("the entries show no date")
	}
	for _, no := range []string{"nothing else is needed"} {
		if strings.Contains(text, no) {
			t.Errorf("the page still says %q", no)
		}
	}
	hrefs := map[string]bool{}
	for _, a := range docFind(doc, docByTag("a")) {
		hrefs[attrOf(a, "href")] = true
	}
	for _, want := range []string{
		"xmpp:pubsub.localhost?roster",
		"xmpp:pubsub.localhost?message;body=subscribe%20news",
		"xmpp:pubsub.localhost?pubsub;action=subscribe;node=news",
		"http://pingd.test:8080/atom/news",
		"http://pingd.test:8080/rss/news",
	} {
		if !hrefs[want] {
			t.Errorf("the page has no link to %s", want)
		}
	}
	// The chat comes first: it works in every client.
	if c, p := strings.Index(raw, `id="message-uri"`), strings.Index(raw, `id="subscribe-uri"`); c < 0 || p < c {
		t.Error("the chat command does not come before the XEP-0060 URI")
	}
}

// TestFeedPageOfAWhitelistNodeShowsNoEntries: a whitelist node's page
// is public; its entries are not.
func TestFeedPageOfAWhitelistNodeShowsNoEntries(t *testing.T) {
	e := newEnv(t)
	e.createNode("club", hub.AccessWhitelist)
	if _, err := e.hub.Publish(context.Background(), "club", "owner@example.org", []hub.Entry{{
		ID: "s", Title: "Members only", Link: "https://club.example.org/secret",
	}}); err != nil {
		t.Fatal(err)
	}
	doc, raw := e.feedPage("/feeds/club")
	if links := entryLinks(doc); len(links) != 0 || strings.Contains(raw, "Members only") || strings.Contains(raw, "club.example.org") {
		t.Errorf("a stranger sees the whitelist node's entries: %q", links)
	}
	if strings.Contains(raw, "/atom/club") {
		t.Error("the whitelist node's page offers its feed to strangers")
	}
}

// TestFeedPageInChromium: the page with entries in a real browser, styled
// by its own style sheet under its Content-Security-Policy, loading
// nothing else. PINGD_UPDATE_SCREENSHOT=1 writes docs/feed-page.png.
func TestFeedPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a headless Chromium")
	}
	e := newEnv(t)
	e.createNode("news", hub.AccessOpen)
	t0 := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
	for i, title := range []string{"Release 2.0 is out", "A week of bug fixes", "Notes from the meet-up", "Why we moved to XMPP"} {
		if _, err := e.hub.Publish(context.Background(), "news", "owner@example.org", []hub.Entry{{
			ID: fmt.Sprint(i), Title: title, Link: fmt.Sprintf("https://blog.example.org/%d", i), Updated: t0.Add(-time.Duration(i) * 26 * time.Hour),
		}}); err != nil {
			t.Fatal(err)
		}
	}
	var log requestLog
	srv := httptest.NewServer(log.wrap(e.api))
	t.Cleanup(srv.Close)

	dom, stderr := chromium(t, "--dump-dom", srv.URL+"/feeds/news")
	doc, err := html.Parse(bytes.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(entryLinks(doc)); got != 4 {
		t.Errorf("the browser's page lists %d entries, want 4", got)
	}
	for line := range strings.Lines(string(stderr)) {
		if strings.Contains(line, "Content Security Policy") {
			t.Errorf("Chromium reports a Content-Security-Policy violation: %s", line)
		}
	}
	dir := t.TempDir()
	if os.Getenv(updateScreenshotEnv) != "" {
		dir = filepath.Join("..", "docs")
	}
	shot := filepath.Join(dir, "feed-page.png")
	chromium(t, "--hide-scrollbars", "--force-device-scale-factor=1", "--window-size=900,1500", "--screenshot="+shot, srv.URL+"/feeds/news")
	t.Logf("screenshot: %s", shot)
	for _, path := range log.list() {
		if !strings.HasPrefix(path, "/feeds/") && path != "/favicon.ico" {
			t.Errorf("the browser asked the server for %s", path)
		}
	}
}
