package httpapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/pingd/pingd/httpapi"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// These tests speak rssCloud the way the clients of its ecosystem do
// (feed readers, River-style aggregators, blog plugins): raw form posts
// with the Accept header they send, and raw XML-RPC calls as their
// libraries write them, including the values those libraries make of "no
// procedure". docs/protocols.md names them.

// The answers rssCloud clients read, in the wording of the rssCloud
// servers they were written against.
const (
	cloudRegistered = "Thanks for the registration. It worked. When the resource updates we'll notify you. " +
		"Don't forget to re-register after 24 hours, your subscription will expire in 25. Keep on truckin!"
	cloudUnreadable = "The subscription was cancelled because there was an error reading the resource at URL %s."
)

// rawRPC posts an XML-RPC call written by hand and decodes the answer.
func (e *dialectEnv) rawRPC(call string) (any, error) {
	e.t.Helper()
	resp := e.do("POST", "/RPC2", "text/xml", call)
	if resp.StatusCode != 200 {
		e.t.Fatalf("XML-RPC: HTTP %d %s", resp.StatusCode, readAll(resp))
	}
	return xmlrpc.DecodeResponse(resp.Body, xmlrpc.Limits{})
}

// pleaseNotifyCall is rssCloud.pleaseNotify (or its alias) with the
// procedure given as a raw <value>, as client libraries encode it.
func pleaseNotifyCall(method, procedureValue string, port, path, protocol, resource, domain string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0"?><methodCall><methodName>%s</methodName><params>`, method)
	fmt.Fprintf(&b, `<param><value>%s</value></param>`, procedureValue)
	fmt.Fprintf(&b, `<param><value><i4>%s</i4></value></param>`, port)
	fmt.Fprintf(&b, `<param><value><string>%s</string></value></param>`, path)
	fmt.Fprintf(&b, `<param><value><string>%s</string></value></param>`, protocol)
	fmt.Fprintf(&b, `<param><value><array><data><value><string>%s</string></value></data></array></value></param>`, resource)
	if domain != "" {
		fmt.Fprintf(&b, `<param><value><string>%s</string></value></param>`, domain)
	}
	b.WriteString(`</params></methodCall>`)
	return b.String()
}

// TestRSSCloudConventionAnyProcedureForHTTPPost: an XML-RPC pleaseNotify
// for http-post takes whatever the client sends as notifyProcedure —
// boolean false, an empty string, a placeholder, an int — and registers
// the callback; xml-rpc still needs a method name.
func TestRSSCloudConventionAnyProcedureForHTTPPost(t *testing.T) {
	e := newDialectEnv(t)
	feedURL := e.origin.set("/feed.xml", "application/rss+xml", rssDoc("News", "a"))
	e.createNode("news", feedURL, hub.AccessOpen)
	e.waitBaselined("news")
	rec := newReceiver(t, answerStatus(200, "Thanks for the update! :-)"))
	port := mustPort(rec.URL)

	values := []string{"<boolean>0</boolean>", "<string></string>", "", "<string>none</string>", "<i4>0</i4>"}
	for i, v := range values {
		method := "rssCloud.pleaseNotify"
		if i%2 == 1 {
			method = "xmlStorageSystem.rssPleaseNotify"
		}
		got, err := e.rawRPC(pleaseNotifyCall(method, v, port, "/feedupdated", "http-post", feedURL, ""))
		if err != nil || got != true {
			t.Fatalf("%s with notifyProcedure %q: %v %v", method, v, got, err)
		}
	}
	posts := rec.matching(isPost)
	if len(posts) != len(values) || posts[0].Path != "/feedupdated" || notifiedURL(posts[0]) != feedURL {
		t.Fatalf("test notifications %+v", posts)
	}
	subs := e.subs("news", hub.KindRSSCloud)
	if len(subs) != 1 || subs[0].State != hub.SubActive || subs[0].Options.Protocol != "http-post" || subs[0].Options.Procedure != "" {
		t.Fatalf("registrations %+v", subs)
	}

	// xml-rpc calls the procedure: false is no method name there.
	_, err := e.rawRPC(pleaseNotifyCall("rssCloud.pleaseNotify", "<boolean>0</boolean>", port, "/RPC2", "xml-rpc", feedURL, ""))
	var f *xmlrpc.Fault
	if !errors.As(err, &f) || f.Code != xmlrpc.FaultInvalidParams {
		t.Fatalf("xml-rpc with false as procedure: want an invalid-params fault, got %v", err)
	}
}

