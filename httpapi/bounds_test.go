package httpapi_test

import (
	"encoding/xml"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/pingd/pingd/httpapi"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// retryAfter fails the test unless resp answered status with a Retry-After
// of whole seconds.
func retryAfter(t *testing.T, what string, resp *http.Response, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s: HTTP %d, want %d; body: %s", what, resp.StatusCode, status, readAll(resp))
		return
	}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || secs < 1 {
		t.Errorf("%s: Retry-After %q", what, resp.Header.Get("Retry-After"))
	}
}

// rpcRefused posts an XML-RPC pleaseNotify and checks it is answered with
// status, Retry-After and a fault saying why.
func (e *dialectEnv) rpcRefused(what string, status int, want string, params ...any) {
	e.t.Helper()
	body, err := xmlrpc.MarshalCall("rssCloud.pleaseNotify", params...)
	if err != nil {
		e.t.Fatal(err)
	}
	resp := e.do("POST", "/RPC2", "text/xml", string(body))
	if resp.StatusCode != status {
		e.t.Errorf("%s: HTTP %d, want %d", what, resp.StatusCode, status)
	}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || secs < 1 {
		e.t.Errorf("%s: Retry-After %q", what, resp.Header.Get("Retry-After"))
	}
	_, err = xmlrpc.DecodeResponse(resp.Body, xmlrpc.Limits{})
	var f *xmlrpc.Fault
	if !errors.As(err, &f) || !strings.Contains(f.Message, want) {
		e.t.Errorf("%s: answer %v, want a fault saying %q", what, err, want)
	}
}

// rssCloudAndCNWSRefused checks that rssCloud (REST and XML-RPC
// pleaseNotify) and CNWS refuse a subscription to topic with callbacks on
// rc: status with Retry-After, rssCloud's failure saying want, CNWS's
// result false.
func (e *dialectEnv) rssCloudAndCNWSRefused(what string, rc *receiver, topic string, status int, want string) {
	e.t.Helper()
	resp := e.form("/pleaseNotify", cloudForm(rc, "http-post", topic))
	code, retry := resp.StatusCode, resp.Header.Get("Retry-After")
	if nr := decodeNotifyResult(e.t, resp); code != status || retry == "" ||
		nr.Success != "false" || !strings.Contains(nr.Msg, want) {
		e.t.Errorf("rssCloud REST, %s: HTTP %d, Retry-After %q, %+v", what, code, retry, nr)
	}
	u, _ := url.Parse(rc.URL)
	port, _ := strconv.Atoi(u.Port())
	e.rpcRefused("rssCloud XML-RPC, "+what, status, want, "river.feedUpdated", port, "/notify", "xml-rpc", []any{topic})
	resp = e.do("POST", "/cnws", "text/xml", cnwsSubscribeDoc(topic, rc.URL+"/cnws"))
	code, retry = resp.StatusCode, resp.Header.Get("Retry-After")
	if _, res := e.cnwsDecode(resp); code != status || retry == "" || res.Result.Status != "false" {
		e.t.Errorf("CNWS, %s: HTTP %d, Retry-After %q, %+v", what, code, retry, res)
	}
}

// followed reports whether a node follows the URL.
func (e *dialectEnv) followed(u string) bool {
	_, err := e.hub.NodeForURL(e.ctx, u, false)
	return err == nil
}

// cnwsDecode reads a CNWS answer.
func (e *dialectEnv) cnwsDecode(resp *http.Response) (*http.Response, cnwsResult) {
	e.t.Helper()
	body := readAll(resp)
	var res cnwsResult
	if err := xml.Unmarshal([]byte(body), &res); err != nil {
		e.t.Fatalf("not a CNWS result (HTTP %d): %v\n%s", resp.StatusCode, err, body)
	}
	return resp, res
}

func (e *dialectEnv) webSubSubscribe(topic, callback string) *http.Response {
	e.t.Helper()
	return e.webSub(url.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.callback": {callback}})
}

// TestImplicitNodeBudget: a client IP may have pingd create only a few new
// implicit nodes (here a burst of 2); the next URL nobody follows is
// refused in every dialect (429 with Retry-After, in the dialect's own
// form) and creates nothing, while subscribing to URLs followed already
// costs nothing and goes on working.
func TestImplicitNodeBudget(t *testing.T) {
	e := newDialectEnv(t, func(c *httpapi.Config) { c.ImplicitNodesPerHour = 1; c.ImplicitNodeBurst = 2 })
	rc := webSubSubscriber(t)
	first, second, third := e.newTopic("/1.xml"), e.newTopic("/2.xml"), e.newTopic("/3.xml")
	for _, topic := range []string{first, second} {
		if resp := e.webSubSubscribe(topic, rc.URL+"/cb"); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("subscribe to %s: HTTP %d %s", topic, resp.StatusCode, readAll(resp))
		}
	}

	retryAfter(t, "WebSub subscribe to a third new URL", e.webSubSubscribe(third, rc.URL+"/cb"), http.StatusTooManyRequests)

	e.rssCloudAndCNWSRefused("a third new URL", rc, third, http.StatusTooManyRequests, "new URLs")
	if e.followed(third) {
		t.Fatal("a refused request created a node for its URL")
	}

	// URLs followed already: no budget needed, in any dialect.
	if resp := e.webSubSubscribe(first, rc.URL+"/other"); resp.StatusCode != http.StatusAccepted {
		t.Errorf("subscribe to a followed URL: HTTP %d %s", resp.StatusCode, readAll(resp))
	}
	if _, res := e.cnws(cnwsSubscribeDoc(second, rc.URL+"/cnws")); res.Result.Status != "true" {
		t.Errorf("CNWS subscribe to a followed URL: %+v", res)
	}
}

