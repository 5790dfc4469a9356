package httpapi_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mmcdole/gofeed"

	"github.com/pingd/pingd/httpapi"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// The websub.rocks hub scenarios 100–106, played against pingd's hub on
// loopback: a subscriber's callback (a receiver), a publisher's topic on
// the origin, and the hub in between.

// webSubSubscriber is a callback that confirms verifications and takes
// deliveries.
func webSubSubscriber(t *testing.T) *receiver {
	return newReceiver(t, echoChallenge)
}

func (e *dialectEnv) webSub(v url.Values, header ...string) *http.Response {
	e.t.Helper()
	return e.form("/websub", v, header...)
}

// subscribeWebSub sends a subscription request and waits for the
// verification of intent, which it returns.
func (e *dialectEnv) subscribeWebSub(rc *receiver, callback, topic string, extra url.Values, header ...string) hit {
	e.t.Helper()
	before := len(rc.matching(isGet))
	v := url.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.callback": {callback}}
	for k, vs := range extra {
		v[k] = vs
	}
	resp := e.webSub(v, header...)
	if resp.StatusCode != http.StatusAccepted {
		e.t.Fatalf("subscribe: HTTP %d %s", resp.StatusCode, readAll(resp))
	}
	verification := rc.waitMatching(e.t, before+1, "verification of intent", isGet)[before]
	q := verification.Query
	if q.Get("hub.mode") != "subscribe" || q.Get("hub.topic") != topic || q.Get("hub.challenge") == "" || q.Get("hub.lease_seconds") == "" {
		e.t.Fatalf("verification %v", q)
	}
	testenv.WaitFor(e.t, 15*time.Second, "the subscription to be active", func() bool {
		for _, s := range e.webSubSubs(topic) {
			// A renewal is a pending change until it is applied.
			if callbackOf(s) == callback && s.State == hub.SubActive && !s.Change.Pending() {
				return true
			}
		}
		return false
	})
	return verification
}

// webSubSubs lists the WebSub subscriptions of the topic's node.
func (e *dialectEnv) webSubSubs(topic string) []hub.Subscription {
	e.t.Helper()
	n, err := e.hub.NodeForURL(e.ctx, topic, false)
	if err != nil {
		if own := strings.TrimPrefix(topic, e.srv.URL+"/atom/"); own != topic {
			return e.subs(own, hub.KindWebSub)
		}
		return nil
	}
	return e.subs(n.Name, hub.KindWebSub)
}

func (e *dialectEnv) publishWebSub(urls ...string) {
	e.t.Helper()
	resp := e.webSub(url.Values{"hub.mode": {"publish"}, "hub.url": urls})
	if resp.StatusCode != http.StatusNoContent {
		e.t.Fatalf("publish: HTTP %d %s", resp.StatusCode, readAll(resp))
	}
}

// checkDistribution checks the WebSub headers of a content distribution.
func (e *dialectEnv) checkDistribution(h hit, topic, contentType string) {
	e.t.Helper()
	if ct := h.Header.Get("Content-Type"); !strings.HasPrefix(ct, contentType) {
		e.t.Errorf("content type %q, want %q", ct, contentType)
	}
	link := strings.Join(h.Header.Values("Link"), ", ")
	if !strings.Contains(link, "<"+e.srv.URL+"/websub>; rel=\"hub\"") || !strings.Contains(link, "<"+topic+">; rel=\"self\"") {
		e.t.Errorf("Link %q lacks rel=hub or rel=self %s", link, topic)
	}
}

func feedGUIDs(t *testing.T, body string) []string {
	t.Helper()
	f, err := gofeed.NewParser().ParseString(body)
	if err != nil {
		t.Fatalf("distribution is not a feed: %v\n%s", err, body)
	}
	var ids []string
	for _, it := range f.Items {
		ids = append(ids, it.GUID)
	}
	return ids
}

// newTopic serves an RSS topic with item "a" and waits until pingd knows it.
func (e *dialectEnv) newTopic(path string) string {
	e.t.Helper()
	return e.origin.set(path, "application/rss+xml", rssDoc("Topic "+path, "a"))
}

