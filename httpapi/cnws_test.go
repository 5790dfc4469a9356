package httpapi_test

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/httpapi"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/cnws"
	"github.com/pingd/pingd/internal/testenv"
)

const cnwsNS = cnws.Namespace

// cnwsResult is a CNWS answer.
type cnwsResult struct {
	XMLName xml.Name `xml:"http://www.owlfish.com/thoughts/cnws-2003-04-08.html notification"`
	Version string   `xml:"version,attr"`
	Result  struct {
		Status      string `xml:"status"`
		Title       string `xml:"title"`
		Description string `xml:"description"`
		Message     string `xml:"urn:pingd:cnws message"`
	} `xml:"result"`
}

func (e *dialectEnv) cnws(doc string, header ...string) (*http.Response, cnwsResult) {
	e.t.Helper()
	resp := e.do("POST", "/cnws", "text/xml", doc, header...)
	body := readAll(resp)
	var res cnwsResult
	if err := xml.Unmarshal([]byte(body), &res); err != nil {
		e.t.Fatalf("not a CNWS result (HTTP %d): %v\n%s", resp.StatusCode, err, body)
	}
	if res.Version != "1.0" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/xml") {
		e.t.Errorf("answer version %q, content type %q", res.Version, resp.Header.Get("Content-Type"))
	}
	return resp, res
}

func cnwsSubscribeDoc(resource, callback string) string {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0"?><notification version="1.0" xmlns="` + cnwsNS + `"><subscribe><resourceID>`)
	_ = xml.EscapeText(&b, []byte(resource))
	b.WriteString(`</resourceID><notificationURL>`)
	_ = xml.EscapeText(&b, []byte(callback))
	b.WriteString(`</notificationURL></subscribe></notification>`)
	return b.String()
}

func cnwsChangeDoc(resource, title, desc string) string {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0"?><notification version="1.0" xmlns="` + cnwsNS + `"><resourceChange><resourceID>`)
	_ = xml.EscapeText(&b, []byte(resource))
	b.WriteString(`</resourceID><changeTime>Mon, 07 Apr 2003 22:59:33 BST</changeTime>`)
	if title != "" {
		b.WriteString(`<title>`)
		_ = xml.EscapeText(&b, []byte(title))
		b.WriteString(`</title>`)
	}
	if desc != "" {
		b.WriteString(`<description>`)
		_ = xml.EscapeText(&b, []byte(desc))
		b.WriteString(`</description>`)
	}
	b.WriteString(`</resourceChange></notification>`)
	return b.String()
}

const cnwsTrueAnswer = `<notification version="1.0" xmlns="` + cnwsNS + `"><result><status>true</status></result></notification>`

// notification is what a CNWS subscriber gets.
type notification struct {
	Change struct {
		ResourceID  string `xml:"resourceID"`
		Title       string `xml:"title"`
		Description string `xml:"description"`
	} `xml:"http://www.owlfish.com/thoughts/cnws-2003-04-08.html resourceChange"`
}

func decodeNotification(t *testing.T, h hit) notification {
	t.Helper()
	var n notification
	if err := xml.Unmarshal([]byte(h.Body), &n); err != nil || n.Change.ResourceID == "" {
		t.Fatalf("not a CNWS resourceChange: %v\n%s", err, h.Body)
	}
	return n
}

