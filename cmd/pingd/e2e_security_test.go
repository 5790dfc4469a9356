package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// The security tests attack the real binary from outside: server-side
// request forgery through every endpoint that makes pingd fetch or call
// back, authorisation over XMPP and HTTP, and secrets in the logs and the
// database. docs/security.md has the threat model.

// victim is a loopback HTTP server that must never be reached: it counts
// every request.
type victim struct {
	mu   sync.Mutex
	hits []string
	addr string
}

func newVictim(t *testing.T, network, addr string) *victim {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil
	}
	v := &victim{addr: ln.Addr().String()}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v.mu.Lock()
		v.hits = append(v.hits, r.Method+" "+r.URL.String())
		v.mu.Unlock()
		_, _ = io.WriteString(w, r.URL.Query().Get("hub.challenge"))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return v
}

func (v *victim) requests() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.hits...)
}

// TestPrivateAddressesRefused runs pingd as it runs in production, without
// PINGD_ALLOW_PRIVATE, and points every endpoint that makes it fetch or
// call back at loopback, private, link-local and metadata addresses and at
// names resolving to them. Each is refused: at once with a message saying
// why, or — where pingd checks only when it connects — by a failed fetch
// or verification that never reaches the address; nothing becomes an
// active subscription and the loopback servers get no request.
func TestPrivateAddressesRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("owner", "pw")
	d := newDaemon(t, p, "PINGD_ALLOW_PRIVATE=0")
	d.Start(true)

	v4 := newVictim(t, "tcp4", "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(v4.addr)
	victims := []*victim{v4}
	targets := []string{
		"http://" + v4.addr + "/feed",
		"http://localhost:" + port + "/feed",
		"http://[::ffff:127.0.0.1]:" + port + "/feed",
		"http://10.255.255.1/feed",
		"http://169.254.169.254/latest/meta-data/",
		"http://192.168.0.1/feed",
	}
	if v6 := newVictim(t, "tcp6", "[::1]:0"); v6 != nil {
		victims = append(victims, v6)
		targets = append(targets, "http://"+v6.addr+"/feed")
	}

	// A node the callbacks subscribe to; its items come from its owner
	// over XMPP, so nothing but the callbacks would be fetched.
	if code := d.api("POST", "/api/nodes", map[string]any{"node": "pub"}, nil); code != 201 {
		t.Fatalf("create node: HTTP %d", code)
	}
	ownFeed := d.URL + "/atom/pub"
	refusedAtOnce := 0
	for i, target := range targets {
		// A node following the private source.
		var created map[string]any
		code := d.api("POST", "/api/nodes", map[string]any{"node": fmt.Sprintf("src%d", i), "source": target}, &created)
		switch code {
		case http.StatusBadRequest:
			refusedAtOnce++
			if msg, _ := created["error"].(string); !strings.Contains(msg, "refused") {
				t.Errorf("source %s: the refusal does not say why: %v", target, created)
			}
		case http.StatusCreated:
			node := fmt.Sprintf("src%d", i)
			testenv.WaitFor(t, 20*time.Second, "the refused fetch of "+target, func() bool {
				var st struct {
					Source struct {
						LastError string `json:"last_error"`
						Baselined bool   `json:"baselined"`
					} `json:"source"`
				}
				d.api("GET", "/api/nodes/"+node+"/status", nil, &st)
				if st.Source.Baselined {
					t.Fatalf("the private source %s was fetched", target)
				}
				return strings.Contains(st.Source.LastError, "refused")
			})
		default:
			t.Errorf("source %s: HTTP %d %v", target, code, created)
		}

		// Callbacks of every kind.
		code, body := d.getPingdRequest("pub", "application/getpingd+http+subscribe+xml", "",
			`<subscribe><url href="`+target+`" method="POST" diff="none"/></subscribe>`)
		refusedAtOnce += checkCallbackRefusal(t, "webhook", target, code, body)
		code, body = postForm(t, d.URL+"/websub", url.Values{"hub.mode": {"subscribe"}, "hub.topic": {ownFeed}, "hub.callback": {target}})
		refusedAtOnce += checkCallbackRefusal(t, "WebSub", target, code, body)
		code, body = postXML(t, d.URL+"/cnws", `<notification version="1.0" xmlns="http://www.owlfish.com/thoughts/cnws-2003-04-08.html">`+
			`<subscribe><resourceID>`+ownFeed+`</resourceID><notificationURL>`+target+`</notificationURL></subscribe></notification>`)
		refusedAtOnce += checkCallbackRefusal(t, "CNWS", target, code, body)
	}
	// rssCloud: the callback is the caller's own address (loopback here)
	// or the domain it names.
	u, _ := url.Parse(targets[0])
	for _, domain := range []string{"", "localhost", "127.0.0.1", "169.254.169.254"} {
		code, body := postForm(t, d.URL+"/pleaseNotify", url.Values{"port": {u.Port()}, "path": {"/feed"},
			"protocol": {"http-post"}, "url1": {ownFeed}, "domain": {domain}})
		if code != http.StatusOK || !strings.Contains(body, `success="false"`) {
			t.Errorf("rssCloud with domain %q: HTTP %d %s; want success=false", domain, code, body)
		}
	}

	// Something to deliver, in case a callback had been taken.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner := testenv.Dial(ctx, t, p, "owner", "pw", "ssrf")
	resp, err := owner.SendRaw(ctx, fmt.Sprintf(`<iq type="set" to="%s" id="pub1"><pubsub xmlns="http://jabber.org/protocol/pubsub">`+
		`<publish node="pub"><item id="x"><entry xmlns="http://www.w3.org/2005/Atom"><id>x</id><title>X</title></entry></item></publish></pubsub></iq>`, p.ComponentDomain))
	if err != nil || !strings.Contains(resp, `type="result"`) {
		t.Fatalf("publish: %v %s", err, resp)
	}
	// Give verifications and deliveries time to try.
	testenv.WaitFor(t, 30*time.Second, "no subscription left waiting", func() bool {
		for _, s := range d.nodeSubscribers("pub") {
			if s.State == "pending" {
				return false
			}
		}
		return true
	})
	// Refused callbacks end their subscriptions, and CNWS records its
	// refused delivery.
	testenv.WaitFor(t, 30*time.Second, "no webhook or WebSub subscription left, and every CNWS delivery refused", func() bool {
		for _, s := range d.nodeSubscribers("pub") {
			if s.Kind == "webhook" || s.Kind == "websub" || (s.Kind == "cnws" && s.Delivery.ConsecutiveErrors == 0) {
				return false
			}
		}
		return true
	})
	for _, s := range d.nodeSubscribers("pub") {
		if s.Kind == "webhook" || s.Kind == "websub" {
			t.Errorf("a %s subscription to %s survived: %+v", s.Kind, s.Address, s)
		}
		if s.Kind == "cnws" && s.Delivery.ConsecutiveErrors == 0 {
			t.Errorf("a CNWS subscription to %s shows no refused delivery: %+v", s.Address, s)
		}
	}
	for _, v := range victims {
		if hits := v.requests(); len(hits) > 0 {
			t.Errorf("the loopback server %s was reached: %v", v.addr, hits)
		}
	}
	t.Logf("%d requests refused at once; the others refused when pingd connected", refusedAtOnce)
}