// Test100TypicalSubscriber: subscription, verification with a lease, and
// the distribution of what is new with the topic's type and Link headers.
func TestWebSubRocks100TypicalSubscriber(t *testing.T) {
	e := newDialectEnv(t)
	topic := e.newTopic("/100.xml")
	sub := webSubSubscriber(t)
	v := e.subscribeWebSub(sub, sub.URL+"/callback/100", topic, nil)
	if v.Query.Get("hub.lease_seconds") != "864000" {
		t.Errorf("default lease %q, want 10 days", v.Query.Get("hub.lease_seconds"))
	}
	e.origin.set("/100.xml", "application/rss+xml", rssDoc("Topic", "a", "b"))
	e.publishWebSub(topic)
	d := sub.waitMatching(t, 1, "distribution", isPost)[0]
	e.checkDistribution(d, topic, "application/rss+xml")
	if ids := feedGUIDs(t, d.Body); len(ids) != 1 || ids[0] != "b" {
		t.Fatalf("distributed items %q, want only the new one", ids)
	}
	if d.Header.Get("X-Hub-Signature") != "" {
		t.Error("signed without a secret")
	}
	subs := e.webSubSubs(topic)
	if len(subs) != 1 || subs[0].ExpiresAt.Before(time.Now().Add(10*24*time.Hour-time.Minute)) {
		t.Fatalf("subscription %+v", subs)
	}
}

// Test101Secret: hub.secret makes every distribution carry
// X-Hub-Signature, sha256 by default and the other methods on request.
func TestWebSubRocks101Secret(t *testing.T) {
	e := newDialectEnv(t)
	topic := e.newTopic("/101.xml")
	algos := map[string]func() hash.Hash{"": sha256.New, "sha1": sha1.New, "sha384": sha512.New384, "sha512": sha512.New}
	subs := map[string]*receiver{}
	for algo := range algos {
		sub := webSubSubscriber(t)
		extra := url.Values{"hub.secret": {"s3cret-" + algo}}
		if algo != "" {
			extra.Set("pingd.signature_algorithm", algo)
		}
		e.subscribeWebSub(sub, sub.URL+"/cb", topic, extra)
		subs[algo] = sub
	}
	e.origin.set("/101.xml", "application/rss+xml", rssDoc("Topic", "a", "b"))
	e.publishWebSub(topic)
	for algo, newHash := range algos {
		d := subs[algo].waitMatching(t, 1, "distribution", isPost)[0]
		name := algo
		if name == "" {
			name = "sha256"
		}
		mac := hmac.New(newHash, []byte("s3cret-"+algo))
		mac.Write([]byte(d.Body))
		if want := name + "=" + hex.EncodeToString(mac.Sum(nil)); d.Header.Get("X-Hub-Signature") != want {
			t.Errorf("%s: X-Hub-Signature %q, want %q", name, d.Header.Get("X-Hub-Signature"), want)
		}
	}
}

// Test102ExtraParameters: parameters the hub does not know are ignored,
// and the callback's own query survives verification and distribution.
func TestWebSubRocks102ExtraParameters(t *testing.T) {
	e := newDialectEnv(t)
	topic := e.newTopic("/102.xml")
	sub := webSubSubscriber(t)
	callback := sub.URL + "/cb?subscription=102&x=%2F"
	v := e.subscribeWebSub(sub, callback, topic, url.Values{"foo": {"bar"}, "hub.unknown": {"1"}, "hub.verify": {"sync"}})
	if v.Query.Get("subscription") != "102" || v.Query.Get("x") != "/" || v.Query.Get("foo") != "" {
		t.Fatalf("verification query %v", v.Query)
	}
	e.origin.set("/102.xml", "application/rss+xml", rssDoc("Topic", "a", "b"))
	e.publishWebSub(topic)
	d := sub.waitMatching(t, 1, "distribution", isPost)[0]
	if d.Query.Get("subscription") != "102" || d.Path != "/cb" {
		t.Fatalf("distributed to %s?%v", d.Path, d.Query)
	}
}

// Test103Resubscribe: subscribing again before the lease ends renews the
// one subscription (verified again, with the new lease).
func TestWebSubRocks103Resubscribe(t *testing.T) {
	e := newDialectEnv(t)
	topic := e.newTopic("/103.xml")
	sub := webSubSubscriber(t)
	e.subscribeWebSub(sub, sub.URL+"/cb", topic, url.Values{"hub.lease_seconds": {"3600"}})
	first := e.webSubSubs(topic)[0]
	v := e.subscribeWebSub(sub, sub.URL+"/cb", topic, url.Values{"hub.lease_seconds": {"7200"}})
	if v.Query.Get("hub.lease_seconds") != "7200" {
		t.Fatalf("renewal lease %q", v.Query.Get("hub.lease_seconds"))
	}
	subs := e.webSubSubs(topic)
	if len(subs) != 1 || subs[0].ID != first.ID || !subs[0].ExpiresAt.After(first.ExpiresAt.Add(59*time.Minute)) {
		t.Fatalf("after renewal %+v (was %+v)", subs, first)
	}
	e.origin.set("/103.xml", "application/rss+xml", rssDoc("Topic", "a", "b"))
	e.publishWebSub(topic)
	sub.waitMatching(t, 1, "distribution", isPost)
	time.Sleep(200 * time.Millisecond)
	if n := len(sub.matching(isPost)); n != 1 {
		t.Fatalf("%d distributions, want 1", n)
	}
}

