package main

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mmcdole/gofeed"

	"github.com/beevik/etree"

	"github.com/pingd/pingd/internal/testenv"
)

// TestOneChangeEverySubscriber is the cross-protocol path: one node, one
// subscriber of every kind (XMPP, a GetPingd webhook, WebSub, rssCloud,
// CNWS), and one change announced in each dialect (XML-RPC, REST /ping,
// CNWS resourceChange, WebSub publish, an owner's XMPP publish). Every
// subscriber gets each change exactly once, in its own format, with only
// what is new.
func TestOneChangeEverySubscriber(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")
	p.Register("owner", "pw")
	feed := newFeedServer(t, feedItem{"old-1", "Old one"})
	feedURL := feed.URL + "/feed.xml"
	d := newDaemon(t, p)
	d.Start(true)
	if code := d.api("POST", "/api/nodes", map[string]string{"node": "news", "source": feedURL, "title": "News"}, nil); code != 201 {
		t.Fatalf("create node: HTTP %d", code)
	}
	d.waitBaselined("news")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reader := testenv.Dial(ctx, t, p, "reader", "pw", "e2e")
	if resp := subscribe(t, ctx, reader, p.ComponentDomain, "news"); !strings.Contains(resp, `subscription="subscribed"`) {
		t.Fatalf("XMPP subscribe: %s", resp)
	}
	// The node's newest item, the feed's entry at its first fetch, is sent
	// to the new subscription: it is an item, never told as new.
	if got := collectItems(t, reader, 1, 15*time.Second, 300*time.Millisecond); !slices.Equal(got, []receivedItem{{"news", "old-1", "Old one"}}) {
		t.Fatalf("sent on subscribing: %v", got)
	}
	owner := testenv.Dial(ctx, t, p, "owner", "pw", "e2e")

	hook, websub, cloud, cnws := newRecordingServer(t), newRecordingServer(t), newRecordingServer(t), newRecordingServer(t)

	// GetPingd webhook.
	req, _ := http.NewRequest("SUBSCRIBE", d.URL+"/feeds/news", strings.NewReader(
		`<subscribe><url href="`+hook.URL+`/hook" method="POST" diff="none"/></subscribe>`))
	req.Header.Set("Content-Type", "application/getpingd+http+subscribe+xml")
	if code, body := doRequest(t, req); code != http.StatusAccepted {
		t.Fatalf("GetPingd subscribe: HTTP %d %s", code, body)
	}
	// WebSub, on the feed's own URL.
	if code, body := postForm(t, d.URL+"/websub", url.Values{"hub.mode": {"subscribe"}, "hub.topic": {feedURL},
		"hub.callback": {websub.URL + "/websub"}, "hub.secret": {"websub-secret"}}); code != http.StatusAccepted {
		t.Fatalf("WebSub subscribe: HTTP %d %s", code, body)
	}
	// rssCloud, REST, notified at this test's own address.
	cloudURL, _ := url.Parse(cloud.URL)
	code, body := postForm(t, d.URL+"/pleaseNotify", url.Values{"notifyProcedure": {""}, "port": {cloudURL.Port()},
		"path": {"/rsscloud"}, "protocol": {"http-post"}, "url1": {feedURL}})
	if code != 200 || !strings.Contains(body, `success="true"`) {
		t.Fatalf("pleaseNotify: HTTP %d %s", code, body)
	}
	// CNWS.
	code, body = postXML(t, d.URL+"/cnws", `<notification version="1.0" xmlns="http://www.owlfish.com/thoughts/cnws-2003-04-08.html">`+
		`<subscribe><resourceID>`+feedURL+`</resourceID><notificationURL>`+cnws.URL+`/cnws</notificationURL></subscribe></notification>`)
	if code != 200 || !strings.Contains(body, "<status>true</status>") || !strings.Contains(body, "<title>Test feed</title>") {
		t.Fatalf("CNWS subscribe: HTTP %d %s", code, body)
	}
	testenv.WaitFor(t, 20*time.Second, "every subscription to be active", func() bool {
		active := map[string]bool{}
		for _, s := range d.protoSubscribers("news") {
			if s.State == "active" {
				active[s.Kind] = true
			}
		}
		return len(active) == 5
	})
	// What came before the changes (verifications, the test notification)
	// does not count.
	for _, rs := range []*recordingServer{hook, websub, cloud, cnws} {
		rs.reset()
	}

	type round struct {
		dialect string
		item    feedItem
		// title is what the CNWS notification says.
		title    string
		announce func(item feedItem)
	}
	rounds := []round{
		{"XML-RPC weblogUpdates.ping", feedItem{"new-1", "New via XML-RPC"}, "New via XML-RPC", func(feedItem) {
			if body := d.xmlrpc("weblogUpdates.ping", "Test blog", feedURL); !strings.Contains(body, "<boolean>0</boolean>") {
				t.Fatalf("weblogUpdates.ping: %s", body)
			}
		}},
		{"REST /ping", feedItem{"new-2", "New via REST"}, "New via REST", func(feedItem) {
			if code, body := postForm(t, d.URL+"/ping", url.Values{"url": {feedURL}}); code != 200 {
				t.Fatalf("/ping: HTTP %d %s", code, body)
			}
		}},
		{"CNWS resourceChange", feedItem{"new-3", "New via CNWS"}, "The publisher says", func(feedItem) {
			code, body := postXML(t, d.URL+"/cnws", `<notification version="1.0" xmlns="http://www.owlfish.com/thoughts/cnws-2003-04-08.html">`+
				`<resourceChange><resourceID>`+feedURL+`</resourceID><changeTime>Mon, 07 Apr 2003 22:59:33 GMT</changeTime>`+
				`<title>The publisher says</title><description>Something new.</description>`+
				`<geo:point xmlns:geo="http://www.w3.org/2003/01/geo/wgs84_pos#" geo:accuracy="10"><geo:lat>52.5</geo:lat><geo:long>13.4</geo:long></geo:point>`+
				`</resourceChange></notification>`)
			if code != 200 || !strings.Contains(body, "<status>true</status>") {
				t.Fatalf("CNWS resourceChange: HTTP %d %s", code, body)
			}
		}},
		{"WebSub publish", feedItem{"new-4", "New via WebSub"}, "New via WebSub", func(feedItem) {
			if code, body := postForm(t, d.URL+"/websub", url.Values{"hub.mode": {"publish"}, "hub.url": {feedURL}}); code != http.StatusNoContent {
				t.Fatalf("WebSub publish: HTTP %d %s", code, body)
			}
		}},
		{"owner's XMPP publish", feedItem{"owner-1", "Published over XMPP"}, "Published over XMPP", func(it feedItem) {
			resp, err := owner.SendRaw(ctx, fmt.Sprintf(`<iq type="set" to="%s" id="pub1"><pubsub xmlns="http://jabber.org/protocol/pubsub">`+
				`<publish node="news"><item id="%s"><entry xmlns="http://www.w3.org/2005/Atom"><id>%s</id><title>%s</title>`+
				`<link href="http://127.0.0.1/%s"/><updated>2030-01-01T00:00:00Z</updated></entry></item></publish></pubsub></iq>`,
				p.ComponentDomain, it.GUID, it.GUID, it.Title, it.GUID))
			if err != nil || !strings.Contains(resp, `type="result"`) {
				t.Fatalf("XMPP publish: %v %s", err, resp)
			}
		}},
	}
	for i, r := range rounds {
		if r.dialect != "owner's XMPP publish" {
			feed.Add(r.item)
		}
		r.announce(r.item)
		n := i + 1

		// XMPP: exactly the new item.
		if got := collectItems(t, reader, 1, 20*time.Second, 300*time.Millisecond); !slices.Equal(got, []receivedItem{{"news", r.item.GUID, r.item.Title}}) {
			t.Fatalf("%s: XMPP subscriber got %v", r.dialect, got)
		}
		// Each HTTP subscriber: one request for this change.
		for name, rs := range map[string]*recordingServer{"webhook": hook, "WebSub": websub, "rssCloud": cloud, "CNWS": cnws} {
			testenv.WaitFor(t, 20*time.Second, fmt.Sprintf("%s: the %s subscriber's notification", r.dialect, name), func() bool { return len(rs.posts()) >= n })
		}
		// Room for a second notification to show: the daemon is a real
		// process on real time, with no event that says it sent no more.
		time.Sleep(500 * time.Millisecond)
		for name, rs := range map[string]*recordingServer{"webhook": hook, "WebSub": websub, "rssCloud": cloud, "CNWS": cnws} {
			if got := len(rs.posts()); got != n {
				t.Fatalf("%s: the %s subscriber got %d notifications in all, want %d", r.dialect, name, got, n)
			}
		}

		// GetPingd webhook: an Atom feed of the one new entry.
		h := hook.posts()[i]
		if titles := feedTitles(t, h.body); !slices.Equal(titles, []string{r.item.Title}) || !strings.HasPrefix(h.contentType, "application/atom+xml") {
			t.Fatalf("%s: webhook got %q as %s", r.dialect, titles, h.contentType)
		}
		// WebSub: the topic's format (RSS), signed, only the new item.
		w := websub.posts()[i]
		if titles := feedTitles(t, w.body); !slices.Equal(titles, []string{r.item.Title}) || !strings.HasPrefix(w.contentType, "application/rss+xml") ||
			!strings.HasPrefix(w.header.Get("X-Hub-Signature"), "sha256=") || !strings.Contains(w.header.Get("Link"), `<`+feedURL+`>; rel="self"`) {
			t.Fatalf("%s: WebSub got %q as %s, headers %v", r.dialect, titles, w.contentType, w.header)
		}
		// rssCloud: the URL that changed.
		if c := cloud.posts()[i]; c.form().Get("url") != feedURL || c.path != "/rsscloud" {
			t.Fatalf("%s: rssCloud got %s %q", r.dialect, c.path, c.body)
		}
		// CNWS: a resourceChange naming the resource, described.
		var note struct {
			Change struct {
				ResourceID string `xml:"resourceID"`
				Title      string `xml:"title"`
			} `xml:"http://www.owlfish.com/thoughts/cnws-2003-04-08.html resourceChange"`
		}
		if c := cnws.posts()[i]; xml.Unmarshal([]byte(c.body), &note) != nil || note.Change.ResourceID != feedURL || note.Change.Title != r.title {
			t.Fatalf("%s: CNWS got %s", r.dialect, c.body)
		}
		if r.dialect == "CNWS resourceChange" {
			// The publisher's extension element went on intact: in the CNWS
			// notification, in the webhook's Atom entry and in the XMPP item.
			checkGeo := func(who, raw string) {
				t.Helper()
				const geo = "http://www.w3.org/2003/01/geo/wgs84_pos#"
				doc := etree.NewDocument()
				if err := doc.ReadFromString(raw); err != nil {
					t.Fatalf("%s: %v", who, err)
				}
				var found []*etree.Element
				for _, el := range doc.FindElements("//point") {
					if el.NamespaceURI() == geo {
						found = append(found, el)
					}
				}
				ok := len(found) == 1
				if ok {
					pt := found[0]
					lat, long := pt.FindElement("lat"), pt.FindElement("long")
					acc := ""
					for _, a := range pt.Attr {
						if a.Key == "accuracy" && a.NamespaceURI() == geo {
							acc = a.Value
						}
					}
					ok = lat != nil && long != nil && lat.Text() == "52.5" && long.Text() == "13.4" && acc == "10" &&
						lat.NamespaceURI() == geo
				}
				if !ok {
					t.Fatalf("%s: the extension element did not arrive intact: %s", who, raw)
				}
			}
			checkGeo("CNWS", cnws.posts()[i].body)
			checkGeo("webhook", h.body)
			resp, err := reader.SendRaw(ctx, fmt.Sprintf(`<iq type="get" to="%s" id="geo"><pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="news"><item id="%s"/></items></pubsub></iq>`,
				p.ComponentDomain, r.item.GUID))
			if err != nil {
				t.Fatal(err)
			}
			checkGeo("XMPP", resp)
		}
	}
	// Nothing failed on the way.
	for _, s := range d.protoSubscribers("news") {
		if s.State != "active" || s.Delivery.ConsecutiveErrors != 0 {
			t.Errorf("subscription %+v", s)
		}
	}
}

