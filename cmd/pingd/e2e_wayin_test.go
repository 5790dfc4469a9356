package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// TestReadersFindTheirWayIn is a new reader's path through pingd as it is
// configured out of the box: a user of the XMPP server names a feed no
// node follows and gets a node for it by chat (PINGD_OPEN_SOURCES=local is
// the default), whose page shows how anyone else subscribes; an operator
// imports an OPML subscription list with pingd import; GET /opml lists the
// open nodes for feed readers.
func TestReadersFindTheirWayIn(t *testing.T) {
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")
	feed := newFeedServer(t, feedItem{"old-1", "Old one"})
	other := newFeedServer(t, feedItem{"o-1", "Other"})
	d := newDaemon(t, p)
	d.Start(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// By chat, with the default configuration.
	reader := testenv.Dial(ctx, t, p, "reader", "pw", "phone")
	feedURL := feed.URL + "/feed.xml"
	var msg bytes.Buffer
	fmt.Fprintf(&msg, `<message type="chat" to=%q><body>`, p.ComponentDomain)
	_ = xml.EscapeText(&msg, []byte("subscribe "+feedURL))
	msg.WriteString(`</body></message>`)
	if _, err := reader.SendRaw(ctx, msg.String()); err != nil {
		t.Fatal(err)
	}
	if answer := readerAnswer(t, reader); !strings.Contains(answer, "Subscribed to") {
		t.Fatalf("a local reader's subscription to a new feed answered %q", answer)
	}
	d.waitBaselined(feedURL)
	page := httpGet(t, d.URL+"/feeds/"+url.PathEscape(feedURL), "text/html")
	want := "xmpp:" + p.ComponentDomain + "?message;body=subscribe%20" + strings.NewReplacer(":", "%3A", "/", "%2F").Replace(feedURL)
	if !strings.Contains(page, want) || !strings.Contains(page, "<svg") {
		t.Errorf("the node's page lacks the message URI %s or its QR code", want)
	}

	// pingd import.
	dir := t.TempDir()
	file := filepath.Join(dir, "subscriptions.opml")
	doc := fmt.Sprintf(`<?xml version="1.0"?>
<opml version="2.0"><head><title>my feeds</title></head><body>
 <outline text="Already followed" type="rss" xmlUrl=%q/>
 <outline text="Folder">
  <outline text="Other blog" type="rss" xmlUrl=%q/>
 </outline>
 <outline text="Broken" type="rss" xmlUrl="gopher://old.example/feed"/>
</body></opml>`, feedURL, other.URL+"/feed.xml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		switch k {
		case "PINGD_SERVER":
			return d.URL
		case "PINGD_ADMIN_TOKEN":
			return testAdminToken
		}
		return ""
	}
	var out bytes.Buffer
	code := run([]string{"import", file}, &out, &out, env)
	for _, line := range []string{"1 created, 1 existed, 1 refused", "Folder / Other blog", "existed", "gopher"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("pingd import printed no %q:\n%s", line, out.String())
		}
	}
	if code != 1 || !strings.Contains(out.String(), "1 of 3 outlines refused") {
		t.Errorf("pingd import with a refused outline: exit %d\n%s", code, out.String())
	}
	t.Logf("pingd import:\n%s", out.String())
	out.Reset()
	code = run([]string{"import", "--json", file}, &out, io.Discard, env)
	var res importResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || code != 1 || res.Existed != 2 || res.Refused != 1 {
		t.Errorf("pingd import --json again: exit %d, %+v, %v\n%s", code, res, err, out.String())
	}
	d.waitBaselined(other.URL + "/feed.xml")

	// GET /opml: both open nodes, read through pingd's own feeds.
	list := httpGet(t, d.URL+"/opml", "")
	for _, node := range []string{feedURL, other.URL + "/feed.xml"} {
		if want := `xmlUrl="` + d.URL + "/atom/" + url.PathEscape(node) + `"`; !strings.Contains(list, want) {
			t.Errorf("GET /opml lacks %s:\n%s", want, list)
		}
	}
}

// readerAnswer waits for the component's chat answer.
func readerAnswer(t *testing.T, c *testenv.Client) string {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case raw := <-c.Stanzas:
			var m struct {
				XMLName xml.Name `xml:"message"`
				Type    string   `xml:"type,attr"`
				Body    string   `xml:"body"`
			}
			if xml.Unmarshal(raw, &m) == nil && m.Type == "chat" && m.Body != "" {
				return m.Body
			}
		case <-deadline:
			t.Fatalf("%s: no answer", c.JID)
			return ""
		}
	}
}

// httpGet fetches a URL and returns its body, failing on anything but 200.
func httpGet(t *testing.T, u, accept string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d, %v\n%s", u, resp.StatusCode, err, b)
	}
	return string(b)
}
