package delivery_test

import (
	"encoding/xml"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/hub"
)

func cnwsEnv(t *testing.T) *dialectEnv {
	return newDialectEnv(t, func(s delivery.HTTPSender, _ delivery.SourceReader, now func() time.Time) map[hub.Kind]delivery.Sender {
		return map[hub.Kind]delivery.Sender{hub.KindCNWS: &delivery.CNWS{HTTPSender: s, Now: now}}
	})
}

const cnwsResource = "http://news.example.org/"

const cnwsTrue = `<?xml version="1.0"?><notification version="1.0" xmlns="http://www.owlfish.com/thoughts/cnws-2003-04-08.html"><result><status>true</status></result></notification>`
const cnwsFalse = `<?xml version="1.0"?><notification version="1.0" xmlns="http://www.owlfish.com/thoughts/cnws-2003-04-08.html"><result><status>false</status></result></notification>`

func cnwsSub(node, callback string) hub.Subscription {
	return hub.Subscription{NodeName: node, Kind: hub.KindCNWS, Address: callback, State: hub.SubActive,
		Options: hub.Options{Topic: cnwsResource}}
}

// resourceChange is the part of a CNWS notification the tests read.
type resourceChange struct {
	XMLName xml.Name `xml:"http://www.owlfish.com/thoughts/cnws-2003-04-08.html notification"`
	Version string   `xml:"version,attr"`
	Change  struct {
		ResourceID  string `xml:"resourceID"`
		ChangeTime  string `xml:"changeTime"`
		Title       string `xml:"title"`
		Description string `xml:"description"`
	} `xml:"resourceChange"`
}

func decodeChange(t *testing.T, h hit) resourceChange {
	t.Helper()
	var rc resourceChange
	if err := xml.Unmarshal([]byte(h.Body), &rc); err != nil {
		t.Fatalf("not a CNWS notification: %v\n%s", err, h.Body)
	}
	if rc.Version != "1.0" {
		t.Errorf("version %q", rc.Version)
	}
	if h.Method != http.MethodPost || !strings.HasPrefix(h.Header.Get("Content-Type"), "text/xml") {
		t.Errorf("%s with content type %q", h.Method, h.Header.Get("Content-Type"))
	}
	return rc
}

// TestCNWSNotification: one <resourceChange> per batch, carrying the
// resource's URL, a change time, and the newest item's title and summary;
// a publisher's note wins over the items.
func TestCNWSNotification(t *testing.T) {
	e := cnwsEnv(t)
	n := e.node("n")
	rec := newReceiver(t, e.clock, answerStatus(200, cnwsTrue))
	sub := e.subscribe(cnwsSub("n", rec.URL+"/cnws"))
	if sub.State != hub.SubActive {
		t.Fatalf("CNWS subscription state %q, want active at once", sub.State)
	}
	e.publishAll("n", testEntry("a", "First", "one"), testEntry("b", "Second post", "the <b>second</b> one"))
	hits := rec.waitHits(t, 1)
	rc := decodeChange(t, hits[0])
	if rc.Change.ResourceID != cnwsResource || rc.Change.Title != "Second post" || rc.Change.Description != "the <b>second</b> one" {
		t.Fatalf("notification %+v", rc.Change)
	}
	if ct, err := http.ParseTime(rc.Change.ChangeTime); err != nil || time.Since(ct) > time.Hour {
		t.Fatalf("changeTime %q: %v", rc.Change.ChangeTime, err)
	}
	e.quiet(rec, 1)

	// A trusted change note (CNWS resourceChange from a publisher).
	long := strings.Repeat("é", 300)
	if _, err := e.store.Append(e.ctx, n.ID, []hub.Event{{Kind: hub.EventChange, Title: long, Summary: "said \x01the publisher"}}); err != nil {
		t.Fatal(err)
	}
	e.engine.Wake(n.ID)
	hits = rec.waitHits(t, 2)
	rc = decodeChange(t, hits[1])
	if want := strings.Repeat("é", 255); rc.Change.Title != want {
		t.Fatalf("title not cut to 255 characters: %d", len([]rune(rc.Change.Title)))
	}
	if rc.Change.Description != "said the publisher" {
		t.Fatalf("description %q", rc.Change.Description)
	}
	e.waitSub(sub.ID, "delivered", func(s *hub.Subscription) bool { return s.Cursor == 3 && s.LastStatus == 200 })
}

