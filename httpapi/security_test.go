package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/netguard"
	"github.com/pingd/pingd/internal/xmlrpc"
	"github.com/pingd/pingd/store"
)

// Hostile input on every endpoint that reads a body: each is refused with
// a clear answer in the endpoint's own format, nothing is stored, and the
// memory spent stays bounded.

// bodyEndpoint is one way of sending a body to pingd.
type bodyEndpoint struct {
	name        string
	method      string
	path        string
	contentType string
	// xml is set for endpoints that parse the body as XML.
	xml bool
	// rpc is set where a malformed document is answered with an XML-RPC
	// fault (HTTP 200), as XML-RPC clients expect, instead of a 4xx.
	rpc bool
	// limit is the body cap of the endpoint.
	limit int64
}

func bodyEndpoints() []bodyEndpoint {
	return []bodyEndpoint{
		{name: "XML-RPC", method: "POST", path: "/RPC2", contentType: "text/xml", xml: true, rpc: true, limit: DefaultMaxBodyBytes},
		{name: "XML-RPC at /ping", method: "POST", path: "/ping", contentType: "text/xml", xml: true, rpc: true, limit: DefaultMaxBodyBytes},
		{name: "REST ping", method: "POST", path: "/ping", contentType: "application/x-www-form-urlencoded", limit: DefaultMaxBodyBytes},
		{name: "CNWS", method: "POST", path: "/cnws", contentType: "text/xml", xml: true, limit: DefaultMaxBodyBytes},
		{name: "WebSub", method: "POST", path: "/websub", contentType: "application/x-www-form-urlencoded", limit: DefaultMaxBodyBytes},
		{name: "rssCloud pleaseNotify", method: "POST", path: "/pleaseNotify", contentType: "application/x-www-form-urlencoded", limit: DefaultMaxBodyBytes},
		{name: "GetPingd webhook SUBSCRIBE", method: "SUBSCRIBE", path: "/feeds/n", contentType: "application/getpingd+http+subscribe+xml", xml: true, limit: getpingd.MaxRequestBytes},
		{name: "GetPingd whitelist SUBSCRIBE", method: "SUBSCRIBE", path: "/feeds/n", contentType: "application/getpingd+xmpp+subscribe+xml", xml: true, limit: getpingd.MaxRequestBytes},
		{name: "GetPingd POST subscribe", method: "POST", path: "/feeds/n?method=subscribe", contentType: "application/getpingd+http+subscribe+xml", xml: true, limit: getpingd.MaxRequestBytes},
		{name: "admin API", method: "POST", path: "/api/nodes", contentType: "application/json", limit: DefaultMaxBodyBytes},
	}
}

// hostileXML are documents every XML endpoint must refuse. Each is valid
// enough to get past a content-type check and would, if accepted, cost
// memory or smuggle content.
func hostileXML() map[string]string {
	// Billion laughs: ten levels of ten references, 10^9 "lol"s if expanded.
	var laughs strings.Builder
	laughs.WriteString(`<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol0 "lol">`)
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&laughs, `<!ENTITY lol%d "%s">`, i, strings.Repeat(fmt.Sprintf("&lol%d;", i-1), 10))
	}
	laughs.WriteString(`]><methodCall><methodName>&lol9;</methodName></methodCall>`)
	return map[string]string{
		"entity expansion": laughs.String(),
		"external entity": `<?xml version="1.0"?><!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>` +
			`<subscribe><url href="&xxe;"/></subscribe>`,
		// Under each endpoint's cap, so that the parser, not the cap, refuses.
		"deep nesting":          strings.Repeat("<a>", 100000) + strings.Repeat("</a>", 100000),
		"deep nesting, smaller": "<subscribe>" + strings.Repeat("<a>", 5000) + strings.Repeat("</a>", 5000) + "</subscribe>",
		"invalid UTF-8":         "<?xml version=\"1.0\"?><notification><subscribe><resourceID>http://x.example/\xff\xfe</resourceID></subscribe></notification>",
		"unclosed element":      "<methodCall><methodName>weblogUpdates.ping</methodName><params>",
	}
}

