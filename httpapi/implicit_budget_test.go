package httpapi_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/httpapi"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// subscribeAsReader sends a WebSub subscription from the client at addr
// (through a trusted proxy's X-Forwarded-For; "" for the TCP peer) the way
// a well-behaved feed reader does: a 429 for its subscription rate is
// waited out as Retry-After says. It returns the first other answer and
// its body.
func (e *dialectEnv) subscribeAsReader(addr, topic, callback string) (*http.Response, string) {
	e.t.Helper()
	var header []string
	if addr != "" {
		header = []string{"X-Forwarded-For", addr}
	}
	for {
		v := map[string][]string{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.callback": {callback}}
		resp := e.form("/websub", v, header...)
		body := readAll(resp)
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "too many subscription requests") {
			return resp, body
		}
		secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || secs < 1 || secs > 10 {
			e.t.Fatalf("subscription rate refusal with Retry-After %q", resp.Header.Get("Retry-After"))
		}
		time.Sleep(time.Duration(secs) * time.Second)
	}
}

// TestFeedReaderMoves300Subscriptions: with the default budgets, a feed
// reader moving its 300 subscriptions to pingd from one address (to URLs
// no node follows yet) gets every one; a few more new URLs at once are
// refused (429, the per-address budget), while subscribing to a followed
// URL still works.
func TestFeedReaderMoves300Subscriptions(t *testing.T) {
	e := newDialectEnv(t)
	rc := webSubSubscriber(t)
	var topics []string
	for i := range 300 {
		topic := e.newTopic(fmt.Sprintf("/reader/%d.xml", i))
		topics = append(topics, topic)
		if resp, body := e.subscribeAsReader("", topic, rc.URL+"/cb"); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("subscription %d of 300: HTTP %d %s", i+1, resp.StatusCode, body)
		}
	}
	for _, topic := range topics {
		if !e.followed(topic) {
			t.Fatalf("no node follows %s", topic)
		}
	}
	// The budget refills at one URL every 12 s: the few seconds the 300
	// took may have added one or two, never many.
	limited := false
	for i := range 5 {
		resp, body := e.subscribeAsReader("", e.newTopic(fmt.Sprintf("/reader/more-%d.xml", i)), rc.URL+"/cb")
		if resp.StatusCode == http.StatusTooManyRequests && strings.Contains(body, "new URLs to follow") && resp.Header.Get("Retry-After") != "" {
			limited = true
			break
		}
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("a new URL past the 300: HTTP %d %s", resp.StatusCode, body)
		}
	}
	if !limited {
		t.Error("five more new URLs from the address within the minute were all taken")
	}
	if resp, body := e.subscribeAsReader("", topics[0], rc.URL+"/other"); resp.StatusCode != http.StatusAccepted {
		t.Errorf("subscribe to a followed URL past the budget: HTTP %d %s", resp.StatusCode, body)
	}
}

// TestStrangersMeetTheImplicitNodeCap: strangers subscribing from ever new
// addresses to ever new URLs fill at most the cap on implicit nodes; past
// it a new URL is refused with a clear answer (503, Retry-After, saying the
// server follows no more new URLs), nothing is created for it, and what was
// there before is kept: the nodes, their subscriptions, and new
// subscriptions to URLs followed already.
func TestStrangersMeetTheImplicitNodeCap(t *testing.T) {
	const capacity = 40
	e := newDialectEnvHub(t, func(c *hub.Config) { c.MaxImplicitNodes = capacity }, func(c *httpapi.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	rc := webSubSubscriber(t)
	var topics []string
	refused := 0
	for i := range capacity + 20 {
		topic := e.newTopic(fmt.Sprintf("/stranger/%d.xml", i))
		addr := fmt.Sprintf("198.51.100.%d", i%250+1)
		resp, body := e.subscribeAsReader(addr, topic, rc.URL+"/cb")
		switch resp.StatusCode {
		case http.StatusAccepted:
			topics = append(topics, topic)
		case http.StatusServiceUnavailable:
			refused++
			if !strings.Contains(body, "no more new URLs to follow") || resp.Header.Get("Retry-After") == "" {
				t.Errorf("refusal past the cap: %s (Retry-After %q)", body, resp.Header.Get("Retry-After"))
			}
			if e.followed(topic) {
				t.Errorf("a node was created past the cap for %s", topic)
			}
		default:
			t.Fatalf("subscription %d: HTTP %d %s", i, resp.StatusCode, body)
		}
	}
	if len(topics) != capacity || refused != 20 {
		t.Fatalf("%d new URLs taken, %d refused; want %d and 20", len(topics), refused, capacity)
	}
	for _, topic := range topics {
		if !e.followed(topic) {
			t.Errorf("%s lost its node", topic)
		}
	}
	testenv.WaitFor(t, 15*time.Second, "every subscription taken to be verified", func() bool {
		active := 0
		for _, topic := range topics {
			for _, s := range e.webSubSubs(topic) {
				if s.State == hub.SubActive {
					active++
				}
			}
		}
		return active == capacity
	})
	if resp, body := e.subscribeAsReader("203.0.113.9", topics[0], rc.URL+"/late"); resp.StatusCode != http.StatusAccepted {
		t.Errorf("subscribe to a followed URL at the cap: HTTP %d %s", resp.StatusCode, body)
	}
}