// TestRSSCloudConventionUnreadableResource: a registration for a resource
// that cannot be read (404, nothing listening) is refused with the
// conventional message — success="false" in REST, JSON alike, a fault in
// XML-RPC — and nobody is called, nothing is stored, no node is made.
func TestRSSCloudConventionUnreadableResource(t *testing.T) {
	e := newDialectEnv(t)
	missing := e.origin.URL + "/rss.xml" // the origin answers 404
	closed := newReceiver(t, answerStatus(200, ""))
	unreachable := closed.URL + "/feed.xml"
	closed.Close() // nothing listens there any more
	rec := newReceiver(t, xmlrpcTrue)
	port := mustPort(rec.URL)

	for _, resource := range []string{missing, unreachable} {
		want := fmt.Sprintf(cloudUnreadable, resource)
		for _, protocol := range []string{"http-post", "xml-rpc"} {
			form := cloudForm(rec, protocol, resource)
			if protocol == "xml-rpc" {
				form.Set("notifyProcedure", "river.feedUpdated")
				form.Set("path", "/RPC2")
			}
			resp := e.form("/pleaseNotify", form)
			if nr := decodeNotifyResult(t, resp); resp.StatusCode != 200 || nr.Success != "false" || nr.Msg != want {
				t.Errorf("REST %s for %s: HTTP %d %+v", protocol, resource, resp.StatusCode, nr)
			}
			resp = e.form("/pleaseNotify", form, "Accept", "application/json")
			if got := decodeCloudJSON(t, resp); resp.StatusCode != 200 || got.Success != false || got.Msg != want {
				t.Errorf("REST JSON %s for %s: HTTP %d %+v", protocol, resource, resp.StatusCode, got)
			}
			procedure := "<boolean>0</boolean>"
			path := "/feedupdated"
			if protocol == "xml-rpc" {
				procedure, path = "<string>river.feedUpdated</string>", "/RPC2"
			}
			_, err := e.rawRPC(pleaseNotifyCall("rssCloud.pleaseNotify", procedure, port, path, protocol, resource, ""))
			var f *xmlrpc.Fault
			if !errors.As(err, &f) || f.Code != 4 || f.Message != want {
				t.Errorf("XML-RPC %s for %s: want fault 4 %q, got %v", protocol, resource, want, err)
			}
		}
		if _, err := e.hub.NodeForURL(e.ctx, resource, false); !errors.Is(err, hub.ErrNotFound) {
			t.Errorf("a node was made for %s: %v", resource, err)
		}
	}
	if hits := rec.Hits(); len(hits) != 0 {
		t.Fatalf("the subscriber was called for unreadable resources: %+v", hits)
	}
	// Read once: the answer stands for the registrations of the next
	// minute (hub.ReadResource), so repeating them hammers no origin.
	if n := e.origin.fetches("/rss.xml"); n != 1 {
		t.Errorf("the missing resource was read %d times by 6 registrations within a minute, want once", n)
	}
}

// cloudJSON is the JSON answer of the REST calls.
type cloudJSON struct {
	Success any    `json:"success"`
	Msg     string `json:"msg"`
}

func decodeCloudJSON(t *testing.T, resp *http.Response) cloudJSON {
	t.Helper()
	body := readAll(resp)
	var raw map[string]json.RawMessage
	var got cloudJSON
	if err := json.Unmarshal([]byte(body), &raw); err != nil || len(raw) != 2 || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("not {success, msg} (HTTP %d, %s): %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("content type %q", ct)
	}
	return got
}

