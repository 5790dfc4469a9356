package delivery_test

import (
	"crypto/tls"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/rsscloud"
	"github.com/pingd/pingd/internal/xmlrpc"
)

func rssCloudEnv(t *testing.T, tune ...func(*delivery.HTTPSender)) *dialectEnv {
	return newDialectEnv(t, func(s delivery.HTTPSender, _ delivery.SourceReader, now func() time.Time) map[hub.Kind]delivery.Sender {
		for _, f := range tune {
			f(&s)
		}
		return map[hub.Kind]delivery.Sender{hub.KindRSSCloud: &delivery.RSSCloud{HTTPSender: s, Now: now}}
	})
}

const cloudTopic = "http://example.org/feed.xml"

func cloudSub(node, callback, protocol, procedure string, verify map[string]string) hub.Subscription {
	return hub.Subscription{
		NodeName: node, Kind: hub.KindRSSCloud, Address: callback, State: hub.SubPending,
		Options: hub.Options{Topic: cloudTopic, Protocol: protocol, Procedure: procedure, Verify: verify},
	}
}

// xmlrpcTrue answers an XML-RPC call with true.
func xmlrpcAnswer(v any) func(http.ResponseWriter, hit) {
	return func(w http.ResponseWriter, _ hit) {
		body, _ := xmlrpc.MarshalResponse(v)
		w.Header().Set("Content-Type", "text/xml")
		_, _ = w.Write(body)
	}
}

