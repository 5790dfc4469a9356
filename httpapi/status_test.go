package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// Hostile strings the page must show as text.
const (
	hostileNode   = `<script>alert("node")</script>`
	hostileTitle  = `<img src=x onerror=alert(1)>`
	hostileSource = `https://evil.example/"><script>alert(2)</script>`
	// Secrets the page must never show, to anyone.
	webhookSecret = "whsec-never-shown"
	sourceKey     = "s3cret-feed-key"
	urlPassword   = "url-pass-never-shown"
)

// statusFixture is what seedStatus stored.
type statusFixture struct {
	nodeTokens []string
	failingSub *hub.Subscription
}

// seedStatus fills the env's store, through the hub where it can and the
// store where only a fetch or a delivery would set a state: nodes of both
// access models, sources fetched fine, failing, gone and moved,
// subscriptions of every kind in every delivery state, and pings.
func seedStatus(t *testing.T, e *env) *statusFixture {
	t.Helper()
	ctx := context.Background()
	now := e.clock.Now()
	fx := &statusFixture{}
	create := func(name, source string, access hub.AccessModel, title string) *hub.Node {
		t.Helper()
		cfg := hub.DefaultNodeConfig()
		cfg.AccessModel, cfg.Title = access, title
		n, token, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: name, Source: source, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		fx.nodeTokens = append(fx.nodeTokens, token)
		return n
	}
	fetched := func(n *hub.Node, st hub.SourceState) {
		t.Helper()
		src, err := e.store.Source(ctx, n.SourceID)
		if err != nil {
			t.Fatal(err)
		}
		if st.URL == "" {
			st.URL = src.URL
		}
		if _, err := e.store.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st}); err != nil {
			t.Fatal(err)
		}
	}
	subscribe := func(n *hub.Node, kind hub.Kind, addr string, state hub.SubState) *hub.Subscription {
		t.Helper()
		s := hub.Subscription{NodeName: n.Name, Kind: kind, Address: addr, State: state,
			Options: hub.Options{Secret: webhookSecret}}
		if kind == hub.KindXMPP {
			s.BareJID, s.Options = addr, hub.Options{}
		}
		sub, _, err := e.hub.Subscribe(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		return sub
	}
	deliveryState := func(sub *hub.Subscription, ds hub.DeliveryState) {
		t.Helper()
		if err := e.store.SaveDeliveryState(ctx, sub.ID, ds); err != nil {
			t.Fatal(err)
		}
	}

	news := create("news", "https://news.example.org/feed.xml", hub.AccessOpen, "Daily news")
	fetched(news, hub.SourceState{Baselined: true, IsFeed: true, Title: "News", LastFetchAt: now.Add(-3 * time.Minute),
		LastStatus: 200, LastChangeAt: now.Add(-3 * time.Minute), NextFetchAt: now.Add(27 * time.Minute), NextFetchReason: "ttl 30m"})
	members := create("members", "https://private.example.org/feed.xml?key="+sourceKey, hub.AccessWhitelist, "Members only")
	fetched(members, hub.SourceState{LastFetchAt: now.Add(-time.Minute), ConsecutiveErrors: 3,
		LastError:   `Get "https://private.example.org/feed.xml?key=` + sourceKey + `": dial tcp: connection refused`,
		NextFetchAt: now.Add(-20 * time.Minute), NextFetchReason: "backoff after 3 errors"})
	old := create("old", "https://old.example.org/feed.xml", hub.AccessOpen, "")
	fetched(old, hub.SourceState{Baselined: true, Gone: true, LastFetchAt: now.Add(-time.Hour), LastStatus: 410})
	moving := create("moving", "https://was.example.org/feed.xml", hub.AccessOpen, "")
	fetched(moving, hub.SourceState{URL: "https://now.example.org/feed.xml", MovedFrom: "https://was.example.org/feed.xml",
		MovedAt: now.Add(-2 * time.Hour), Baselined: true, LastFetchAt: now.Add(-2 * time.Hour), LastStatus: 200,
		NextFetchAt: now.Add(time.Hour), NextFetchReason: "sy:updatePeriod hourly"})
	create("owners", "", hub.AccessOpen, "Published by its owners")
	create(hostileNode, hostileSource, hub.AccessOpen, hostileTitle)
	create("credentials", "https://feeder:"+urlPassword+"@feeds.example.net/private.xml", hub.AccessOpen, "")

	if err := e.hub.SetAffiliation(ctx, members, "member@example.org", hub.AffMember); err != nil {
		t.Fatal(err)
	}
	subscribe(news, hub.KindXMPP, "reader@example.org", "")
	subscribe(members, hub.KindXMPP, "member@example.org", "")
	fine := subscribe(news, hub.KindWebhook, "http://127.0.0.1:9/hook-fine", hub.SubActive)
	fx.failingSub = subscribe(news, hub.KindWebhook, "http://127.0.0.1:9/hook-failing", hub.SubActive)
	subscribe(news, hub.KindWebSub, "http://127.0.0.1:9/websub-behind", hub.SubActive)
	suspended := subscribe(members, hub.KindRSSCloud, "http://127.0.0.1:9/rsscloud-suspended", hub.SubActive)
	subscribe(old, hub.KindCNWS, "http://127.0.0.1:9/cnws-pending", hub.SubPending)

	// Two items on "news": the fine webhook got them, the others did not.
	if _, err := e.hub.Publish(ctx, "news", "", []hub.Entry{{ID: "a", Title: "A"}, {ID: "b", Title: "B"}}); err != nil {
		t.Fatal(err)
	}
	deliveryState(fine, hub.DeliveryState{Cursor: 2, LastDeliveredAt: now.Add(-time.Minute), LastStatus: 204})
	deliveryState(fx.failingSub, hub.DeliveryState{Attempts: 4, ConsecutiveErrors: 4, FirstFailureAt: now.Add(-90 * time.Minute),
		NextAttemptAt: now.Add(5 * time.Minute), LastStatus: 500,
		LastError: "POST http://127.0.0.1:9/hook-failing: 500 Internal Server Error"})
	deliveryState(suspended, hub.DeliveryState{ConsecutiveErrors: 3, FirstFailureAt: now.Add(-5 * time.Hour),
		LastError: "rssCloud notify http://127.0.0.1:9/rsscloud-suspended: connection refused"})
	if err := e.hub.SetSubscriptionState(ctx, suspended, hub.SubSuspended); err != nil {
		t.Fatal(err)
	}

	for i, p := range []struct {
		ago     time.Duration
		dialect string
		url     string
	}{
		{2 * time.Hour, "rest", "https://stale.example.org/feed.xml"},
		{40 * time.Minute, "xmlrpc-weblogupdates", "https://news.example.org/"},
		{10 * time.Minute, "rsscloud", "https://news.example.org/feed.xml"},
	} {
		_, err := e.hub.Ping(ctx, hub.Ping{Dialect: p.dialect, Name: fmt.Sprintf("blog %d", i),
			Remote: "203.0.113.7", ReceivedAt: now.Add(-p.ago)}, []string{p.url}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	return fx
}

// page is a parsed status page.
type statusDoc struct {
	t    *testing.T
	resp *http.Response
	body string
	doc  *html.Node
}

func getStatusPage(t *testing.T, e *env, path string, header ...string) *statusDoc {
	t.Helper()
	resp := e.do(http.MethodGet, path, "", nil, header...)
	body := string(readBody(t, resp))
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse the page: %v", err)
	}
	return &statusDoc{t: t, resp: resp, body: body, doc: doc}
}

func docAttr(n *html.Node, name string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val, true
		}
	}
	return "", false
}