// TestRSSCloudConventionXMLRPCDomain: an xml-rpc subscriber naming a
// domain is checked with a test call of its procedure carrying the
// resource URL, never a challenge GET (which an XML-RPC responder cannot
// answer), in the XML-RPC and REST forms; one that does not answer true is
// refused.
func TestRSSCloudConventionXMLRPCDomain(t *testing.T) {
	e := newDialectEnv(t)
	feedURL := e.origin.set("/feed.xml", "application/rss+xml", rssDoc("News", "a"))
	e.createNode("news", feedURL, hub.AccessOpen)
	e.waitBaselined("news")
	var (
		mu    sync.Mutex
		calls []string
	)
	rec := newReceiver(t, func(w http.ResponseWriter, h hit) {
		if h.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed) // an XML-RPC endpoint
			return
		}
		call, err := xmlrpc.DecodeCall(strings.NewReader(h.Body), xmlrpc.Limits{})
		if err != nil || len(call.Params) != 1 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		calls = append(calls, fmt.Sprint(call.Method, " ", call.Params[0]))
		mu.Unlock()
		xmlrpcTrue(w, h)
	})
	port := mustPort(rec.URL)

	got, err := e.rawRPC(pleaseNotifyCall("rssCloud.pleaseNotify", "<string>river.feedUpdated</string>", port, "/RPC2", "xml-rpc", feedURL, "127.0.0.1"))
	if err != nil || got != true {
		t.Fatalf("XML-RPC registration with domain: %v %v", got, err)
	}
	form := cloudForm(rec, "xml-rpc", feedURL)
	form.Set("notifyProcedure", "river.feedUpdated")
	form.Set("path", "/RPC2")
	form.Set("domain", "localhost")
	if nr := decodeNotifyResult(t, e.form("/pleaseNotify", form)); nr.Success != "true" || nr.Msg != cloudRegistered {
		t.Fatalf("REST registration with domain: %+v", nr)
	}
	if gets := rec.matching(isGet); len(gets) != 0 {
		t.Fatalf("an xml-rpc subscriber got a challenge GET: %+v", gets)
	}
	mu.Lock()
	if len(calls) != 2 || calls[0] != "river.feedUpdated "+feedURL || calls[1] != calls[0] {
		t.Fatalf("test calls %q", calls)
	}
	mu.Unlock()
	subs := e.subs("news", hub.KindRSSCloud)
	if len(subs) != 2 {
		t.Fatalf("registrations %+v", subs)
	}
	for _, s := range subs {
		if s.State != hub.SubActive || s.Options.Protocol != "xml-rpc" || !strings.HasSuffix(callbackOf(s), ":"+port+"/RPC2") {
			t.Errorf("registration %+v", s)
		}
	}

	// A host that does not answer the call with true is not registered.
	mute := newReceiver(t, answerStatus(200, "<html>not XML-RPC</html>"))
	mport := mustPort(mute.URL)
	got, err = e.rawRPC(pleaseNotifyCall("rssCloud.pleaseNotify", "<string>river.feedUpdated</string>", mport, "/RPC2", "xml-rpc", feedURL, "127.0.0.1"))
	if err != nil || got != false {
		t.Fatalf("a domain that does not answer the call: %v %v", got, err)
	}
	if len(mute.matching(isGet)) != 0 || len(e.subs("news", hub.KindRSSCloud)) != 2 {
		t.Fatalf("refused: hits %+v, registrations %+v", mute.Hits(), e.subs("news", hub.KindRSSCloud))
	}
}

