package httpapi_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// A stranger names the callback of someone's verified subscription with
// settings of its own (another method, secret, lease or protocol), or asks
// to unsubscribe it. Each dialect below: the victim subscribes and is
// verified; the stranger's request is refused or not answered by the
// callback; the victim's subscription is exactly as it was and gets the
// next change, signed with its own secret where the dialect signs. A
// change the callback confirms applies.

const webhookType = "application/getpingd+http+subscribe+xml"

// refuseVerification answers verification GETs (WebSub-style or rssCloud
// challenges) with 404, as a callback that did not ask does, and takes
// everything else.
func refuseVerification(w http.ResponseWriter, h hit) {
	if h.Method == http.MethodGet {
		w.WriteHeader(http.StatusNotFound)
	}
}

// hangUpVerification closes the connection of a verification GET without
// an answer.
func hangUpVerification(w http.ResponseWriter, h hit) {
	if h.Method != http.MethodGet {
		return
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

// holdVerification keeps verification GETs waiting, unanswered, until
// release is called; then they are refused.
func holdVerification(t *testing.T) (answer func(http.ResponseWriter, hit), release func()) {
	held := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(release)
	return func(w http.ResponseWriter, h hit) {
		if h.Method == http.MethodGet {
			<-held
			w.WriteHeader(http.StatusNotFound)
		}
	}, release
}

// signedWith reports whether a delivery carries the sha256 X-Hub-Signature
// of its body under secret.
func signedWith(h hit, secret string) bool {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(h.Body))
	return h.Header.Get("X-Hub-Signature") == "sha256="+hex.EncodeToString(mac.Sum(nil))
}

// subscription returns the node's subscription of kind whose callback is
// callback.
func (e *dialectEnv) subscription(node string, kind hub.Kind, callback string) (hub.Subscription, bool) {
	for _, s := range e.subs(node, kind) {
		if callbackOf(s) == callback {
			return s, true
		}
	}
	return hub.Subscription{}, false
}

// waitSettled waits until the subscription is active with no change
// pending, and returns it.
func (e *dialectEnv) waitSettled(node string, kind hub.Kind, callback string) hub.Subscription {
	e.t.Helper()
	var s hub.Subscription
	testenv.WaitFor(e.t, 15*time.Second, "an active subscription of "+callback+" without a pending change", func() bool {
		var ok bool
		s, ok = e.subscription(node, kind, callback)
		return ok && s.State == hub.SubActive && !s.Change.Pending() && s.LeaseOwner == ""
	})
	return s
}

// requestChange sends a request about a verified subscription and
// returns the change it made: a new one, pending or (the engine is quick)
// decided already.
func (e *dialectEnv) requestChange(node string, kind hub.Kind, callback string, send func()) hub.SubChange {
	e.t.Helper()
	before, _ := e.subscription(node, kind, callback)
	send()
	s, ok := e.subscription(node, kind, callback)
	if !ok || s.Change.ID == before.Change.ID || s.Change.ID == "" {
		e.t.Fatalf("the request is no change of the verified subscription: %+v", s)
	}
	return s.Change
}

// waitDecided waits until the change is decided and returns the
// subscription then.
func (e *dialectEnv) waitDecided(node string, kind hub.Kind, callback string, change hub.SubChange) hub.Subscription {
	e.t.Helper()
	var s hub.Subscription
	testenv.WaitFor(e.t, 15*time.Second, "the pending change to be decided", func() bool {
		var ok bool
		s, ok = e.subscription(node, kind, callback)
		return !ok || s.Change.ID != change.ID || !s.Change.Pending()
	})
	return s
}

// sameSubscription fails unless got is want, its pending change and lease
// aside.
func sameSubscription(t *testing.T, what string, got, want hub.Subscription) {
	t.Helper()
	got.Change, want.Change = hub.SubChange{}, hub.SubChange{}
	got.LeaseOwner, got.LeaseUntil, want.LeaseOwner, want.LeaseUntil = "", time.Time{}, "", time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s changed the subscription:\n got %+v\nwant %+v", what, got, want)
	}
}

// publishChange makes the origin's feed gain an item and pings pingd.
func (e *dialectEnv) publishChange(path string, ids ...string) {
	e.t.Helper()
	feedURL := e.origin.set(path, "application/rss+xml", rssDoc("News", ids...))
	if resp := e.form("/ping", url.Values{"url": {feedURL}}); resp.StatusCode != http.StatusOK {
		e.t.Fatalf("ping: HTTP %d", resp.StatusCode)
	}
}