// find returns the elements for which match is true, in document order.
func docFind(root *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for n := range root.Descendants() {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
	}
	return out
}

func docByID(id string) func(*html.Node) bool {
	return func(n *html.Node) bool { v, _ := docAttr(n, "id"); return v == id }
}

func docByTag(tag string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Data == tag }
}

// docText is the text content of n, with runs of white space (and line
// breaks) folded into one space.
func docText(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		switch {
		case d.Type == html.TextNode:
			b.WriteString(d.Data)
		case d.Type == html.ElementNode && d.Data == "br":
			b.WriteString(" ")
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func (p *statusDoc) one(id string) *html.Node {
	p.t.Helper()
	got := docFind(p.doc, docByID(id))
	if len(got) != 1 {
		p.t.Fatalf("%d elements with id %q, want 1", len(got), id)
	}
	return got[0]
}

// rows returns the body rows of a table as maps from the cells' labels to
// their text.
func (p *statusDoc) rows(tableID string) []map[string]string {
	p.t.Helper()
	var out []map[string]string
	for _, tr := range docFind(p.one(tableID), docByTag("tr")) {
		if tr.Parent.Data != "tbody" {
			continue
		}
		row := map[string]string{}
		for _, td := range docFind(tr, docByTag("td")) {
			label, _ := docAttr(td, "data-label")
			row[label] = docText(td)
		}
		out = append(out, row)
	}
	return out
}

// row returns the row whose cell label has the value.
func (p *statusDoc) row(tableID, label, value string) map[string]string {
	p.t.Helper()
	for _, r := range p.rows(tableID) {
		if r[label] == value {
			return r
		}
	}
	p.t.Fatalf("table %s has no row with %s = %q", tableID, label, value)
	return nil
}

// visibleText is the text of the body: what a reader sees.
func (p *statusDoc) visibleText() string {
	return docText(docFind(p.doc, docByTag("body"))[0])
}

func TestStatusPagePublic(t *testing.T) {
	e := newEnv(t)
	fx := seedStatus(t, e)
	p := getStatusPage(t, e, "/")
	wantStatus(t, p.resp, http.StatusOK)
	if ct := p.resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if h := p.resp.Header.Get("WWW-Authenticate"); h != "" {
		t.Errorf("the plain page asks for credentials: %q", h)
	}

	// The component state follows Ready.
	if got := docText(p.one("component")); !strings.Contains(got, "not connected") || !strings.Contains(got, "pubsub.localhost") {
		t.Errorf("component card = %q", got)
	}
	if got := docText(p.one("database")); !strings.Contains(got, "answering") || strings.Contains(got, "not answering") || !strings.Contains(got, "sqlite") {
		t.Errorf("database card = %q", got)
	}
	summary := docText(p.one("summary"))
	for _, want := range []string{"Not connected to the XMPP server", "1 HTTP subscription is suspended",
		"2 HTTP subscriptions are failing; the oldest failure began 5h ago", "1 source fails to fetch",
		"1 source is gone", "1 fetch is more than 5m late"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q: %s", want, summary)
		}
	}
	if !strings.Contains(docText(p.one("card-subscribers")), "xmpp 2 · webhook 2 · websub 1 · rsscloud 1 · cnws 1") {
		t.Errorf("subscriber card = %q", docText(p.one("card-subscribers")))
	}
	e.ready.Store(true)
	p2 := getStatusPage(t, e, "/")
	if got := docText(p2.one("component")); !strings.HasPrefix(got, "XMPP component connected") {
		t.Errorf("component card when connected = %q", got)
	}
	if strings.Contains(docText(p2.one("summary")), "Not connected") {
		t.Error("the summary still says not connected")
	}

	// Nodes with their subscriber counts per transport.
	news := p.row("node-list", "Node", "news")
	want := map[string]string{"Title": "Daily news", "Access": "open", "Source": "https://news.example.org/feed.xml",
		"xmpp": "1", "webhook": "2", "websub": "1", "rsscloud": "0", "cnws": "0", "XMPP backlog": "2"}
	for k, v := range want {
		if news[k] != v {
			t.Errorf("node news: %s = %q, want %q (row %v)", k, news[k], v, news)
		}
	}
	if !strings.Contains(news["Flags"], "1 failing") || !strings.Contains(news["Flags"], "2 behind") {
		t.Errorf("node news flags = %q", news["Flags"])
	}
	members := p.row("node-list", "Node", "members")
	if members["Access"] != "whitelist" || members["Source"] != "shown to admins" || members["rsscloud"] != "1" ||
		!strings.Contains(members["Flags"], "1 suspended") || !strings.Contains(members["Flags"], "source failing") {
		t.Errorf("node members = %v", members)
	}
	var order []string
	for _, r := range p.rows("node-list") {
		order = append(order, r["Node"])
	}
	// Problems first: failing or suspended subscribers, then a failing or
	// gone source; the rest by name.
	if len(order) != 7 || order[0] != "members" || order[1] != "news" || order[2] != "old" {
		t.Errorf("nodes in order %q", order)
	}
	if l, _ := docAttr(docFind(p.one("node-list"), docByTag("a"))[0], "href"); l != "/feeds/members" {
		t.Errorf("node link = %q", l)
	}

	// Sources: fetch state, status, next fetch and why, errors, flags.
	// A ping made the source due at once.
	srcNews := p.row("source-list", "Source", "https://news.example.org/feed.xml")
	if srcNews["Status"] != "200 OK" || srcNews["Errors in a row"] != "0" || srcNews["Why"] != "ping received" ||
		srcNews["Last fetch"] != "3m ago" || srcNews["Next fetch"] != "now" || srcNews["Last error"] != "—" {
		t.Errorf("source news = %v", srcNews)
	}
	failing := p.rows("source-list")[0]
	if failing["Source"] != "followed by whitelist nodes only: shown to admins" || failing["Errors in a row"] != "3" ||
		failing["Status"] != "no answer" || failing["Last error"] != "in the admin view" ||
		!strings.Contains(failing["Flags"], "failing") || !strings.Contains(failing["Flags"], "late") {
		t.Errorf("failing source = %v", failing)
	}
	gone := p.row("source-list", "Source", "https://old.example.org/feed.xml")
	if gone["Status"] != "410 Gone" || !strings.Contains(gone["Flags"], "gone") {
		t.Errorf("gone source = %v", gone)
	}
	moved := p.row("source-list", "Source", "https://now.example.org/feed.xml moved from https://was.example.org/feed.xml")
	if !strings.Contains(moved["Flags"], "moved") {
		t.Errorf("moved source = %v", moved)
	}

	// The delivery queue: worst first, addresses and errors left out.
	queue := docText(p.one("queue"))
	for _, want := range []string{"HTTP subscriptions 5", "Waiting for verification 1", "Behind their node 2 (4 events)",
		"Failing 2", "Suspended 1", "Oldest failure 5h ago", "Nodes behind over XMPP 1 (2 events)"} {
		if !strings.Contains(queue, want) {
			t.Errorf("queue lacks %q: %s", want, queue)
		}
	}
	deliveries := p.rows("deliveries")
	if len(deliveries) != 3 || deliveries[0]["Kind"] != "rsscloud" || !strings.Contains(deliveries[0]["Flags"], "suspended") ||
		deliveries[1]["Subscriber"] != fmt.Sprintf("#%d", fx.failingSub.ID) || deliveries[1]["Errors in a row"] != "4" ||
		deliveries[1]["Failing since"] != "1h 30m ago" || deliveries[1]["Next attempt"] != "in 5m" || deliveries[1]["Last status"] != "500" ||
		deliveries[2]["Kind"] != "websub" || deliveries[2]["Behind"] != "2" {
		t.Errorf("deliveries = %v", deliveries)
	}
	if _, ok := deliveries[0]["Last error"]; ok {
		t.Error("the public page has a last-error column for deliveries")
	}

	// Pings of the last hour, newest first, without where they came from.
	pings := p.rows("ping-list")
	if len(pings) != 2 || pings[0]["URL"] != "https://news.example.org/feed.xml" || pings[0]["Dialect"] != "rsscloud" ||
		pings[0]["Received"] != "10m ago" || pings[1]["URL"] != "https://news.example.org/" {
		t.Errorf("pings = %v", pings)
	}
	if _, ok := pings[0]["From"]; ok {
		t.Error("the public page shows where pings came from")
	}
	if docFind(p.doc, docByID("subscribers")) != nil {
		t.Error("the public page lists subscribers")
	}

	// Nothing only an admin may see, and no secret at all.
	for _, hidden := range []string{"reader@example.org", "member@example.org", "hook-failing", "hook-fine",
		"websub-behind", "rsscloud-suspended", "cnws-pending", "connection refused", "500 Internal Server Error",
		"203.0.113.7", "private.example.org", sourceKey, urlPassword, webhookSecret, testAdminToken} {
		if strings.Contains(p.body, hidden) {
			t.Errorf("the public page shows %q", hidden)
		}
	}
	for _, tok := range fx.nodeTokens {
		if strings.Contains(p.body, tok) {
			t.Error("the page shows a node token")
		}
	}
	// The credentials in a source URL are redacted for everyone.
	p.row("source-list", "Source", "https://feeder:xxxxx@feeds.example.net/private.xml")
}

func TestStatusPageAdmin(t *testing.T) {
	e := newEnv(t)
	fx := seedStatus(t, e)

	// The admin view asks for the token; the plain page never does.
	for _, header := range [][]string{
		nil,
		{"Authorization", "Bearer wrong"},
		{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:wrong"))},
		{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(testAdminToken+":"))},
		{"Authorization", "Digest " + testAdminToken},
	} {
		resp := e.do(http.MethodGet, "/?admin=1", "", nil, header...)
		wantStatus(t, resp, http.StatusUnauthorized)
		if h := resp.Header.Get("WWW-Authenticate"); h != `Basic realm="pingd"` {
			t.Errorf("%v: WWW-Authenticate = %q", header, h)
		}
		if b := string(readBody(t, resp)); strings.Contains(b, "hook-failing") || strings.Contains(b, testAdminToken) {
			t.Errorf("a 401 shows the page or the token: %s", b)
		}
	}

	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("anyone:"+testAdminToken))
	for _, auth := range []string{basic, "Bearer " + testAdminToken} {
		p := getStatusPage(t, e, "/?admin=1", "Authorization", auth)
		wantStatus(t, p.resp, http.StatusOK)
		marks := docFind(p.doc, func(n *html.Node) bool { c, _ := docAttr(n, "class"); return c == "admin" })
		if len(marks) != 1 || docText(marks[0]) != "admin view" {
			t.Errorf("%s: the page does not say it is the admin view", auth)
		}
		if v := p.resp.Header.Get("Cache-Control"); v != "no-store" {
			t.Errorf("Cache-Control = %q", v)
		}

		deliveries := p.rows("deliveries")
		if len(deliveries) != 3 || deliveries[1]["Subscriber"] != "http://127.0.0.1:9/hook-failing" ||
			deliveries[1]["Last error"] != "POST http://127.0.0.1:9/hook-failing: 500 Internal Server Error" {
			t.Errorf("admin deliveries = %v", deliveries)
		}
		failing := p.rows("source-list")[0]
		if failing["Source"] != "https://private.example.org/feed.xml?key="+sourceKey ||
			!strings.Contains(failing["Last error"], "connection refused") {
			t.Errorf("admin failing source = %v", failing)
		}
		if got := p.row("node-list", "Node", "members")["Source"]; got != "https://private.example.org/feed.xml?key="+sourceKey {
			t.Errorf("admin: members source = %q", got)
		}
		pings := p.rows("ping-list")
		if len(pings) != 2 || pings[0]["From"] != "203.0.113.7" {
			t.Errorf("admin pings = %v", pings)
		}
		var subs []string
		for _, r := range p.rows("subscriber-list") {
			subs = append(subs, r["Kind"]+" "+r["Subscriber"])
		}
		for _, want := range []string{"xmpp reader@example.org", "xmpp member@example.org", "webhook http://127.0.0.1:9/hook-fine",
			"cnws http://127.0.0.1:9/cnws-pending", "rsscloud http://127.0.0.1:9/rsscloud-suspended"} {
			if !slices.Contains(subs, want) {
				t.Errorf("admin subscribers %q lack %q", subs, want)
			}
		}
		// Secrets stay out of the admin view too.
		for _, secret := range append([]string{webhookSecret, testAdminToken, urlPassword}, fx.nodeTokens...) {
			if strings.Contains(p.body, secret) {
				t.Errorf("the admin view shows the secret %q", secret)
			}
		}
	}

	// Credentials on the plain page are ignored: it stays public.
	p := getStatusPage(t, e, "/", "Authorization", basic)
	wantStatus(t, p.resp, http.StatusOK)
	if strings.Contains(p.body, "hook-failing") {
		t.Error("the plain page shows admin parts to a request with credentials")
	}

	// Without an admin token configured nobody gets the admin view.
	tokenless, err := hub.New(hub.Config{Stores: store.HubStores(e.store)})
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(Config{Hub: tokenless, Store: e.store, PublicURL: "http://pingd.test"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/?admin=1", nil)
	req.SetBasicAuth("admin", "")
	api.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("admin view without a configured token: %d", rec.Code)
	}
}

func TestStatusPageEscapes(t *testing.T) {
	e := newEnv(t)
	seedStatus(t, e)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+testAdminToken))
	for _, hdr := range [][]string{nil, {"Authorization", basic}} {
		path := "/"
		if hdr != nil {
			path = "/?admin=1"
		}
		p := getStatusPage(t, e, path, hdr...)
		wantStatus(t, p.resp, http.StatusOK)
		// The hostile strings are text, not markup: no element came of them.
		if s := docFind(p.doc, docByTag("script")); len(s) != 0 {
			t.Errorf("%s: the page has %d script elements", path, len(s))
		}
		if imgs := docFind(p.doc, docByTag("img")); len(imgs) != 0 {
			t.Errorf("%s: the page has %d img elements", path, len(imgs))
		}
		for _, el := range docFind(p.doc, func(*html.Node) bool { return true }) {
			for _, a := range el.Attr {
				if strings.HasPrefix(strings.ToLower(a.Key), "on") {
					t.Errorf("%s: <%s> has the event handler %s=%q", path, el.Data, a.Key, a.Val)
				}
			}
		}
		// A source is stored in canonical form, its markup characters
		// percent-encoded; the page shows that form.
		shownSource, err := hub.CanonicalURL(hostileSource)
		if err != nil {
			t.Fatal(err)
		}
		row := p.row("node-list", "Node", hostileNode)
		if row["Title"] != hostileTitle || row["Source"] != shownSource {
			t.Errorf("%s: hostile node row = %v", path, row)
		}
		link := docFind(p.one("node-list"), func(n *html.Node) bool { return n.Data == "a" && docText(n) == hostileNode })
		if len(link) != 1 {
			t.Fatalf("%s: no link for the hostile node", path)
		}
		if href, _ := docAttr(link[0], "href"); href != "/feeds/%3Cscript%3Ealert%28%22node%22%29%3C%2Fscript%3E" {
			t.Errorf("%s: hostile node link = %q", path, href)
		}
		p.row("source-list", "Source", shownSource)
	}
}