// malformedJSON are admin API bodies to refuse.
func malformedJSON() map[string]string {
	return map[string]string{
		"deep nesting":  `{"node":` + strings.Repeat("[", 200000) + strings.Repeat("]", 200000) + `}`,
		"invalid UTF-8": "{\"node\":\"n\xff\xfe\"}",
		"two values":    `{"node":"a"}{"node":"b"}`,
	}
}

// securityEnv is an env with the node "n" and the rssCloud, CNWS and WebSub
// transports marked as served, so every endpoint gets past its first
// checks.
func securityEnv(t *testing.T, tune ...func(*Config)) *env {
	t.Helper()
	e := newEnv(t, tune...)
	e.hub.Register(nopTransport{}, hub.KindRSSCloud, hub.KindCNWS, hub.KindWebSub, hub.KindWebhook)
	wantStatus(t, e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": "n"}), http.StatusCreated)
	return e
}

type nopTransport struct{}

func (nopTransport) Wake(int64) {}

// send posts body to the endpoint; unsized hides its length (chunked).
func (e *env) send(ep bodyEndpoint, body io.Reader) *http.Response {
	e.t.Helper()
	token := ""
	if ep.path == "/api/nodes" {
		token = testAdminToken
	}
	return e.do(ep.method, ep.path, token, body, "Content-Type", ep.contentType)
}

// stored counts what requests may have left in the store: pings, nodes
// and subscriptions.
func (e *env) stored() (pings, nodes, subs int) {
	e.t.Helper()
	ctx := context.Background()
	p, _, err := e.hub.Pings(ctx, time.Time{}, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	n, err := e.hub.Nodes(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(p), len(n), len(s)
}

// wantRefused checks that the answer refuses the request clearly: a 4xx
// with a message, or for XML-RPC an HTTP 200 fault.
func wantRefused(t *testing.T, ep bodyEndpoint, resp *http.Response, what string) string {
	t.Helper()
	body := string(readBody(t, resp))
	if ep.rpc && resp.StatusCode == http.StatusOK {
		_, err := xmlrpc.DecodeResponse(strings.NewReader(body), xmlrpc.Limits{})
		f, ok := err.(*xmlrpc.Fault)
		if !ok || f.Message == "" {
			t.Errorf("%s, %s: HTTP 200 without a fault: %s", ep.name, what, body)
		}
		return body
	}
	if resp.StatusCode < 400 || resp.StatusCode > 499 {
		t.Errorf("%s, %s: HTTP %d, want a 4xx refusal; body: %.300s", ep.name, what, resp.StatusCode, body)
	}
	if strings.TrimSpace(body) == "" {
		t.Errorf("%s, %s: HTTP %d without a message", ep.name, what, resp.StatusCode)
	}
	return body
}

// TestHostileBodiesAreRefused sends entity expansion, external entities,
// deep nesting, invalid UTF-8 and truncated documents to every endpoint
// that reads a body.
func TestHostileBodiesAreRefused(t *testing.T) {
	e := securityEnv(t)
	pings0, nodes0, subs0 := e.stored()
	for _, ep := range bodyEndpoints() {
		bodies := hostileXML()
		switch {
		case ep.path == "/api/nodes":
			bodies = malformedJSON()
		case !ep.xml:
			bodies = map[string]string{
				"invalid UTF-8 in a field": "url=http%3A%2F%2Fx.example%2F%FF%FE&name=%FF&hub.mode=publish&hub.url=http%3A%2F%2Fx.example%2F%FF" +
					"&port=80&path=%2F%FF&protocol=http-post&url1=http%3A%2F%2Fx.example%2F%FF",
				"an XML document instead of a form": hostileXML()["entity expansion"],
				"a bare percent":                    "url=%&hub.mode=%zz",
			}
		}
		for what, body := range bodies {
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			resp := e.send(ep, strings.NewReader(body))
			answer := wantRefused(t, ep, resp, what)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			// A refusal costs a bounded multiple of the body, whatever
			// the document says it expands to.
			if spent := after.TotalAlloc - before.TotalAlloc; spent > uint64(64*len(body)+(8<<20)) {
				t.Errorf("%s, %s: refusing a %d-byte body allocated %d bytes", ep.name, what, len(body), spent)
			}
			if strings.Contains(answer, "root:") || strings.Contains(answer, "lollol") {
				t.Errorf("%s, %s: an entity was expanded into the answer: %.300s", ep.name, what, answer)
			}
		}
	}
	if p, n, s := e.stored(); p != pings0 || n != nodes0 || s != subs0 {
		t.Errorf("refused requests stored something: pings %d→%d, nodes %d→%d, subscriptions %d→%d", pings0, p, nodes0, n, subs0, s)
	}
}

// TestOversizedBodiesGet413 sends a body one byte over each endpoint's cap,
// with and without a Content-Length.
func TestOversizedBodiesGet413(t *testing.T) {
	e := securityEnv(t)
	for _, ep := range bodyEndpoints() {
		var filler string
		switch {
		case ep.path == "/api/nodes":
			filler = `{"node":"` + strings.Repeat("n", int(ep.limit)) + `"}`
		case ep.xml:
			filler = `<?xml version="1.0"?><subscribe><!--` + strings.Repeat("x", int(ep.limit)) + `--></subscribe>`
		default:
			filler = "url=http%3A%2F%2Fx.example%2F&name=" + strings.Repeat("n", int(ep.limit))
		}
		for _, sized := range []bool{true, false} {
			var body io.Reader = strings.NewReader(filler)
			if !sized {
				body = &unsizedReader{r: body}
			}
			resp := e.send(ep, body)
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("%s (Content-Length sent: %v): HTTP %d, want 413; body: %.200s", ep.name, sized, resp.StatusCode, readBody(t, resp))
				continue
			}
			if msg := string(readBody(t, resp)); !strings.Contains(msg, strconv.FormatInt(ep.limit, 10)) {
				t.Errorf("%s: the 413 does not say the limit: %.200s", ep.name, msg)
			}
		}
	}
	if p, _, _ := e.stored(); p != 0 {
		t.Errorf("%d oversized pings were stored", p)
	}
}

// TestInvalidUTF8NeverReachesDocuments: what pingd writes out (changes.xml
// from the pings it took) stays well-formed whatever bytes came in.
func TestInvalidUTF8NeverReachesDocuments(t *testing.T) {
	e := securityEnv(t)
	resp := e.do(http.MethodGet, "/pingSiteForm?name=%FF%FEblog&url="+url.QueryEscape("http://x.example/feed"), "", nil)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("ping with an invalid name: HTTP %d", resp.StatusCode)
	}
	_, _, _ = e.rpc("weblogUpdates.ping", "bad \xff name", "http://y.example/")
	resp = e.do(http.MethodGet, "/changes.xml", "", nil)
	wantStatus(t, resp, http.StatusOK)
	doc := readBody(t, resp)
	d := xml.NewDecoder(bytes.NewReader(doc))
	for {
		_, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("changes.xml is not well-formed: %v\n%s", err, doc)
		}
	}
}

