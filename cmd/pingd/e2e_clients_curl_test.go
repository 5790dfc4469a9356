package main

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/metrics"
	"github.com/pingd/pingd/internal/testenv"
)

// curlResult is the final answer curl got (after any 100 Continue).
type curlResult struct {
	Status int
	Header http.Header
	Body   string
}

// curl runs the curl binary with args and returns the answer.
func curl(t *testing.T, args ...string) curlResult {
	t.Helper()
	dir := t.TempDir()
	hdrFile, bodyFile := filepath.Join(dir, "headers"), filepath.Join(dir, "body")
	full := append([]string{"--silent", "--show-error", "--max-time", "30", "--dump-header", hdrFile, "--output", bodyFile}, args...)
	var raw []byte
	for attempt := 1; ; attempt++ {
		os.Remove(hdrFile)
		out, err := exec.Command("curl", full...).CombinedOutput()
		raw, _ = os.ReadFile(hdrFile)
		var exit *exec.ExitError
		// Exit 55 is a send failure: pingd answered an oversized body
		// early and closed the connection while curl was still sending
		// it. The answer counts when curl read it before the reset;
		// otherwise the reset beat the answer (a busy machine), and the
		// request is made again.
		if err != nil && errors.As(err, &exit) && exit.ExitCode() == 55 {
			if len(raw) > 0 {
				break
			}
			if attempt < 5 {
				continue
			}
		}
		if err != nil {
			t.Fatalf("curl %q: %v\n%s", args, err, out)
		}
		break
	}
	body, _ := os.ReadFile(bodyFile)
	// The dump holds every response of the exchange; the last is the answer.
	blocks := strings.Split(strings.TrimSpace(strings.ReplaceAll(string(raw), "\r\n", "\n")), "\n\n")
	last := blocks[len(blocks)-1]
	r := textproto.NewReader(bufio.NewReader(strings.NewReader(last + "\n\n")))
	statusLine, err := r.ReadLine()
	if err != nil {
		t.Fatalf("curl %q: no status line in %q", args, raw)
	}
	parts := strings.Fields(statusLine)
	code, err := strconv.Atoi(parts[1])
	if len(parts) < 2 || err != nil {
		t.Fatalf("curl %q: status line %q", args, statusLine)
	}
	h, err := r.ReadMIMEHeader()
	if err != nil && err != io.EOF {
		t.Fatalf("curl %q: headers %q: %v", args, last, err)
	}
	return curlResult{Status: code, Header: http.Header(h), Body: string(body)}
}

// want fails unless the answer has the status and every header value
// given as "Name: value" (exact) is present.
func (c curlResult) want(t *testing.T, what string, status int, headers ...string) bool {
	t.Helper()
	ok := c.Status == status
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ": ")
		if !slices.Contains(c.Header.Values(name), value) {
			ok = false
		}
	}
	if !ok {
		t.Errorf("%s: HTTP %d %v\n%s\nwant %d with %q", what, c.Status, c.Header, c.Body, status, headers)
	}
	return ok
}

// callbackServer is testdata/clients/callback_server.py: a subscriber's
// endpoint written with Python's http.server.
type callbackServer struct {
	URL   string
	mu    sync.Mutex
	reqs  []callbackRequest
	stdin io.WriteCloser
}