func TestStatusPageHeaders(t *testing.T) {
	e := newEnv(t)
	seedStatus(t, e)
	p := getStatusPage(t, e, "/")
	csp := p.resp.Header.Get("Content-Security-Policy")
	styles := docFind(p.doc, docByTag("style"))
	if len(styles) != 1 {
		t.Fatalf("%d style elements, want 1", len(styles))
	}
	sum := sha256.Sum256([]byte(styles[0].FirstChild.Data))
	allowed := "style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	for _, want := range []string{"default-src 'none'", allowed, "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy %q allows something unsafe", csp)
	}
	for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer"} {
		if got := p.resp.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	// Nothing is loaded from anywhere: no element fetches a resource.
	for _, el := range docFind(p.doc, func(*html.Node) bool { return true }) {
		for _, a := range el.Attr {
			if a.Key == "src" || a.Key == "srcset" || (a.Key == "href" && el.Data != "a") || a.Key == "style" {
				t.Errorf("<%s %s=%q> loads or styles something outside the style sheet", el.Data, a.Key, a.Val)
			}
		}
	}
	if v, ok := docAttr(docFind(p.doc, func(n *html.Node) bool { v, _ := docAttr(n, "name"); return v == "viewport" })[0], "content"); !ok || !strings.Contains(v, "width=device-width") {
		t.Errorf("viewport = %q", v)
	}

	resp := e.do(http.MethodHead, "/", "", nil)
	wantStatus(t, resp, http.StatusOK)
	if b := readBody(t, resp); len(b) != 0 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
		resp.Header.Get("Content-Security-Policy") != csp {
		t.Errorf("HEAD: %d body bytes, headers %v", len(b), resp.Header)
	}
	resp = e.do(http.MethodPost, "/", "", nil)
	wantStatus(t, resp, http.StatusMethodNotAllowed)
	// "/" is the page, not a catch-all.
	wantStatus(t, e.do(http.MethodGet, "/no-such-page", "", nil), http.StatusNotFound)
}