func (e *dialectEnv) newsNode() string {
	e.t.Helper()
	feedURL := e.origin.set("/feed.xml", "application/rss+xml", rssDoc("News", "a"))
	e.createNode("news", feedURL, hub.AccessOpen)
	e.waitBaselined("news")
	return feedURL
}

func (e *dialectEnv) webhookRequest(doc string) {
	e.t.Helper()
	if resp := e.do("SUBSCRIBE", "/feeds/news", webhookType, doc); resp.StatusCode != http.StatusAccepted {
		e.t.Fatalf("webhook request: HTTP %d %s", resp.StatusCode, readAll(resp))
	}
}

// TestWebhookTakeoverRefused: a stranger's SUBSCRIBE naming a verified
// webhook's href with another method and secret, and its <unsubscribe>,
// change nothing when the callback refuses them, hangs up, or does not
// answer; deliveries go on meanwhile, with the victim's method and secret.
func TestWebhookTakeoverRefused(t *testing.T) {
	e := newDialectEnv(t)
	e.newsNode()
	cb := newReceiver(t, echoChallenge)
	href := cb.URL + "/hook"
	e.webhookRequest(`<subscribe><url href="` + href + `" method="POST" diff="none" secret="victim-secret"/></subscribe>`)
	victim := e.waitSettled("news", hub.KindWebhook, href)

	stranger := `<subscribe><url href="` + href + `" method="NOTIFY" diff="application/patch-ops+xml" secret="stranger-secret"/></subscribe>`
	for name, answer := range map[string]func(http.ResponseWriter, hit){
		"refused": refuseVerification, "hung up": hangUpVerification,
	} {
		cb.setAnswer(answer)
		change := e.requestChange("news", hub.KindWebhook, href, func() { e.webhookRequest(stranger) })
		if change.Pending() && (change.Options.Secret != "stranger-secret" || change.Options.Method != "NOTIFY") {
			t.Fatalf("%s: pending change %+v", name, change)
		}
		got := e.waitDecided("news", hub.KindWebhook, href, change)
		sameSubscription(t, "a "+name+" change", got, victim)
		if got.Change.Outcome != hub.ChangeRefused {
			t.Fatalf("%s: change %+v", name, got.Change)
		}
	}
	// An unsubscription the callback does not confirm ends nothing either.
	cb.setAnswer(refuseVerification)
	change := e.requestChange("news", hub.KindWebhook, href, func() {
		e.webhookRequest(`<unsubscribe><url href="` + href + `"/></unsubscribe>`)
	})
	sameSubscription(t, "a refused unsubscription", e.waitDecided("news", hub.KindWebhook, href, change), victim)

	// While a stranger's change or unsubscription waits for an answer that
	// does not come, the next change is delivered as the victim asked.
	for i, doc := range []string{stranger, `<unsubscribe><url href="` + href + `"/></unsubscribe>`} {
		hold, release := holdVerification(t)
		cb.setAnswer(hold)
		change := e.requestChange("news", hub.KindWebhook, href, func() { e.webhookRequest(doc) })
		ids := []string{"a", "b", "c"}[:i+2]
		e.publishChange("/feed.xml", ids...)
		d := cb.waitMatching(t, i+1, "a delivery", func(h hit) bool { return h.Method != http.MethodGet })[i]
		if d.Method != http.MethodPost || !signedWith(d, "victim-secret") || !strings.HasPrefix(d.Header.Get("Content-Type"), "application/atom+xml") {
			t.Fatalf("delivery %s %q %q, want a POST of Atom signed with the victim's secret", d.Method, d.Header.Get("Content-Type"), d.Header.Get("X-Hub-Signature"))
		}
		if s, _ := e.subscription("news", hub.KindWebhook, href); !s.Change.Pending() || s.Change.ID != change.ID {
			t.Fatalf("the change was decided before the callback answered: %+v", s.Change)
		}
		release()
		got := e.waitDecided("news", hub.KindWebhook, href, change)
		if got.ID != victim.ID || !reflect.DeepEqual(got.Options, victim.Options) || got.State != hub.SubActive {
			t.Fatalf("after the unanswered %s: %+v", doc, got)
		}
	}
}