// TestCNWSSubscribe: a subscribe answers true with the resource's title
// and description (waiting for a resource pingd did not know to be
// fetched); a repeated subscribe renews the one subscription.
func TestCNWSSubscribe(t *testing.T) {
	e := newDialectEnv(t)
	feedURL := e.origin.set("/feed.xml", "application/rss+xml", rssDoc("Weblog & Co", "a"))
	rec := newReceiver(t, answerStatus(200, cnwsTrueAnswer))

	resp, res := e.cnws(cnwsSubscribeDoc(feedURL, rec.URL+"/cnws"))
	if resp.StatusCode != 200 || res.Result.Status != "true" || res.Result.Title != "Weblog & Co" || res.Result.Description != "About Weblog & Co" {
		t.Fatalf("subscribe: HTTP %d %+v", resp.StatusCode, res.Result)
	}
	n, err := e.hub.NodeForURL(e.ctx, feedURL, false)
	if err != nil {
		t.Fatal(err)
	}
	subs := e.subs(n.Name, hub.KindCNWS)
	if len(subs) != 1 || subs[0].State != hub.SubActive || callbackOf(subs[0]) != rec.URL+"/cnws" ||
		subs[0].Options.Topic != feedURL || !subs[0].ExpiresAt.IsZero() {
		t.Fatalf("subscriptions %+v", subs)
	}
	if resp, res := e.cnws(cnwsSubscribeDoc(feedURL, rec.URL+"/cnws")); resp.StatusCode != 200 || res.Result.Status != "true" {
		t.Fatalf("renewal: HTTP %d %+v", resp.StatusCode, res.Result)
	}
	if again := e.subs(n.Name, hub.KindCNWS); len(again) != 1 || again[0].ID != subs[0].ID {
		t.Fatalf("renewal made another subscription: %+v", again)
	}
	// pingd's own node URL: the node's title.
	e.createNode("mine", "", hub.AccessOpen)
	if _, res := e.cnws(cnwsSubscribeDoc(e.srv.URL+"/atom/mine", rec.URL+"/cnws")); res.Result.Status != "true" || res.Result.Title != "Node mine" {
		t.Fatalf("own node: %+v", res.Result)
	}
	// A whitelist node needs its token.
	token := e.createNode("closed", "", hub.AccessWhitelist)
	if resp, res := e.cnws(cnwsSubscribeDoc(e.srv.URL+"/rss/closed", rec.URL+"/cnws")); resp.StatusCode != 401 || res.Result.Status != "false" {
		t.Fatalf("whitelist without token: HTTP %d %+v", resp.StatusCode, res.Result)
	}
	if _, res := e.cnws(cnwsSubscribeDoc(e.srv.URL+"/rss/closed", rec.URL+"/cnws"), "Authorization", "Bearer "+token); res.Result.Status != "true" {
		t.Fatalf("whitelist with token: %+v", res.Result)
	}
	if len(rec.Hits()) != 0 {
		t.Fatalf("subscribing notified: %+v", rec.Hits())
	}
}

// TestCNWSResourceChange: a publisher's resourceChange is a trusted ping:
// subscribers get its title and description even when the resource did
// not change; with a change and no text, the new item describes it. A
// subscriber answering false is removed.
func TestCNWSResourceChange(t *testing.T) {
	e := newDialectEnv(t)
	feedURL := e.origin.set("/feed.xml", "application/rss+xml", rssDoc("News", "a"))
	e.createNode("news", feedURL, hub.AccessOpen)
	e.waitBaselined("news")
	rec := newReceiver(t, answerStatus(200, cnwsTrueAnswer))
	if _, res := e.cnws(cnwsSubscribeDoc(feedURL, rec.URL+"/cnws")); res.Result.Status != "true" {
		t.Fatalf("subscribe: %+v", res.Result)
	}

	fetches := e.origin.fetches("/feed.xml")
	resp, res := e.cnws(cnwsChangeDoc(feedURL, "A correction", "We fixed a typo."))
	if resp.StatusCode != 200 || res.Result.Status != "true" {
		t.Fatalf("resourceChange: HTTP %d %+v", resp.StatusCode, res.Result)
	}
	n := decodeNotification(t, rec.waitMatching(t, 1, "notification", isPost)[0])
	if n.Change.ResourceID != feedURL || n.Change.Title != "A correction" || n.Change.Description != "We fixed a typo." {
		t.Fatalf("notification %+v", n.Change)
	}
	if e.origin.fetches("/feed.xml") <= fetches {
		t.Fatal("the resourceChange did not fetch the resource")
	}
	pings, _, err := e.hub.Pings(e.ctx, time.Now().Add(-time.Minute), 10)
	if err != nil || len(pings) != 1 || pings[0].Dialect != httpapi.DialectCNWS || pings[0].URL != feedURL {
		t.Fatalf("recorded pings %+v %v", pings, err)
	}

	e.origin.set("/feed.xml", "application/rss+xml", rssDoc("News", "a", "b"))
	e.cnws(cnwsChangeDoc(feedURL, "", ""))
	n = decodeNotification(t, rec.waitMatching(t, 2, "notifications", isPost)[1])
	if n.Change.Title != "Item b" || n.Change.Description != "Text of b" {
		t.Fatalf("second notification %+v", n.Change)
	}

	// "To unsubscribe … simply return false."
	rec.setAnswer(answerStatus(200, strings.Replace(cnwsTrueAnswer, "true", "false", 1)))
	e.cnws(cnwsChangeDoc(feedURL, "Third", ""))
	rec.waitMatching(t, 3, "notifications", isPost)
	testenv.WaitFor(t, 15*time.Second, "the subscriber to be removed", func() bool { return len(e.subs("news", hub.KindCNWS)) == 0 })
}