// TestSlowBodiesAreCutOff: a client that sends its headers or its body a
// byte at a time is disconnected by the server's read timeouts, and the
// request it was sending is not taken. The server is set up as cmd/pingd
// sets up its own, with the timeouts scaled down.
func TestSlowBodiesAreCutOff(t *testing.T) {
	e := securityEnv(t)
	srv := httptest.NewUnstartedServer(e.api)
	srv.Config.ReadHeaderTimeout = 300 * time.Millisecond
	srv.Config.ReadTimeout = 600 * time.Millisecond
	srv.Config.WriteTimeout = 2 * time.Second
	srv.Config.IdleTimeout = 2 * time.Second
	srv.Config.MaxHeaderBytes = 64 << 10
	srv.Config.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelWarn)
	srv.Start()
	t.Cleanup(srv.Close)

	// slowly writes the request a chunk at a time and reports how long the
	// server kept the connection and what it answered.
	slowly := func(head string, body string, every time.Duration) (time.Duration, string) {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		answer := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(bufio.NewReader(c))
			answer <- string(b)
		}()
		for _, part := range []string{head, body} {
			for i := 0; i < len(part); i++ {
				if _, err := c.Write([]byte{part[i]}); err != nil {
					return time.Since(start), <-answer
				}
				time.Sleep(every)
				if time.Since(start) > 10*time.Second {
					t.Fatalf("the server kept a slow client for %v", time.Since(start))
				}
			}
		}
		return time.Since(start), <-answer
	}

	form := "url=" + url.QueryEscape("http://slow.example/feed") + "&name=" + strings.Repeat("s", 200)
	head := "POST /ping HTTP/1.1\r\nHost: pingd\r\nContent-Type: application/x-www-form-urlencoded\r\n" +
		"Content-Length: " + strconv.Itoa(len(form)) + "\r\n\r\n"
	// Headers a byte every 50 ms: cut at ReadHeaderTimeout.
	took, answer := slowly(head, form, 50*time.Millisecond)
	t.Logf("slow headers: disconnected after %v", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("slow headers: connection kept %v", took)
	}
	if strings.Contains(answer, "200 OK") {
		t.Errorf("slow headers: the ping was taken: %q", answer)
	}
	// Headers at once, the body a byte every 50 ms: cut at ReadTimeout.
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() { b, _ := io.ReadAll(c); got <- string(b) }()
	for i := 0; i < len(form); i++ {
		if _, err := c.Write([]byte{form[i]}); err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
		if time.Since(start) > 5*time.Second {
			break
		}
	}
	answer = <-got
	t.Logf("slow body: disconnected after %v with %q", time.Since(start).Round(time.Millisecond), firstLine(answer))
	if time.Since(start) > 5*time.Second {
		t.Errorf("slow body: connection kept past 5s (ReadTimeout 600ms)")
	}
	if strings.Contains(answer, "200 OK") {
		t.Errorf("slow body: the ping was taken: %q", answer)
	}
	if p, _, _ := e.stored(); p != 0 {
		t.Errorf("a slow request was stored as a ping (%d pings)", p)
	}
}