// TestRSSCloudProtocols registers one callback per protocol: each gets a
// test notification before the registration becomes active (for 25
// hours), then exactly one notification per change, in its own format.
func TestRSSCloudProtocols(t *testing.T) {
	soapOK := func(w http.ResponseWriter, _ hit) {
		w.Header().Set("Content-Type", "text/xml")
		_, _ = io.WriteString(w, `<?xml version="1.0"?><SOAP-ENV:Envelope xmlns:SOAP-ENV="http://schemas.xmlsoap.org/soap/envelope/"><SOAP-ENV:Body><notifyResponse><Result>1</Result></notifyResponse></SOAP-ENV:Body></SOAP-ENV:Envelope>`)
	}
	cases := []struct {
		protocol, procedure string
		answer              func(http.ResponseWriter, hit)
		tls                 bool
		check               func(t *testing.T, h hit)
	}{
		{rsscloud.HTTPPost, "", answerStatus(200, "ok"), false, func(t *testing.T, h hit) {
			if ct := h.Header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
				t.Errorf("content type %q", ct)
			}
			if h.Body != "url="+strings.ReplaceAll(strings.ReplaceAll(cloudTopic, ":", "%3A"), "/", "%2F") {
				t.Errorf("body %q", h.Body)
			}
		}},
		{rsscloud.HTTPSPost, "", answerStatus(204, ""), true, func(t *testing.T, h hit) {
			if !strings.HasPrefix(h.Body, "url=") {
				t.Errorf("body %q", h.Body)
			}
		}},
		{rsscloud.XMLRPC, "myCloud.notify", xmlrpcAnswer(true), false, func(t *testing.T, h hit) {
			call, err := xmlrpc.DecodeCall(strings.NewReader(h.Body), xmlrpc.Limits{})
			if err != nil {
				t.Fatalf("not an XML-RPC call: %v\n%s", err, h.Body)
			}
			if call.Method != "myCloud.notify" || len(call.Params) != 1 || call.Params[0] != cloudTopic {
				t.Errorf("call %+v", call)
			}
		}},
		{rsscloud.SOAP, "notify", soapOK, false, func(t *testing.T, h hit) {
			if got := h.Header.Get("SOAPAction"); got != `"/notify"` {
				t.Errorf("SOAPAction %q", got)
			}
			var env struct {
				XMLName xml.Name `xml:"http://schemas.xmlsoap.org/soap/envelope/ Envelope"`
				Body    struct {
					Call struct {
						XMLName xml.Name
						URL     string `xml:"url"`
					} `xml:",any"`
				} `xml:"http://schemas.xmlsoap.org/soap/envelope/ Body"`
			}
			if err := xml.Unmarshal([]byte(h.Body), &env); err != nil {
				t.Fatalf("not a SOAP envelope: %v\n%s", err, h.Body)
			}
			if env.Body.Call.XMLName.Local != "notify" || env.Body.Call.URL != cloudTopic {
				t.Errorf("SOAP call %+v", env.Body.Call)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.protocol, func(t *testing.T) {
			var srv *httptest.Server
			rec := &receiver{answer: c.answer, arrived: make(chan struct{}, 100)}
			var tune []func(*delivery.HTTPSender)
			if c.tls {
				srv = httptest.NewTLSServer(http.HandlerFunc(rec.serve))
				pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
				tune = append(tune, func(s *delivery.HTTPSender) {
					s.Client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
				})
			} else {
				srv = httptest.NewServer(http.HandlerFunc(rec.serve))
			}
			t.Cleanup(srv.Close)
			rec.Server = srv
			e := rssCloudEnv(t, tune...)
			rec.setClock(e.clock)
			e.node("n")
			start := e.clock.Now()
			sub := e.subscribe(cloudSub("n", srv.URL+"/notify", c.protocol, c.procedure, nil))
			s := e.waitSub(sub.ID, "active", func(s *hub.Subscription) bool { return s != nil && s.State == hub.SubActive })
			if want := start.Add(25 * time.Hour); !s.ExpiresAt.Equal(want) {
				t.Errorf("expires %v, want %v (25 hours)", s.ExpiresAt, want)
			}
			hits := rec.waitHits(t, 1)
			if hits[0].Method != http.MethodPost || hits[0].Path != "/notify" {
				t.Errorf("test notification %s %s", hits[0].Method, hits[0].Path)
			}
			c.check(t, hits[0])

			// Two items in one batch: one notification.
			e.publishAll("n", testEntry("a", "A", ""), testEntry("b", "B", ""))
			hits = rec.waitHits(t, 2)
			c.check(t, hits[1])
			e.quiet(rec, 2)
			e.waitSub(sub.ID, "cursor advanced", func(s *hub.Subscription) bool { return s != nil && s.Cursor == 2 })
		})
	}
}

// TestRSSCloudDomainChallenge: with a domain, the callback must echo the
// challenge of a GET carrying the URL; no test notification is sent.
func TestRSSCloudDomainChallenge(t *testing.T) {
	e := rssCloudEnv(t)
	e.node("n")
	echo := newReceiver(t, e.clock, func(w http.ResponseWriter, h hit) {
		if h.Method == http.MethodGet && len(h.Query["url"]) == 1 && h.Query["url"][0] == cloudTopic {
			_, _ = io.WriteString(w, h.Query["challenge"][0])
		}
	})
	sub := e.subscribe(cloudSub("n", echo.URL+"/cb?x=1", rsscloud.HTTPPost, "", map[string]string{rsscloud.VerifyDomain: "127.0.0.1"}))
	e.waitSub(sub.ID, "active", func(s *hub.Subscription) bool { return s != nil && s.State == hub.SubActive })
	hits := echo.Hits()
	if len(hits) != 1 || hits[0].Method != http.MethodGet || hits[0].Query["x"][0] != "1" || len(hits[0].Query["challenge"][0]) < 16 {
		t.Fatalf("want one challenge GET keeping the callback's query, got %+v", hits)
	}

	// A callback that answers 200 without the challenge is refused.
	mute := newReceiver(t, e.clock, answerStatus(200, "sure"))
	sub = e.subscribe(cloudSub("n", mute.URL+"/cb", rsscloud.HTTPPost, "", map[string]string{rsscloud.VerifyDomain: "127.0.0.1"}))
	e.waitSub(sub.ID, "removed", func(s *hub.Subscription) bool { return s == nil })
	if hits := mute.Hits(); len(hits) != 1 || hits[0].Method != http.MethodGet {
		t.Fatalf("want only the challenge GET, got %+v", hits)
	}
}

// TestRSSCloudTestNotificationRefused: without a domain a failing test
// notification (an HTTP error, XML-RPC false, a fault, a SOAP fault)
// refuses the registration.
func TestRSSCloudTestNotificationRefused(t *testing.T) {
	soapFault := func(w http.ResponseWriter, _ hit) {
		w.WriteHeader(500)
		_, _ = io.WriteString(w, `<SOAP-ENV:Envelope xmlns:SOAP-ENV="http://schemas.xmlsoap.org/soap/envelope/"><SOAP-ENV:Body><SOAP-ENV:Fault><faultcode>SOAP-ENV:Client</faultcode><faultstring>no such procedure</faultstring></SOAP-ENV:Fault></SOAP-ENV:Body></SOAP-ENV:Envelope>`)
	}
	fault := func(w http.ResponseWriter, _ hit) {
		_, _ = w.Write(xmlrpc.MarshalFault(xmlrpc.Errorf(1, "nope")))
	}
	for name, c := range map[string]struct {
		protocol, procedure string
		answer              func(http.ResponseWriter, hit)
	}{
		"http 500":      {rsscloud.HTTPPost, "", answerStatus(500, "")},
		"http 404":      {rsscloud.HTTPPost, "", answerStatus(404, "")},
		"xml-rpc false": {rsscloud.XMLRPC, "n.notify", xmlrpcAnswer(false)},
		"xml-rpc fault": {rsscloud.XMLRPC, "n.notify", fault},
		"xml-rpc junk":  {rsscloud.XMLRPC, "n.notify", answerStatus(200, "<html>hi</html>")},
		"soap fault":    {rsscloud.SOAP, "notify", soapFault},
	} {
		t.Run(name, func(t *testing.T) {
			e := rssCloudEnv(t)
			e.node("n")
			rec := newReceiver(t, e.clock, c.answer)
			sub := e.subscribe(cloudSub("n", rec.URL+"/", c.protocol, c.procedure, nil))
			e.waitSub(sub.ID, "removed", func(s *hub.Subscription) bool { return s == nil })
			e.quiet(rec, 1)
		})
	}
}

// TestRSSCloudSuspendAndRenew: three consecutive failed notifications
// suspend a registration; nothing more is sent until it registers again,
// which reactivates it with a clean error count.
func TestRSSCloudSuspendAndRenew(t *testing.T) {
	e := rssCloudEnv(t)
	e.node("n")
	var mu sync.Mutex
	failing := false
	rec := newReceiver(t, e.clock, func(w http.ResponseWriter, _ hit) {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			w.WriteHeader(503)
		}
	})
	setFailing := func(v bool) { mu.Lock(); failing = v; mu.Unlock() }
	sub := e.subscribe(cloudSub("n", rec.URL+"/", rsscloud.HTTPPost, "", nil))
	e.waitSub(sub.ID, "active", func(s *hub.Subscription) bool { return s != nil && s.State == hub.SubActive })
	rec.waitHits(t, 1) // the test notification

	setFailing(true)
	e.publish("n", "a", "A", "")
	rec.waitHits(t, 2)
	s := e.waitSub(sub.ID, "first error", func(s *hub.Subscription) bool { return s.ConsecutiveErrors == 1 })
	if s.State != hub.SubActive || s.NextAttemptAt.IsZero() {
		t.Fatalf("after one error: %+v", s)
	}
	e.advance(2 * time.Minute)
	rec.waitHits(t, 3)
	e.waitSub(sub.ID, "second error", func(s *hub.Subscription) bool { return s.ConsecutiveErrors == 2 })
	e.advance(5 * time.Minute)
	rec.waitHits(t, 4)
	e.waitSub(sub.ID, "suspended after 3 errors", func(s *hub.Subscription) bool {
		return s.State == hub.SubSuspended && s.ConsecutiveErrors == 3
	})

	// Suspended: no more notifications, whatever happens.
	setFailing(false)
	e.publish("n", "b", "B", "")
	e.advance(time.Hour)
	e.quiet(rec, 4)

	// Registering again: a test notification, then active and clean.
	renewed := e.subscribe(cloudSub("n", rec.URL+"/", rsscloud.HTTPPost, "", nil))
	if renewed.ID != sub.ID {
		t.Fatalf("renewal made a new subscription %d (was %d)", renewed.ID, sub.ID)
	}
	s = e.waitSub(sub.ID, "reactivated", func(s *hub.Subscription) bool { return s.State == hub.SubActive })
	if s.ConsecutiveErrors != 0 || !s.FirstFailureAt.IsZero() {
		t.Fatalf("renewed registration keeps its errors: %+v", s.DeliveryState)
	}
	if want := e.clock.Now().Add(rsscloud.Lease); !s.ExpiresAt.Equal(want) {
		t.Fatalf("renewed expiry %v, want %v", s.ExpiresAt, want)
	}
	// The test notification and the changes it missed while suspended.
	rec.waitHits(t, 6)
	e.waitSub(sub.ID, "caught up", func(s *hub.Subscription) bool { return s.Cursor == 2 })
	e.publish("n", "c", "C", "")
	rec.waitHits(t, 7)
	e.quiet(rec, 7)
}

