package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/cnws"
	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/nodeurl"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// TestSubscribeRateLimit: subscription requests of every protocol share
// one bucket per client IP; over it each protocol answers 429 with
// Retry-After in its own format, before calling anyone back.
func TestSubscribeRateLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SubscribeRate = 0.001; c.SubscribeBurst = 1 })
	wantStatus(t, e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": "n"}), http.StatusCreated)
	const topic, callback = "http://pingd.test:8080/atom/n", "http://127.0.0.1:9/cb"
	websub := func(mode string) *http.Response {
		form := url.Values{"hub.mode": {mode}, "hub.topic": {topic}, "hub.callback": {callback}}
		return e.do(http.MethodPost, nodeurl.PathWebSub, "", strings.NewReader(form.Encode()),
			"Content-Type", "application/x-www-form-urlencoded")
	}
	// The first request of the burst is served (here: refused for its own
	// reasons, not limited).
	if resp := websub("subscribe"); resp.StatusCode == http.StatusTooManyRequests {
		t.Fatalf("the first subscription request was limited: %s", readBody(t, resp))
	}
	limited := func(name string, resp *http.Response, contentType string) {
		t.Helper()
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s: status %d, want 429; body: %s", name, resp.StatusCode, readBody(t, resp))
			return
		}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || secs < 1 {
			t.Errorf("%s: Retry-After %q", name, resp.Header.Get("Retry-After"))
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, contentType) {
			t.Errorf("%s: Content-Type %q, want %s", name, ct, contentType)
		}
	}
	limited("WebSub subscribe", websub("subscribe"), "text/plain")
	limited("WebSub unsubscribe", websub("unsubscribe"), "text/plain")
	limited("GetPingd subscribe", e.do(http.MethodPost, "/feeds/n?method=subscribe", "", strings.NewReader("<subscription/>"),
		"Content-Type", getpingd.ContentTypeHTTPSubscribe), "text/plain")
	limited("CNWS subscribe", e.do(http.MethodPost, "/cnws", "", strings.NewReader(`<?xml version="1.0"?><notification version="1.0" xmlns="`+
		cnws.Namespace+`"><subscribe><resourceID>`+topic+`</resourceID><notificationURL>`+callback+
		`</notificationURL></subscribe></notification>`),
		"Content-Type", "text/xml"), "text/xml")
	form := url.Values{"notifyProcedure": {""}, "port": {"9"}, "path": {"/cb"}, "protocol": {"http-post"}, "url1": {topic}}
	limited("rssCloud REST pleaseNotify", e.do(http.MethodPost, nodeurl.PathPleaseNotify, "", strings.NewReader(form.Encode()),
		"Content-Type", "application/x-www-form-urlencoded"), "text/xml")
	resp, _, err := e.rpc("rssCloud.pleaseNotify", "river.feedUpdated", 9, "/cb", "xml-rpc", []any{topic})
	limited("rssCloud XML-RPC pleaseNotify", resp, "text/xml")
	var f *xmlrpc.Fault
	if !errors.As(err, &f) {
		t.Errorf("XML-RPC 429 body is not a fault: %v", err)
	}
	// Nothing was stored for the limited requests.
	if subs, err := e.hub.Subscriptions(t.Context(), hub.SubscriptionFilter{}); err != nil || len(subs) != 0 {
		t.Errorf("%d subscriptions stored (%v), want none", len(subs), err)
	}
}

// TestRSSCloudRegistrationCostsATokenPerURL: an rssCloud registration
// makes pingd check each of its URLs with a call of its own (up to
// rsscloud.MaxURLs), so it takes one token of the client's subscription
// bucket per URL, not one per request; more URLs than the burst take the
// whole burst.
func TestRSSCloudRegistrationCostsATokenPerURL(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SubscribeRate = 0.001; c.SubscribeBurst = 10 })
	register := func(urls int) *http.Response {
		form := url.Values{"notifyProcedure": {""}, "port": {"9"}, "path": {"/cb"}, "protocol": {"http-post"}}
		for i := range urls {
			form.Set("url"+strconv.Itoa(i+1), "http://blog.example/"+strconv.Itoa(i)+".xml")
		}
		return e.do(http.MethodPost, nodeurl.PathPleaseNotify, "", strings.NewReader(form.Encode()),
			"Content-Type", "application/x-www-form-urlencoded")
	}
	if resp := register(10); resp.StatusCode == http.StatusTooManyRequests {
		t.Fatalf("10 URLs with 10 tokens: limited: %s", readBody(t, resp))
	}
	resp := register(1)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("after a registration of 10 URLs, one more: status %d, want 429 (the 10 calls took the burst); body: %s",
			resp.StatusCode, readBody(t, resp))
	}
	if b := string(readBody(t, resp)); !strings.Contains(b, "from 127.0.0.1") {
		t.Errorf("429 body %q does not name the client", b)
	}

	// More URLs than the burst: served once the bucket is full, taking all of it.
	e = newEnv(t, func(c *Config) { c.SubscribeRate = 0.001; c.SubscribeBurst = 10 })
	if resp := register(30); resp.StatusCode == http.StatusTooManyRequests {
		t.Fatalf("30 URLs from a full bucket of 10: limited: %s", readBody(t, resp))
	}
	if resp := register(1); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("after 30 URLs, one more: status %d, want 429", resp.StatusCode)
	}
}