// TestPingRateLimitPerHost: pings naming different URLs of one host share
// the host's bucket; each refusal is 429 with Retry-After, in every
// dialect; another host is not affected.
func TestPingRateLimitPerHost(t *testing.T) {
	e := securityEnv(t, func(c *Config) { c.PingHostRate = 0.001; c.PingHostBurst = 3 })
	for i := range 3 {
		resp, v, err := e.rpc("weblogUpdates.ping", "Blog", fmt.Sprintf("http://busy.example/blog/%d", i))
		wantStatus(t, resp, http.StatusOK)
		if err != nil {
			t.Fatal(err)
		}
		wantFlerror(t, v, false)
	}
	resp, _, err := e.rpc("weblogUpdates.ping", "Blog", "http://busy.example/blog/other")
	if f, ok := err.(*xmlrpc.Fault); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		!ok || !strings.Contains(f.Message, "busy.example") {
		t.Errorf("XML-RPC: HTTP %d, Retry-After %q, %v; want 429 with a fault naming the host", resp.StatusCode, resp.Header.Get("Retry-After"), err)
	}
	refusals := map[string]*http.Response{}
	refusals["REST"] = e.do(http.MethodPost, "/ping", "", strings.NewReader("url="+url.QueryEscape("http://BUSY.example/x")),
		"Content-Type", "application/x-www-form-urlencoded")
	refusals["form"] = e.do(http.MethodGet, "/pingSiteForm?url="+url.QueryEscape("http://busy.example/y"), "", nil)
	refusals["WebSub publish"] = e.do(http.MethodPost, "/websub", "", strings.NewReader("hub.mode=publish&hub.url="+url.QueryEscape("http://busy.example/z")),
		"Content-Type", "application/x-www-form-urlencoded")
	refusals["CNWS resourceChange"] = e.do(http.MethodPost, "/cnws", "", strings.NewReader(
		`<notification version="1.0"><resourceChange><resourceID>http://busy.example/w</resourceID></resourceChange></notification>`),
		"Content-Type", "text/xml")
	for name, resp := range refusals {
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s: HTTP %d, want 429", name, resp.StatusCode)
			continue
		}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || secs < 1 {
			t.Errorf("%s: Retry-After %q", name, resp.Header.Get("Retry-After"))
		}
		if body := string(readBody(t, resp)); !strings.Contains(body, "busy.example") {
			t.Errorf("%s: the 429 does not name the host: %.300s", name, body)
		}
	}
	// Another host has its own bucket.
	_, v, err := e.rpc("weblogUpdates.ping", "Quiet", "http://quiet.example/feed")
	if err != nil {
		t.Fatal(err)
	}
	wantFlerror(t, v, false)
	if p, _, _ := e.stored(); p != 4 {
		t.Errorf("%d pings stored, want 4 (refused ones are not)", p)
	}
}