// TestImplicitNodeCap: beyond Config.MaxImplicitNodes no implicit node is
// created (503 with Retry-After in each dialect's form), whoever asks;
// owners' nodes and URLs followed already are served as before. A
// negative cap (PINGD_MAX_IMPLICIT_NODES=0) creates none at all.
func TestImplicitNodeCap(t *testing.T) {
	e := newDialectEnvHub(t, func(c *hub.Config) { c.MaxImplicitNodes = 1 })
	rc := webSubSubscriber(t)
	first, second := e.newTopic("/1.xml"), e.newTopic("/2.xml")
	if resp := e.webSubSubscribe(first, rc.URL+"/cb"); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("subscribe to the first URL: HTTP %d %s", resp.StatusCode, readAll(resp))
	}
	retryAfter(t, "WebSub subscribe beyond the cap", e.webSubSubscribe(second, rc.URL+"/cb"), http.StatusServiceUnavailable)

	e.rssCloudAndCNWSRefused("beyond the cap", rc, second, http.StatusServiceUnavailable, "no more new URLs to follow")
	if e.followed(second) {
		t.Fatal("a node was created beyond the cap")
	}
	// A URL followed already is no new node.
	if resp := e.webSubSubscribe(first, rc.URL+"/other"); resp.StatusCode != http.StatusAccepted {
		t.Errorf("subscribe to a followed URL at the cap: HTTP %d %s", resp.StatusCode, readAll(resp))
	}
}

// TestNoImplicitNodes: with implicit nodes off, subscriptions to an
// owner's node work and URLs no node follows are refused.
func TestNoImplicitNodes(t *testing.T) {
	e := newDialectEnvHub(t, func(c *hub.Config) { c.MaxImplicitNodes = -1 })
	rc := webSubSubscriber(t)
	owned, stranger := e.newTopic("/owned.xml"), e.newTopic("/stranger.xml")
	e.createNode("owned", owned, hub.AccessOpen)
	retryAfter(t, "WebSub subscribe to a URL no node follows", e.webSubSubscribe(stranger, rc.URL+"/cb"), http.StatusServiceUnavailable)
	if resp := e.webSubSubscribe(owned, rc.URL+"/cb"); resp.StatusCode != http.StatusAccepted {
		t.Errorf("subscribe to an owner's node: HTTP %d %s", resp.StatusCode, readAll(resp))
	}
	if e.followed(stranger) {
		t.Fatal("a node was created with implicit nodes off")
	}
}

// TestCallbackHostCap: beyond Config.MaxCallbackHostSubscriptions
// subscriptions (pending or active) with callbacks on one host, whatever
// the port, a new one is refused in every dialect (429 with Retry-After,
// in the dialect's form) and nothing is stored, while a renewal of one
// that exists passes and callbacks on other hosts are served.
func TestCallbackHostCap(t *testing.T) {
	e := newDialectEnvHub(t, func(c *hub.Config) { c.MaxCallbackHostSubscriptions = 2 })
	topic := e.newTopic("/feed.xml")
	e.createNode("news", topic, hub.AccessOpen)
	rc, other := webSubSubscriber(t), webSubSubscriber(t) // both on 127.0.0.1
	e.subscribeWebSub(rc, rc.URL+"/a", topic, nil)
	if resp := e.webSubSubscribe(topic, rc.URL+"/b"); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("second callback on the host: HTTP %d %s", resp.StatusCode, readAll(resp))
	}

	retryAfter(t, "WebSub, a third callback on the host", e.webSubSubscribe(topic, other.URL+"/c"), http.StatusTooManyRequests)
	e.rssCloudAndCNWSRefused("a third callback on the host", other, topic, http.StatusTooManyRequests, "callbacks on this host")
	resp := e.do("POST", "/feeds/news?method=subscribe", "application/getpingd+http+subscribe+xml",
		`<subscribe><url href="`+other.URL+`/hook" method="POST" diff="none"/></subscribe>`)
	retryAfter(t, "GetPingd webhook, a third callback on the host", resp, http.StatusTooManyRequests)
	if subs := e.subs("news", ""); len(subs) != 2 {
		t.Errorf("%d subscriptions stored, want the 2 under the cap: %+v", len(subs), subs)
	}

	// Renewing one that exists passes, verified or not.
	e.subscribeWebSub(rc, rc.URL+"/a", topic, nil)
	if resp := e.webSubSubscribe(topic, rc.URL+"/b"); resp.StatusCode != http.StatusAccepted {
		t.Errorf("renewal at the cap: HTTP %d %s", resp.StatusCode, readAll(resp))
	}
	// Another host has its own count.
	elsewhere := strings.Replace(rc.URL, "127.0.0.1", "localhost", 1) + "/d"
	if resp := e.webSubSubscribe(topic, elsewhere); resp.StatusCode != http.StatusAccepted {
		t.Errorf("a callback on another host: HTTP %d %s", resp.StatusCode, readAll(resp))
	}
}