type callbackRequest struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Query   map[string]string `json:"query"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

func startCallbackServer(t *testing.T) *callbackServer {
	t.Helper()
	cmd := exec.Command(systemPython, filepath.Join("testdata", "clients", "callback_server.py"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start callback_server.py: %v", err)
	}
	cb := &callbackServer{stdin: stdin}
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 0, 64<<10), 4<<20)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "LISTENING ") {
		t.Fatalf("callback_server.py did not start: %q %v", lines.Text(), lines.Err())
	}
	cb.URL = strings.TrimPrefix(lines.Text(), "LISTENING ")
	go func() {
		for lines.Scan() {
			var r callbackRequest
			if json.Unmarshal(lines.Bytes(), &r) == nil {
				cb.mu.Lock()
				cb.reqs = append(cb.reqs, r)
				cb.mu.Unlock()
			}
		}
	}()
	return cb
}

// requests returns the requests so far to path with the method ("" any).
func (cb *callbackServer) requests(method, path string) []callbackRequest {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	var out []callbackRequest
	for _, r := range cb.reqs {
		if r.Path == path && (method == "" || r.Method == method) {
			out = append(out, r)
		}
	}
	return out
}

func (cb *callbackServer) waitRequests(t *testing.T, method, path string, n int) []callbackRequest {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("%d %s request(s) to %s", n, method, path), func() bool { return len(cb.requests(method, path)) >= n })
	return cb.requests(method, path)
}

// TestClientsCurl: the HTTP contract as the curl binary sees it — GetPingd
// SUBSCRIBE and its content types and errors, webhooks verified and
// delivered to a Python http.server, WebSub and CNWS subscriptions and
// their deliveries, the node feeds' validators, pings and their limits,
// health, metrics, changes.xml, and the admin API's status codes.
func TestClientsCurl(t *testing.T) {
	e := startClientsEnv(t)
	testenv.RequireProgram(t, "curl", "apt-get install -y curl")
	requirePython(t, map[string]string{"http.server": "python3"})
	cb := startCallbackServer(t)
	base := e.d.URL
	descriptor := base + "/feeds/news"
	const (
		httpType = "application/getpingd+http+subscribe+xml"
		xmppType = "application/getpingd+xmpp+subscribe+xml"
	)
	subscribe := func(target, contentType string, body string, extra ...string) curlResult {
		args := []string{"--request", "SUBSCRIBE", "--data-binary", body}
		if contentType != "" {
			args = append(args, "--header", "Content-Type: "+contentType)
		}
		return curl(t, append(append(args, extra...), target)...)
	}

	// Discovery documents, literally.
	x := curl(t, base+"/xrds/news")
	x.want(t, "GET /xrds/news", 200, "Content-Type: application/xrds+xml")
	if !hasAll(x.Body, `xmlns:xrds="xri://$xrds"`, `xmlns="xri://$xrd*($v*2.0)"`, `<Type>http://getpingd.com/services/subscribe</Type>`) {
		t.Errorf("XRDS document:\n%s", x.Body)
	}
	curl(t, "--head", base+"/xrds/news").want(t, "HEAD /xrds/news", 200, "Content-Type: application/xrds+xml")
	curl(t, "--header", "Accept: application/xrds+xml", descriptor).want(t, "GET /feeds/news preferring XRDS", 200,
		"Content-Type: application/xrds+xml", "X-XRDS-Location: "+base+"/xrds/news")
	page := curl(t, descriptor)
	page.want(t, "GET /feeds/news", 200, "X-XRDS-Location: "+base+"/xrds/news")
	if !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Errorf("descriptor page is %s", page.Header.Get("Content-Type"))
	}
	curl(t, base+"/feeds/no-such-node").want(t, "GET /feeds/ of an unknown node", 404)

	// GetPingd webhooks: one POST without diff, one NOTIFY with patches
	// and a secret (through the POST ?method=subscribe URI).
	// The first as the proposal writes it: white space around, a query in
	// the callback.
	hookPost := cb.URL + "/hook-post?feed=UniversalGadget"
	subscribe(descriptor, httpType, "  <subscribe>\n<url href=\""+hookPost+"\" method=\"POST\" diff=\"none\" />\n</subscribe>\n").
		want(t, "SUBSCRIBE webhook", 202)
	curl(t, "--request", "POST", "--header", "Content-Type: "+httpType+"; charset=utf-8", "--data-binary",
		`<subscribe><url href="`+cb.URL+`/hook-notify" method="NOTIFY" diff="application/patch-ops+xml" secret="s3cret"/></subscribe>`,
		descriptor+"?method=subscribe").want(t, "POST ?method=subscribe webhook", 202)
	for _, path := range []string{"/hook-post", "/hook-notify"} {
		v := cb.waitRequests(t, "GET", path, 1)[0]
		if v.Query["hub.mode"] != "subscribe" || v.Query["hub.topic"] != descriptor || v.Query["hub.challenge"] == "" ||
			(path == "/hook-post" && v.Query["feed"] != "UniversalGadget") {
			t.Errorf("verification of %s: %v", path, v.Query)
		}
	}
	curl(t, "--request", "POST", "--header", "Content-Type: "+httpType, "--data-binary", `<subscribe/>`, descriptor).
		want(t, "POST /feeds/news without ?method=subscribe", 400)
	// RFC 7351's name for the patch format is an alias; deliveries carry
	// the name the subscriber used.
	subscribe(descriptor, httpType, `<subscribe><url href="`+cb.URL+`/hook-alias" method="POST" diff="application/xml-patch+xml"/></subscribe>`).
		want(t, "SUBSCRIBE webhook with the xml-patch alias", 202)
	cb.waitRequests(t, "GET", "/hook-alias", 1)
	// A whitelist node's content needs its token, webhooks included.
	hookOnPrivate := `<subscribe><url href="` + cb.URL + `/hook-private" method="POST"/></subscribe>`
	subscribe(base+"/feeds/private", httpType, hookOnPrivate).want(t, "webhook on a whitelist node without token", 401)
	subscribe(base+"/feeds/private", httpType, hookOnPrivate, "--header", "Authorization: Bearer "+e.privateToken).
		want(t, "webhook on a whitelist node with its token", 202)
	cb.waitRequests(t, "GET", "/hook-private", 1)

	// Content types: 415 listing the accepted ones.
	for _, ct := range []string{"text/xml", "application/xml", ""} {
		r := subscribe(descriptor, ct, `<subscribe><consumer jid="a@localhost"/></subscribe>`)
		if r.want(t, "SUBSCRIBE as "+ct, 415) && !hasAll(r.Body, httpType, xmppType) {
			t.Errorf("415 answer does not list the accepted types: %q", r.Body)
		}
	}

	// XMPP consumers.
	r := subscribe(descriptor, xmppType, `<subscribe><consumer jid="stranger@localhost/Feeds"/></subscribe>`)
	if r.want(t, "XMPP consumer on an open node", 200) {
		var ans struct {
			XMLName xml.Name
			JID     string `xml:"jid,attr"`
			Node    string `xml:"node,attr"`
		}
		if err := xml.Unmarshal([]byte(r.Body), &ans); err != nil || ans.XMLName.Local != "subscribed" || ans.JID != "stranger@localhost" || ans.Node != "news" {
			t.Errorf("XMPP consumer answer: %q", r.Body)
		}
	}
	private := base + "/feeds/private"
	consumer := `<subscribe><consumer jid="stranger@localhost"/></subscribe>`
	subscribe(private, xmppType, consumer).want(t, "whitelist node without token", 401, `WWW-Authenticate: Bearer realm="pingd"`)
	if r := subscribe(private, xmppType, consumer, "--header", "Authorization: Bearer wrong"); r.want(t, "whitelist node with a wrong token", 401) &&
		!strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 without a Bearer challenge: %v", r.Header)
	}
	subscribe(private, xmppType, consumer, "--header", "Authorization: Bearer "+e.privateToken).want(t, "whitelist node with its token", 200)
	subscribe(private, xmppType, consumer, "--header", "Authorization: Bearer "+testAdminToken).want(t, "whitelist node with the admin token", 200)
	subscribe(descriptor, xmppType, `<subscribe><consumer jid="not a jid@@"/></subscribe>`).want(t, "invalid JID", 400)
	subscribe(descriptor, xmppType, `<subscribe><consumer`).want(t, "malformed document", 400)
	subscribe(base+"/feeds/no-such-node", xmppType, consumer).want(t, "SUBSCRIBE an unknown node", 404)
	unsubscribeConsumer := `<unsubscribe><consumer jid="stranger@localhost"/></unsubscribe>`
	subscribe(descriptor, xmppType, unsubscribeConsumer).want(t, "XMPP consumer unsubscribe without token", 401)
	if r := subscribe(private, xmppType, unsubscribeConsumer, "--header", "Authorization: Bearer "+e.privateToken); r.want(t, "XMPP consumer unsubscribe with the node's token", 200) &&
		!hasAll(r.Body, "<unsubscribed", `jid="stranger@localhost"`, `node="private"`) {
		t.Errorf("XMPP consumer unsubscribe answer: %q", r.Body)
	}

	// Size limits: 413, with a declared length and chunked.
	big := "<subscribe>" + strings.Repeat(" ", 2<<20) + "</subscribe>"
	bigFile := filepath.Join(t.TempDir(), "big.xml")
	if err := os.WriteFile(bigFile, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	curl(t, "--request", "SUBSCRIBE", "--header", "Content-Type: "+httpType, "--data-binary", "@"+bigFile, descriptor).
		want(t, "2 MiB subscription request", 413)
	curl(t, "--request", "SUBSCRIBE", "--header", "Content-Type: "+httpType, "--header", "Transfer-Encoding: chunked",
		"--data-binary", "@"+bigFile, descriptor).want(t, "2 MiB chunked subscription request", 413)
	for path, ct := range map[string]string{"/RPC2": "text/xml", "/cnws": "text/xml", "/websub": "application/x-www-form-urlencoded",
		"/ping": "application/x-www-form-urlencoded", "/pleaseNotify": "application/x-www-form-urlencoded"} {
		curl(t, "--header", "Content-Type: "+ct, "--data-binary", "@"+bigFile, base+path).want(t, "2 MiB body to "+path, 413)
	}
	curl(t, "--header", "Authorization: Bearer "+testAdminToken, "--header", "Content-Type: application/json", "--data-binary", "@"+bigFile,
		base+"/api/nodes").want(t, "2 MiB body to /api/nodes", 413)

	// WebSub on pingd's own RSS feed of the node.
	rssURL := base + "/rss/news"
	websub := func(fields ...string) curlResult {
		args := []string{}
		for _, f := range fields {
			args = append(args, "--data-urlencode", f)
		}
		return curl(t, append(args, base+"/websub")...)
	}
	websub("hub.mode=subscribe", "hub.topic="+rssURL, "hub.callback="+cb.URL+"/websub", "hub.secret=websub-secret").
		want(t, "WebSub subscribe", 202)
	if v := cb.waitRequests(t, "GET", "/websub", 1)[0]; v.Query["hub.mode"] != "subscribe" || v.Query["hub.topic"] != rssURL ||
		v.Query["hub.challenge"] == "" || v.Query["hub.lease_seconds"] == "" {
		t.Errorf("WebSub verification: %v", v.Query)
	}
	websub("hub.mode=subscribe", "hub.topic="+rssURL).want(t, "WebSub subscribe without a callback", 400)
	// A whitelist node's feed as a topic: without its token the
	// subscription is denied (WebSub §5.2), with it verified.
	privateAtom := base + "/atom/private"
	websub("hub.mode=subscribe", "hub.topic="+privateAtom, "hub.callback="+cb.URL+"/websub-private").want(t, "WebSub on a whitelist node without token", 202)
	if v := cb.waitRequests(t, "GET", "/websub-private", 1)[0]; v.Query["hub.mode"] != "denied" || v.Query["hub.topic"] != privateAtom {
		t.Errorf("WebSub subscription to a whitelist node without token: %v, want hub.mode=denied", v.Query)
	}
	curl(t, "--header", "Authorization: Bearer "+e.privateToken, "--data-urlencode", "hub.mode=subscribe", "--data-urlencode", "hub.topic="+privateAtom,
		"--data-urlencode", "hub.callback="+cb.URL+"/websub-private", base+"/websub").want(t, "WebSub on a whitelist node with its token", 202)
	if v := cb.waitRequests(t, "GET", "/websub-private", 2)[1]; v.Query["hub.mode"] != "subscribe" {
		t.Errorf("WebSub subscription to a whitelist node with its token: %v", v.Query)
	}
	curl(t, "--header", "Content-Type: application/json", "--data", `{"hub.mode":"publish"}`, base+"/websub").
		want(t, "WebSub request as JSON", 415)

	// CNWS.
	const cnwsNS = "http://www.owlfish.com/thoughts/cnws-2003-04-08.html"
	cnws := func(doc string) curlResult {
		return curl(t, "--header", "Content-Type: text/xml", "--data-binary",
			`<?xml version="1.0"?><notification version="1.0" xmlns="`+cnwsNS+`">`+doc+`</notification>`, base+"/cnws")
	}
	if r := cnws(`<subscribe><resourceID>` + e.newsFeed + `</resourceID><notificationURL>` + cb.URL + `/cnws</notificationURL></subscribe>`); r.want(t, "CNWS subscribe", 200) &&
		!strings.Contains(r.Body, "<status>true</status>") {
		t.Errorf("CNWS subscribe answer: %s", r.Body)
	}
	if r := cnws(`<subscribe><resourceID>` + e.newsFeed + `</resourceID></subscribe>`); r.want(t, "CNWS subscribe without notificationURL", 400) &&
		!strings.Contains(r.Body, "<status>false</status>") {
		t.Errorf("CNWS refusal: %s", r.Body)
	}

	// Subscribers as the admin API lists them: every kind.
	testenv.WaitFor(t, 20*time.Second, "every HTTP subscription to be active", func() bool {
		active := map[string]int{}
		for _, s := range e.d.nodeSubscribers("news") {
			if s.State == "active" {
				active[s.Kind]++
			}
		}
		return active["webhook"] == 3 && active["websub"] == 1 && active["cnws"] == 1
	})

	// A change, pinged with curl: every subscriber hears of it.
	atomBefore := curl(t, base+"/atom/news")
	e.feed.Add(feedItem{"curl-1", "Pinged with curl"})
	curl(t, "--data-urlencode", "url="+e.newsFeed, base+"/ping").want(t, "POST /ping", 200)

	post := cb.waitRequests(t, "POST", "/hook-post", 1)[0]
	if !strings.HasPrefix(post.Headers["content-type"], "application/atom+xml") || !strings.Contains(post.Body, "Pinged with curl") || post.Query["feed"] != "UniversalGadget" ||
		!hasAll(post.Headers["link"], `rel="hub"`, `<`+descriptor+`>; rel="self"`) {
		t.Errorf("webhook delivery: %+v", post)
	}
	notify := cb.waitRequests(t, "NOTIFY", "/hook-notify", 1)[0]
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write([]byte(notify.Body))
	if notify.Headers["content-type"] != "application/patch-ops+xml" || notify.Headers["x-hub-signature"] != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
		t.Errorf("NOTIFY patch delivery: %+v", notify)
	}
	var patch struct {
		XMLName xml.Name
		Adds    []struct {
			Sel     string `xml:"sel,attr"`
			Entries []struct {
				Title string `xml:"http://www.w3.org/2005/Atom title"`
			} `xml:"http://www.w3.org/2005/Atom entry"`
		} `xml:"urn:ietf:rfc:7351 add"`
		Removes []struct{} `xml:"urn:ietf:rfc:7351 remove"`
	}
	if err := xml.Unmarshal([]byte(notify.Body), &patch); err != nil || patch.XMLName != (xml.Name{Space: "urn:ietf:rfc:7351", Local: "patch"}) ||
		len(patch.Adds) != 1 || patch.Adds[0].Sel == "" || len(patch.Adds[0].Entries) != 1 || patch.Adds[0].Entries[0].Title != "Pinged with curl" ||
		len(patch.Removes) != 0 {
		t.Errorf("patch delivery is not one <p:add> of the new Atom entry (%v):\n%s", err, notify.Body)
	}
	ws := cb.waitRequests(t, "POST", "/websub", 1)[0]
	mac = hmac.New(sha256.New, []byte("websub-secret"))
	mac.Write([]byte(ws.Body))
	if !strings.HasPrefix(ws.Headers["content-type"], "application/rss+xml") || !strings.Contains(ws.Body, "Pinged with curl") ||
		!strings.Contains(ws.Headers["link"], `<`+rssURL+`>; rel="self"`) || ws.Headers["x-hub-signature"] != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
		t.Errorf("WebSub content distribution: %+v", ws)
	}
	if a := cb.waitRequests(t, "POST", "/hook-alias", 1)[0]; a.Headers["content-type"] != "application/xml-patch+xml" || !strings.Contains(a.Body, "urn:ietf:rfc:7351") {
		t.Errorf("patch delivery to the alias subscriber: %+v", a)
	}
	if c := cb.waitRequests(t, "POST", "/cnws", 1)[0]; !hasAll(c.Body, cnwsNS, "<resourceChange>", "<resourceID>"+e.newsFeed+"</resourceID>") {
		t.Errorf("CNWS notification: %+v", c)
	}

	// A publisher's <resourceChange> is trusted: its subscribers hear of it
	// with its title even though the feed did not change.
	cnwsBefore := len(cb.requests("POST", "/cnws"))
	if r := cnws(`<resourceChange><resourceID>` + e.newsFeed + `</resourceID><changeTime>Mon, 07 Apr 2003 22:59:33 GMT</changeTime>` +
		`<title>Told by CNWS</title><description>No new item.</description></resourceChange>`); r.want(t, "CNWS resourceChange", 200) &&
		!strings.Contains(r.Body, "<status>true</status>") {
		t.Errorf("CNWS resourceChange answer: %s", r.Body)
	}
	if c := cb.waitRequests(t, "POST", "/cnws", cnwsBefore+1)[cnwsBefore]; !hasAll(c.Body, "<title>Told by CNWS</title>", "<resourceID>"+e.newsFeed+"</resourceID>") {
		t.Errorf("CNWS notification of a publisher's resourceChange: %s", c.Body)
	}

	// WebSub publish naming pingd's own feed of the node stands for its
	// source: a second change reaches the webhooks again.
	e.feed.Add(feedItem{"curl-2", "Published with hub.topic"})
	curl(t, "--data-urlencode", "hub.mode=publish", "--data-urlencode", "hub.topic="+rssURL, base+"/websub").want(t, "WebSub publish by hub.topic", 204)
	if n := cb.waitRequests(t, "NOTIFY", "/hook-notify", 2); !strings.Contains(n[1].Body, "Published with hub.topic") || strings.Contains(n[1].Body, "Pinged with curl") {
		t.Errorf("second patch delivery: %s", n[1].Body)
	}
	curl(t, "--data-urlencode", "hub.mode=publish", base+"/websub").want(t, "WebSub publish without a URL", 400)

	// Unsubscribing is verified the same way.
	subscribe(descriptor, httpType, `<unsubscribe><url href="`+hookPost+`"/></unsubscribe>`).want(t, "webhook unsubscribe", 202)
	if v := cb.waitRequests(t, "GET", "/hook-post", 2)[1]; v.Query["hub.mode"] != "unsubscribe" || v.Query["hub.topic"] != descriptor {
		t.Errorf("unsubscribe verification: %v", v.Query)
	}
	websub("hub.mode=unsubscribe", "hub.topic="+rssURL, "hub.callback="+cb.URL+"/websub").want(t, "WebSub unsubscribe", 202)
	if v := cb.waitRequests(t, "GET", "/websub", 2)[1]; v.Query["hub.mode"] != "unsubscribe" {
		t.Errorf("WebSub unsubscribe verification: %v", v.Query)
	}

	// The node's own feeds: validators, gzip, RFC 3229.
	etag := atomBefore.Header.Get("ETag")
	atom := curl(t, base+"/atom/news")
	atom.want(t, "GET /atom/news", 200, "Content-Type: application/atom+xml; charset=utf-8")
	if atom.Header.Get("ETag") == "" || atom.Header.Get("Last-Modified") == "" || etag == "" || etag == atom.Header.Get("ETag") {
		t.Errorf("validators before %q and after the change %v", etag, atom.Header)
	}
	curl(t, "--header", "If-None-Match: "+atom.Header.Get("ETag"), base+"/atom/news").want(t, "If-None-Match current", 304)
	curl(t, "--header", "If-Modified-Since: "+atom.Header.Get("Last-Modified"), base+"/atom/news").want(t, "If-Modified-Since current", 304)
	curl(t, "--compressed", base+"/rss/news").want(t, "gzip", 200, "Content-Encoding: gzip", "Vary: Accept-Encoding")
	delta := curl(t, "--header", "A-IM: feed", "--header", "If-None-Match: "+etag, base+"/atom/news")
	if delta.want(t, "A-IM: feed", 226, "IM: feed", "Cache-Control: no-store, im", "Vary: A-IM, If-None-Match") &&
		(!hasAll(delta.Body, "Pinged with curl", "Published with hub.topic") || strings.Count(delta.Body, "<entry") != 2) {
		t.Errorf("226 body does not hold exactly the two entries new since the base:\n%s", delta.Body)
	}
	curl(t, base+"/atom/private").want(t, "whitelist node's feed without token", 401)
	curl(t, "--header", "Authorization: Bearer "+e.privateToken, base+"/rss/private").want(t, "whitelist node's feed with its token", 200)

	// Pings.
	curl(t, "--get", "--data-urlencode", "name=Test blog", "--data-urlencode", "url="+e.newsFeed, base+"/pingSiteForm").want(t, "GET /pingSiteForm", 200)
	// rssCloud's REST ping: curl accepts */*, so the answer is <result/>;
	// without url it is 200 with success="false", as rssCloud clients expect.
	if r := curl(t, "--data", "nothing=here", base+"/ping"); r.want(t, "POST /ping without url", 200) && !strings.Contains(r.Body, `<result success="false"`) {
		t.Errorf("POST /ping without url: %s", r.Body)
	}
	if r := curl(t, "--header", "Accept: application/json", "--data-urlencode", "url="+e.feed.URL+"/json-ping.xml", base+"/ping"); r.want(t, "POST /ping for JSON", 200) &&
		!strings.Contains(r.Body, `"success":true`) {
		t.Errorf("POST /ping for JSON: %s", r.Body)
	}
	rateURL := e.feed.URL + "/rate-limited.xml"
	limited := false
	for i := range 30 {
		r := curl(t, "--data-urlencode", "url="+rateURL, base+"/ping")
		if r.Status == 429 {
			if i < 10 {
				t.Errorf("ping %d of a burst answered 429: the defaults allow bursts of 10", i+1)
			}
			wait, err := strconv.Atoi(r.Header.Get("Retry-After"))
			if err != nil || wait < 1 || wait > 2 {
				t.Errorf("429 with Retry-After %q: a source may be pinged once a second", r.Header.Get("Retry-After"))
				wait = 1
			}
			// A publisher that waits as told is heard.
			time.Sleep(time.Duration(wait)*time.Second + 100*time.Millisecond)
			curl(t, "--data-urlencode", "url="+rateURL, base+"/ping").want(t, "a ping after Retry-After", 200)
			limited = true
			break
		}
		r.want(t, "ping in a burst", 200)
	}
	if !limited {
		t.Errorf("30 pings of one URL at once were never limited")
	}
	for _, p := range []string{"/changes.xml", "/shortChanges.xml"} {
		r := curl(t, base+p)
		var doc struct {
			XMLName xml.Name        `xml:"weblogUpdates"`
			Version string          `xml:"version,attr"`
			Weblogs []changesWeblog `xml:"weblog"`
		}
		if !r.want(t, p, 200) {
			continue
		}
		if err := xml.Unmarshal([]byte(r.Body), &doc); err != nil || doc.Version == "" ||
			!slices.ContainsFunc(doc.Weblogs, func(w changesWeblog) bool { return w.URL == e.newsFeed && w.Name == "Test blog" }) {
			t.Errorf("%s does not list the ping of /pingSiteForm (%v):\n%s", p, err, r.Body)
		}
	}

	// Health, readiness, metrics, the status page.
	curl(t, base+"/healthz").want(t, "/healthz", 200)
	curl(t, base+"/readyz").want(t, "/readyz", 200)
	if m := curl(t, base+"/metrics"); m.want(t, "/metrics", 200) {
		if !strings.HasPrefix(m.Header.Get("Content-Type"), "text/plain") {
			t.Errorf("/metrics is %s", m.Header.Get("Content-Type"))
		}
		for _, line := range strings.Split(m.Body, "\n") {
			if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "pingd_") && !metrics.IsStandardSeries(line) {
				t.Errorf("/metrics series neither pingd_… nor a standard go_/process_ one: %s", line)
			}
		}
	}
	if s := curl(t, base+"/"); s.want(t, "GET /", 200) && !strings.HasPrefix(s.Header.Get("Content-Type"), "text/html") {
		t.Errorf("status page is %s", s.Header.Get("Content-Type"))
	}

	// The admin API.
	api := func(method, path string, body string, token string) curlResult {
		args := []string{"--request", method}
		if token != "" {
			args = append(args, "--header", "Authorization: Bearer "+token)
		}
		if body != "" {
			args = append(args, "--header", "Content-Type: application/json", "--data-binary", body)
		}
		return curl(t, append(args, base+path)...)
	}
	api("GET", "/api/nodes", "", "").want(t, "admin API without token", 401)
	if r := api("GET", "/api/nodes", "", "wrong"); r.want(t, "admin API with a wrong token", 401) && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("admin 401 without a Bearer challenge: %v", r.Header)
	}
	api("POST", "/api/nodes", `{"node":"x","source":"`+e.feed.URL+`/x.xml"}`, "").want(t, "creating a node without token", 401)
	created := api("POST", "/api/nodes", `{"node":"feeds/demo","source":"`+e.feed.URL+`/demo.xml","title":"Demo","access_model":"whitelist"}`, testAdminToken)
	var node struct {
		Name  string `json:"name"`
		Token string `json:"token"`
	}
	if created.want(t, "POST /api/nodes", 201) && (json.Unmarshal([]byte(created.Body), &node) != nil || node.Name != "feeds/demo" || node.Token == "") {
		t.Errorf("created node: %s", created.Body)
	}
	demo := "/api/nodes/" + url.PathEscape("feeds/demo")
	api("POST", "/api/nodes", `{"node":"feeds/demo","source":"`+e.feed.URL+`/demo.xml"}`, testAdminToken).want(t, "creating it again", 409)
	api("POST", "/api/nodes", `{"node":"bad","source":"`+e.feed.URL+`/x.xml","access_model":"nobody"}`, testAdminToken).want(t, "an unknown access model", 400)
	api("POST", "/api/nodes", `{not json`, testAdminToken).want(t, "malformed JSON", 400)
	api("POST", "/api/nodes", `{"node":"unfetchable","source":"http://127.0.0.1:1/feed.xml"}`, testAdminToken).
		want(t, "a source that cannot be fetched yet", 201)
	api("GET", "/api/nodes", "", testAdminToken).want(t, "GET /api/nodes", 200, "Content-Type: application/json")
	api("GET", demo, "", testAdminToken).want(t, "GET /api/nodes/{node}", 200)
	api("GET", "/api/nodes/no-such-node", "", testAdminToken).want(t, "GET an unknown node", 404)
	api("PUT", demo+"/whitelist/reader@localhost", "", testAdminToken).want(t, "PUT whitelist", 200)
	api("PUT", demo+"/whitelist/"+url.PathEscape("not a jid@@"), "", testAdminToken).want(t, "PUT an invalid JID", 400)
	if r := api("GET", demo+"/whitelist", "", testAdminToken); r.want(t, "GET whitelist", 200) && !strings.Contains(r.Body, `"reader@localhost"`) {
		t.Errorf("whitelist: %s", r.Body)
	}
	api("DELETE", demo+"/whitelist/reader@localhost", "", testAdminToken).want(t, "DELETE whitelist", 204)
	if r := api("GET", "/api/nodes/news/subscribers", "", testAdminToken); r.want(t, "GET subscribers", 200) &&
		!hasAll(r.Body, `"cnws"`, `"webhook"`) {
		t.Errorf("subscribers of every kind: %s", r.Body)
	}
	var status struct {
		Source struct {
			LastError string `json:"last_error"`
		} `json:"source"`
	}
	testenv.WaitFor(t, 15*time.Second, "the unfetchable source's error in its status", func() bool {
		r := api("GET", "/api/nodes/unfetchable/status", "", testAdminToken)
		return r.Status == 200 && json.Unmarshal([]byte(r.Body), &status) == nil && status.Source.LastError != ""
	})
	rotated := api("POST", demo+"/token", "", testAdminToken)
	var tok struct {
		Token string `json:"token"`
	}
	if rotated.want(t, "POST token", 200) && (json.Unmarshal([]byte(rotated.Body), &tok) != nil || tok.Token == "" || tok.Token == node.Token) {
		t.Errorf("new token: %s", rotated.Body)
	}
	demoDescriptor := base + "/feeds/" + url.PathEscape("feeds/demo")
	subscribe(demoDescriptor, xmppType, consumer, "--header", "Authorization: Bearer "+node.Token).want(t, "the old token after a new one was issued", 401)
	subscribe(demoDescriptor, xmppType, consumer, "--header", "Authorization: Bearer "+tok.Token).want(t, "the new token", 200)
	// A node name with "/" is one percent-encoded segment everywhere,
	// hub.topic of the verification included.
	subscribe(demoDescriptor, httpType, `<subscribe><url href="`+cb.URL+`/hook-demo"/></subscribe>`, "--header", "Authorization: Bearer "+tok.Token).
		want(t, "webhook on feeds/demo", 202)
	if v := cb.waitRequests(t, "GET", "/hook-demo", 1)[0]; v.Query["hub.topic"] != demoDescriptor {
		t.Errorf("verification of a webhook on feeds/demo: hub.topic %q, want %q", v.Query["hub.topic"], demoDescriptor)
	}
	api("DELETE", demo, "", testAdminToken).want(t, "DELETE node", 204)
	api("GET", demo, "", testAdminToken).want(t, "GET a deleted node", 404)
	curl(t, demoDescriptor).want(t, "the deleted node's descriptor", 404)
}

// changesWeblog is one ping of changes.xml (weblogs.com format).
type changesWeblog struct {
	Name string `xml:"name,attr"`
	URL  string `xml:"url,attr"`
	When string `xml:"when,attr"`
}