// TestRSSCloudExpiry: a registration not renewed expires after 25 hours;
// a change at that point is not notified even before the hub's expiry
// sweep removes it.
func TestRSSCloudExpiry(t *testing.T) {
	e := rssCloudEnv(t)
	e.node("n")
	rec := newReceiver(t, e.clock, answerStatus(200, ""))
	sub := e.subscribe(cloudSub("n", rec.URL+"/", rsscloud.HTTPPost, "", nil))
	e.waitSub(sub.ID, "active", func(s *hub.Subscription) bool { return s != nil && s.State == hub.SubActive })
	rec.waitHits(t, 1)

	e.clock.Advance(24*time.Hour + 59*time.Minute)
	if removed, err := e.store.DeleteExpiredSubscriptions(e.ctx, e.clock.Now()); err != nil || len(removed) != 0 {
		t.Fatalf("expired before 25 hours: %v %v", removed, err)
	}
	e.publish("n", "a", "A", "")
	rec.waitHits(t, 2)
	e.waitSub(sub.ID, "delivery saved", func(s *hub.Subscription) bool { return s.Cursor == 1 && s.LeaseOwner == "" })

	e.clock.Advance(time.Minute)
	e.publish("n", "b", "B", "")
	e.waitSub(sub.ID, "removed at expiry", func(s *hub.Subscription) bool { return s == nil })
	e.quiet(rec, 2)
}