// TestWebSubTakeoverRefused: a stranger's hub.mode=subscribe for a
// verified callback and topic, with its own secret and lease, and its
// unsubscribe, leave the subscription as it was when the callback refuses
// or hangs up (§5.1: "If verification fails, the subscription state MUST
// be left unchanged"); the next distribution is signed with the victim's
// secret.
func TestWebSubTakeoverRefused(t *testing.T) {
	e := newDialectEnv(t)
	feedURL := e.newsNode()
	cb := webSubSubscriber(t)
	callback := cb.URL + "/cb"
	e.subscribeWebSub(cb, callback, feedURL, url.Values{"hub.secret": {"victim-secret"}, "hub.lease_seconds": {"3600"}})
	victim := e.waitSettled("news", hub.KindWebSub, callback)

	for name, answer := range map[string]func(http.ResponseWriter, hit){
		"refused": refuseVerification, "hung up": hangUpVerification,
	} {
		cb.setAnswer(answer)
		change := e.requestChange("news", hub.KindWebSub, callback, func() {
			resp := e.webSub(url.Values{"hub.mode": {"subscribe"}, "hub.topic": {feedURL}, "hub.callback": {callback},
				"hub.secret": {"stranger-secret"}, "hub.lease_seconds": {"86400"}})
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("%s: subscribe HTTP %d", name, resp.StatusCode)
			}
		})
		got := e.waitDecided("news", hub.KindWebSub, callback, change)
		sameSubscription(t, "a "+name+" change", got, victim)
	}
	change := e.requestChange("news", hub.KindWebSub, callback, func() {
		resp := e.webSub(url.Values{"hub.mode": {"unsubscribe"}, "hub.topic": {feedURL}, "hub.callback": {callback}})
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("unsubscribe: HTTP %d", resp.StatusCode)
		}
	})
	sameSubscription(t, "a refused unsubscription", e.waitDecided("news", hub.KindWebSub, callback, change), victim)

	cb.setAnswer(echoChallenge)
	e.publishChange("/feed.xml", "a", "b")
	d := cb.waitMatching(t, 1, "a distribution", isPost)[0]
	if !signedWith(d, "victim-secret") {
		t.Fatalf("distribution signed %q, want the victim's secret", d.Header.Get("X-Hub-Signature"))
	}
}

// xmlrpcTrue answers rssCloud notifications over XML-RPC with true, and
// GETs (a challenge) with an empty 200.
func xmlrpcTrue(w http.ResponseWriter, h hit) {
	if h.Method == http.MethodPost {
		body, _ := xmlrpc.MarshalResponse(true)
		w.Header().Set("Content-Type", "text/xml")
		_, _ = w.Write(body)
	}
}

// cloudRegistration is a REST pleaseNotify form naming the receiver's
// /rpc on 127.0.0.1 as domain, so the callback is checked with a
// challenge.
func cloudRegistration(rc *receiver, protocol, procedure, feedURL string) url.Values {
	v := cloudForm(rc, protocol, feedURL)
	v.Set("path", "/rpc")
	v.Set("notifyProcedure", procedure)
	v.Set("domain", "127.0.0.1")
	return v
}

// TestRSSCloudTakeoverRefused: a re-registration naming a verified
// callback with another protocol (REST with a domain, SOAP with a domain)
// that fails the challenge leaves the registration as it was, and the next
// change is notified with the victim's XML-RPC procedure.
func TestRSSCloudTakeoverRefused(t *testing.T) {
	e := newDialectEnv(t)
	feedURL := e.newsNode()
	cb := newReceiver(t, xmlrpcTrue)
	port := mustPort(cb.URL)
	ok, err := e.rpc("rssCloud.pleaseNotify", "victim.changed", port, "/rpc", "xml-rpc", []any{feedURL})
	if err != nil || ok != true {
		t.Fatalf("victim's registration: %v %v", ok, err)
	}
	callback := "http://127.0.0.1:" + port + "/rpc"
	victim := e.waitSettled("news", hub.KindRSSCloud, callback)

	cb.setAnswer(func(w http.ResponseWriter, h hit) { refuseVerification(w, h); xmlrpcTrue(w, h) })
	resp := e.form("/pleaseNotify", cloudRegistration(cb, "http-post", "", feedURL))
	if nr := decodeNotifyResult(t, resp); nr.Success != "false" {
		t.Fatalf("a registration whose challenge failed: %+v", nr)
	}
	sameSubscription(t, "a refused REST registration", e.waitSettled("news", hub.KindRSSCloud, callback), victim)

	cb.setAnswer(func(w http.ResponseWriter, h hit) { hangUpVerification(w, h); xmlrpcTrue(w, h) })
	_, a := e.soap(t, "/pleaseNotify", fmt.Sprintf(`<pleaseNotify><notifyProcedure>stranger</notifyProcedure><port>%s</port>`+
		`<path>/rpc</path><protocol>soap</protocol><urlList><item>%s</item></urlList><domain>127.0.0.1</domain></pleaseNotify>`, port, feedURL))
	if a.Body.Fault != nil || !strings.Contains(string(a.Body.Inner), ">false</Result>") {
		t.Fatalf("a SOAP registration whose challenge was not answered: %s", a.Body.Inner)
	}
	sameSubscription(t, "an unanswered SOAP registration", e.waitSettled("news", hub.KindRSSCloud, callback), victim)

	cb.setAnswer(xmlrpcTrue)
	before := len(cb.matching(isPost))
	e.publishChange("/feed.xml", "a", "b")
	n := cb.waitMatching(t, before+1, "a notification", isPost)[before]
	if !strings.Contains(n.Body, "<methodName>victim.changed</methodName>") || !strings.Contains(n.Body, feedURL) {
		t.Fatalf("notification %q, want the victim's XML-RPC call", n.Body)
	}
}

