package delivery_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/websub"
)

func webSubEnv(t *testing.T) *dialectEnv {
	return newDialectEnv(t, func(s delivery.HTTPSender, st delivery.SourceReader, now func() time.Time) map[hub.Kind]delivery.Sender {
		return map[hub.Kind]delivery.Sender{hub.KindWebSub: &delivery.WebSub{HTTPSender: s, Store: st, Now: now, BaselineWait: time.Second}}
	})
}

func webSubCallback(w http.ResponseWriter, h hit) {
	if c := url.Values(h.Query).Get("hub.challenge"); h.Method == http.MethodGet && c != "" {
		_, _ = io.WriteString(w, c)
	}
}

// TestWebSubLeaseLifetime: the lease is echoed in the verification and
// ends the subscription: past it, nothing is distributed.
func TestWebSubLeaseLifetime(t *testing.T) {
	e := webSubEnv(t)
	e.node("n")
	rec := newReceiver(t, e.clock, webSubCallback)
	start := e.clock.Now()
	sub := e.subscribe(hub.Subscription{NodeName: "n", Kind: hub.KindWebSub, Address: rec.URL + "/cb", State: hub.SubPending,
		Options: hub.Options{LeaseSeconds: 3600}})
	s := e.waitSub(sub.ID, "verified", func(s *hub.Subscription) bool { return s != nil && s.State == hub.SubActive })
	v := rec.Hits()[0]
	if v.Query["hub.lease_seconds"][0] != "3600" || v.Query["hub.mode"][0] != "subscribe" || v.Query["hub.topic"][0] != "http://pingd.test/atom/n" {
		t.Fatalf("verification %v", v.Query)
	}
	if !s.ExpiresAt.Equal(start.Add(time.Hour)) {
		t.Fatalf("expires %v, want an hour after verification", s.ExpiresAt)
	}
	e.publish("n", "a", "A", "")
	d := rec.waitHits(t, 2)[1]
	if d.Method != http.MethodPost || !strings.HasPrefix(d.Header.Get("Content-Type"), "application/atom+xml") ||
		d.Header.Get("Link") != `<http://pingd.test/websub>; rel="hub", <http://pingd.test/atom/n>; rel="self"` {
		t.Fatalf("distribution %s %v", d.Method, d.Header)
	}
	// Moving the clock past a live claim would hand it out again.
	e.waitSub(sub.ID, "delivery saved", func(s *hub.Subscription) bool { return s.Cursor == 1 && s.LeaseOwner == "" })
	e.clock.Advance(time.Hour)
	e.publish("n", "b", "B", "")
	e.waitSub(sub.ID, "removed at the end of its lease", func(s *hub.Subscription) bool { return s == nil })
	e.quiet(rec, 2)
}

// TestWebSubDistributionFailures: 410 removes the subscriber; other
// errors are retried.
func TestWebSubDistributionFailures(t *testing.T) {
	e := webSubEnv(t)
	e.node("n")
	rec := newReceiver(t, e.clock, webSubCallback)
	sub := e.subscribe(hub.Subscription{NodeName: "n", Kind: hub.KindWebSub, Address: rec.URL + "/cb", State: hub.SubPending})
	s := e.waitSub(sub.ID, "verified", func(s *hub.Subscription) bool { return s != nil && s.State == hub.SubActive })
	if v := rec.Hits()[0]; v.Query["hub.lease_seconds"][0] != "864000" || !s.ExpiresAt.Equal(e.clock.Now().Add(10*24*time.Hour)) {
		t.Fatalf("default lease: %v, expires %v", v.Query, s.ExpiresAt)
	}
	rec.setAnswer(answerStatus(500, ""))
	e.publish("n", "a", "A", "")
	e.waitSub(sub.ID, "retry scheduled", func(s *hub.Subscription) bool { return s.ConsecutiveErrors == 1 && !s.NextAttemptAt.IsZero() })
	rec.setAnswer(answerStatus(410, ""))
	e.advance(2 * time.Minute)
	e.waitSub(sub.ID, "removed on 410", func(s *hub.Subscription) bool { return s == nil })
	e.quiet(rec, 3)
}

// TestWebSubDenialNotice: a request pingd refused, or whose topic could
// not be fetched, gets hub.mode=denied instead of a verification, and is
// dropped; pingd's own feed of a node whose source fails is verified.
func TestWebSubDenialNotice(t *testing.T) {
	e := webSubEnv(t)
	e.node("n")
	rec := newReceiver(t, e.clock, webSubCallback)
	sub := e.subscribe(hub.Subscription{NodeName: "n", Kind: hub.KindWebSub, Address: rec.URL + "/cb?k=v", State: hub.SubPending,
		Options: hub.Options{Topic: "http://pingd.test/rss/n", Verify: map[string]string{websub.VerifyDenied: "not for you"}}})
	e.waitSub(sub.ID, "dropped", func(s *hub.Subscription) bool { return s == nil })
	q := rec.Hits()[0].Query
	if q["hub.mode"][0] != "denied" || q["hub.topic"][0] != "http://pingd.test/rss/n" || q["hub.reason"][0] != "not for you" || q["k"][0] != "v" {
		t.Fatalf("denial %v", q)
	}
	if _, ok := q["hub.challenge"]; ok {
		t.Fatal("a denial carries a challenge")
	}

	// A node following a source that is gone.
	n, _, err := e.hub.CreateNode(e.ctx, hub.NodeSpec{Name: "gone", Source: "http://example.org/gone", Config: hub.DefaultNodeConfig()})
	if err != nil {
		t.Fatal(err)
	}
	markGone(t, e, n.SourceID)
	sub = e.subscribe(hub.Subscription{NodeName: "gone", Kind: hub.KindWebSub, Address: rec.URL + "/cb2", State: hub.SubPending,
		Options: hub.Options{Topic: "http://example.org/gone"}})
	e.waitSub(sub.ID, "dropped", func(s *hub.Subscription) bool { return s == nil })
	if q := rec.Hits()[1].Query; q["hub.mode"][0] != "denied" || !strings.Contains(q["hub.reason"][0], "gone") {
		t.Fatalf("denial %v", q)
	}

	// pingd's own feed of that node is there whatever its source does:
	// a subscription to it is verified, not denied.
	sub = e.subscribe(hub.Subscription{NodeName: "gone", Kind: hub.KindWebSub, Address: rec.URL + "/cb3", State: hub.SubPending,
		Options: hub.Options{Topic: "http://pingd.test/atom/gone"}})
	e.waitSub(sub.ID, "verified", func(s *hub.Subscription) bool { return s != nil && s.State == hub.SubActive })
	if q := rec.Hits()[2].Query; q["hub.mode"][0] != "subscribe" || q["hub.topic"][0] != "http://pingd.test/atom/gone" {
		t.Fatalf("verification %v", q)
	}
}

// markGone records a fetch of the source that answered 410.
func markGone(t *testing.T, e *dialectEnv, sourceID int64) {
	t.Helper()
	src, err := e.store.Source(context.Background(), sourceID)
	if err != nil {
		t.Fatal(err)
	}
	st := src.SourceState
	st.Gone, st.LastStatus, st.LastFetchAt = true, http.StatusGone, e.clock.Now()
	if _, err := e.store.ApplyFetch(context.Background(), hub.FetchOutcome{SourceID: sourceID, State: st}); err != nil {
		t.Fatal(err)
	}
}
