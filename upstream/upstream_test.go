package upstream

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/hub/fetching"
	"github.com/pingd/pingd/internal/netguard"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// A loopback WebSub hub, a loopback rssCloud cloud and a loopback feed,
// against a real hub on a real SQLite store.

// feedSite serves an Atom feed that advertises a hub (or an RSS feed with
// a cloud) and counts the GETs.
type feedSite struct {
	*httptest.Server
	mu      sync.Mutex
	entries []string
	hubURL  string
	// hubInHeader names the hub (and self) in a Link header instead of
	// the feed body.
	hubInHeader bool
	cloud       string // host:port of a cloud; RSS when set
	// cloudProtocol, cloudPath and cloudProcedure are the <cloud>'s
	// protocol, path and registerProcedure; http-post on /pleaseNotify
	// when empty.
	cloudProtocol, cloudPath, cloudProcedure string
	gets                                     atomic.Int64
}

func newFeedSite(t *testing.T) *feedSite {
	f := &feedSite{entries: []string{"old"}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.gets.Add(1)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.cloud != "" {
			host, port, _ := strings.Cut(f.cloud, ":")
			protocol, path := cmp.Or(f.cloudProtocol, "http-post"), cmp.Or(f.cloudPath, "/pleaseNotify")
			w.Header().Set("Content-Type", "application/rss+xml")
			fmt.Fprintf(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>C</title><link>%s/</link><description>d</description>`+
				`<cloud domain="%s" port="%s" path="%s" registerProcedure="%s" protocol="%s"/>`, f.URL, host, port, path, f.cloudProcedure, protocol)
			for _, e := range f.entries {
				fmt.Fprintf(w, `<item><title>%s</title><guid isPermaLink="false">%s</guid><link>%s/%s</link></item>`, e, e, f.URL, e)
			}
			fmt.Fprint(w, `</channel></rss>`)
			return
		}
		w.Header().Set("Content-Type", "application/atom+xml")
		if f.hubInHeader {
			w.Header().Add("Link", fmt.Sprintf(`<%s>; rel="hub"`, f.hubURL))
			w.Header().Add("Link", fmt.Sprintf(`<%s/feed.atom>; rel="self"`, f.URL))
		}
		fmt.Fprintf(w, `<feed xmlns="http://www.w3.org/2005/Atom"><title>F</title><id>urn:f</id><updated>2031-01-01T00:00:00Z</updated>`)
		if !f.hubInHeader {
			fmt.Fprintf(w, `<link rel="hub" href="%s"/><link rel="self" href="%s/feed.atom"/>`, f.hubURL, f.URL)
		}
		for _, e := range f.entries {
			fmt.Fprintf(w, `<entry><id>urn:%s</id><title>%s</title><updated>2031-01-01T00:00:00Z</updated><link href="%s/%s"/></entry>`, e, e, f.URL, e)
		}
		fmt.Fprint(w, `</feed>`)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *feedSite) add(e string) {
	f.mu.Lock()
	f.entries = append(f.entries, e)
	f.mu.Unlock()
}

// webSubHub is a loopback WebSub hub that verifies intent like a real one.
type webSubHub struct {
	*httptest.Server
	mu       sync.Mutex
	requests []url.Values
	subs     map[string]url.Values // by callback
	// verifyFirst makes the hub verify before it answers the request
	// (the verification then always arrives before the answer).
	verifyFirst bool
	// verified counts the verifications finished, whatever their outcome.
	verified int
}

func newWebSubHub(t *testing.T) *webSubHub {
	h := &webSubHub{subs: map[string]url.Values{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		form := r.PostForm
		h.mu.Lock()
		h.requests = append(h.requests, form)
		first := h.verifyFirst
		h.mu.Unlock()
		if first {
			h.verify(form)
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		go h.verify(form) // after answering, as hubs do
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *webSubHub) verify(form url.Values) {
	defer func() {
		h.mu.Lock()
		h.verified++
		h.mu.Unlock()
	}()
	challenge := fmt.Sprintf("c%d", time.Now().UnixNano())
	q := url.Values{"hub.mode": {form.Get("hub.mode")}, "hub.topic": {form.Get("hub.topic")}, "hub.challenge": {challenge}}
	if form.Get("hub.mode") == "subscribe" {
		q.Set("hub.lease_seconds", "1000")
	}
	resp, err := http.Get(form.Get("hub.callback") + "?" + q.Encode())
	if err != nil {
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != challenge {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if form.Get("hub.mode") == "subscribe" {
		h.subs[form.Get("hub.callback")] = form
	} else {
		delete(h.subs, form.Get("hub.callback"))
	}
}

func (h *webSubHub) modes() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.requests {
		out = append(out, r.Get("hub.mode"))
	}
	return out
}

func (h *webSubHub) subscriber() (url.Values, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.subs {
		return f, true
	}
	return nil, false
}

// push distributes content to the subscriber, signed with secret (the
// subscription's unless given).
func (h *webSubHub) push(t *testing.T, body, secret string) int {
	t.Helper()
	sub, ok := h.subscriber()
	if !ok {
		t.Fatal("no verified subscriber at the hub")
	}
	if secret == "" {
		secret = sub.Get("hub.secret")
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	req, _ := http.NewRequest(http.MethodPost, sub.Get("hub.callback"), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/atom+xml")
	req.Header.Set("X-Hub-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// env is a hub with the tracker and a manager whose callbacks are served.
type env struct {
	ctx   context.Context
	st    store.Store
	hub   *hub.Hub
	m     *Manager
	clock *testenv.Clock
	cb    *httptest.Server
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWith is newEnv with the Manager's Config changed by configure.
func newEnvWith(t *testing.T, configure func(*Config)) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "pingd.db"), store.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tracker := NewTracker(feed.NewScheduler(feed.SchedulerConfig{}), time.Hour)
	fetcher := feed.NewFetcher(feed.FetcherConfig{AllowPrivate: true})
	fetches, err := fetching.New(fetching.Config{Store: st, Fetcher: fetcher, Scheduler: tracker, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Fetches: fetches, Fetcher: fetcher, Entries: fetcher, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	var handler http.Handler
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(cb.Close)
	clock := testenv.NewClock(time.Now().UTC())
	client := netguard.NewClient(netguard.Options{AllowPrivate: true, Timeout: 10 * time.Second})
	cfg := Config{Hub: h, Store: st, HTTP: client, PublicURL: cb.URL, Tracker: tracker, Logger: log, Now: clock.Now, CheckEvery: time.Hour}
	if configure != nil {
		configure(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	handler = m.Handler()
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &env{ctx: ctx, st: st, hub: h, m: m, clock: clock, cb: cb}
}

// follow creates a node for feedURL with one (webhook) subscriber and
// waits for the baseline fetch.
func (e *env) follow(t *testing.T, name, feedURL string, gets func() int64) (*hub.Node, *hub.Subscription) {
	t.Helper()
	n, _, err := e.hub.CreateNode(e.ctx, hub.NodeSpec{Name: name, Source: feedURL, Config: hub.DefaultNodeConfig()})
	if err != nil {
		t.Fatal(err)
	}
	sub := &hub.Subscription{NodeID: n.ID, NodeName: n.Name, Kind: hub.KindWebhook, Address: "http://127.0.0.1:9/hook", State: hub.SubActive}
	if _, err := e.st.PutSubscription(e.ctx, sub); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 15*time.Second, "the baseline fetch", func() bool {
		src, err := e.hub.Source(e.ctx, n.SourceID)
		return err == nil && src.Baselined && gets() >= 1
	})
	return n, sub
}

func (e *env) upstreams(t *testing.T, sourceID int64) []hub.Upstream {
	t.Helper()
	ups, err := e.st.UpstreamsOfSource(e.ctx, sourceID)
	if err != nil {
		t.Fatal(err)
	}
	return ups
}

func (e *env) items(t *testing.T, n *hub.Node) []string {
	t.Helper()
	evs, err := e.hub.Items(e.ctx, n, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.ItemID)
	}
	return ids
}

// TestWebSubVerificationBeforeTheAnswer: a hub whose verification of
// intent reaches pingd before its answer to the subscribe request leaves
// the subscription active, not pending (the answer must not overwrite
// what the verification stored).
func TestWebSubVerificationBeforeTheAnswer(t *testing.T) {
	e := newEnv(t)
	wh := newWebSubHub(t)
	wh.verifyFirst = true
	site := newFeedSite(t)
	site.hubURL = wh.URL
	n, _ := e.follow(t, "news", site.URL+"/feed.atom", site.gets.Load)
	e.m.Check(e.ctx)
	testenv.WaitFor(t, 15*time.Second, "the hub's verification", func() bool { _, ok := wh.subscriber(); return ok })
	testenv.WaitFor(t, 15*time.Second, "the subscription to be active", func() bool {
		ups := e.upstreams(t, n.SourceID)
		return len(ups) == 1 && ups[0].State == hub.UpstreamActive
	})
	// Check sends the request and takes the answer itself, so whatever it
	// writes after the answer is written by now.
	if ups := e.upstreams(t, n.SourceID); len(ups) != 1 || ups[0].State != hub.UpstreamActive || ups[0].LeaseSeconds != 1000 {
		t.Fatalf("after the hub's answer: %+v", ups)
	}
}

func TestWebSubUpstream(t *testing.T) {
	t.Run("hub in the feed", func(t *testing.T) { testWebSubUpstream(t, false) })
	t.Run("hub in a Link header", func(t *testing.T) { testWebSubUpstream(t, true) })
}

// testWebSubUpstream follows a feed whose hub is named in its body or,
// with inHeader, only in its answer's Link header (WebSub §4).
func testWebSubUpstream(t *testing.T, inHeader bool) {
	e := newEnv(t)
	wh := newWebSubHub(t)
	site := newFeedSite(t)
	site.hubURL = wh.URL
	site.hubInHeader = inHeader
	n, sub := e.follow(t, "news", site.URL+"/feed.atom", site.gets.Load)

	e.m.Check(e.ctx)
	// pingd marks it active when it answers the verification; the hub
	// records it once it has read that answer.
	testenv.WaitFor(t, 15*time.Second, "the hub's verification", func() bool {
		ups := e.upstreams(t, n.SourceID)
		_, recorded := wh.subscriber()
		return len(ups) == 1 && ups[0].State == hub.UpstreamActive && recorded
	})
	u := e.upstreams(t, n.SourceID)[0]
	if u.Endpoint != wh.URL || u.Topic != site.URL+"/feed.atom" || u.LeaseSeconds != 1000 || u.Secret == "" {
		t.Fatalf("upstream %+v", u)
	}
	form, _ := wh.subscriber()
	if form.Get("hub.callback") != fmt.Sprintf("%s/upstream/websub/%d", e.cb.URL, u.ID) || form.Get("hub.secret") == "" {
		t.Errorf("subscribe request %v", form)
	}

	// A push with a wrong signature is taken (202) and ignored.
	site.add("forged")
	before := site.gets.Load()
	if code := wh.push(t, "<feed/>", "not-the-secret"); code != http.StatusAccepted {
		t.Errorf("forged push answered %d", code)
	}
	// The handler decides before it answers: a push it takes is recorded
	// (a ping of the source, the push's time) before the 202.
	if u, _ := e.st.Upstream(e.ctx, u.ID); !u.LastPushAt.IsZero() {
		t.Errorf("a forged push was taken as a push at %v", u.LastPushAt)
	}
	if got := site.gets.Load(); got != before {
		t.Errorf("a forged push made pingd fetch (%d GETs)", got-before)
	}

	// A signed push: one fetch, the new entry in the node's log, no poll.
	site.add("pushed")
	if code := wh.push(t, "<feed/>", ""); code != http.StatusAccepted {
		t.Fatalf("push answered %d", code)
	}
	testenv.WaitFor(t, 15*time.Second, "the pushed entry", func() bool {
		ids := e.items(t, n)
		return len(ids) > 0 && strings.Contains(strings.Join(ids, " "), "urn:pushed")
	})
	if got := site.gets.Load() - before; got != 1 {
		t.Errorf("%d GETs after one push, want 1", got)
	}
	src, _ := e.hub.Source(e.ctx, n.SourceID)
	if src.NextFetchAt.Before(time.Now().Add(50 * time.Minute)) {
		t.Errorf("next poll %v (%s): want none before the safety net, an hour away", src.NextFetchAt, src.NextFetchReason)
	}
	if u, _ := e.st.Upstream(e.ctx, u.ID); u.LastPushAt.IsZero() {
		t.Error("the push was not recorded")
	}

	// Renewal: nothing before 80 % of the lease, a new request after.
	e.clock.Advance(700 * time.Second)
	e.m.Check(e.ctx)
	if got := wh.modes(); len(got) != 1 {
		t.Errorf("requests before the renewal is due: %v", got)
	}
	e.clock.Advance(150 * time.Second)
	e.m.Check(e.ctx)
	if got := wh.modes(); len(got) != 2 || got[1] != "subscribe" {
		t.Errorf("requests after 85 %% of the lease: %v", got)
	}
	// The hub verifies each request in a goroutine of its own: the
	// renewal's must be over before the unsubscription's, or the hub
	// could record the renewal after the unsubscription.
	testenv.WaitFor(t, 15*time.Second, "the renewal's verification", func() bool {
		wh.mu.Lock()
		defer wh.mu.Unlock()
		return wh.verified == 2
	})

	// The last subscriber leaves: pingd unsubscribes at the hub.
	if err := e.st.DeleteSubscription(e.ctx, sub.ID); err != nil {
		t.Fatal(err)
	}
	e.m.Check(e.ctx)
	testenv.WaitFor(t, 15*time.Second, "the unsubscription", func() bool {
		_, subscribed := wh.subscriber()
		return !subscribed && len(e.upstreams(t, n.SourceID)) == 0
	})
	if got := wh.modes(); got[len(got)-1] != "unsubscribe" {
		t.Errorf("requests %v: want an unsubscribe last", got)
	}
	// Its callback is gone: a hub that pushes anyway is told 410.
	resp, err := http.Post(fmt.Sprintf("%s/upstream/websub/%d", e.cb.URL, u.ID), "text/plain", bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGone {
		t.Errorf("push to a removed subscription: %d, want 410", resp.StatusCode)
	}
}

// rssCloud is a loopback cloud: it checks a registration naming a domain
// with a challenge, then notifies with http-post.
type rssCloud struct {
	*httptest.Server
	mu       sync.Mutex
	callback string
	url      string
	regs     int
}

func newRSSCloud(t *testing.T) *rssCloud {
	c := &rssCloud{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.PostForm.Get("protocol") != "http-post" {
			fmt.Fprint(w, `<notifyResult success="false" msg="bad request"/>`)
			return
		}
		f := r.PostForm
		cb := "http://" + f.Get("domain") + ":" + f.Get("port") + f.Get("path")
		resp, err := http.Get(cb + "?" + url.Values{"url": {f.Get("url1")}, "challenge": {"xyz"}}.Encode())
		if err != nil {
			fmt.Fprint(w, `<notifyResult success="false" msg="unreachable"/>`)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "xyz" {
			fmt.Fprint(w, `<notifyResult success="false" msg="challenge failed"/>`)
			return
		}
		c.mu.Lock()
		c.callback, c.url = cb, f.Get("url1")
		c.regs++
		c.mu.Unlock()
		fmt.Fprint(w, `<notifyResult success="true" msg="Registration successful."/>`)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *rssCloud) notify(t *testing.T, u string) int {
	t.Helper()
	c.mu.Lock()
	cb := c.callback
	c.mu.Unlock()
	resp, err := http.PostForm(cb, url.Values{"url": {u}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestRSSCloudUpstream(t *testing.T) {
	e := newEnv(t)
	cloud := newRSSCloud(t)
	site := newFeedSite(t)
	site.cloud = strings.TrimPrefix(cloud.URL, "http://")
	n, _ := e.follow(t, "blog", site.URL+"/rss", site.gets.Load)

	e.m.Check(e.ctx)
	ups := e.upstreams(t, n.SourceID)
	if len(ups) != 1 || ups[0].Kind != hub.UpstreamRSSCloud || ups[0].State != hub.UpstreamActive || cloud.regs != 1 {
		t.Fatalf("after registering: %+v (registrations %d)", ups, cloud.regs)
	}
	if code := cloud.notify(t, "http://127.0.0.1:9/not-registered"); code != http.StatusNotFound {
		t.Errorf("a notification for another URL: %d, want 404", code)
	}
	before := site.gets.Load()
	site.add("clouded")
	if code := cloud.notify(t, site.URL+"/rss"); code != http.StatusOK {
		t.Fatalf("notification answered %d", code)
	}
	testenv.WaitFor(t, 15*time.Second, "the notified entry", func() bool { return strings.Contains(strings.Join(e.items(t, n), " "), "clouded") })
	if got := site.gets.Load() - before; got != 1 {
		t.Errorf("%d GETs after one notification, want 1", got)
	}
	// Re-registration every 24 hours.
	e.clock.Advance(23 * time.Hour)
	e.m.Check(e.ctx)
	if cloud.regs != 1 {
		t.Errorf("re-registered after 23 hours (%d)", cloud.regs)
	}
	e.clock.Advance(2 * time.Hour)
	e.m.Check(e.ctx)
	if cloud.regs != 2 {
		t.Errorf("not re-registered after 25 hours (%d)", cloud.regs)
	}
}

// TestRSSCloudNotificationsOverTheLimitAreRefused: an rssCloud notification
// is not signed and callback ids are counters, so anyone who knows a feed's
// URL can send one; beyond the limit per callback they are refused with 429
// and Retry-After and ping nothing.
func TestRSSCloudNotificationsOverTheLimitAreRefused(t *testing.T) {
	e := newEnvWith(t, func(c *Config) { c.NotifyRate, c.NotifyBurst = 0.1, 2 })
	cloud := newRSSCloud(t)
	site := newFeedSite(t)
	site.cloud = strings.TrimPrefix(cloud.URL, "http://")
	e.follow(t, "blog", site.URL+"/rss", site.gets.Load)
	e.m.Check(e.ctx)
	_, before, err := e.hub.Pings(e.ctx, time.Time{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	cloud.mu.Lock()
	cb := cloud.callback
	cloud.mu.Unlock()
	notify := func(u string) *http.Response {
		t.Helper()
		resp, err := http.PostForm(cb, url.Values{"url": {u}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	// A notification for another URL takes no token.
	if resp := notify("http://127.0.0.1:9/other"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a notification for another URL: HTTP %d, want 404", resp.StatusCode)
	}
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		resp := notify(site.URL + "/rss")
		if resp.StatusCode != want {
			t.Errorf("notification %d: HTTP %d, want %d", i+1, resp.StatusCode, want)
		}
		if want == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "10" {
			t.Errorf("refused notification: Retry-After %q, want 10", resp.Header.Get("Retry-After"))
		}
	}
	_, after, err := e.hub.Pings(e.ctx, time.Time{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if after-before != 2 {
		t.Errorf("%d pings recorded for 2 notifications let through and 1 refused", after-before)
	}
	// Ten seconds later a token is back.
	e.clock.Advance(10 * time.Second)
	if resp := notify(site.URL + "/rss"); resp.StatusCode != http.StatusOK {
		t.Errorf("a notification after the wait: HTTP %d, want 200", resp.StatusCode)
	}
}