// TestCNWSResubscribeChangesNothing: CNWS has no verification of intent,
// so a stranger's repeated <subscribe> (answered true, as the draft says)
// leaves the subscription exactly as it was, its delivery record and a
// failing subscriber's ageing included, and the next change reaches it.
func TestCNWSResubscribeChangesNothing(t *testing.T) {
	e := newDialectEnv(t)
	feedURL := e.newsNode()
	cb := newReceiver(t, answerStatus(200, cnwsTrueAnswer))
	doc := cnwsSubscribeDoc(feedURL, cb.URL+"/cnws")
	if resp, res := e.cnws(doc); resp.StatusCode != http.StatusOK || res.Result.Status != "true" {
		t.Fatalf("subscribe: HTTP %d %+v", resp.StatusCode, res.Result)
	}
	e.publishChange("/feed.xml", "a", "b")
	cb.waitMatching(t, 1, "a notification", isPost)
	victim := e.waitSettled("news", hub.KindCNWS, cb.URL+"/cnws")
	if victim.Cursor == 0 {
		t.Fatalf("not delivered: %+v", victim)
	}

	if resp, res := e.cnws(doc); resp.StatusCode != http.StatusOK || res.Result.Status != "true" {
		t.Fatalf("repeated subscribe: HTTP %d %+v", resp.StatusCode, res.Result)
	}
	sameSubscription(t, "a repeated subscribe", e.waitSettled("news", hub.KindCNWS, cb.URL+"/cnws"), victim)
	e.publishChange("/feed.xml", "a", "b", "c")
	cb.waitMatching(t, 2, "the next notification", isPost)

	// A subscriber that cannot be reached just now ages; a repeated
	// subscribe, which anyone may send, does not reset that.
	cb.setAnswer(answerStatus(http.StatusServiceUnavailable, ""))
	e.publishChange("/feed.xml", "a", "b", "c", "d")
	var failing hub.Subscription
	testenv.WaitFor(t, 15*time.Second, "a failed notification", func() bool {
		failing, _ = e.subscription("news", hub.KindCNWS, cb.URL+"/cnws")
		return failing.ConsecutiveErrors == 1 && failing.LeaseOwner == ""
	})
	if resp, res := e.cnws(doc); resp.StatusCode != http.StatusOK || res.Result.Status != "true" {
		t.Fatalf("repeated subscribe of a failing subscriber: HTTP %d %+v", resp.StatusCode, res.Result)
	}
	got, _ := e.subscription("news", hub.KindCNWS, cb.URL+"/cnws")
	sameSubscription(t, "a repeated subscribe of a failing subscriber", got, failing)
}