// checkCallbackRefusal accepts an immediate refusal saying why, or the
// protocol's "accepted, will check" answer (the check then fails without
// reaching the address); it returns 1 for an immediate refusal.
func checkCallbackRefusal(t *testing.T, kind, target string, code int, body string) int {
	t.Helper()
	switch {
	case code == http.StatusBadRequest && strings.Contains(body, "refused"):
		return 1
	case code == http.StatusAccepted && (kind == "webhook" || kind == "WebSub"):
	case code == http.StatusOK && kind == "CNWS":
	default:
		t.Errorf("%s callback %s: HTTP %d %s", kind, target, code, body)
	}
	return 0
}

// xmppError reports whether an IQ answer is an error holding every one of
// the conditions.
func xmppError(answer string, conditions ...string) bool {
	if !strings.Contains(answer, `type="error"`) {
		return false
	}
	for _, c := range conditions {
		if !strings.Contains(answer, "<"+c) {
			return false
		}
	}
	return true
}

// TestAuthorization: who may do what, over XMPP and HTTP. A whitelist node
// refuses a non-member, another JID's resource, other spellings of a
// member's JID, and a forged sender; the admin API and whitelist requests
// need the right token; an rssCloud registration cannot be made for a host
// that does not confirm it; a whitelist node's feed is closed to others.
func TestAuthorization(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	for _, u := range []string{"owner", "member", "mallory"} {
		p.Register(u, "pw-"+u)
	}
	d := newDaemon(t, p)
	d.Start(true)
	var created struct {
		Token string `json:"token"`
	}
	if code := d.api("POST", "/api/nodes", map[string]any{"node": "closed", "access_model": "whitelist"}, &created); code != 201 {
		t.Fatalf("create the whitelist node: HTTP %d", code)
	}
	var openNode struct {
		Token string `json:"token"`
	}
	if code := d.api("POST", "/api/nodes", map[string]any{"node": "open"}, &openNode); code != 201 {
		t.Fatalf("create the open node: HTTP %d", code)
	}
	// The whitelist takes a JID in any spelling and keeps its normal form.
	var added struct {
		JID string `json:"jid"`
	}
	if code := d.api("PUT", "/api/nodes/closed/whitelist/"+url.PathEscape("MeMbEr@LocalHost"), nil, &added); code != 200 || added.JID != "member@localhost" {
		t.Fatalf("whitelist MeMbEr@LocalHost: HTTP %d, stored as %q", code, added.JID)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	member := testenv.Dial(ctx, t, p, "member", "pw-member", "phone")
	mallory := testenv.Dial(ctx, t, p, "mallory", "pw-mallory", "laptop")
	sub := func(c *testenv.Client, node, jid string) string {
		t.Helper()
		resp, err := c.SendRaw(ctx, fmt.Sprintf(`<iq type="set" to="%s" id="s"><pubsub xmlns="http://jabber.org/protocol/pubsub"><subscribe node="%s" jid="%s"/></pubsub></iq>`,
			p.ComponentDomain, node, jid))
		if err != nil {
			t.Fatalf("subscribe: %v", err)
		}
		return resp
	}
	refusals := []struct {
		what, jid  string
		conditions []string
	}{
		{"a non-member", "mallory@localhost", []string{"not-allowed", "closed-node"}},
		{"a non-member, differently cased", "MALLORY@LOCALHOST", []string{"not-allowed", "closed-node"}},
		{"another JID's resource", "member@localhost/phone", []string{"bad-request", "invalid-jid"}},
		{"a member's JID, differently cased", "Member@LOCALHOST", []string{"bad-request", "invalid-jid"}},
		{"a member's JID in fullwidth letters", "ｍｅｍｂｅｒ@localhost", []string{"bad-request", "invalid-jid"}},
	}
	for _, r := range refusals {
		if resp := sub(mallory, "closed", r.jid); !xmppError(resp, r.conditions...) {
			t.Errorf("mallory subscribing %s (%s): %s; want an error with %v", r.jid, r.what, resp, r.conditions)
		}
	}
	// The member, under any spelling of its own JID, is let in.
	if resp := sub(member, "closed", "MEMBER@localhost"); !strings.Contains(resp, `subscription="subscribed"`) {
		t.Errorf("the member subscribing as MEMBER@localhost: %s", resp)
	}

	// Forged senders: Prosody stamps the sender of a client's stanza; a
	// publish that claims to come from the owner is refused either way.
	lastSeq := d.nodeLastSeq("open")
	resp, err := mallory.SendRaw(ctx, fmt.Sprintf(`<iq type="set" from="owner@localhost/desk" to="%s" id="f1"><pubsub xmlns="http://jabber.org/protocol/pubsub">`+
		`<publish node="open"><item id="forged"><entry xmlns="http://www.w3.org/2005/Atom"><id>forged</id><title>Forged</title></entry></item></publish></pubsub></iq>`,
		p.ComponentDomain))
	if err == nil && !strings.Contains(resp, `type="error"`) {
		t.Errorf("a publish with a forged from was answered %s", resp)
	}
	t.Logf("a publish claiming to come from the owner: %v %s", err, resp)
	resp, err = mallory.SendRaw(ctx, fmt.Sprintf(`<iq type="set" from="member@localhost/phone" to="%s" id="f2"><pubsub xmlns="http://jabber.org/protocol/pubsub">`+
		`<subscribe node="closed" jid="member@localhost/phone"/></pubsub></iq>`, p.ComponentDomain))
	if err == nil && !strings.Contains(resp, `type="error"`) {
		t.Errorf("a subscription with a forged from was answered %s", resp)
	}
	if got := d.nodeLastSeq("open"); got != lastSeq {
		t.Errorf("the forged publish reached the node (last_seq %d → %d)", lastSeq, got)
	}
	for _, s := range d.nodeSubscribers("closed") {
		if s.BareJID != "member@localhost" {
			t.Errorf("a subscription that is not the member's: %+v", s)
		}
	}

	// The admin API: no token, a wrong token, a node token.
	for name, header := range map[string]string{"no token": "", "wrong token": "Bearer not-" + testAdminToken,
		"node token": "Bearer " + created.Token, "basic auth": "Basic " + testAdminToken} {
		req, _ := http.NewRequest("GET", d.URL+"/api/nodes", nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		if code, body := doRequest(t, req); code != http.StatusUnauthorized {
			t.Errorf("admin API with %s: HTTP %d %s", name, code, body)
		}
	}
	// Whitelist requests and the feed of a whitelist node.
	consumer := `<subscribe><consumer jid="mallory@localhost"/></subscribe>`
	for name, token := range map[string]string{"no token": "", "a wrong token": "wrong", "the open node's token": openNode.Token} {
		if code, body := d.getPingdRequest("closed", "application/getpingd+xmpp+subscribe+xml", token, consumer); code != http.StatusUnauthorized {
			t.Errorf("whitelist request with %s: HTTP %d %s", name, code, body)
		}
	}
	var wl struct {
		Whitelist []struct {
			JID string `json:"jid"`
		} `json:"whitelist"`
	}
	d.api("GET", "/api/nodes/closed/whitelist", nil, &wl)
	for _, e := range wl.Whitelist {
		if e.JID == "mallory@localhost" {
			t.Errorf("mallory got onto the whitelist: %+v", wl)
		}
	}
	for _, path := range []string{"/atom/closed", "/rss/closed"} {
		req, _ := http.NewRequest("GET", d.URL+path, nil)
		if code, _ := doRequest(t, req); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: HTTP %d", path, code)
		}
	}

	// rssCloud for another host: the named domain must confirm with the
	// challenge; a host that does not is not registered, and gets nothing
	// but that one check.
	other := newVictim(t, "tcp4", "127.0.0.2:0")
	if other == nil {
		t.Skip("no 127.0.0.2 here")
	}
	// This victim answers the check without echoing the challenge.
	otherHost, otherPort, _ := net.SplitHostPort(other.addr)
	code, body := postForm(t, d.URL+"/pleaseNotify", url.Values{"port": {otherPort}, "path": {"/rpc"}, "protocol": {"http-post"},
		"domain": {otherHost}, "url1": {d.URL + "/atom/open"}})
	if code != http.StatusOK || !strings.Contains(body, `success="false"`) {
		t.Errorf("rssCloud registration for another host: HTTP %d %s", code, body)
	}
	for _, s := range d.nodeSubscribers("open") {
		if s.Kind == "rsscloud" {
			t.Errorf("registered for another host: %+v", s)
		}
	}
	for _, h := range other.requests() {
		if !strings.HasPrefix(h, "GET ") || !strings.Contains(h, "challenge=") {
			t.Errorf("the other host got more than the check: %v", other.requests())
		}
	}
}

// TestNoSecretsInLogsOrDatabase runs pingd at debug level through a
// session that uses every kind of secret it handles — the admin token,
// node tokens (issued and rotated), the component secret, webhook and
// WebSub signing secrets, a callback whose query holds a key, bearer
// tokens on whitelist requests — and then looks for each in the whole log
// and in the database files. Tokens that only need checking are stored as
// hashes; signing secrets must be kept as they are (HMAC needs them).
func TestNoSecretsInLogsOrDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	secret := func(name string) string {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		return name + "-" + hex.EncodeToString(b)
	}
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")
	adminToken := testAdminToken // the harness's helpers use it
	d := newDaemon(t, p, "PINGD_LOG_LEVEL=debug")
	d.Start(true)
	api := func(method, path, token string, body string) (int, string) {
		req, _ := http.NewRequest(method, d.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		return doRequest(t, req)
	}
	feed := newFeedServer(t, feedItem{"a", "Item a"})
	code, body := api("POST", "/api/nodes", adminToken, `{"node":"news","source":"`+feed.URL+`","access_model":"whitelist"}`)
	if code != 201 {
		t.Fatalf("create: HTTP %d %s", code, body)
	}
	nodeToken := jsonField(t, body, "token")
	code, body = api("POST", "/api/nodes/news/token", adminToken, "")
	if code != 200 {
		t.Fatalf("rotate: HTTP %d %s", code, body)
	}
	rotated := jsonField(t, body, "token")
	api("GET", "/api/nodes", "wrong-"+adminToken, "")
	api("GET", "/api/nodes", nodeToken, "") // an old node token is not an admin token

	hookSecret, webSubSecret, callbackKey := secret("hooksecret"), secret("websubsecret"), secret("callbackkey")
	hook := newRecordingServer(t)
	code, body = d.getPingdRequest("news", "application/getpingd+http+subscribe+xml", rotated,
		`<subscribe><url href="`+hook.URL+`/hook?key=`+callbackKey+`" method="POST" diff="none" secret="`+hookSecret+`"/></subscribe>`)
	if code != http.StatusAccepted {
		t.Fatalf("webhook: HTTP %d %s", code, body)
	}
	req, _ := http.NewRequest("POST", d.URL+"/websub", strings.NewReader(url.Values{"hub.mode": {"subscribe"}, "hub.topic": {d.URL + "/atom/news"},
		"hub.callback": {hook.URL + "/websub?key=" + callbackKey}, "hub.secret": {webSubSecret}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+rotated)
	if code, body := doRequest(t, req); code != http.StatusAccepted {
		t.Fatalf("WebSub: HTTP %d %s", code, body)
	}
	if code, body := d.getPingdRequest("news", "application/getpingd+xmpp+subscribe+xml", rotated,
		`<subscribe><consumer jid="reader@localhost"/></subscribe>`); code != 200 {
		t.Fatalf("whitelist request: HTTP %d %s", code, body)
	}
	d.getPingdRequest("news", "application/getpingd+xmpp+subscribe+xml", nodeToken, `<subscribe><consumer jid="reader@localhost"/></subscribe>`)
	testenv.WaitFor(t, 20*time.Second, "both callbacks verified", func() bool {
		active := 0
		for _, s := range d.nodeSubscribers("news") {
			if s.State == "active" {
				active++
			}
		}
		return active == 2
	})
	// A delivery to each, and one to a callback that fails (its error is
	// logged and kept).
	hook.Close()
	feed.Add(feedItem{"b", "Item b"})
	d.pingFeed(feed.URL)
	testenv.WaitFor(t, 20*time.Second, "the failed deliveries", func() bool {
		failing := 0
		for _, s := range d.nodeSubscribers("news") {
			if s.Delivery.ConsecutiveErrors > 0 {
				failing++
			}
		}
		return failing == 2
	})
	d.Stop()

	logs := d.logs.String()
	if !strings.Contains(logs, "level=DEBUG") || !strings.Contains(logs, "XMPP out") {
		t.Fatalf("the log is not at debug level:\n%.2000s", logs)
	}
	secrets := map[string]string{
		"admin token": adminToken, "node token": nodeToken, "rotated node token": rotated,
		"component secret": p.Secret, "webhook secret": hookSecret, "WebSub secret": webSubSecret,
		"callback key": callbackKey,
	}
	for name, s := range secrets {
		if i := strings.Index(logs, s); i >= 0 {
			t.Errorf("the log holds the %s: …%s…", name, logs[max(0, i-200):min(len(logs), i+len(s)+50)])
		}
	}

	// The database files (with the WAL, if any is left).
	var db []byte
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(d.dbPath + suffix)
		if err == nil {
			db = append(db, b...)
		}
	}
	if len(db) == 0 {
		t.Fatalf("no database file at %s", filepath.Base(d.dbPath))
	}
	for name, s := range map[string]string{"admin token": adminToken, "node token": nodeToken,
		"rotated node token": rotated, "component secret": p.Secret} {
		if strings.Contains(string(db), s) {
			t.Errorf("the database holds the %s in clear", name)
		}
	}
	sum := sha256.Sum256([]byte(rotated))
	if !strings.Contains(string(db), string(sum[:])) {
		t.Error("the database does not hold the node token's SHA-256: is it stored at all?")
	}
}

func jsonField(t *testing.T, body, field string) string {
	t.Helper()
	var m map[string]any
	if err := jsonUnmarshal([]byte(body), &m); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	s, _ := m[field].(string)
	if s == "" {
		t.Fatalf("no %q in %s", field, body)
	}
	return s
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// TestHugeFeedIsCut points a node at a source that never stops sending:
// pingd reads up to its 10 MiB cap, drops the connection, says so in the
// source's status, and stays healthy.
func TestHugeFeedIsCut(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	d := newDaemon(t, p)
	d.Start(true)
	var mu sync.Mutex
	sent := 0
	endless := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		_, _ = io.WriteString(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>Endless</title>`)
		chunk := []byte(strings.Repeat("<!-- filler -->", 4096))
		for {
			n, err := w.Write(chunk)
			mu.Lock()
			sent += n
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}))
	if code := d.api("POST", "/api/nodes", map[string]any{"node": "huge", "source": endless.URL}, nil); code != 201 {
		t.Fatalf("create: HTTP %d", code)
	}
	var st struct {
		Source struct {
			LastError string `json:"last_error"`
			Baselined bool   `json:"baselined"`
		} `json:"source"`
	}
	testenv.WaitFor(t, 60*time.Second, "the fetch to be cut", func() bool {
		d.api("GET", "/api/nodes/huge/status", nil, &st)
		return st.Source.LastError != ""
	})
	mu.Lock()
	total := sent
	mu.Unlock()
	t.Logf("cut after the origin had written %d MiB: %s", total>>20, st.Source.LastError)
	if !strings.Contains(st.Source.LastError, "too large") || st.Source.Baselined {
		t.Errorf("source status after an endless body: %+v", st.Source)
	}
	if total > 64<<20 {
		t.Errorf("pingd kept reading: the origin wrote %d MiB", total>>20)
	}
	resp, err := http.Get(d.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("pingd is not healthy after the huge feed: %v", err)
	}
	resp.Body.Close()
}

func newTestServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