// Test104Unsubscribe: an unsubscription is verified with the callback and
// then nothing more is distributed.
func TestWebSubRocks104Unsubscribe(t *testing.T) {
	e := newDialectEnv(t)
	topic := e.newTopic("/104.xml")
	sub := webSubSubscriber(t)
	e.subscribeWebSub(sub, sub.URL+"/cb", topic, nil)
	resp := e.webSub(url.Values{"hub.mode": {"unsubscribe"}, "hub.topic": {topic}, "hub.callback": {sub.URL + "/cb"}})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("unsubscribe: HTTP %d", resp.StatusCode)
	}
	v := sub.waitMatching(t, 2, "verification", isGet)[1]
	if v.Query.Get("hub.mode") != "unsubscribe" || v.Query.Get("hub.topic") != topic || v.Query.Get("hub.lease_seconds") != "" {
		t.Fatalf("unsubscribe verification %v", v.Query)
	}
	testenv.WaitFor(t, 15*time.Second, "the subscription to be removed", func() bool { return len(e.webSubSubs(topic)) == 0 })
	e.origin.set("/104.xml", "application/rss+xml", rssDoc("Topic", "a", "b"))
	e.publishWebSub(topic)
	time.Sleep(500 * time.Millisecond)
	if posts := sub.matching(isPost); len(posts) != 0 {
		t.Fatalf("distributed after unsubscribing: %+v", posts)
	}
	// Unsubscribing what is not subscribed: 202, and nobody is called.
	resp = e.webSub(url.Values{"hub.mode": {"unsubscribe"}, "hub.topic": {topic}, "hub.callback": {sub.URL + "/other"}})
	if resp.StatusCode != http.StatusAccepted || len(sub.Hits()) != 2 {
		t.Fatalf("unsubscribe of nothing: HTTP %d, %d requests", resp.StatusCode, len(sub.Hits()))
	}
}

// Test105PlainText and Test106JSON: a topic that is not a feed is
// distributed whole, with its own content type.
func TestWebSubRocks105PlainText(t *testing.T) {
	testWholeDocumentTopic(t, "/105.txt", "text/plain; charset=utf-8", "first version\n", "second version\n")
}

func TestWebSubRocks106JSON(t *testing.T) {
	testWholeDocumentTopic(t, "/106.json", "application/json", `{"version":1}`, `{"version":2,"note":"new"}`)
}

func testWholeDocumentTopic(t *testing.T, path, contentType, before, after string) {
	e := newDialectEnv(t)
	topic := e.origin.set(path, contentType, before)
	sub := webSubSubscriber(t)
	e.subscribeWebSub(sub, sub.URL+"/cb", topic, url.Values{"hub.secret": {"k"}})
	n, err := e.hub.NodeForURL(e.ctx, topic, false)
	if err != nil {
		t.Fatal(err)
	}
	e.waitBaselined(n.Name)
	e.origin.set(path, contentType, after)
	e.publishWebSub(topic)
	d := sub.waitMatching(t, 1, "distribution", isPost)[0]
	e.checkDistribution(d, topic, contentType)
	if d.Body != after {
		t.Fatalf("distributed %q, want the new content %q", d.Body, after)
	}
	mac := hmac.New(sha256.New, []byte("k"))
	mac.Write([]byte(after))
	if d.Header.Get("X-Hub-Signature") != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
		t.Errorf("signature %q", d.Header.Get("X-Hub-Signature"))
	}
}

