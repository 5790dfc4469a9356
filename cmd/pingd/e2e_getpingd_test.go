package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mmcdole/gofeed"

	"github.com/pingd/pingd/internal/testenv"
)

// getpingd sends a GetPingd subscription request (SUBSCRIBE) and returns
// the status and body.
func (d *daemon) getPingdRequest(node, contentType, token, body string) (int, string) {
	d.t.Helper()
	req, _ := http.NewRequest("SUBSCRIBE", d.URL+"/feeds/"+url.PathEscape(node), strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("SUBSCRIBE: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// subscriberState is a subscription as the admin API lists it.
type subscriberState struct {
	Kind     string `json:"kind"`
	Address  string `json:"address"`
	BareJID  string `json:"bare_jid"`
	State    string `json:"state"`
	Delivery struct {
		Cursor            int64 `json:"cursor"`
		ConsecutiveErrors int   `json:"consecutive_errors"`
	} `json:"delivery"`
}

func (d *daemon) nodeSubscribers(node string) []subscriberState {
	d.t.Helper()
	var out struct {
		Subscribers []subscriberState `json:"subscribers"`
	}
	if code := d.api("GET", "/api/nodes/"+url.PathEscape(node)+"/subscribers", nil, &out); code != 200 {
		d.t.Fatalf("subscribers of %s: HTTP %d", node, code)
	}
	return out.Subscribers
}

func (d *daemon) nodeLastSeq(node string) int64 {
	d.t.Helper()
	var out struct {
		LastSeq int64 `json:"last_seq"`
	}
	if code := d.api("GET", "/api/nodes/"+url.PathEscape(node), nil, &out); code != 200 {
		d.t.Fatalf("node %s: HTTP %d", node, code)
	}
	return out.LastSeq
}

func (d *daemon) pingFeed(feedURL string) {
	d.t.Helper()
	resp, err := http.PostForm(d.URL+"/ping", url.Values{"url": {feedURL}})
	if err != nil {
		d.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		d.t.Fatalf("/ping: HTTP %d", resp.StatusCode)
	}
}

// TestGetPingdWhitelistEndToEnd: a JID becomes able to subscribe to a
// whitelist node only through an authorised GetPingd request, and an
// unsubscribe request ends its subscription.
func TestGetPingdWhitelistEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")
	feed := newFeedServer(t, feedItem{"old", "Old"})
	d := newDaemon(t, p)
	d.Start(true)
	var created struct {
		Token string `json:"token"`
	}
	if code := d.api("POST", "/api/nodes", map[string]string{"node": "private", "source": feed.URL, "access_model": "whitelist"}, &created); code != 201 {
		t.Fatalf("create: HTTP %d", code)
	}
	d.waitBaselined("private")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	reader := testenv.Dial(ctx, t, p, "reader", "pw", "e2e")
	readerJID := "reader@" + p.Domain
	if resp := subscribe(t, ctx, reader, p.ComponentDomain, "private"); !strings.Contains(resp, "closed-node") {
		t.Fatalf("subscribing before being whitelisted: %s", resp)
	}

	request := `<subscribe><consumer jid="` + readerJID + `/FeedListener"/></subscribe>`
	for _, token := range []string{"", "wrong-token"} {
		code, body := d.getPingdRequest("private", "application/getpingd+xmpp+subscribe+xml", token, request)
		if code != 401 {
			t.Fatalf("token %q: HTTP %d %s", token, code, body)
		}
	}
	var wl struct {
		Whitelist []struct{ JID string } `json:"whitelist"`
	}
	d.api("GET", "/api/nodes/private/whitelist", nil, &wl)
	if len(wl.Whitelist) != 0 {
		t.Fatalf("unauthorised requests changed the whitelist: %+v", wl)
	}
	if resp := subscribe(t, ctx, reader, p.ComponentDomain, "private"); !strings.Contains(resp, "closed-node") {
		t.Fatalf("subscribing after unauthorised requests: %s", resp)
	}

	code, body := d.getPingdRequest("private", "application/getpingd+xmpp+subscribe+xml", created.Token, request)
	var ans struct {
		XMLName xml.Name
		JID     string `xml:"jid,attr"`
		Node    string `xml:"node,attr"`
	}
	if code != 200 || xml.Unmarshal([]byte(body), &ans) != nil || ans.XMLName.Local != "subscribed" || ans.JID != readerJID || ans.Node != "private" {
		t.Fatalf("authorised request: HTTP %d %s", code, body)
	}
	if resp := subscribe(t, ctx, reader, p.ComponentDomain, "private"); !strings.Contains(resp, `subscription="subscribed"`) {
		t.Fatalf("subscribing after the authorised request: %s", resp)
	}
	feed.Add(feedItem{"n1", "New one"})
	d.pingFeed(feed.URL)
	// The node's newest item comes first, sent to the new subscription
	// (the feed's entry at its first fetch), then the new one.
	if got := collectItems(t, reader, 2, 15*time.Second, 300*time.Millisecond); !slices.Equal(got, []receivedItem{{"private", "old", "Old"}, {"private", "n1", "New one"}}) {
		t.Fatalf("member got %v", got)
	}

	code, body = d.getPingdRequest("private", "application/getpingd+xmpp+subscribe+xml", "",
		`<unsubscribe><consumer jid="`+readerJID+`"/></unsubscribe>`)
	if code != 401 {
		t.Fatalf("unsubscribe without token: HTTP %d %s", code, body)
	}
	code, body = d.getPingdRequest("private", "application/getpingd+xmpp+subscribe+xml", created.Token,
		`<unsubscribe><consumer jid="`+readerJID+`"/></unsubscribe>`)
	if code != 200 {
		t.Fatalf("unsubscribe: HTTP %d %s", code, body)
	}
	for _, s := range d.nodeSubscribers("private") {
		if s.Kind == "xmpp" {
			t.Fatalf("subscription left after unsubscribe: %+v", s)
		}
	}
	before := d.nodeLastSeq("private")
	feed.Add(feedItem{"n2", "New two"})
	d.pingFeed(feed.URL)
	testenv.WaitFor(t, 15*time.Second, "the new item in the node", func() bool { return d.nodeLastSeq("private") > before })
	if got := collectItems(t, reader, 1, 3*time.Second, 0); len(got) != 0 {
		t.Errorf("removed JID still got %v", got)
	}
	if resp := subscribe(t, ctx, reader, p.ComponentDomain, "private"); !strings.Contains(resp, "closed-node") {
		t.Errorf("subscribing after removal: %s", resp)
	}
}

// hookServer is a webhook receiver on a fixed loopback address that can
// be taken down and brought back.
type hookServer struct {
	t    *testing.T
	addr string

	mu       sync.Mutex
	srv      *http.Server
	checks   []url.Values
	received [][]byte
}

func newHookServer(t *testing.T) *hookServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hookServer{t: t, addr: ln.Addr().String()}
	h.serve(ln)
	t.Cleanup(h.Down)
	return h
}

func (h *hookServer) URL() string { return "http://" + h.addr + "/hook" }

func (h *hookServer) serve(ln net.Listener) {
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if r.Method == http.MethodGet {
			h.checks = append(h.checks, r.URL.Query())
			_, _ = io.WriteString(w, r.URL.Query().Get("hub.challenge"))
			return
		}
		h.received = append(h.received, body)
		w.WriteHeader(http.StatusNoContent)
	})}
	h.mu.Lock()
	h.srv = srv
	h.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

