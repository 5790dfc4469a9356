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
	waitFor(t, 20*time.Second, "the subscriptions to be received", func() bool {
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
// pages whose server hangs, must not stop other requests.
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
	e.stop()
	e.startComponentWith(func(c *Config) {
		c.OpenSources = true
		c.Resolver = &discovery.Client{HTTP: netguard.NewClient(netguard.Options{AllowPrivate: true, Timeout: time.Minute})}
	})
	const slow = requestWorkers + 2
	clients := make([]*testenv.Client, slow)
	for i := range clients {
		clients[i] = e.dial("alice", fmt.Sprintf("r%d", i))
	}
	for i, c := range clients {
		body := fmt.Sprintf("subscribe %s/page%d", site.URL, i)
		if _, err := c.SendRaw(e.ctx, fmt.Sprintf(`<message type="chat" to=%q><body>%s</body></message>`, e.p.ComponentDomain, body)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "every page to be asked for", func() bool { return asked.Load() == slow })
	bob := e.dial("bob", "x")
	result(t, e.request(bob, "get", `<query xmlns="http://jabber.org/protocol/disco#info"/>`))
	for i, c := range clients {
	drain:
		for {
			select {
			case raw := <-c.Stanzas:
				if el, err := parseDocument(raw); err == nil && el.Name.Local == "message" && el.attr("type") == "chat" {
					t.Fatalf("resource %d had an answer before its page was fetched: %s", i, raw)
				}
			default:
				break drain
			}
		}
	}
	releaseOnce()
	for i, c := range clients {
		msg := nextMessage(t, c, 30*time.Second, func(el *element) bool { return el.attr("type") == "chat" })
		answer := msg.child(msg.Name.Space, "body").text()
		if !strings.Contains(answer, "could not find a feed") {
			t.Errorf("resource %d: answer %q, want that no feed was found", i, answer)
		}
	}
}
