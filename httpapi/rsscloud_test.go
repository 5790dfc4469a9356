package httpapi_test

import (
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/httpapi"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/xmlrpc"
	"github.com/pingd/pingd/store"
)

// notifyResult is the REST answer of pleaseNotify.
type notifyResult struct {
	XMLName xml.Name `xml:"notifyResult"`
	Success string   `xml:"success,attr"`
	Msg     string   `xml:"msg,attr"`
}

func decodeNotifyResult(t *testing.T, resp *http.Response) notifyResult {
	t.Helper()
	body := readAll(resp)
	var nr notifyResult
	if err := xml.Unmarshal([]byte(body), &nr); err != nil {
		t.Fatalf("not a notifyResult (HTTP %d): %v\n%s", resp.StatusCode, err, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/xml") {
		t.Errorf("content type %q", ct)
	}
	return nr
}

// cloudForm is a REST registration of the receiver's /notify for urls.
func cloudForm(rc *receiver, protocol string, urls ...string) url.Values {
	u, _ := url.Parse(rc.URL)
	v := url.Values{"notifyProcedure": {""}, "port": {u.Port()}, "path": {"/notify"}, "protocol": {protocol}}
	for i, x := range urls {
		v.Set("url"+strconv.Itoa(i+1), x)
	}
	return v
}

func notifiedURL(h hit) string {
	v, _ := url.ParseQuery(h.Body)
	return v.Get("url")
}

// TestPleaseNotifyREST: a registration answers success only once the test
// notification reached the caller's own address, lasts 25 hours, covers
// every URL (a followed feed, an unknown URL, pingd's own RSS URL of a
// node), and each change is then notified once.
func TestPleaseNotifyREST(t *testing.T) {
	e := newDialectEnv(t)
	feedURL := e.origin.set("/feed.xml", "application/rss+xml", rssDoc("News", "a"))
	otherURL := e.origin.set("/other.xml", "application/rss+xml", rssDoc("Other", "x"))
	e.createNode("news", feedURL, hub.AccessOpen)
	e.waitBaselined("news")
	rec := newReceiver(t, answerStatus(200, ""))
	ownRSS := e.srv.URL + "/rss/news"

	before := time.Now()
	resp := e.form("/pleaseNotify", cloudForm(rec, "http-post", feedURL, otherURL, ownRSS))
	nr := decodeNotifyResult(t, resp)
	if resp.StatusCode != 200 || nr.Success != "true" || nr.Msg == "" {
		t.Fatalf("pleaseNotify: HTTP %d %+v", resp.StatusCode, nr)
	}
	// Answered only after each URL's test notification arrived.
	tests := rec.matching(isPost)
	var got []string
	for _, h := range tests {
		if h.Path != "/notify" {
			t.Errorf("notified at %s", h.Path)
		}
		got = append(got, notifiedURL(h))
	}
	if len(got) != 3 || !contains(got, feedURL) || !contains(got, otherURL) || !contains(got, ownRSS) {
		t.Fatalf("test notifications before the answer: %q", got)
	}
	subs := e.subs("news", hub.KindRSSCloud)
	if len(subs) != 2 {
		t.Fatalf("news has %d rssCloud registrations, want 2 (feed URL and own RSS URL): %+v", len(subs), subs)
	}
	for _, s := range subs {
		if s.State != hub.SubActive || callbackOf(s) != fmt.Sprintf("http://127.0.0.1:%s/notify", mustPort(rec.URL)) {
			t.Errorf("registration %+v", s)
		}
		if d := s.ExpiresAt.Sub(before); d < 25*time.Hour-time.Minute || d > 25*time.Hour+time.Minute {
			t.Errorf("expires in %v, want 25 hours", d)
		}
	}
	if other, err := e.hub.NodeForURL(e.ctx, otherURL, false); err != nil || !other.Implicit {
		t.Fatalf("no implicit node for the unknown URL: %v %+v", err, other)
	}

	// A change of the feed: one notification per registered URL of it.
	e.origin.set("/feed.xml", "application/rss+xml", rssDoc("News", "a", "b"))
	if resp := e.form("/ping", url.Values{"url": {feedURL}}); resp.StatusCode != 200 {
		t.Fatalf("ping: HTTP %d", resp.StatusCode)
	}
	notes := rec.waitMatching(t, 5, "notifications", isPost)[3:]
	time.Sleep(200 * time.Millisecond)
	if n := len(rec.matching(isPost)); n != 5 {
		t.Fatalf("%d notifications, want 5 (3 tests, 2 changes)", n)
	}
	got = []string{notifiedURL(notes[0]), notifiedURL(notes[1])}
	if !contains(got, feedURL) || !contains(got, ownRSS) {
		t.Fatalf("change notified for %q", got)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// callbackOf is the URL a subscription's requests go to (its address
// without the fragment that names the topic).
func callbackOf(s hub.Subscription) string {
	cb, _, _ := strings.Cut(s.Address, "#")
	return cb
}

func mustPort(raw string) string {
	u, _ := url.Parse(raw)
	return u.Port()
}

// TestPleaseNotifyRefused: a failed test notification or an unanswered
// challenge gives success="false", and nothing stays registered.
func TestPleaseNotifyRefused(t *testing.T) {
	e := newDialectEnv(t)
	feedURL := e.origin.set("/feed.xml", "application/rss+xml", rssDoc("News", "a"))
	e.createNode("news", feedURL, hub.AccessOpen)

	failing := newReceiver(t, answerStatus(500, ""))
	nr := decodeNotifyResult(t, e.form("/pleaseNotify", cloudForm(failing, "http-post", feedURL)))
	if nr.Success != "false" || !strings.Contains(nr.Msg, "test notification") {
		t.Fatalf("refused registration answered %+v", nr)
	}

	mute := newReceiver(t, answerStatus(200, "no challenge here"))
	v := cloudForm(mute, "http-post", feedURL)
	v.Set("domain", "127.0.0.1")
	nr = decodeNotifyResult(t, e.form("/pleaseNotify", v))
	if nr.Success != "false" || !strings.Contains(nr.Msg, "challenge") {
		t.Fatalf("unechoed challenge answered %+v", nr)
	}
	if hits := mute.Hits(); len(hits) != 1 || hits[0].Method != http.MethodGet || hits[0].Query.Get("url") != feedURL {
		t.Fatalf("want one challenge GET naming the URL, got %+v", hits)
	}
	if subs := e.subs("news", hub.KindRSSCloud); len(subs) != 0 {
		t.Fatalf("refused registrations were kept: %+v", subs)
	}

	// With domain, the challenge echoed: registered without a test POST.
	echo := newReceiver(t, func(w http.ResponseWriter, h hit) {
		if h.Method == http.MethodGet {
			_, _ = w.Write([]byte(h.Query.Get("challenge")))
		}
	})
	v = cloudForm(echo, "http-post", feedURL)
	v.Set("domain", "localhost")
	nr = decodeNotifyResult(t, e.form("/pleaseNotify", v))
	if nr.Success != "true" {
		t.Fatalf("echoed challenge answered %+v", nr)
	}
	if posts := echo.matching(isPost); len(posts) != 0 {
		t.Fatalf("a registration with domain got a test notification: %+v", posts)
	}
	subs := e.subs("news", hub.KindRSSCloud)
	if len(subs) != 1 || !strings.HasPrefix(subs[0].Address, "http://localhost:") || subs[0].Options.Topic != feedURL {
		t.Fatalf("registration with domain: %+v", subs)
	}

	// Malformed forms: 400 with success="false".
	for name, v := range map[string]url.Values{
		"no port":      {"path": {"/n"}, "protocol": {"http-post"}, "url1": {feedURL}},
		"bad protocol": {"port": {"80"}, "path": {"/n"}, "protocol": {"HTTP-POST"}, "url1": {feedURL}},
		"no url":       {"port": {"80"}, "path": {"/n"}, "protocol": {"http-post"}},
		"bad url":      {"port": {"80"}, "path": {"/n"}, "protocol": {"http-post"}, "url1": {"ftp://x/"}},
	} {
		resp := e.form("/pleaseNotify", v)
		if nr := decodeNotifyResult(t, resp); resp.StatusCode != 400 || nr.Success != "false" || nr.Msg == "" {
			t.Errorf("%s: HTTP %d %+v", name, resp.StatusCode, nr)
		}
	}
}

// rpc posts an XML-RPC call and decodes the answer.
func (e *dialectEnv) rpc(method string, params ...any) (any, error) {
	e.t.Helper()
	body, err := xmlrpc.MarshalCall(method, params...)
	if err != nil {
		e.t.Fatal(err)
	}
	resp := e.do("POST", "/RPC2", "text/xml", string(body))
	if resp.StatusCode != 200 {
		e.t.Fatalf("%s: HTTP %d", method, resp.StatusCode)
	}
	return xmlrpc.DecodeResponse(resp.Body, xmlrpc.Limits{})
}

// TestPleaseNotifyXMLRPC: both method names register an XML-RPC callback
// (answering true after the test call), a failing callback gets false,
// malformed calls get faults.
func TestPleaseNotifyXMLRPC(t *testing.T) {
	e := newDialectEnv(t)
	feedURL := e.origin.set("/feed.xml", "application/rss+xml", rssDoc("News", "a"))
	e.createNode("news", feedURL, hub.AccessOpen)
	e.waitBaselined("news")
	var (
		mu    sync.Mutex
		calls []string
	)
	rec := newReceiver(t, func(w http.ResponseWriter, h hit) {
		mu.Lock()
		defer mu.Unlock()
		call, err := xmlrpc.DecodeCall(strings.NewReader(h.Body), xmlrpc.Limits{})
		if err != nil || len(call.Params) != 1 {
			w.WriteHeader(400)
			return
		}
		calls = append(calls, call.Method+" "+call.Params[0].(string))
		b, _ := xmlrpc.MarshalResponse(true)
		_, _ = w.Write(b)
	})
	port, _ := strconv.Atoi(mustPort(rec.URL))

	for _, method := range []string{"rssCloud.pleaseNotify", "xmlStorageSystem.rssPleaseNotify"} {
		v, err := e.rpc(method, "aggregator.notify", port, "/RPC2", "xml-rpc", []any{feedURL})
		if err != nil || v != true {
			t.Fatalf("%s: %v %v", method, v, err)
		}
	}
	subs := e.subs("news", hub.KindRSSCloud)
	if len(subs) != 1 || subs[0].Options.Protocol != "xml-rpc" || subs[0].Options.Procedure != "aggregator.notify" ||
		subs[0].State != hub.SubActive || !strings.HasSuffix(callbackOf(subs[0]), "/RPC2") {
		t.Fatalf("registrations %+v", subs)
	}
	mu.Lock()
	if len(calls) != 2 || calls[0] != "aggregator.notify "+feedURL {
		t.Fatalf("test calls %q", calls)
	}
	mu.Unlock()

	// Port as a string and a single URL instead of a list are taken too.
	if v, err := e.rpc("rssCloud.pleaseNotify", "aggregator.notify", strconv.Itoa(port), "/RPC2", "xml-rpc", feedURL); err != nil || v != true {
		t.Fatalf("lenient call: %v %v", v, err)
	}

	failing := newReceiver(t, answerStatus(200, "not XML-RPC"))
	fport, _ := strconv.Atoi(mustPort(failing.URL))
	if v, err := e.rpc("rssCloud.pleaseNotify", "aggregator.notify", fport, "/RPC2", "xml-rpc", []any{feedURL}); err != nil || v != false {
		t.Fatalf("failing callback: %v %v", v, err)
	}

	for name, params := range map[string][]any{
		"too few":        {"p", port, "/RPC2", "xml-rpc"},
		"port type":      {"p", true, "/RPC2", "xml-rpc", []any{feedURL}},
		"port range":     {"p", 70000, "/RPC2", "xml-rpc", []any{feedURL}},
		"protocol":       {"p", port, "/RPC2", "smtp", []any{feedURL}},
		"no procedure":   {"", port, "/RPC2", "xml-rpc", []any{feedURL}},
		"url list type":  {"p", port, "/RPC2", "xml-rpc", []any{42}},
		"empty url list": {"p", port, "/RPC2", "xml-rpc", []any{}},
		"bad domain":     {"p", port, "/RPC2", "xml-rpc", []any{feedURL}, "http://evil/"},
	} {
		_, err := e.rpc("rssCloud.pleaseNotify", params...)
		var f *xmlrpc.Fault
		if !errors.As(err, &f) || f.Code != xmlrpc.FaultInvalidParams {
			t.Errorf("%s: want an invalid-params fault, got %v", name, err)
		}
	}
}

// TestPleaseNotifyRenewsSuspended: registering again reactivates a
// suspended registration with a clean error count and a new 25-hour lease.
func TestPleaseNotifyRenewsSuspended(t *testing.T) {
	e := newDialectEnv(t)
	feedURL := e.origin.set("/feed.xml", "application/rss+xml", rssDoc("News", "a"))
	e.createNode("news", feedURL, hub.AccessOpen)
	rec := newReceiver(t, answerStatus(200, ""))
	if nr := decodeNotifyResult(t, e.form("/pleaseNotify", cloudForm(rec, "http-post", feedURL))); nr.Success != "true" {
		t.Fatalf("register: %+v", nr)
	}
	sub := e.subs("news", hub.KindRSSCloud)[0]
	// Suspended after three failures, with a retry time in the future.
	if err := e.store.SetSubscriptionState(e.ctx, sub.ID, hub.SubSuspended, sub.ExpiresAt); err != nil {
		t.Fatal(err)
	}
	ds := sub.DeliveryState
	ds.ConsecutiveErrors, ds.FirstFailureAt, ds.NextAttemptAt, ds.LastError = 3, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), "HTTP 503"
	if err := e.store.SaveDeliveryState(e.ctx, sub.ID, ds); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if nr := decodeNotifyResult(t, e.form("/pleaseNotify", cloudForm(rec, "http-post", feedURL))); nr.Success != "true" {
		t.Fatalf("renew: %+v", nr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("renewal waited %v: the old backoff was not cleared", d)
	}
	subs := e.subs("news", hub.KindRSSCloud)
	if len(subs) != 1 || subs[0].ID != sub.ID || subs[0].State != hub.SubActive || subs[0].ConsecutiveErrors != 0 ||
		!subs[0].ExpiresAt.After(sub.ExpiresAt) {
		t.Fatalf("after renewal: %+v", subs)
	}
}

// TestPleaseNotifyWhitelistNode: pingd's own feed of a whitelist node
// needs the node's token.
func TestPleaseNotifyWhitelistNode(t *testing.T) {
	e := newDialectEnv(t)
	token := e.createNode("secret", "", hub.AccessWhitelist)
	rec := newReceiver(t, answerStatus(200, ""))
	form := cloudForm(rec, "http-post", e.srv.URL+"/rss/secret")
	if nr := decodeNotifyResult(t, e.form("/pleaseNotify", form)); nr.Success != "false" || !strings.Contains(nr.Msg, "whitelist") {
		t.Fatalf("without token: %+v", nr)
	}
	if nr := decodeNotifyResult(t, e.form("/pleaseNotify", form, "Authorization", "Bearer wrong")); nr.Success != "false" {
		t.Fatalf("wrong token: %+v", nr)
	}
	if len(rec.Hits()) != 0 {
		t.Fatalf("a refused registration was contacted: %+v", rec.Hits())
	}
	if nr := decodeNotifyResult(t, e.form("/pleaseNotify", form, "Authorization", "Bearer "+token)); nr.Success != "true" {
		t.Fatalf("with token: %+v", nr)
	}
	// An owner's publish is a change of the node: notified.
	if _, err := e.hub.Publish(e.ctx, "secret", "owner@example.org", []hub.Entry{{ID: "1", Title: "t"}}); err != nil {
		t.Fatal(err)
	}
	rec.waitMatching(t, 2, "notifications", isPost)
	// An unknown node of pingd is an error, not an implicit node.
	if nr := decodeNotifyResult(t, e.form("/pleaseNotify", cloudForm(rec, "http-post", e.srv.URL+"/atom/nope"))); nr.Success != "false" {
		t.Fatalf("unknown own node: %+v", nr)
	}
}

// TestDialectsNeedTheirTransport: a pingd that does not deliver a kind
// refuses its subscriptions at once instead of accepting what it would
// never serve.
func TestDialectsNeedTheirTransport(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "pingd.db"), store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Config{Hub: h, Store: st, PublicURL: "http://pingd.test", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	e := &dialectEnv{t: t, ctx: t.Context(), store: st, hub: h, api: api, srv: srv}
	rec := newReceiver(t, answerStatus(200, ""))

	start := time.Now()
	if nr := decodeNotifyResult(t, e.form("/pleaseNotify", cloudForm(rec, "http-post", "http://example.org/feed"))); nr.Success != "false" {
		t.Fatalf("pleaseNotify: %+v", nr)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("pleaseNotify took %v", d)
	}
	if resp, res := e.cnws(cnwsSubscribeDoc("http://example.org/feed", rec.URL)); resp.StatusCode != 503 || res.Result.Status != "false" {
		t.Fatalf("CNWS subscribe: HTTP %d %+v", resp.StatusCode, res.Result)
	}
	if resp := e.webSub(url.Values{"hub.mode": {"subscribe"}, "hub.topic": {"http://example.org/feed"}, "hub.callback": {rec.URL}}); resp.StatusCode != 503 {
		t.Fatalf("WebSub subscribe: HTTP %d", resp.StatusCode)
	}
	if len(rec.Hits()) != 0 {
		t.Fatalf("contacted: %+v", rec.Hits())
	}
}