// TestCNWSBadDocuments: anything but a valid notification is answered
// with status false and HTTP 400, saying why.
func TestCNWSBadDocuments(t *testing.T) {
	e := newDialectEnv(t)
	ok := "http://example.org/"
	for name, doc := range map[string]string{
		"not XML":          `hello`,
		"empty":            ``,
		"unclosed":         `<notification version="1.0" xmlns="` + cnwsNS + `"><subscribe>`,
		"wrong root":       `<result xmlns="` + cnwsNS + `"/>`,
		"wrong namespace":  `<notification version="1.0" xmlns="urn:other"><resourceChange><resourceID>` + ok + `</resourceID></resourceChange></notification>`,
		"version":          `<notification version="2.0" xmlns="` + cnwsNS + `"><resourceChange><resourceID>` + ok + `</resourceID></resourceChange></notification>`,
		"no request":       `<notification version="1.0" xmlns="` + cnwsNS + `"/>`,
		"two requests":     `<notification version="1.0" xmlns="` + cnwsNS + `"><resourceChange><resourceID>` + ok + `</resourceID></resourceChange><resourceChange><resourceID>` + ok + `</resourceID></resourceChange></notification>`,
		"unknown request":  `<notification version="1.0" xmlns="` + cnwsNS + `"><unsubscribe><resourceID>` + ok + `</resourceID></unsubscribe></notification>`,
		"no resourceID":    `<notification version="1.0" xmlns="` + cnwsNS + `"><resourceChange><title>x</title></resourceChange></notification>`,
		"bad resourceID":   cnwsChangeDoc("mailto:me@example.org", "", ""),
		"no callback":      `<notification version="1.0" xmlns="` + cnwsNS + `"><subscribe><resourceID>` + ok + `</resourceID></subscribe></notification>`,
		"bad callback":     cnwsSubscribeDoc(ok, "ftp://example.org/"),
		"title too long":   cnwsChangeDoc(ok, strings.Repeat("x", 256), ""),
		"title markup":     `<notification version="1.0" xmlns="` + cnwsNS + `"><resourceChange><resourceID>` + ok + `</resourceID><title>a <b>bold</b> claim</title></resourceChange></notification>`,
		"doctype":          `<!DOCTYPE notification [<!ENTITY x "y">]><notification version="1.0" xmlns="` + cnwsNS + `"><resourceChange><resourceID>` + ok + `</resourceID></resourceChange></notification>`,
		"two roots":        cnwsChangeDoc(ok, "", "") + `<notification/>`,
		"duplicate field":  `<notification version="1.0" xmlns="` + cnwsNS + `"><resourceChange><resourceID>` + ok + `</resourceID><resourceID>` + ok + `</resourceID></resourceChange></notification>`,
		"unknown encoding": `<?xml version="1.0" encoding="x-nonsense"?><notification/>`,
	} {
		resp, res := e.cnws(doc)
		if resp.StatusCode != 400 || res.Result.Status != "false" || res.Result.Message == "" {
			t.Errorf("%s: HTTP %d %+v", name, resp.StatusCode, res.Result)
		}
	}
	// Too large: 413, still a CNWS answer.
	big := cnwsChangeDoc(ok, "", strings.Repeat("x", httpapi.DefaultMaxBodyBytes))
	if resp, res := e.cnws(big); resp.StatusCode != 413 || res.Result.Status != "false" {
		t.Errorf("too large: HTTP %d %+v", resp.StatusCode, res.Result)
	}
}