// TestRSSCloudConventionAnswers: REST pleaseNotify answers
// <notifyResult success="true" msg="…"/> in text/xml with the
// conventional message, and {"success": true, "msg": "…"} to a client
// that asks for application/json; a refused one success false in both.
func TestRSSCloudConventionAnswers(t *testing.T) {
	e := newDialectEnv(t)
	feedURL := e.origin.set("/feed.xml", "application/rss+xml", rssDoc("News", "a"))
	e.createNode("news", feedURL, hub.AccessOpen)
	e.waitBaselined("news")
	rec := newReceiver(t, answerStatus(200, ""))

	for _, accept := range []string{"", "*/*", "text/xml"} {
		resp := e.form("/pleaseNotify", cloudForm(rec, "http-post", feedURL), "Accept", accept)
		if nr := decodeNotifyResult(t, resp); resp.StatusCode != 200 || nr.Success != "true" || nr.Msg != cloudRegistered {
			t.Errorf("Accept %q: HTTP %d %+v", accept, resp.StatusCode, nr)
		}
	}
	resp := e.form("/pleaseNotify", cloudForm(rec, "http-post", feedURL), "Accept", "application/json")
	if got := decodeCloudJSON(t, resp); resp.StatusCode != 200 || got.Success != true || got.Msg != cloudRegistered {
		t.Errorf("JSON: HTTP %d %+v", resp.StatusCode, got)
	}
	if v := resp.Header.Values("Vary"); len(v) == 0 || !strings.Contains(strings.Join(v, ","), "Accept") {
		t.Errorf("Vary %q", v)
	}
	failing := newReceiver(t, answerStatus(500, ""))
	resp = e.form("/pleaseNotify", cloudForm(failing, "http-post", feedURL), "Accept", "application/json")
	if got := decodeCloudJSON(t, resp); resp.StatusCode != 200 || got.Success != false || got.Msg == "" {
		t.Errorf("refused, JSON: HTTP %d %+v", resp.StatusCode, got)
	}
	resp = e.form("/pleaseNotify", url.Values{"port": {"80"}}, "Accept", "application/json")
	if got := decodeCloudJSON(t, resp); got.Success != false || got.Msg == "" {
		t.Errorf("malformed, JSON: HTTP %d %+v", resp.StatusCode, got)
	}
}

// TestRSSCloudReadCostsImplicitNodeBudget: reading a resource no node
// follows before registering it is a fetch of the caller's choosing, as
// the creation of its node would be, so it costs the same per-address
// budget of new URLs: a stranger naming ever new unreadable URLs (nothing
// is created, so no creation would ever charge them) gets as many fetches
// as that budget allows, not one per subscription token; a readable new
// URL is charged once, not for its read and again for its node.
func TestRSSCloudReadCostsImplicitNodeBudget(t *testing.T) {
	e := newDialectEnv(t, func(c *httpapi.Config) { c.ImplicitNodesPerHour = 1; c.ImplicitNodeBurst = 2 })
	rec := newReceiver(t, answerStatus(200, ""))

	// Two readable new URLs fit the burst of 2: read, created, registered.
	for _, p := range []string{"/new-1.xml", "/new-2.xml"} {
		topic := e.newTopic(p)
		resp := e.form("/pleaseNotify", cloudForm(rec, "http-post", topic))
		if nr := decodeNotifyResult(t, resp); resp.StatusCode != 200 || nr.Success != "true" {
			t.Fatalf("register %s: HTTP %d %+v", topic, resp.StatusCode, nr)
		}
	}

	// The budget is spent: unreadable new URLs are refused before any fetch.
	const tries = 10
	for i := range tries {
		resp := e.form("/pleaseNotify", cloudForm(rec, "http-post", fmt.Sprintf("%s/missing/%d.xml", e.origin.URL, i)))
		body := readAll(resp)
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "new URLs") {
			t.Fatalf("registration %d for a new unreadable URL past the budget: HTTP %d %s", i, resp.StatusCode, body)
		}
	}
	fetched := 0
	for i := range tries {
		fetched += e.origin.fetches(fmt.Sprintf("/missing/%d.xml", i))
	}
	if fetched != 0 {
		t.Fatalf("%d fetches of new URLs past the address's budget", fetched)
	}
}