// TestAdminRateLimitGuessingTokens: wrong tokens are rate limited like
// right ones, with Retry-After, so guessing the admin token is slow.
func TestAdminRateLimitGuessingTokens(t *testing.T) {
	e := securityEnv(t, func(c *Config) { c.AdminRate = 0.001; c.AdminBurst = 5 })
	codes := map[int]int{}
	var last *http.Response
	for i := range 8 {
		last = e.do(http.MethodGet, "/api/nodes", fmt.Sprintf("guess-%d", i), nil)
		codes[last.StatusCode]++
	}
	// One request of the burst went to creating the node.
	if codes[http.StatusUnauthorized] != 4 || codes[http.StatusTooManyRequests] != 4 {
		t.Fatalf("answers to 8 guesses: %v, want 4×401 then 4×429", codes)
	}
	if last.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	// The right token is refused too while the client is over its limit.
	wantStatus(t, e.admin(http.MethodGet, "/api/nodes", nil), http.StatusTooManyRequests)
}

// TestPrivateAddressesRefusedEarly: with the address check pingd runs
// without PINGD_ALLOW_PRIVATE, sources, topics and callbacks at loopback,
// private, link-local and metadata addresses, and names that resolve to
// them, are refused before anything is stored, on every endpoint that
// takes one, with a message that says why.
func TestPrivateAddressesRefusedEarly(t *testing.T) {
	e := securityEnv(t, func(c *Config) { c.CheckHost = netguard.CheckHost })
	_, nodes0, subs0 := e.stored()
	targets := []string{
		"http://127.0.0.1:8080/feed",
		"http://[::1]/feed",
		"http://10.1.2.3/feed",
		"http://169.254.169.254/latest/meta-data/",
		"http://localhost:9/feed",
		"http://[::ffff:127.0.0.1]/feed",
		"http://0.0.0.0/feed",
	}
	form := func(v url.Values) io.Reader { return strings.NewReader(v.Encode()) }
	for i, target := range targets {
		checks := map[string]*http.Response{
			"node source": e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": fmt.Sprintf("private-%d", i), "source": target}),
			"webhook callback": e.do("SUBSCRIBE", "/feeds/n", "", strings.NewReader(`<subscribe><url href="`+target+`"/></subscribe>`),
				"Content-Type", "application/getpingd+http+subscribe+xml"),
			"WebSub callback": e.do(http.MethodPost, "/websub", "", form(url.Values{"hub.mode": {"subscribe"},
				"hub.topic": {"http://public.example/feed"}, "hub.callback": {target}}), "Content-Type", "application/x-www-form-urlencoded"),
			"WebSub topic": e.do(http.MethodPost, "/websub", "", form(url.Values{"hub.mode": {"subscribe"},
				"hub.topic": {target}, "hub.callback": {"http://public.example/cb"}}), "Content-Type", "application/x-www-form-urlencoded"),
			"CNWS notificationURL": e.do(http.MethodPost, "/cnws", "", strings.NewReader(`<notification version="1.0"><subscribe><resourceID>http://public.example/feed</resourceID>`+
				`<notificationURL>`+target+`</notificationURL></subscribe></notification>`), "Content-Type", "text/xml"),
			"CNWS resourceID": e.do(http.MethodPost, "/cnws", "", strings.NewReader(`<notification version="1.0"><subscribe><resourceID>`+target+`</resourceID>`+
				`<notificationURL>http://public.example/cb</notificationURL></subscribe></notification>`), "Content-Type", "text/xml"),
			"rssCloud URL": e.do(http.MethodPost, "/pleaseNotify", "", form(url.Values{"port": {"80"}, "path": {"/rpc"}, "protocol": {"http-post"},
				"domain": {"public.example"}, "url1": {target}}), "Content-Type", "application/x-www-form-urlencoded"),
		}
		if u, _ := url.Parse(target); u.Port() == "" || u.Hostname() != "localhost" {
			checks["rssCloud domain"] = e.do(http.MethodPost, "/pleaseNotify", "", form(url.Values{"port": {"80"}, "path": {"/rpc"},
				"protocol": {"http-post"}, "domain": {u.Hostname()}, "url1": {"http://public.example/feed"}}), "Content-Type", "application/x-www-form-urlencoded")
		}
		for what, resp := range checks {
			body := string(readBody(t, resp))
			refused := resp.StatusCode == http.StatusBadRequest ||
				(strings.HasPrefix(what, "rssCloud") && strings.Contains(body, `success="false"`))
			if !refused || !strings.Contains(body, "refused") {
				t.Errorf("%s %s: HTTP %d, want a refusal saying why: %.300s", what, target, resp.StatusCode, body)
			}
		}
	}
	// The rssCloud callback without a domain is the caller's own address:
	// loopback here.
	resp := e.do(http.MethodPost, "/pleaseNotify", "", form(url.Values{"port": {"80"}, "path": {"/rpc"}, "protocol": {"http-post"},
		"url1": {"http://public.example/feed"}}), "Content-Type", "application/x-www-form-urlencoded")
	if body := string(readBody(t, resp)); !strings.Contains(body, `success="false"`) || !strings.Contains(body, "refused") {
		t.Errorf("rssCloud at the caller's loopback address: %s", body)
	}
	if _, n, s := e.stored(); n != nodes0 || s != subs0 {
		t.Errorf("refused requests stored something: nodes %d→%d, subscriptions %d→%d", nodes0, n, subs0, s)
	}

	// Without the check (PINGD_ALLOW_PRIVATE=1) the same source is taken.
	open := securityEnv(t)
	wantStatus(t, open.admin(http.MethodPost, "/api/nodes", map[string]any{"node": "local", "source": targets[0]}), http.StatusCreated)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}