func TestStatusPageEmptyAndBroken(t *testing.T) {
	e := newEnv(t)
	p := getStatusPage(t, e, "/")
	wantStatus(t, p.resp, http.StatusOK)
	for _, want := range []string{"No nodes yet.", "No node follows a source.", "No pings in the last hour.",
		"No HTTP subscription is failing, suspended or behind."} {
		if !strings.Contains(p.visibleText(), want) {
			t.Errorf("the empty page lacks %q", want)
		}
	}
	e.ready.Store(true)
	if p := getStatusPage(t, e, "/"); !strings.Contains(docText(p.one("summary")), "Nothing looks wrong.") {
		t.Errorf("empty, connected: summary = %q", docText(p.one("summary")))
	}

	// A database that does not answer is shown, not answered with an
	// error: the page is most needed then.
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	// Once the last reading has expired (statusCacheFor).
	e.clock.Advance(statusCacheFor)
	p = getStatusPage(t, e, "/")
	wantStatus(t, p.resp, http.StatusOK)
	if got := docText(p.one("database")); !strings.Contains(got, "not answering") || strings.Contains(got, "closed") {
		t.Errorf("database card with the store closed = %q", got)
	}
	if !strings.Contains(docText(p.one("summary")), "The database does not answer.") {
		t.Errorf("summary = %q", docText(p.one("summary")))
	}
	p = getStatusPage(t, e, "/?admin=1", "Authorization", "Bearer "+testAdminToken)
	if got := docText(p.one("database")); !strings.Contains(got, "closed") {
		t.Errorf("admin: database card with the store closed = %q (want the error)", got)
	}
}