func (h *hookServer) Down() {
	h.mu.Lock()
	srv := h.srv
	h.srv = nil
	h.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

func (h *hookServer) Up() {
	h.t.Helper()
	var ln net.Listener
	testenv.WaitFor(h.t, 5*time.Second, "the address "+h.addr+" free to listen on again", func() bool {
		var err error
		ln, err = net.Listen("tcp", h.addr)
		return err == nil
	})
	h.serve(ln)
}

// titles returns the entry titles of every delivery so far, oldest
// delivery first, each document's entries oldest first.
func (h *hookServer) titles() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, body := range h.received {
		f, err := gofeed.NewParser().Parse(bytes.NewReader(body))
		if err != nil {
			h.t.Errorf("delivered document does not parse: %v\n%s", err, body)
			continue
		}
		for i := len(f.Items) - 1; i >= 0; i-- {
			out = append(out, f.Items[i].Title)
		}
	}
	return out
}

func (h *hookServer) verifications() []url.Values {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.checks)
}

// TestGetPingdWebhooksEndToEnd: a webhook subscribed over HTTP gets the
// new entries of each ping, and deliveries pending when pingd is killed
// reach the receiver after a restart.
func TestGetPingdWebhooksEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	feed := newFeedServer(t, feedItem{"old", "Old"})
	d := newDaemon(t, p)
	d.Start(true)
	if code := d.api("POST", "/api/nodes", map[string]string{"node": "news", "source": feed.URL}, nil); code != 201 {
		t.Fatalf("create: HTTP %d", code)
	}
	d.waitBaselined("news")

	hook := newHookServer(t)
	code, body := d.getPingdRequest("news", "application/getpingd+http+subscribe+xml; charset=utf-8", "",
		fmt.Sprintf(`<subscribe><url href="%s" method="POST" diff="none"/></subscribe>`, hook.URL()))
	if code != 202 {
		t.Fatalf("webhook subscription: HTTP %d %s", code, body)
	}
	testenv.WaitFor(t, 15*time.Second, "verification of intent", func() bool {
		subs := d.nodeSubscribers("news")
		return len(subs) == 1 && subs[0].State == "active"
	})
	if checks := hook.verifications(); len(checks) != 1 || checks[0].Get("hub.mode") != "subscribe" ||
		checks[0].Get("hub.topic") != d.URL+"/feeds/news" || checks[0].Get("hub.challenge") == "" {
		t.Fatalf("verification requests: %v", checks)
	}

	feed.Add(feedItem{"a", "A"}, feedItem{"b", "B"})
	d.pingFeed(feed.URL)
	testenv.WaitFor(t, 15*time.Second, "the first delivery", func() bool { return len(hook.titles()) >= 2 })
	if got := hook.titles(); !slices.Equal(got, []string{"A", "B"}) {
		t.Fatalf("received %v, want A, B", got)
	}

	// The receiver goes down; a change is pending when pingd is killed.
	hook.Down()
	feed.Add(feedItem{"c", "C"})
	d.pingFeed(feed.URL)
	testenv.WaitFor(t, 15*time.Second, "a failed delivery", func() bool {
		subs := d.nodeSubscribers("news")
		return len(subs) == 1 && subs[0].Delivery.ConsecutiveErrors > 0
	})
	d.Kill()
	d.Start(true)
	hook.Up()
	// The retry comes after the first backoff (about 30 s).
	testenv.WaitFor(t, 90*time.Second, "the pending delivery after the restart", func() bool { return len(hook.titles()) >= 3 })
	// Room for a duplicate to show: the daemon is a real process on real
	// time, with no event that says it sent nothing more.
	time.Sleep(500 * time.Millisecond)
	if got := hook.titles(); !slices.Equal(got, []string{"A", "B", "C"}) {
		t.Fatalf("received %v, want A, B, C exactly once each", got)
	}
}