// TestCNWSRemoval: a false status and an HTTP error remove the subscriber
// at once, without retries.
func TestCNWSRemoval(t *testing.T) {
	for name, answer := range map[string]func(http.ResponseWriter, hit){
		"status false": answerStatus(200, cnwsFalse),
		"HTTP 404":     answerStatus(404, "no"),
		"HTTP 500":     answerStatus(500, cnwsTrue),
		"HTTP 301":     answerStatus(301, ""),
	} {
		t.Run(name, func(t *testing.T) {
			e := cnwsEnv(t)
			e.node("n")
			rec := newReceiver(t, e.clock, answer)
			sub := e.subscribe(cnwsSub("n", rec.URL+"/"))
			e.publish("n", "a", "A", "")
			e.waitSub(sub.ID, "removed", func(s *hub.Subscription) bool { return s == nil })
			e.publish("n", "b", "B", "")
			e.advance(time.Hour)
			e.quiet(rec, 1)
		})
	}
}

// TestCNWSAgeing: a host that cannot be contacted is retried for 24 hours
// with a last retry at the end, then removed; a host that comes back in
// time gets what it missed and a clean record.
func TestCNWSAgeing(t *testing.T) {
	// A port with nothing listening: connection refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() + "/cnws"
	l.Close()

	e := cnwsEnv(t)
	e.node("n")
	start := e.clock.Now()
	sub := e.subscribe(cnwsSub("n", dead))
	e.publish("n", "a", "A", "")
	s := e.waitSub(sub.ID, "first failure", func(s *hub.Subscription) bool { return s.ConsecutiveErrors == 1 })
	if !s.FirstFailureAt.Equal(start) || s.State != hub.SubActive {
		t.Fatalf("after the first failure: %+v", s)
	}
	// Retries with backoff (at most an hour and a fifth apart) through the day.
	for i := 2; e.clock.Now().Before(start.Add(22 * time.Hour)); i++ {
		e.advance(75 * time.Minute)
		e.waitSub(sub.ID, "another retry", func(s *hub.Subscription) bool { return s != nil && s.ConsecutiveErrors == i })
	}
	deadline := start.Add(24 * time.Hour)
	e.advance(deadline.Add(-time.Minute).Sub(e.clock.Now()))
	e.waitSub(sub.ID, "the last retry scheduled at the end of the 24 hours", func(s *hub.Subscription) bool {
		return s != nil && s.NextAttemptAt.Equal(deadline)
	})
	e.engine.Settle(t)
	if e.sub(sub.ID) == nil {
		t.Fatal("removed before 24 hours")
	}
	e.advance(time.Minute) // the last retry
	e.waitSub(sub.ID, "removed after the last retry", func(s *hub.Subscription) bool { return s == nil })

	// A host that comes back within the day gets everything it missed,
	// in one notification, and a clean record.
	sub = e.subscribe(cnwsSub("n", dead))
	e.publish("n", "b", "B", "")
	e.waitSub(sub.ID, "failure", func(s *hub.Subscription) bool { return s.ConsecutiveErrors == 1 })
	e.publish("n", "c", "C", "")
	back := newReceiverOn(t, l.Addr().String(), e.clock, answerStatus(200, cnwsTrue))
	e.advance(time.Hour)
	s = e.waitSub(sub.ID, "delivered", func(s *hub.Subscription) bool { return s.Cursor == 3 })
	if s.ConsecutiveErrors != 0 || !s.FirstFailureAt.IsZero() {
		t.Fatalf("after recovery: %+v", s.DeliveryState)
	}
	hits := back.waitHits(t, 1)
	if rc := decodeChange(t, hits[0]); rc.Change.Title != "C" {
		t.Fatalf("catch-up notification about %q, want the newest change", rc.Change.Title)
	}
	e.quiet(back, 1)
}