// protoSubscriber is a subscription as the admin API lists it.
type protoSubscriber struct {
	Kind     string `json:"kind"`
	State    string `json:"state"`
	Delivery struct {
		ConsecutiveErrors int `json:"consecutive_errors"`
	} `json:"delivery"`
}

func (d *daemon) protoSubscribers(node string) []protoSubscriber {
	d.t.Helper()
	var out struct {
		Subscribers []protoSubscriber `json:"subscribers"`
	}
	if code := d.api("GET", "/api/nodes/"+url.PathEscape(node)+"/subscribers", nil, &out); code != 200 {
		d.t.Fatalf("subscribers of %s: HTTP %d", node, code)
	}
	return out.Subscribers
}

func doRequest(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func postForm(t *testing.T, target string, v url.Values) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", target, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return doRequest(t, req)
}

func postXML(t *testing.T, target, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", target, strings.NewReader(body))
	req.Header.Set("Content-Type", "text/xml")
	return doRequest(t, req)
}

func feedTitles(t *testing.T, body string) []string {
	t.Helper()
	f, err := gofeed.NewParser().ParseString(body)
	if err != nil {
		t.Fatalf("not a feed: %v\n%s", err, body)
	}
	var titles []string
	for _, it := range f.Items {
		titles = append(titles, it.Title)
	}
	return titles
}

