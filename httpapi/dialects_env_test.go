package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/httpapi"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/hub/fetching"
	"github.com/pingd/pingd/internal/netguard"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// The dialect tests run everything for real on loopback: the API on an
// HTTP server, the hub with its fetch loop and the real feed fetcher, the
// delivery engine with the rssCloud, CNWS, WebSub and webhook senders, an origin
// serving the resources, and receivers standing for the subscribers.

const dialectAdminToken = "dialect-admin-token"

type dialectEnv struct {
	t      *testing.T
	ctx    context.Context
	store  store.Store
	hub    *hub.Hub
	api    *httpapi.API
	srv    *httptest.Server
	origin *origin
}

func newDialectEnv(t *testing.T, tune ...func(*httpapi.Config)) *dialectEnv {
	t.Helper()
	return newDialectEnvHub(t, nil, tune...)
}

// newDialectEnvHub is newDialectEnv with the hub's configuration changed
// by tuneHub (when set).
func newDialectEnvHub(t *testing.T, tuneHub func(*hub.Config), tune ...func(*httpapi.Config)) *dialectEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "pingd.db"), store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	e := &dialectEnv{t: t, ctx: ctx, store: st, origin: newOrigin(t)}
	e.srv = httptest.NewUnstartedServer(nil)
	publicURL := "http://" + e.srv.Listener.Addr().String()
	fetcher := feed.NewFetcher(feed.FetcherConfig{Version: "test", PublicURL: publicURL, AllowPrivate: true})
	fetches, err := fetching.New(fetching.Config{Store: st, Fetcher: fetcher, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	hubCfg := hub.Config{
		Stores:     store.HubStores(st),
		Fetches:    fetches,
		Fetcher:    fetcher,
		Entries:    fetcher,
		Logger:     log,
		AdminToken: dialectAdminToken,
	}
	if tuneHub != nil {
		tuneHub(&hubCfg)
	}
	e.hub, err = hub.New(hubCfg)
	if err != nil {
		t.Fatal(err)
	}
	client := netguard.NewClient(netguard.Options{AllowPrivate: true})
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	sender := delivery.HTTPSender{Client: client, PublicURL: publicURL, UserAgent: "pingd-test"}
	engine, err := delivery.New(delivery.Config{
		Store: st,
		Senders: map[hub.Kind]delivery.Sender{
			hub.KindRSSCloud: &delivery.RSSCloud{HTTPSender: sender},
			hub.KindCNWS:     &delivery.CNWS{HTTPSender: sender},
			hub.KindWebSub:   &delivery.WebSub{HTTPSender: sender, Store: st},
			hub.KindWebhook:  &delivery.Webhook{HTTPSender: sender},
		},
		Logger:       log,
		PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.hub.Register(engine, engine.Kinds()...)
	cfg := httpapi.Config{Hub: e.hub, Store: e.store, PublicURL: publicURL, ComponentJID: "pubsub.localhost", Logger: log, Version: "test"}
	for _, f := range tune {
		f(&cfg)
	}
	e.api, err = httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv.Config.Handler = e.api
	e.srv.Start()
	var wg sync.WaitGroup
	wg.Go(func() { _ = e.hub.Run(ctx) })
	wg.Go(func() { _ = engine.Run(ctx) })
	t.Cleanup(func() {
		e.srv.Close()
		cancel()
		wg.Wait()
		_ = st.Close()
	})
	return e
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// createNode makes a node over the admin API and returns its token.
func (e *dialectEnv) createNode(name, source string, access hub.AccessModel) string {
	e.t.Helper()
	body := fmt.Sprintf(`{"node":%q,"source":%q,"title":"Node %s","access_model":%q}`, name, source, name, access)
	resp := e.do("POST", "/api/nodes", "application/json", body, "Authorization", "Bearer "+dialectAdminToken)
	if resp.StatusCode != http.StatusCreated {
		e.t.Fatalf("create node %s: HTTP %d %s", name, resp.StatusCode, readAll(resp))
	}
	var out struct{ Token string }
	if err := json.Unmarshal([]byte(readAll(resp)), &out); err != nil {
		e.t.Fatal(err)
	}
	return out.Token
}

// do sends a request to the API and returns the answer (its body unread).
func (e *dialectEnv) do(method, path, contentType, body string, header ...string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// form posts a form to the API.
func (e *dialectEnv) form(path string, v url.Values, header ...string) *http.Response {
	e.t.Helper()
	return e.do("POST", path, "application/x-www-form-urlencoded", v.Encode(), header...)
}

func readAll(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// subs lists the subscriptions of a node.
func (e *dialectEnv) subs(node string, kind hub.Kind) []hub.Subscription {
	e.t.Helper()
	n, err := e.hub.Node(e.ctx, node)
	if err != nil {
		e.t.Fatal(err)
	}
	subs, err := e.hub.Subscriptions(e.ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: kind})
	if err != nil {
		e.t.Fatal(err)
	}
	return subs
}

// waitBaselined waits until the node's source was fetched once.
func (e *dialectEnv) waitBaselined(node string) *hub.Source {
	e.t.Helper()
	n, err := e.hub.Node(e.ctx, node)
	if err != nil {
		e.t.Fatal(err)
	}
	var src *hub.Source
	testenv.WaitFor(e.t, 15*time.Second, "the baseline fetch of "+node, func() bool {
		src, err = e.hub.Source(e.ctx, n.SourceID)
		return err == nil && src.Baselined
	})
	return src
}

// origin serves resources whose content the tests change.
type origin struct {
	*httptest.Server
	mu    sync.Mutex
	docs  map[string]originDoc
	fetch map[string]int
}

type originDoc struct {
	contentType, body string
	status            int
}

func newOrigin(t *testing.T) *origin {
	o := &origin{docs: map[string]originDoc{}, fetch: map[string]int{}}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		d, ok := o.docs[r.URL.Path]
		o.fetch[r.URL.Path]++
		o.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		if d.status != 0 {
			w.WriteHeader(d.status)
			return
		}
		w.Header().Set("Content-Type", d.contentType)
		_, _ = io.WriteString(w, d.body)
	}))
	t.Cleanup(o.Close)
	return o
}

// set serves body at path and returns the resource's URL.
func (o *origin) set(path, contentType, body string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.docs[path] = originDoc{contentType: contentType, body: body}
	return o.URL + path
}

func (o *origin) setStatus(path string, status int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.docs[path] = originDoc{status: status}
	return o.URL + path
}

func (o *origin) fetches(path string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.fetch[path]
}

// rssDoc is an RSS feed with the given item ids (newest last).
func rssDoc(title string, ids ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0"?><rss version="2.0"><channel><title>%s</title><link>http://example.org/</link><description>About %s</description>`, title, title)
	for i := len(ids) - 1; i >= 0; i-- {
		fmt.Fprintf(&b, `<item><title>Item %s</title><link>http://example.org/%s</link><guid isPermaLink="false">%s</guid><description>Text of %s</description></item>`, ids[i], ids[i], ids[i], ids[i])
	}
	b.WriteString(`</channel></rss>`)
	return b.String()
}

// hit is one request a receiver got.
type hit struct {
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	Body   string
}

// receiver is a subscriber's loopback server: it records requests and
// answers with its current handler.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	hits   []hit
	answer func(w http.ResponseWriter, h hit)
}

func newReceiver(t *testing.T, answer func(w http.ResponseWriter, h hit)) *receiver {
	rc := &receiver{answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		h := hit{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: string(body)}
		rc.mu.Lock()
		rc.hits = append(rc.hits, h)
		answer := rc.answer
		rc.mu.Unlock()
		if answer != nil {
			answer(w, h)
		}
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) setAnswer(f func(w http.ResponseWriter, h hit)) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.answer = f
}

func (rc *receiver) Hits() []hit {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hit(nil), rc.hits...)
}

// matching returns the requests for which ok holds.
func (rc *receiver) matching(ok func(hit) bool) []hit {
	var out []hit
	for _, h := range rc.Hits() {
		if ok(h) {
			out = append(out, h)
		}
	}
	return out
}

// waitMatching waits until n requests match and returns them.
func (rc *receiver) waitMatching(t *testing.T, n int, what string, ok func(hit) bool) []hit {
	t.Helper()
	var got []hit
	testenv.WaitFor(t, 15*time.Second, fmt.Sprintf("%d %s", n, what), func() bool {
		got = rc.matching(ok)
		return len(got) >= n
	})
	return got
}

func isPost(h hit) bool { return h.Method == http.MethodPost }
func isGet(h hit) bool  { return h.Method == http.MethodGet }

// echoChallenge answers WebSub-style verifications with their challenge
// and everything else with 200.
func echoChallenge(w http.ResponseWriter, h hit) {
	if c := h.Query.Get("hub.challenge"); h.Method == http.MethodGet && c != "" {
		_, _ = io.WriteString(w, c)
	}
}

func answerStatus(code int, body string) func(http.ResponseWriter, hit) {
	return func(w http.ResponseWriter, _ hit) {
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}