// TestWebSubDenials: a whitelist node without its token and a topic that
// cannot be fetched get a hub.mode=denied notice and no subscription; a
// tokenless request cannot end a subscription someone made with a token.
func TestWebSubDenials(t *testing.T) {
	e := newDialectEnv(t)
	token := e.createNode("closed", "", hub.AccessWhitelist)
	topic := e.srv.URL + "/atom/closed"
	sub := webSubSubscriber(t)
	resp := e.webSub(url.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.callback": {sub.URL + "/cb"}, "hub.secret": {"x"}})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("subscribe: HTTP %d", resp.StatusCode)
	}
	d := sub.waitMatching(t, 1, "denial", isGet)[0]
	if d.Query.Get("hub.mode") != "denied" || d.Query.Get("hub.topic") != topic || !strings.Contains(d.Query.Get("hub.reason"), "whitelist") ||
		d.Query.Get("hub.challenge") != "" {
		t.Fatalf("denial %v", d.Query)
	}
	testenv.WaitFor(t, 15*time.Second, "the denied request to be dropped", func() bool { return len(e.subs("closed", hub.KindWebSub)) == 0 })

	// With the token: verified, and the owner's items arrive as Atom.
	e.subscribeWebSub(sub, sub.URL+"/cb", topic, nil, "Authorization", "Bearer "+token)
	// Without it, for the same callback: refused, the subscription stays.
	resp = e.webSub(url.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.callback": {sub.URL + "/cb"}})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("tokenless renewal: HTTP %d", resp.StatusCode)
	}
	// Nor can it unsubscribe that callback, or tell whether any other one
	// is subscribed: 401 either way, and the subscription stays active.
	for _, cb := range []string{sub.URL + "/cb", sub.URL + "/not-subscribed"} {
		for _, header := range [][]string{nil, {"Authorization", "Bearer wrong"}} {
			resp = e.webSub(url.Values{"hub.mode": {"unsubscribe"}, "hub.topic": {topic}, "hub.callback": {cb}}, header...)
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
				t.Fatalf("unsubscribe %s with %v: HTTP %d, WWW-Authenticate %q", cb, header, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		}
	}
	if subs := e.subs("closed", hub.KindWebSub); len(subs) != 1 || subs[0].State != hub.SubActive {
		t.Fatalf("after tokenless unsubscribes: %+v", subs)
	}
	if _, err := e.hub.Publish(e.ctx, "closed", "owner@example.org", []hub.Entry{{ID: "i1", Title: "Inside",
		Payload: []byte(`<entry xmlns="http://www.w3.org/2005/Atom"><id>i1</id><title>Inside</title><updated>2030-01-01T00:00:00Z</updated></entry>`)}}); err != nil {
		t.Fatal(err)
	}
	post := sub.waitMatching(t, 1, "distribution", isPost)[0]
	e.checkDistribution(post, topic, "application/atom+xml")
	if !strings.Contains(post.Body, "Inside") {
		t.Fatalf("distribution %s", post.Body)
	}

	// A topic pingd cannot fetch.
	missing := e.origin.setStatus("/gone.xml", http.StatusNotFound)
	other := webSubSubscriber(t)
	if resp := e.webSub(url.Values{"hub.mode": {"subscribe"}, "hub.topic": {missing}, "hub.callback": {other.URL + "/cb"}}); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("subscribe: HTTP %d", resp.StatusCode)
	}
	d = other.waitMatching(t, 1, "denial", isGet)[0]
	if d.Query.Get("hub.mode") != "denied" || !strings.Contains(d.Query.Get("hub.reason"), "cannot be fetched") {
		t.Fatalf("denial %v", d.Query)
	}
	testenv.WaitFor(t, 15*time.Second, "the denied request to be dropped", func() bool { return len(e.webSubSubs(missing)) == 0 })

	// pingd's own URL of a node that does not exist: 404 at once.
	if resp := e.webSub(url.Values{"hub.mode": {"subscribe"}, "hub.topic": {e.srv.URL + "/atom/nope"}, "hub.callback": {other.URL}}); resp.StatusCode != 404 {
		t.Fatalf("unknown own node: HTTP %d", resp.StatusCode)
	}
}

// TestWebSubLeasesAndVerification: leases are clamped to the configured
// bounds and echoed; a callback that does not confirm is not subscribed.
func TestWebSubLeasesAndVerification(t *testing.T) {
	e := newDialectEnv(t, func(c *httpapi.Config) {
		c.WebSubLeases = httpapi.LeaseLimits{Default: time.Hour, Min: 10 * time.Minute, Max: 2 * time.Hour}
	})
	topic := e.newTopic("/lease.xml")
	for asked, want := range map[string]string{"": "3600", "60": "600", "5000": "5000", "999999999": "7200",
		"99999999999999": "7200", "99999999999999999999999": "7200"} {
		sub := webSubSubscriber(t)
		extra := url.Values{}
		if asked != "" {
			extra.Set("hub.lease_seconds", asked)
		}
		v := e.subscribeWebSub(sub, sub.URL+"/cb", topic, extra)
		if got := v.Query.Get("hub.lease_seconds"); got != want {
			t.Errorf("asked %q: lease %s, want %s", asked, got, want)
		}
		for _, s := range e.webSubSubs(topic) {
			if callbackOf(s) == sub.URL+"/cb" {
				secs, _ := strconv.Atoi(want)
				if d := time.Until(s.ExpiresAt) - time.Duration(secs)*time.Second; d > time.Minute || d < -time.Minute {
					t.Errorf("asked %q: expires %v", asked, s.ExpiresAt)
				}
			}
		}
	}

	refusing := newReceiver(t, answerStatus(404, ""))
	if resp := e.webSub(url.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.callback": {refusing.URL}}); resp.StatusCode != 202 {
		t.Fatalf("HTTP %d", resp.StatusCode)
	}
	refusing.waitMatching(t, 1, "verification", isGet)
	testenv.WaitFor(t, 15*time.Second, "the unconfirmed subscription to be dropped", func() bool {
		for _, s := range e.webSubSubs(topic) {
			if callbackOf(s) == refusing.URL {
				return false
			}
		}
		return true
	})
}