// recordingServer is a subscriber's HTTP endpoint: it confirms WebSub-style
// verifications (echoing hub.challenge), answers CNWS posts with status
// true, and records every POST.
type recordingServer struct {
	*httptest.Server
	mu       sync.Mutex
	received []recordedPost
}

type recordedPost struct {
	path, contentType, body string
	header                  http.Header
}

func (p recordedPost) form() url.Values {
	v, _ := url.ParseQuery(p.body)
	return v
}

func newRecordingServer(t *testing.T) *recordingServer {
	rs := &recordingServer{}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, r.URL.Query().Get("hub.challenge"))
			return
		}
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		rs.mu.Lock()
		rs.received = append(rs.received, recordedPost{path: r.URL.Path, contentType: r.Header.Get("Content-Type"), body: string(b), header: r.Header.Clone()})
		rs.mu.Unlock()
		if r.URL.Path == "/cnws" {
			_, _ = io.WriteString(w, `<notification version="1.0" xmlns="http://www.owlfish.com/thoughts/cnws-2003-04-08.html"><result><status>true</status></result></notification>`)
		}
	}))
	t.Cleanup(rs.Close)
	return rs
}

func (rs *recordingServer) posts() []recordedPost {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.received)
}

func (rs *recordingServer) reset() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.received = nil
}