// FuzzRequestBodies sends arbitrary bodies to every endpoint that reads
// one, through the whole router on a real hub and store: no answer is a
// server error (503, "this server does not send …", aside), and nothing
// panics. The endpoint is chosen by the first input.
func FuzzRequestBodies(f *testing.F) {
	eps := bodyEndpoints()
	for i, ep := range eps {
		for _, body := range hostileXML() {
			if len(body) < 4096 {
				f.Add(uint8(i), []byte(body))
			}
		}
		switch {
		case ep.path == "/api/nodes":
			f.Add(uint8(i), []byte(`{"node":"a","source":"http://x.example/feed","access_model":"whitelist"}`))
			f.Add(uint8(i), []byte(`{"node":"\u0000"}`))
		case ep.xml:
			f.Add(uint8(i), []byte(`<subscribe><url href="http://x.example/cb" method="POST" diff="none"/></subscribe>`))
			f.Add(uint8(i), []byte(`<subscribe><consumer jid="a@example.org/r"/></subscribe>`))
			f.Add(uint8(i), []byte(`<notification version="1.0"><resourceChange><resourceID>http://x.example/</resourceID></resourceChange></notification>`))
			f.Add(uint8(i), []byte(`<?xml version="1.0"?><methodCall><methodName>weblogUpdates.ping</methodName><params>`+
				`<param><value>Blog</value></param><param><value>http://x.example/</value></param></params></methodCall>`))
		default:
			f.Add(uint8(i), []byte("url=http%3A%2F%2Fx.example%2F&hub.mode=publish&hub.url=http%3A%2F%2Fx.example%2F"))
			f.Add(uint8(i), []byte("hub.mode=subscribe&hub.topic=http%3A%2F%2Fx.example%2F&hub.callback=http%3A%2F%2Fy.example%2F&hub.lease_seconds=99999999999999999999"))
			f.Add(uint8(i), []byte("notifyProcedure=&port=80&path=%2Frpc&protocol=http-post&url1=http%3A%2F%2Fx.example%2F"))
		}
	}
	st, err := store.Open(context.Background(), filepath.Join(f.TempDir(), "pingd.db"), store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = st.Close() })
	quiet := slog.New(slog.DiscardHandler)
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Logger: quiet, AdminToken: testAdminToken})
	if err != nil {
		f.Fatal(err)
	}
	// The address check without name lookups: fuzzing must not depend on DNS.
	literalsOnly := func(_ context.Context, host string) error {
		if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
			return netguard.CheckAddr(ip)
		}
		return nil
	}
	api, err := New(Config{Hub: h, Store: st, PublicURL: "http://localhost:8080", Logger: quiet, CheckHost: literalsOnly})
	if err != nil {
		f.Fatal(err)
	}
	if _, _, err := h.CreateNode(context.Background(), hub.NodeSpec{Name: "n", Config: hub.DefaultNodeConfig()}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		ep := eps[int(which)%len(eps)]
		req := httptest.NewRequest(ep.method, ep.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", ep.contentType)
		if ep.path == "/api/nodes" {
			req.Header.Set("Authorization", "Bearer "+testAdminToken)
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s: HTTP %d for %q: %s", ep.name, rec.Code, body, rec.Body)
		}
		if rec.Code == http.StatusRequestEntityTooLarge && int64(len(body)) <= ep.limit {
			t.Fatalf("%s: 413 for %d bytes", ep.name, len(body))
		}
	})
}

