package component

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/hub/fetching"
	"github.com/pingd/pingd/internal/netguard"
	"github.com/pingd/pingd/internal/testenv"
)

// TestSubscriptionsWaitingForBaselinesDoNotStallTheComponent: subscribing to
// a node whose feed was never fetched waits for the feed's first fetch. More
// such subscriptions than the component has workers, to feeds whose server
// hangs, must not stop other requests: a disco#info sent after them is
// answered while they all still wait, and they are answered once the feeds
// are fetched.
func TestSubscriptionsWaitingForBaselinesDoNotStallTheComponent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prosody")
	}
	release := make(chan struct{})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/rss+xml")
		fmt.Fprint(w, `<rss version="2.0"><channel><title>Feed</title><link>http://example.org/</link><item><guid>a</guid><title>A</title></item></channel></rss>`)
	}))
	defer origin.Close()
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce() // before the server closes: deferred calls run last in, first out

	e := newEnv(t, envOptions{hub: func(c *hub.Config) {
		c.Fetcher = feed.NewFetcher(feed.FetcherConfig{AllowPrivate: true})
	}, fetching: func(c *fetching.Config) {
		c.BaselineWait = 2 * time.Minute // longer than the test: only the fetches end the waits
	}})
	const slow = requestWorkers + 2
	var created sync.WaitGroup
	for i := range slow {
		// The nodes are created without waiting for their baselines (the
		// context ends the wait); their fetches hang.
		created.Go(func() {
			ctx, cancel := context.WithTimeout(e.ctx, time.Second)
			defer cancel()
			spec := hub.NodeSpec{Name: fmt.Sprintf("feed%d", i), Source: fmt.Sprintf("%s/feed%d", origin.URL, i), Config: hub.DefaultNodeConfig()}
			if _, _, err := e.hub.CreateNode(ctx, spec); err != nil {
				t.Errorf("create %s: %v", spec.Name, err)
			}
		})
	}
	created.Wait()
	if t.Failed() {
		return
	}

	alice := e.dial("alice", "phone")
	answers := make(chan string, slow)
	for i := range slow {
		go func() {
			ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
			defer cancel()
			resp, err := alice.SendRaw(ctx, fmt.Sprintf(`<iq type="set" to=%q id="sub%d">%s</iq>`,
				e.p.ComponentDomain, i, subscribePayload(fmt.Sprintf("feed%d", i), alice.JID.String())))
			if err != nil {
				resp = "error: " + err.Error()
			}
			answers <- resp
		}()
	}
	// Every subscription is waiting: the origin has their fetches (two at a
	// time per host, the rest due) and nothing was answered.
	testenv.WaitFor(t, 20*time.Second, "the subscriptions to be received", func() bool {
		subs, err := e.hub.Subscriptions(e.ctx, hub.SubscriptionFilter{Kind: hub.KindXMPP})
		return err == nil && len(subs) == slow
	})
	info := result(t, e.request(alice, "get", `<query xmlns="http://jabber.org/protocol/disco#info"/>`))
	if find(info, "query", "identity") == nil {
		t.Errorf("disco#info answer without an identity: %s", info.standalone())
	}
	select {
	case a := <-answers:
		t.Fatalf("a subscription was answered before its feed was fetched: %s", a)
	default:
	}
	releaseOnce()
	for range slow {
		select {
		case a := <-answers:
			el, err := parseDocument([]byte(a))
			if err != nil {
				t.Fatalf("answer %q: %v", a, err)
			}
			if sub := find(result(t, el), "pubsub", "subscription"); sub == nil || sub.attr("subscription") != "subscribed" {
				t.Errorf("subscription answer: %s", a)
			}
		case <-time.After(time.Minute):
			t.Fatal("the subscriptions were not answered after their feeds were fetched")
		}
	}
}

// TestChatCommandsFindingFeedsDoNotStallTheComponent: "subscribe <page>"
// in a chat makes pingd fetch the page to find its feed. More such
// commands than the component has workers, from as many resources, to
// pages whose server hangs, must not stop other requests; and the
// look-ups have bounds of their own: two at once per JID (the others of
// that JID are refused at once, before any request), four in the whole
// process (a fifth JID is refused too).
func TestChatCommandsFindingFeedsDoNotStallTheComponent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prosody")
	}
	release := make(chan struct{})
	var asked atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Page</title></head><body>no feed here</body></html>`)
	}))
	defer site.Close()
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce()

	e := newEnv(t, envOptions{})
	e.p.Register("carol", password)
	e.stop()
	e.startComponentWith(func(c *Config) {
		c.OpenSources = true
		c.Resolver = &discovery.Client{HTTP: netguard.NewClient(netguard.Options{AllowPrivate: true, Timeout: time.Minute})}
		c.LookupTimeout = time.Minute // longer than the test: only the release ends the look-ups
	})
	const slow = requestWorkers + 2
	clients := make([]*testenv.Client, slow)
	for i := range clients {
		clients[i] = e.dial("alice", fmt.Sprintf("r%d", i))
	}
	say := func(c *testenv.Client, body string) {
		t.Helper()
		if _, err := c.SendRaw(e.ctx, fmt.Sprintf(`<message type="chat" to=%q><body>%s</body></message>`, e.p.ComponentDomain, body)); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range clients {
		say(c, fmt.Sprintf("subscribe %s/page%d", site.URL, i))
	}
	// Two look up their pages; the other resources are told at once.
	testenv.WaitFor(t, 20*time.Second, "two pages to be asked for", func() bool { return asked.Load() == 2 })
	answered := map[int]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for len(answered) < slow-2 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of alice's resources were refused while two look-ups run", len(answered))
		}
		for i, c := range clients {
			select {
			case raw := <-c.Stanzas:
				if el, err := parseDocument(raw); err == nil && el.Name.Local == "message" && el.attr("type") == "chat" {
					if !strings.Contains(bodyOf(el), "still looking at other pages for you") || answered[i] {
						t.Fatalf("resource %d was answered %q before its page was fetched", i, bodyOf(el))
					}
					answered[i] = true
				}
			default:
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	bob := e.dial("bob", "x")
	result(t, e.request(bob, "get", `<query xmlns="http://jabber.org/protocol/disco#info"/>`))
	// Other JIDs take the process's two other places; a third is refused.
	carol := e.dial("carol", "x")
	say(bob, "subscribe "+site.URL+"/bob")
	say(carol, "subscribe "+site.URL+"/carol")
	testenv.WaitFor(t, 20*time.Second, "four pages to be asked for", func() bool { return asked.Load() == 4 })
	admin := e.dial("admin", "x")
	if got := chatSay(t, e, admin, "subscribe "+site.URL+"/admin"); !strings.Contains(got, "busy looking at pages for others") {
		t.Errorf("a fifth look-up answered %q, want the process's refusal", got)
	}
	if n := asked.Load(); n != 4 {
		t.Fatalf("%d pages asked for, want 4", n)
	}
	releaseOnce()
	waiting := []*testenv.Client{bob, carol}
	for i, c := range clients {
		if !answered[i] {
			waiting = append(waiting, c)
		}
	}
	if len(waiting) != 4 {
		t.Fatalf("%d look-ups waiting, want 4", len(waiting))
	}
	for _, c := range waiting {
		msg := nextMessage(t, c, 30*time.Second, func(el *element) bool { return el.attr("type") == "chat" })
		if answer := bodyOf(msg); !strings.Contains(answer, "could not find a feed") {
			t.Errorf("%s: answer %q, want that no feed was found", c.JID, answer)
		}
	}
}