// TestCNWSRetryLimit: the ageing lasts the configured limit, not 24
// hours: a host unreachable for longer than a day is still retried, gets
// its last retry at the end of the limit and is removed after it.
func TestCNWSRetryLimit(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() + "/cnws"
	l.Close()

	const limit = 36 * time.Hour
	e := newDialectEnv(t, func(s delivery.HTTPSender, _ delivery.SourceReader, now func() time.Time) map[hub.Kind]delivery.Sender {
		return map[hub.Kind]delivery.Sender{hub.KindCNWS: &delivery.CNWS{HTTPSender: s, Now: now, RetryLimit: limit}}
	})
	e.node("n")
	start := e.clock.Now()
	sub := e.subscribe(cnwsSub("n", dead))
	e.publish("n", "a", "A", "")
	e.waitSub(sub.ID, "first failure", func(s *hub.Subscription) bool { return s.ConsecutiveErrors == 1 })
	for i := 2; e.clock.Now().Before(start.Add(limit - 2*time.Hour)); i++ {
		e.advance(75 * time.Minute)
		e.waitSub(sub.ID, "another retry", func(s *hub.Subscription) bool { return s != nil && s.ConsecutiveErrors == i })
	}
	// Follow the jittered retries to the end of the limit: each one is
	// scheduled no later than the deadline, and the one that reaches it
	// is the last.
	deadline := start.Add(limit)
	for {
		s := e.sub(sub.ID)
		if s == nil {
			t.Fatal("removed before the end of the limit")
		}
		if s.NextAttemptAt.After(deadline) {
			t.Fatalf("retry scheduled at %v, after the end of the limit %v", s.NextAttemptAt, deadline)
		}
		if s.NextAttemptAt.Equal(deadline) {
			break
		}
		errs := s.ConsecutiveErrors
		e.advance(s.NextAttemptAt.Sub(e.clock.Now()))
		e.waitSub(sub.ID, "a retry before the end of the limit", func(s *hub.Subscription) bool {
			return s != nil && s.ConsecutiveErrors == errs+1
		})
	}
	e.advance(deadline.Sub(e.clock.Now())) // the last retry
	e.waitSub(sub.ID, "removed after the last retry", func(s *hub.Subscription) bool { return s == nil })
}

// TestCNWSUnavailableAges: a gateway's 503 ages like an unreachable host
// rather than removing the subscriber; when the host is back the missed
// changes come in one notification and the record is clean.
func TestCNWSUnavailableAges(t *testing.T) {
	e := cnwsEnv(t)
	e.node("n")
	rec := newReceiver(t, e.clock, answerStatus(503, "down for maintenance"))
	sub := e.subscribe(cnwsSub("n", rec.URL+"/"))
	e.publish("n", "a", "A", "")
	e.waitSub(sub.ID, "first failure", func(s *hub.Subscription) bool { return s.ConsecutiveErrors == 1 })
	e.advance(2 * time.Minute)
	e.waitSub(sub.ID, "second failure", func(s *hub.Subscription) bool { return s.ConsecutiveErrors == 2 })

	rec.setAnswer(answerStatus(200, cnwsTrue))
	e.publish("n", "b", "B", "")
	e.advance(5 * time.Minute)
	s := e.waitSub(sub.ID, "delivered", func(s *hub.Subscription) bool { return s.Cursor == 2 })
	if s.ConsecutiveErrors != 0 || !s.FirstFailureAt.IsZero() || s.State != hub.SubActive {
		t.Fatalf("after recovery: %+v", s.DeliveryState)
	}
	hits := rec.Hits()
	if rc := decodeChange(t, hits[len(hits)-1]); rc.Change.Title != "B" {
		t.Fatalf("the catch-up notification is about %q, want the newest item", rc.Change.Title)
	}
	// An answer that is not a CNWS document is taken as delivered.
	rec.setAnswer(answerStatus(200, "OK"))
	e.publish("n", "c", "C", "")
	e.waitSub(sub.ID, "delivered", func(s *hub.Subscription) bool { return s.Cursor == 3 })
}