// TestRefusalsNameNoResolvedAddress: a URL refused because its name
// resolves to a non-public address is refused without the address pingd's
// resolver gave for the name, so that strangers cannot use pingd to learn
// what names resolve to on its network.
func TestRefusalsNameNoResolvedAddress(t *testing.T) {
	e := securityEnv(t, func(c *Config) { c.CheckHost = netguard.CheckHost })
	const target = "http://localhost:9/feed"
	form := func(v url.Values) io.Reader { return strings.NewReader(v.Encode()) }
	checks := map[string]*http.Response{
		"WebSub topic": e.do(http.MethodPost, "/websub", "", form(url.Values{"hub.mode": {"subscribe"},
			"hub.topic": {target}, "hub.callback": {"http://public.example/cb"}}), "Content-Type", "application/x-www-form-urlencoded"),
		"rssCloud URL": e.do(http.MethodPost, "/pleaseNotify", "", form(url.Values{"port": {"80"}, "path": {"/rpc"}, "protocol": {"http-post"},
			"domain": {"public.example"}, "url1": {target}}), "Content-Type", "application/x-www-form-urlencoded"),
		"CNWS resourceID": e.do(http.MethodPost, "/cnws", "", strings.NewReader(`<notification version="1.0"><subscribe><resourceID>`+target+`</resourceID>`+
			`<notificationURL>http://public.example/cb</notificationURL></subscribe></notification>`), "Content-Type", "text/xml"),
	}
	for what, resp := range checks {
		body := string(readBody(t, resp))
		if !strings.Contains(body, "refused") || strings.Contains(body, "127.0.0.1") || strings.Contains(body, "::1") {
			t.Errorf("%s %s: HTTP %d %.300s", what, target, resp.StatusCode, body)
		}
	}
}