// countingStore gives the page only the store methods it counts; any other
// method is the nil embedded interface's and panics, which fails the test.
type countingStore struct {
	store.Store // nil
	real        store.Store

	mu    sync.Mutex
	calls map[string]int
}

func (c *countingStore) count(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[name]++
}

func (c *countingStore) Check(ctx context.Context) error {
	c.count("Check")
	return c.real.Check(ctx)
}

func (c *countingStore) Backend() string { return c.real.Backend() }

func (c *countingStore) StatusReport(ctx context.Context, q store.StatusQuery) (*store.StatusReport, error) {
	c.count("StatusReport")
	return c.real.StatusReport(ctx, q)
}

// calls serves one page and returns the store calls it made.
func (c *countingStore) serve(t *testing.T, api *API, path string) (map[string]int, string) {
	t.Helper()
	c.mu.Lock()
	c.calls = map[string]int{}
	c.mu.Unlock()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("%s: the page called a store method other than Check and StatusReport: %v", path, r)
			}
		}()
		api.ServeHTTP(rec, req)
	}()
	if rec.Code != http.StatusOK {
		t.Fatalf("%s: status %d", path, rec.Code)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, rec.Body.String()
}

// TestStatusPageQueries checks that a view costs the same store calls
// whatever the size of the installation (StatusReport runs a fixed set of
// queries), and that big lists are capped and say how many more there are.
func TestStatusPageQueries(t *testing.T) {
	e := newEnv(t)
	seedStatus(t, e)
	cs := &countingStore{real: e.store}
	h, err := hub.New(hub.Config{Stores: store.HubStores(cs), Now: e.clock.Now, AdminToken: testAdminToken})
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(Config{Hub: h, Store: cs, PublicURL: "http://pingd.test", ComponentJID: "pubsub.localhost"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"Check": 1, "StatusReport": 1}
	for _, path := range []string{"/", "/?admin=1"} {
		if calls, _ := cs.serve(t, api, path); fmt.Sprint(calls) != fmt.Sprint(want) {
			t.Errorf("small installation, %s: store calls %v, want %v", path, calls, want)
		}
	}

	// Grow it well past the lists' caps.
	ctx := context.Background()
	const extra = statusListLimit + 30
	for i := range extra {
		n, _, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: fmt.Sprintf("bulk-%03d", i),
			Source: fmt.Sprintf("https://bulk.example.org/%d.xml", i), Config: hub.DefaultNodeConfig()})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []hub.Kind{hub.KindWebhook, hub.KindWebSub} {
			sub, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: n.Name, Kind: k,
				Address: fmt.Sprintf("http://127.0.0.1:9/%s/%d", k, i), State: hub.SubActive})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.store.SaveDeliveryState(ctx, sub.ID, hub.DeliveryState{ConsecutiveErrors: 1,
				FirstFailureAt: e.clock.Now().Add(-time.Minute), LastError: "refused"}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.hub.Ping(ctx, hub.Ping{Dialect: "rest", Remote: "203.0.113.8"}, []string{n.SourceURL}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The next views come after the readings of the small installation
	// have expired (statusCacheFor).
	e.clock.Advance(statusCacheFor)
	for _, path := range []string{"/", "/?admin=1"} {
		calls, body := cs.serve(t, api, path)
		if fmt.Sprint(calls) != fmt.Sprint(want) {
			t.Errorf("big installation, %s: store calls %v, want %v", path, calls, want)
		}
		doc, err := html.Parse(strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		p := &statusDoc{t: t, body: body, doc: doc}
		for _, table := range []string{"node-list", "source-list", "deliveries", "ping-list"} {
			if n := len(p.rows(table)); n != statusListLimit {
				t.Errorf("%s: table %s has %d rows, want the cap %d", path, table, n, statusListLimit)
			}
		}
		all := p.visibleText()
		for _, want := range []string{
			fmt.Sprintf("%d more not shown: the list shows %d, those with problems first.", 7+extra-statusListLimit, statusListLimit),
			fmt.Sprintf("%d more not shown: the list shows %d, the worst first.", 6+extra-statusListLimit, statusListLimit),
			fmt.Sprintf("%d more not shown: the list shows the %d worst.", 3+2*extra-statusListLimit, statusListLimit),
			fmt.Sprintf("%d more not shown: the list shows the newest %d.", 2+extra-statusListLimit, statusListLimit),
		} {
			if !strings.Contains(all, want) {
				t.Errorf("%s: the page lacks %q", path, want)
			}
		}
	}
}

func TestCompactDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 1499 * time.Millisecond: "1s", 45 * time.Second: "45s", time.Minute: "1m",
		200 * time.Second: "3m 20s", 2*time.Hour + 5*time.Minute + 9*time.Second: "2h 5m", 2 * time.Hour: "2h",
		76 * time.Hour: "3d 4h", 72*time.Hour + 30*time.Second: "3d",
	} {
		if got := compactDuration(d); got != want {
			t.Errorf("compactDuration(%v) = %q, want %q", d, got, want)
		}
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		t    time.Time
		want timeView
	}{
		{time.Time{}, timeView{Text: "—"}},
		{now, timeView{ISO: "2030-01-02T03:04:05Z", Title: "2030-01-02 03:04:05 UTC", Text: "now"}},
		{now.Add(-90 * time.Second), timeView{ISO: "2030-01-02T03:02:35Z", Title: "2030-01-02 03:02:35 UTC", Text: "1m 30s ago"}},
		{now.Add(26 * time.Hour), timeView{ISO: "2030-01-03T05:04:05Z", Title: "2030-01-03 05:04:05 UTC", Text: "in 1d 2h"}},
	} {
		if got := timeOf(c.t, now); got != c.want {
			t.Errorf("timeOf(%v) = %+v, want %+v", c.t, got, c.want)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://example.org/feed":                   "https://example.org/feed",
		"https://user:pw@example.org/feed":           "https://user:xxxxx@example.org/feed",
		"https://user@example.org/feed":              "https://user@example.org/feed",
		"mailto:someone@example.org":                 "mailto:someone@example.org",
		"reader@example.org":                         "reader@example.org",
		`Get "https://a:b@h/x": refused`:             `Get "https://a:xxxxx@h/x": refused`,
		"see http://u:p@one/ and ftp://v:q@two/ too": "see http://u:xxxxx@one/ and ftp://v:xxxxx@two/ too",
	} {
		got := redactURL(in)
		if got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzStatusRedact checks that no password of a URL survives redaction,
// whatever the text around it.
func FuzzStatusRedact(f *testing.F) {
	f.Add("https://example.org/feed", "user", "secret-pass")
	f.Add(`Get "`, "a", "hunter22")
	f.Add("x ", "", "p@ss:word")
	f.Fuzz(func(t *testing.T, prefix, user, pass string) {
		if len(pass) < 4 || strings.ContainsAny(pass, "@/ \t\r\n\v\f\u0085\u00a0") || strings.ContainsAny(user, ":@/ \t\r\n\v\f\u0085\u00a0") ||
			strings.Contains(prefix, pass) || strings.Contains(user, pass) || strings.Contains("xxxxx", pass) {
			return
		}
		raw := "https://" + user + ":" + pass + "@host.example/path"
		for _, s := range []string{redactText(prefix + raw + " tail"), redactURL(raw)} {
			if strings.Contains(s, pass) {
				t.Fatalf("the password %q survived: %q", pass, s)
			}
		}
	})
}

// TestStatusPageRateLimit: the public status page shares the admin API's
// per-client bucket, so reloading it in a loop is refused with 429 and
// Retry-After like the admin API.
func TestStatusPageRateLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.AdminRate = 0.001; c.AdminBurst = 2 })
	for range 2 {
		wantStatus(t, e.do(http.MethodGet, "/", "", nil), http.StatusOK)
	}
	resp := e.do(http.MethodGet, "/", "", nil)
	wantStatus(t, resp, http.StatusTooManyRequests)
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || secs < 1 {
		t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	// The admin API is in the same bucket.
	wantStatus(t, e.admin(http.MethodGet, "/api/nodes", nil), http.StatusTooManyRequests)
}

// TestStatusPageShowsTheFetchLoad: the page tells whether the fetcher keeps
// up (due, being fetched, late, the oldest due time) and the limits it
// works within.
func TestStatusPageShowsTheFetchLoad(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PollInterval = 2 * time.Hour })
	seedStatus(t, e)
	now := e.clock.Now()
	// Another process fetches the source due the longest (the failing
	// one, due 20 minutes ago); two new ones and the pinged one wait.
	claimed, err := e.store.ClaimDueSources(t.Context(), now, 1, "other-process", now.Add(time.Minute))
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	p := getStatusPage(t, e, "/")
	wantStatus(t, p.resp, http.StatusOK)
	if got := docText(p.one("card-fetcher")); !strings.Contains(got, "Fetcher 3 due now · 1 being fetched · 1 late · oldest due 20m ago") {
		t.Errorf("fetcher card = %q", got)
	}
	load := docText(p.one("fetch-load"))
	for _, want := range []string{"Due now, waiting 3", "Being fetched 1", "Late (due more than 5m ago) 1", "Oldest due 20m ago"} {
		if !strings.Contains(load, want) {
			t.Errorf("fetch load lacks %q: %s", want, load)
		}
	}
	limits := docText(p.one("fetch-limits"))
	for _, want := range []string{"Fetch workers 8", "Fetches per host at once 2", "Spacing per host none",
		"Default poll interval 2h", "This process: running, waiting for their host, hosts paused 0 · 0 · 0"} {
		if !strings.Contains(limits, want) {
			t.Errorf("fetch limits lack %q: %s", want, limits)
		}
	}
}