// TestWebSubPublish: a publish request names several topics (hub.url and
// hub.topic, repeated); each is fetched and distributed; pingd's own feed
// URL stands for its node's source; bad requests get 400.
func TestWebSubPublish(t *testing.T) {
	e := newDialectEnv(t)
	t1, t2 := e.newTopic("/p1.xml"), e.newTopic("/p2.xml")
	e.createNode("p2node", t2, hub.AccessOpen)
	s1, s2 := webSubSubscriber(t), webSubSubscriber(t)
	e.subscribeWebSub(s1, s1.URL+"/cb", t1, nil)
	e.subscribeWebSub(s2, s2.URL+"/cb", e.srv.URL+"/atom/p2node", nil)
	e.waitBaselined("p2node")
	e.origin.set("/p1.xml", "application/rss+xml", rssDoc("Topic", "a", "b"))
	e.origin.set("/p2.xml", "application/rss+xml", rssDoc("Topic", "a", "c"))
	resp := e.webSub(url.Values{"hub.mode": {"publish"}, "hub.url": {t1}, "hub.topic": {e.srv.URL + "/atom/p2node"}})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("publish: HTTP %d", resp.StatusCode)
	}
	if ids := feedGUIDs(t, s1.waitMatching(t, 1, "distribution", isPost)[0].Body); len(ids) != 1 || ids[0] != "b" {
		t.Fatalf("topic 1 got %q", ids)
	}
	d := s2.waitMatching(t, 1, "distribution", isPost)[0]
	e.checkDistribution(d, e.srv.URL+"/atom/p2node", "application/atom+xml")
	if f, err := gofeed.NewParser().ParseString(d.Body); err != nil || len(f.Items) != 1 || f.Items[0].Title != "Item c" {
		t.Fatalf("own feed distribution: %v %s", err, d.Body)
	}
	pings, _, _ := e.hub.Pings(e.ctx, time.Now().Add(-time.Minute), 10)
	if len(pings) != 2 || pings[0].Dialect != httpapi.DialectWebSub || pings[1].Dialect != httpapi.DialectWebSub {
		t.Fatalf("recorded pings %+v, want one per topic", pings)
	}

	for name, v := range map[string]url.Values{
		"no mode":         {"hub.url": {t1}},
		"bad mode":        {"hub.mode": {"ping"}, "hub.url": {t1}},
		"publish nothing": {"hub.mode": {"publish"}},
		"publish bad url": {"hub.mode": {"publish"}, "hub.url": {"gopher://x/"}},
		"no callback":     {"hub.mode": {"subscribe"}, "hub.topic": {t1}},
		"bad callback":    {"hub.mode": {"subscribe"}, "hub.topic": {t1}, "hub.callback": {"/relative"}},
		"no topic":        {"hub.mode": {"subscribe"}, "hub.callback": {s1.URL}},
		"long secret":     {"hub.mode": {"subscribe"}, "hub.topic": {t1}, "hub.callback": {s1.URL}, "hub.secret": {strings.Repeat("s", 200)}},
		"bad lease":       {"hub.mode": {"subscribe"}, "hub.topic": {t1}, "hub.callback": {s1.URL}, "hub.lease_seconds": {"-5"}},
		"bad algorithm":   {"hub.mode": {"subscribe"}, "hub.topic": {t1}, "hub.callback": {s1.URL}, "pingd.signature_algorithm": {"md5"}},
	} {
		if resp := e.webSub(v); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d", name, resp.StatusCode)
		}
	}
	if resp := e.do("POST", "/websub", "application/json", `{"hub.mode":"publish"}`); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("JSON body: HTTP %d", resp.StatusCode)
	}
}