// TestSubscriptionChangeConfirmed: a change the callback confirms applies
// at once, whole: the new method, diff and secret of a webhook, the new
// secret and lease of a WebSub subscription, the new protocol of an
// rssCloud registration.
func TestSubscriptionChangeConfirmed(t *testing.T) {
	e := newDialectEnv(t)
	feedURL := e.newsNode()

	hook := newReceiver(t, echoChallenge)
	href := hook.URL + "/hook"
	e.webhookRequest(`<subscribe><url href="` + href + `" method="POST" diff="none" secret="old"/></subscribe>`)
	before := e.waitSettled("news", hub.KindWebhook, href)
	e.waitDecided("news", hub.KindWebhook, href, e.requestChange("news", hub.KindWebhook, href, func() {
		e.webhookRequest(`<subscribe><url href="` + href + `" method="NOTIFY" diff="application/patch-ops+xml" secret="new"/></subscribe>`)
	}))
	after := e.waitSettled("news", hub.KindWebhook, href)
	if after.ID != before.ID || after.Options.Method != "NOTIFY" || after.Options.Diff != "application/patch-ops+xml" ||
		after.Options.Secret != "new" || after.Change.Outcome != hub.ChangeApplied {
		t.Fatalf("webhook after a confirmed change: %+v", after)
	}

	ws := webSubSubscriber(t)
	callback := ws.URL + "/cb"
	e.subscribeWebSub(ws, callback, feedURL, url.Values{"hub.secret": {"old"}, "hub.lease_seconds": {"3600"}})
	first := e.waitSettled("news", hub.KindWebSub, callback)
	e.subscribeWebSub(ws, callback, feedURL, url.Values{"hub.secret": {"new"}, "hub.lease_seconds": {"86400"}})
	renewed := e.waitSettled("news", hub.KindWebSub, callback)
	if renewed.ID != first.ID || renewed.Options.Secret != "new" || renewed.Options.LeaseSeconds != 86400 ||
		!renewed.ExpiresAt.After(first.ExpiresAt.Add(20*time.Hour)) {
		t.Fatalf("WebSub after a confirmed change: %+v (was %+v)", renewed, first)
	}

	cloud := newReceiver(t, xmlrpcTrue)
	port := mustPort(cloud.URL)
	if ok, err := e.rpc("rssCloud.pleaseNotify", "old.changed", port, "/rpc", "xml-rpc", []any{feedURL}); err != nil || ok != true {
		t.Fatalf("registration: %v %v", ok, err)
	}
	cloud.setAnswer(func(w http.ResponseWriter, h hit) {
		if c := h.Query.Get("challenge"); h.Method == http.MethodGet && c != "" {
			_, _ = io.WriteString(w, c)
		}
	})
	resp := e.form("/pleaseNotify", cloudRegistration(cloud, "http-post", "", feedURL))
	if nr := decodeNotifyResult(t, resp); nr.Success != "true" {
		t.Fatalf("a confirmed re-registration: %+v", nr)
	}
	reg := e.waitSettled("news", hub.KindRSSCloud, "http://127.0.0.1:"+port+"/rpc")
	if reg.Options.Protocol != "http-post" || reg.Change.Outcome != hub.ChangeApplied {
		t.Fatalf("rssCloud after a confirmed change: %+v", reg)
	}

	// The next change goes out with the new settings.
	e.publishChange("/feed.xml", "a", "b")
	d := hook.waitMatching(t, 1, "a webhook delivery", func(h hit) bool { return h.Method == "NOTIFY" })[0]
	if !signedWith(d, "new") || d.Header.Get("Content-Type") != "application/patch-ops+xml" {
		t.Fatalf("webhook delivery %q %q", d.Header.Get("Content-Type"), d.Header.Get("X-Hub-Signature"))
	}
	if d := ws.waitMatching(t, 1, "a distribution", isPost)[0]; !signedWith(d, "new") {
		t.Fatalf("distribution signed %q", d.Header.Get("X-Hub-Signature"))
	}
	n := cloud.waitMatching(t, 1, "a form notification", func(h hit) bool {
		return h.Method == http.MethodPost && strings.HasPrefix(h.Header.Get("Content-Type"), "application/x-www-form-urlencoded")
	})[0]
	if notifiedURL(n) != feedURL {
		t.Fatalf("notification %q", n.Body)
	}
}

// TestWebhookReplacedWhileVerified: a request replacing the settings of a
// subscription not verified yet, while its verification is under way, is
// verified on its own: the callback's confirmation of the earlier request
// does not activate the later one's secret.
func TestWebhookReplacedWhileVerified(t *testing.T) {
	e := newDialectEnv(t)
	e.newsNode()
	held := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(held) }) }
	t.Cleanup(release)
	var mu sync.Mutex
	gets := 0
	cb := newReceiver(t, func(w http.ResponseWriter, h hit) {
		if h.Method != http.MethodGet {
			return
		}
		mu.Lock()
		gets++
		first := gets == 1
		mu.Unlock()
		if !first {
			refuseVerification(w, h)
			return
		}
		<-held
		echoChallenge(w, h)
	})
	href := cb.URL + "/hook"
	e.webhookRequest(`<subscribe><url href="` + href + `" secret="first"/></subscribe>`)
	cb.waitMatching(t, 1, "the first verification", isGet)
	e.webhookRequest(`<subscribe><url href="` + href + `" secret="second"/></subscribe>`)
	release()
	cb.waitMatching(t, 2, "the verification of the second request", isGet)
	testenv.WaitFor(t, 15*time.Second, "the refused subscription to be removed", func() bool {
		_, ok := e.subscription("news", hub.KindWebhook, href)
		return !ok
	})
}