// gatedStore is countingStore whose first StatusReport waits for release,
// so that the views of a burst arrive while the reading runs.
type gatedStore struct {
	*countingStore
	release chan struct{}
}

func (g *gatedStore) StatusReport(ctx context.Context, q store.StatusQuery) (*store.StatusReport, error) {
	<-g.release
	return g.countingStore.StatusReport(ctx, q)
}

// TestStatusPageBurstCostsOneReading: 50 views at once, through the real
// SQLite store, cost one Check and one StatusReport (about eight
// whole-table aggregates), not fifty: viewers arriving while the reading
// runs wait for it, and later ones within statusCacheFor are served from
// it. The admin view has its own reading; after statusCacheFor a view
// reads the store again.
func TestStatusPageBurstCostsOneReading(t *testing.T) {
	e := newEnv(t)
	seedStatus(t, e)
	cs := &countingStore{real: e.store, calls: map[string]int{}}
	gs := &gatedStore{countingStore: cs, release: make(chan struct{})}
	h, err := hub.New(hub.Config{Stores: store.HubStores(gs), Now: e.clock.Now, AdminToken: testAdminToken})
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(Config{Hub: h, Store: gs, PublicURL: "http://pingd.test", ComponentJID: "pubsub.localhost", AdminBurst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	view := func(path string, header ...string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const views = 50
	var wg sync.WaitGroup
	bodies := make([]string, views)
	for i := range views {
		wg.Go(func() {
			code, body := view("/")
			if code != http.StatusOK {
				t.Errorf("view %d: status %d", i, code)
			}
			bodies[i] = body
		})
	}
	// Let the burst arrive while the first reading waits, then let it run.
	time.Sleep(200 * time.Millisecond)
	close(gs.release)
	wg.Wait()
	cs.mu.Lock()
	got := fmt.Sprint(cs.calls)
	cs.mu.Unlock()
	if want := fmt.Sprint(map[string]int{"Check": 1, "StatusReport": 1}); got != want {
		t.Errorf("%d views at once: store calls %s, want %s", views, got, want)
	}
	for i, b := range bodies {
		if !strings.Contains(b, `id="node-list"`) {
			t.Errorf("view %d lacks the node list", i)
			break
		}
	}

	// The admin view reads with the subscribers: a reading of its own.
	if code, _ := view("/?admin=1", "Authorization", "Bearer "+testAdminToken); code != http.StatusOK {
		t.Errorf("admin view: %d", code)
	}
	if code, _ := view("/"); code != http.StatusOK {
		t.Errorf("public view: %d", code)
	}
	cs.mu.Lock()
	got = fmt.Sprint(cs.calls)
	cs.mu.Unlock()
	if want := fmt.Sprint(map[string]int{"Check": 2, "StatusReport": 2}); got != want {
		t.Errorf("after an admin view and another public one: store calls %s, want %s", got, want)
	}

	// Once the reading has expired, a view reads again.
	e.clock.Advance(statusCacheFor)
	if code, _ := view("/"); code != http.StatusOK {
		t.Errorf("public view: %d", code)
	}
	cs.mu.Lock()
	got = fmt.Sprint(cs.calls)
	cs.mu.Unlock()
	if want := fmt.Sprint(map[string]int{"Check": 3, "StatusReport": 3}); got != want {
		t.Errorf("after statusCacheFor: store calls %s, want %s", got, want)
	}
}
