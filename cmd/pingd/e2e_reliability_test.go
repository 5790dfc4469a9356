package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mmcdole/gofeed"
	_ "modernc.org/sqlite" // reads pingd's database file and locks it

	"github.com/pingd/pingd/internal/testenv"
)

// The reliability tests put the real pingd binary through faults while it
// fans out to real subscribers: kill -9 at random moments, the XMPP server
// stopped and killed, slow and broken receivers, a locked and a full
// database, and a graceful SIGTERM. Each runs briefly in `make test`;
// soak_test.go has the long versions (`make soak`). The results and the
// commands are in docs/reliability.md.

// relRand is the tests' random source; PINGD_SEED replays a run.
func relRand(t testing.TB) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PINGD_SEED"); s != "" {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			seed = n
		}
	}
	t.Logf("random seed %d (PINGD_SEED=%d replays it)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x5eed))
}

// relTally counts how often each subscriber got each item, and when it
// got it first.
type relTally struct {
	mu    sync.Mutex
	n     map[string]map[string]int
	first map[string]map[string]time.Time
	// wrongIDs are notifications whose item id is not the item's.
	wrongIDs []string
}

func (c *relTally) misnamed(sub, got, want string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wrongIDs = append(c.wrongIDs, fmt.Sprintf("%s got item id %q for %q", sub, got, want))
}

func newRelTally() *relTally {
	return &relTally{n: map[string]map[string]int{}, first: map[string]map[string]time.Time{}}
}

func (c *relTally) add(sub, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[sub] == nil {
		c.n[sub] = map[string]int{}
		c.first[sub] = map[string]time.Time{}
	}
	if c.n[sub][id] == 0 {
		c.first[sub][id] = time.Now()
	}
	c.n[sub][id]++
}

// has counts the (subscriber, item) pairs that arrived at least once.
func (c *relTally) has(subs, ids []string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range subs {
		for _, id := range ids {
			if c.n[s][id] > 0 {
				n++
			}
		}
	}
	return n
}

func (c *relTally) complete(subs, ids []string) bool { return c.has(subs, ids) == len(subs)*len(ids) }

// arrived returns when the subscriber first got the item (zero: never).
func (c *relTally) arrived(sub, id string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first[sub][id]
}

// summary lists the missing pairs and counts the pairs that came more
// than once and the extra copies; unexpected are items no one published.
func (c *relTally) summary(subs, ids []string) (missing []string, repeated, extra int, unexpected []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, s := range subs {
		for _, id := range ids {
			switch n := c.n[s][id]; {
			case n == 0:
				missing = append(missing, s+" "+id)
			case n > 1:
				repeated++
				extra += n - 1
			}
		}
		for id := range c.n[s] {
			if !want[id] {
				unexpected = append(unexpected, s+" "+id)
			}
		}
	}
	return missing, repeated, extra, append(unexpected, c.wrongIDs...)
}

// relItemID is the item id the tests give an item: its title is "Item "
// and the id, so XMPP notifications and Atom documents name it alike.
func relItemID(title string) string { return strings.TrimPrefix(title, "Item ") }

func relItems(prefix string, from, n int) []feedItem {
	out := make([]feedItem, n)
	for i := range out {
		id := fmt.Sprintf("%s-%05d", prefix, from+i)
		out[i] = feedItem{id, "Item " + id}
	}
	return out
}

func relIDs(items []feedItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.GUID
	}
	return out
}

// relListen feeds the item notifications c receives into the tally under
// name, until the test ends.
func relListen(t testing.TB, c *testenv.Client, name string, tally *relTally) {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case <-done:
				return
			case raw := <-c.Stanzas:
				var ev pubsubEvent
				if err := xml.Unmarshal(raw, &ev); err != nil || ev.XMLName.Local != "message" {
					continue
				}
				for _, it := range ev.Event.Items.Items {
					id := relItemID(it.Entry.Title)
					if it.ID != id {
						// Every copy, duplicates included, must carry the
						// item's own id.
						tally.misnamed(name, it.ID, id)
					}
					tally.add(name, id)
				}
			}
		}
	}()
}

// relHook is a webhook receiver: it confirms verifications, and what it
// does with a delivery is up to behave (nil: take it, count its entries
// and answer 204).
type relHook struct {
	t      testing.TB
	name   string
	tally  *relTally
	srv    *http.Server
	addr   string
	behave func(w http.ResponseWriter, r *http.Request, body []byte) bool

	mu       sync.Mutex
	posts    int
	statuses []int
}

func newRelHook(t testing.TB, name string, tally *relTally, behave func(w http.ResponseWriter, r *http.Request, body []byte) bool) *relHook {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &relHook{t: t, name: name, tally: tally, addr: ln.Addr().String(), behave: behave}
	h.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(h.serve)}
	go func() { _ = h.srv.Serve(ln) }()
	t.Cleanup(func() { _ = h.srv.Close() })
	return h
}

func (h *relHook) URL() string { return "http://" + h.addr + "/hook/" + h.name }

func (h *relHook) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		// The request was cut (pingd killed while sending it): no
		// delivery; pingd sends it again after the restart.
		return
	}
	if r.Method == http.MethodGet {
		_, _ = io.WriteString(w, r.URL.Query().Get("hub.challenge"))
		return
	}
	h.mu.Lock()
	h.posts++
	h.mu.Unlock()
	if h.behave != nil && h.behave(w, r, body) {
		return
	}
	f, err := gofeed.NewParser().Parse(bytes.NewReader(body))
	if err != nil {
		h.t.Errorf("%s: the delivery is not a feed: %v\n%.500s", h.name, err, body)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	for _, it := range f.Items {
		h.tally.add(h.name, relItemID(it.Title))
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *relHook) postCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.posts
}

// subscribeHook subscribes the receiver to the node over GetPingd.
func (d *daemon) subscribeHook(node string, h *relHook) {
	d.t.Helper()
	code, body := d.getPingdRequest(node, "application/getpingd+http+subscribe+xml", "",
		fmt.Sprintf(`<subscribe><url href="%s" method="POST" diff="none"/></subscribe>`, h.URL()))
	if code != http.StatusAccepted {
		d.t.Fatalf("webhook subscription of %s: HTTP %d %s", h.name, code, body)
	}
}

// relPing pings the URL the way a patient publisher does: it waits out a
// 429's Retry-After and a pingd that is restarting, and fails the test on
// any other refusal. It returns when the ping that was taken was sent.
func (d *daemon) relPing(u string) time.Time {
	d.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		sent := time.Now()
		resp, err := http.PostForm(d.URL+"/ping", url.Values{"url": {u}})
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK:
				return sent
			case resp.StatusCode == http.StatusTooManyRequests:
				secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
				time.Sleep(time.Duration(max(secs, 1)) * time.Second) // as told: the daemon's limit is on real time
			default:
				d.t.Fatalf("ping %s: HTTP %d %s", u, resp.StatusCode, body)
			}
		} else {
			time.Sleep(100 * time.Millisecond) // not listening yet, or restarting: try again
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("ping %s: not taken within a minute: %v", u, err)
		}
	}
}

// relSetup is one node fed by a feed server, with XMPP readers and webhook
// receivers subscribed, all counting into one tally.
type relSetup struct {
	p     *testenv.Prosody
	d     *daemon
	feed  *feedServer
	tally *relTally
	subs  []string // every subscriber's name in the tally
	hooks []*relHook
	conns []*testenv.Client
}

const relNode = "fanout"

// newRelSetup starts Prosody and pingd (extra: more environment), creates
// the node and subscribes xmppReaders readers and the given hooks (made
// with newRelHook on the returned tally by mkHooks).
func newRelSetup(t *testing.T, xmppReaders int, mkHooks func(tally *relTally) []*relHook, extra ...string) *relSetup {
	t.Helper()
	return newRelSetupOn(t, testenv.StartProsody(t, testenv.ProsodyOptions{}), xmppReaders, mkHooks, extra...)
}

// newRelSetupOn is newRelSetup on a Prosody the test started.
func newRelSetupOn(t *testing.T, p *testenv.Prosody, xmppReaders int, mkHooks func(tally *relTally) []*relHook, extra ...string) *relSetup {
	t.Helper()
	s := &relSetup{p: p, tally: newRelTally()}
	s.feed = newFeedServer(t, feedItem{"old", "Item old"})
	s.d = newDaemon(t, s.p, extra...)
	// Every run of these tests logs at debug level: none may log the
	// admin token or the component secret, whatever fault it went through.
	t.Cleanup(func() {
		if s.d.logs == nil {
			return
		}
		logs := s.d.logs.String()
		for name, secret := range map[string]string{"admin token": testAdminToken, "component secret": p.Secret} {
			if strings.Contains(logs, secret) {
				t.Errorf("pingd logged the %s", name)
			}
		}
	})
	s.d.Start(true)
	if code := s.d.api("POST", "/api/nodes", map[string]any{"node": relNode, "source": s.feed.URL, "max_items": 1000}, nil); code != 201 {
		t.Fatalf("create node: HTTP %d", code)
	}
	s.d.waitBaselined(relNode)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for i := range xmppReaders {
		user := fmt.Sprintf("reader%d", i)
		s.p.Register(user, "pw")
		c := testenv.Dial(ctx, t, s.p, user, "pw", "rel0")
		if resp := subscribe(t, ctx, c, s.p.ComponentDomain, relNode); !strings.Contains(resp, `subscription="subscribed"`) {
			t.Fatalf("subscribe %s: %s", user, resp)
		}
		// The node's newest item (the feed's entry at its first fetch) is
		// sent to the new subscription before anything is counted.
		wantNewestOnSubscribe(t, c, receivedItem{relNode, "old", "Item old"})
		name := user + "@" + s.p.Domain
		relListen(t, c, name, s.tally)
		s.subs = append(s.subs, name)
		s.conns = append(s.conns, c)
	}
	if mkHooks != nil {
		s.hooks = mkHooks(s.tally)
	}
	for _, h := range s.hooks {
		s.d.subscribeHook(relNode, h)
		s.subs = append(s.subs, h.name)
	}
	testenv.WaitFor(t, 30*time.Second, "every webhook verified", func() bool {
		active := 0
		for _, sub := range s.d.nodeSubscribers(relNode) {
			if sub.Kind == "webhook" && sub.State == "active" {
				active++
			}
		}
		return active == len(s.hooks)
	})
	return s
}

// publish adds the items to the feed and pings pingd; it returns when
// the ping was sent.
func (s *relSetup) publish(items []feedItem) time.Time {
	s.feed.Add(items...)
	return s.d.relPing(s.feed.URL)
}

// waitAll waits until every subscriber has every id, failing after limit.
func (s *relSetup) waitAll(t *testing.T, ids []string, limit time.Duration, what string) time.Duration {
	t.Helper()
	return s.waitSubs(t, s.subs, ids, limit, what)
}

// waitSubs waits until each of subs has every id, failing after limit.
func (s *relSetup) waitSubs(t *testing.T, subs, ids []string, limit time.Duration, what string) time.Duration {
	t.Helper()
	began := time.Now()
	deadline := began.Add(limit)
	for !s.tally.complete(subs, ids) {
		if time.Now().After(deadline) {
			missing, _, _, _ := s.tally.summary(subs, ids)
			t.Fatalf("%s: after %v, %d of %d notifications are missing, e.g. %v", what, limit, len(missing),
				len(subs)*len(ids), missing[:min(10, len(missing))])
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(began)
}

// TestKillDuringFanOut kills pingd with SIGKILL at random moments of a
// fan-out to XMPP and webhook subscribers, restarts it each time, and
// checks that after each restart every subscriber has every item
// published so far: 100 items × 10 subscribers (1,000 notifications),
// 3 kills. TestSoakKill10000 is the long version.
func TestKillDuringFanOut(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	runKillDuringFanOut(t, 100, 10, 3)
}

func runKillDuringFanOut(t *testing.T, items, batch, kills int) {
	const readers, hooks = 5, 5
	rnd := relRand(t)
	s := newRelSetup(t, readers, func(tally *relTally) []*relHook {
		var hs []*relHook
		for i := range hooks {
			hs = append(hs, newRelHook(t, fmt.Sprintf("hook%d", i), tally, nil))
		}
		return hs
	})
	t.Logf("fan-out of %d items to %d XMPP readers and %d webhooks: %d notifications, %d kills",
		items, readers, hooks, items*(readers+hooks), kills)

	warm := relItems("warm", 0, 1)
	s.publish(warm)
	s.waitAll(t, relIDs(warm), 30*time.Second, "warm-up")
	published := relIDs(warm)

	batches := items / batch
	killAt := map[int]bool{}
	for _, b := range rnd.Perm(batches)[:kills] {
		killAt[b] = true
	}
	var recoveries []time.Duration
	for b := range batches {
		next := relItems("item", b*batch, batch)
		s.publish(next)
		published = append(published, relIDs(next)...)
		if !killAt[b] {
			time.Sleep(time.Duration(200+rnd.IntN(400)) * time.Millisecond) // the publisher's pace
			continue
		}
		// A third of the kills come as soon as the ping is taken (the fetch
		// may still run), the others once a random share of the batch's
		// notifications has arrived.
		moment := "right after the ping was taken"
		if rnd.IntN(3) > 0 {
			share := 0.05 + 0.85*rnd.Float64()
			want := int(share * float64(len(next)*len(s.subs)))
			deadline := time.Now().Add(30 * time.Second)
			// Not a wait to pass: the kill comes at this share of the
			// fan-out, or after 30 s whatever has arrived.
			for s.tally.has(s.subs, relIDs(next)) < want && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			moment = fmt.Sprintf("once %.0f%% of the fan-out had arrived", 100*share)
		}
		have := s.tally.has(s.subs, relIDs(next))
		s.d.Kill()
		t.Logf("kill -9 %s (batch %d): %d of its %d notifications had arrived", moment, b, have, len(next)*len(s.subs))
		s.d.Start(true)
		// Leases the killed process held may have to run out (2 minutes
		// for deliveries) unless pingd takes them back at start.
		took := s.waitAll(t, published, 3*time.Minute, fmt.Sprintf("after the restart at batch %d", b))
		recoveries = append(recoveries, took)
		t.Logf("after the restart every subscriber had every item within %v", took.Round(10*time.Millisecond))
	}
	s.waitAll(t, published, 3*time.Minute, "at the end")
	time.Sleep(2 * time.Second) // late copies count as duplicates
	missing, repeated, extra, unexpected := s.tally.summary(s.subs, published)
	_, _, xmppExtra, _ := s.tally.summary(s.subs[:readers], published)
	slices.Sort(recoveries)
	t.Logf("%d notifications, %d kills: %d lost, %d (subscriber, item) pairs came more than once (%d extra copies, %.2f%%: "+
		"%d over XMPP, %d to webhooks, each with the item's own id); recovery after a restart: median %v, slowest %v",
		len(published)*len(s.subs), kills, len(missing), repeated, extra,
		100*float64(extra)/float64(len(published)*len(s.subs)), xmppExtra, extra-xmppExtra,
		median(recoveries).Round(10*time.Millisecond), recoveries[len(recoveries)-1].Round(10*time.Millisecond))
	if len(missing) > 0 {
		t.Errorf("lost: %v", missing[:min(20, len(missing))])
	}
	if len(unexpected) > 0 {
		t.Errorf("items no one published, or under another id: %v", unexpected[:min(20, len(unexpected))])
	}
}

// redial logs every reader in again (after the XMPP server restarted) and
// counts what the new sessions receive.
func (s *relSetup) redial(t *testing.T, round int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for i, old := range s.conns {
		old.Close()
		user := strings.TrimSuffix(s.subs[i], "@"+s.p.Domain)
		c := testenv.Dial(ctx, t, s.p, user, "pw", fmt.Sprintf("rel%d", round))
		relListen(t, c, s.subs[i], s.tally)
		s.conns[i] = c
	}
}

// retrieve asks pingd, as reader i, for the node's items with these ids
// (XEP-0060 §6.5.8) and returns the ids it has.
func (s *relSetup) retrieve(t *testing.T, i int, ids []string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	fmt.Fprintf(&b, `<iq type="get" to="%s" id="get1"><pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="%s">`, s.p.ComponentDomain, relNode)
	for _, id := range ids {
		fmt.Fprintf(&b, `<item id="%s"/>`, id)
	}
	b.WriteString(`</items></pubsub></iq>`)
	resp, err := s.conns[i].SendRaw(ctx, b.String())
	if err != nil {
		t.Fatalf("retrieve items: %v", err)
	}
	var r struct {
		Type  string `xml:"type,attr"`
		Items []struct {
			ID string `xml:"id,attr"`
		} `xml:"http://jabber.org/protocol/pubsub pubsub>items>item"`
	}
	if err := xml.Unmarshal([]byte(resp), &r); err != nil || r.Type != "result" {
		t.Fatalf("retrieve items: %v %s", err, resp)
	}
	var out []string
	for _, it := range r.Items {
		out = append(out, it.ID)
	}
	return out
}

// ready reports what /readyz answers.
func (d *daemon) ready() int {
	resp, err := http.Get(d.URL + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestXMPPServerRestartDuringFanOut stops Prosody (SIGTERM) and then kills
// it (SIGKILL) in the middle of a fan-out. /readyz follows the connection,
// pingd reconnects with backoff by itself, webhooks never notice, the
// items published while the server was down reach every XMPP reader once
// it is back, and every item stays retrievable. Notifications written to
// the server but not acknowledged when it went down are written again
// after the reconnection (at-least-once): at most what the server had
// routed to its clients' sessions but not yet written to their sockets can
// be lost (before the acknowledgements, about a fifth of the notifications
// of a round was); losses and duplicates are counted and reported.
func TestXMPPServerRestartDuringFanOut(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	runXMPPServerRestarts(t, 3, 200, 2)
}

// runXMPPServerRestarts takes the XMPP server down rounds times (stopped
// and killed in turn), each in the middle of a fan-out of batch items to
// readers XMPP readers and two webhooks.
func runXMPPServerRestarts(t *testing.T, readers, batch, rounds int) {
	const hooks = 2
	rnd := relRand(t)
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	// pingd reaches Prosody through a proxy the test opens only once the
	// readers are back, so that nothing is sent to readers still offline.
	proxy := testenv.StartProxy(t, p.ComponentAddr)
	s := newRelSetupOn(t, p, readers, func(tally *relTally) []*relHook {
		var hs []*relHook
		for i := range hooks {
			hs = append(hs, newRelHook(t, fmt.Sprintf("hook%d", i), tally, nil))
		}
		return hs
	}, "PINGD_XMPP_ADDR="+proxy.Addr)
	xmppSubs, hookSubs := s.subs[:readers], s.subs[readers:]

	var published []string
	lost := 0
	for round := range rounds {
		mode := "stopped (SIGTERM)"
		if round%2 == 1 {
			mode = "killed (SIGKILL)"
		}
		during := relItems(fmt.Sprintf("r%d-during", round), 0, batch)
		s.publish(during)
		published = append(published, relIDs(during)...)
		share := 0.05 + 0.45*rnd.Float64()
		want := int(share * float64(len(during)*readers))
		testenv.WaitFor(t, 30*time.Second, "the fan-out to be under way", func() bool { return s.tally.has(xmppSubs, relIDs(during)) >= want })
		if round%2 == 0 {
			p.Stop()
		} else {
			p.Kill()
		}
		down := time.Now()
		proxy.Block()
		t.Logf("round %d: Prosody %s once %d of %d XMPP notifications had arrived", round, mode,
			s.tally.has(xmppSubs, relIDs(during)), len(during)*readers)
		testenv.WaitFor(t, 20*time.Second, "/readyz to report the lost server", func() bool { return s.d.ready() == http.StatusServiceUnavailable })

		// While the server is down pings are taken and fetched; webhooks
		// get everything.
		backlog := relItems(fmt.Sprintf("r%d-backlog", round), 0, batch)
		hits := s.feed.Hits()
		s.publish(backlog)
		published = append(published, relIDs(backlog)...)
		testenv.WaitFor(t, 20*time.Second, "the fetch while the server is down", func() bool { return s.feed.Hits() > hits })
		s.waitSubs(t, hookSubs, published, 60*time.Second, "the webhooks while the XMPP server is down")
		time.Sleep(time.Duration(500+rnd.IntN(2000)) * time.Millisecond) // the XMPP server stays down a while
		if code := s.d.ready(); code != http.StatusServiceUnavailable {
			t.Errorf("/readyz answered %d while the XMPP server was down", code)
		}

		p.Start()
		s.redial(t, round+1)
		proxy.Allow()
		back := time.Now()
		testenv.WaitFor(t, 90*time.Second, "/readyz after the server came back", func() bool { return s.d.ready() == http.StatusOK })
		t.Logf("round %d: pingd ready again %v after the server came back (it was down for %v)", round,
			time.Since(back).Round(100*time.Millisecond), back.Sub(down).Round(100*time.Millisecond))
		s.waitSubs(t, xmppSubs, relIDs(backlog), 60*time.Second, "the backlog after the server came back")

		// What no notification brought must still be in the node. Late
		// notifications get room to arrive first (a real server on real
		// time), so that only the items none brought are retrieved.
		time.Sleep(500 * time.Millisecond)
		for i, sub := range xmppSubs {
			var absent []string
			for _, id := range relIDs(during) {
				if s.tally.arrived(sub, id).IsZero() {
					absent = append(absent, id)
				}
			}
			lost += len(absent)
			if len(absent) == 0 {
				continue
			}
			if got := s.retrieve(t, i, absent); len(got) != len(absent) {
				t.Errorf("%s: %d items neither notified nor retrievable", sub, len(absent)-len(got))
			}
		}
	}
	s.waitSubs(t, hookSubs, published, 60*time.Second, "webhooks")
	time.Sleep(time.Second) // room for duplicates to show (a real process on real time)
	missing, repeated, extra, _ := s.tally.summary(hookSubs, published)
	if len(missing) > 0 {
		t.Errorf("webhooks lost %d notifications: %v", len(missing), missing[:min(10, len(missing))])
	}
	_, xrepeated, xextra, _ := s.tally.summary(xmppSubs, published)
	t.Logf("%d items, %d XMPP server restarts: XMPP notifications in flight when the server went down and never passed on: %d of %d "+
		"(all retrievable); duplicates: XMPP %d pairs (%d copies), webhooks %d pairs (%d copies)",
		len(published), rounds, lost, len(published)*readers, xrepeated, xextra, repeated, extra)
	if total := len(published) * readers; lost > total/100 {
		t.Errorf("%d of %d XMPP notifications lost with the server: more than the server could have held for its clients", lost, total)
	}
	if n := s.d.logCount("XMPP server", "retrying in"); n == 0 {
		t.Errorf("no reconnect attempt was logged while the server was down")
	}
}

// logCount counts the log lines holding every one of the parts.
func (d *daemon) logCount(parts ...string) int {
	n := 0
	for line := range strings.Lines(d.logs.String()) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// relSubscriber is a subscription with its delivery state, as the admin
// API shows it.
type relSubscriber struct {
	Kind     string `json:"kind"`
	Address  string `json:"address"`
	State    string `json:"state"`
	Delivery struct {
		Cursor            int64     `json:"cursor"`
		Attempts          int       `json:"attempts"`
		ConsecutiveErrors int       `json:"consecutive_errors"`
		FirstFailure      time.Time `json:"first_failure"`
		NextAttempt       time.Time `json:"next_attempt"`
		LastError         string    `json:"last_error"`
		LastStatus        int       `json:"last_status"`
	} `json:"delivery"`
}

// relSubscription returns the webhook subscription of the hook, or nil.
func (d *daemon) relSubscription(h *relHook) *relSubscriber {
	d.t.Helper()
	var out struct {
		Subscribers []relSubscriber `json:"subscribers"`
	}
	if code := d.api("GET", "/api/nodes/"+url.PathEscape(relNode)+"/subscribers", nil, &out); code != 200 {
		d.t.Fatalf("subscribers: HTTP %d", code)
	}
	for i := range out.Subscribers {
		if out.Subscribers[i].Address == h.URL() {
			return &out.Subscribers[i]
		}
	}
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestSlowAndBrokenReceivers subscribes, next to healthy webhooks, one
// that takes 10 s to answer, one that answers 500, one that resets the
// connection and one that answers 410. The healthy ones' latency stays
// what it was before the broken ones came (compared in the same run,
// generously), the 410 one is removed at once, the 500 and reset ones are
// kept and retried after a backoff instead of being hammered, and the
// slow one gets everything.
func TestSlowAndBrokenReceivers(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	runSlowAndBrokenReceivers(t, 4)
}

// runSlowAndBrokenReceivers measures the healthy receivers' latency over
// rounds pings before and after the broken receivers come.
func runSlowAndBrokenReceivers(t *testing.T, rounds int) {
	const slowFor = 10 * time.Second
	var healthy, broken []*relHook
	var slow, failing, resetting, gone *relHook
	s := newRelSetup(t, 1, func(tally *relTally) []*relHook {
		for i := range 3 {
			healthy = append(healthy, newRelHook(t, fmt.Sprintf("healthy%d", i), tally, nil))
		}
		slow = newRelHook(t, "slow", tally, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
			select {
			case <-time.After(slowFor):
			case <-r.Context().Done():
			}
			return false // then take it
		})
		failing = newRelHook(t, "error500", tally, func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
			http.Error(w, "broken", http.StatusInternalServerError)
			return true
		})
		resetting = newRelHook(t, "reset", tally, func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // close with RST
				}
				conn.Close()
			}
			return true
		})
		gone = newRelHook(t, "gone410", tally, func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
			http.Error(w, "gone", http.StatusGone)
			return true
		})
		broken = []*relHook{slow, failing, resetting, gone}
		return healthy // the broken ones come later
	})
	healthyNames := []string{}
	for _, h := range healthy {
		healthyNames = append(healthyNames, h.name)
	}

	// latencies publishes rounds of two items and measures, per round and
	// healthy receiver, the time from the ping to the round's arrival.
	n := 0
	latencies := func(phase string) []time.Duration {
		var out []time.Duration
		for range rounds {
			items := relItems(phase, n, 2)
			n += 2
			sent := s.publish(items)
			s.waitSubs(t, healthyNames, relIDs(items), 30*time.Second, phase)
			for _, h := range healthy {
				out = append(out, s.tally.arrived(h.name, items[1].GUID).Sub(sent))
			}
			time.Sleep(300 * time.Millisecond) // the rounds' pace
		}
		return out
	}
	before := latencies("alone")

	for _, h := range broken {
		s.d.subscribeHook(relNode, h)
	}
	testenv.WaitFor(t, 30*time.Second, "the broken receivers' subscriptions", func() bool {
		for _, h := range broken {
			if sub := s.d.relSubscription(h); sub == nil || sub.State != "active" {
				return false
			}
		}
		return true
	})
	n0 := n
	firstBroken := time.Now()
	after := latencies("beside")
	brokenIDs := []string{}
	for i := n0; i < n; i++ {
		brokenIDs = append(brokenIDs, fmt.Sprintf("beside-%05d", i))
	}

	mb, ma := median(before), median(after)
	t.Logf("healthy receivers' latency from ping to delivery: median %v alone, %v beside the broken ones (max %v, %v)",
		mb.Round(time.Millisecond), ma.Round(time.Millisecond), slices.Max(before).Round(time.Millisecond), slices.Max(after).Round(time.Millisecond))
	if ma > 4*mb+time.Second {
		t.Errorf("the broken receivers slowed the healthy ones down: median %v, was %v", ma, mb)
	}
	if slices.Max(after) >= slowFor {
		t.Errorf("a healthy receiver waited as long as the slow one answers: %v", slices.Max(after))
	}

	// 410: removed after its one delivery, never retried.
	testenv.WaitFor(t, 20*time.Second, "the 410 receiver's removal", func() bool { return s.d.relSubscription(gone) == nil })
	// 500 and resets: kept, one attempt so far, the next one after the
	// first backoff (30 s ± 20%), not at once.
	for _, h := range []*relHook{failing, resetting} {
		sub := s.d.relSubscription(h)
		if sub == nil || sub.State != "active" {
			t.Errorf("%s: subscription %+v, want it kept", h.name, sub)
			continue
		}
		d := sub.Delivery
		wait := d.NextAttempt.Sub(d.FirstFailure)
		if d.ConsecutiveErrors < 1 || d.FirstFailure.IsZero() || wait < 24*time.Second || wait > 36*time.Second {
			t.Errorf("%s: delivery state %+v: want an error counted and the next attempt 24–36 s after the first failure (got %v)", h.name, d, wait)
		}
		t.Logf("%s: %d attempt(s), last error %q, next attempt %v after the first failure", h.name, d.Attempts, d.LastError, wait.Round(time.Second))
	}
	if since := time.Since(firstBroken); since < 20*time.Second {
		for _, h := range []*relHook{failing, resetting, gone} {
			if got := h.postCount(); got != 1 {
				t.Errorf("%s got %d requests in the %v since it failed, want 1 (retries wait for the backoff)", h.name, got, since.Round(time.Second))
			}
		}
	}
	// The slow receiver is not dropped: it gets everything, in a few
	// deliveries (each batches what came meanwhile).
	s.waitSubs(t, []string{slow.name}, brokenIDs, 4*slowFor+20*time.Second, "the slow receiver")
	if sub := s.d.relSubscription(slow); sub == nil || sub.Delivery.ConsecutiveErrors != 0 {
		t.Errorf("slow receiver: %+v", sub)
	}
	t.Logf("the slow receiver got %d items in %d requests", len(brokenIDs), slow.postCount())
}

// relPingOutcome is what one ping was answered.
type relPingOutcome struct {
	dialect string
	url     string
	status  int
	body    string
	err     error
}

// acknowledged reports whether the answer tells the publisher that the
// ping was taken, in its dialect's terms.
func (o relPingOutcome) acknowledged() bool {
	if o.err != nil || o.status != http.StatusOK && o.status != http.StatusNoContent {
		return false
	}
	switch o.dialect {
	case "weblogUpdates.ping", "weblogUpdates.extendedPing":
		return strings.Contains(o.body, "<name>flerror</name><value><boolean>0</boolean>")
	case "rssCloud.ping":
		return strings.Contains(o.body, "<boolean>1</boolean>") && !strings.Contains(o.body, "<fault>")
	case "CNWS":
		return strings.Contains(o.body, "<status>true</status>")
	}
	return true
}

// refusedClearly reports whether the answer is an error in the dialect's
// terms: a 5xx, an XML-RPC fault, or weblogUpdates' flerror.
func (o relPingOutcome) refusedClearly() bool {
	switch {
	case o.err != nil:
		return false
	case o.status >= 500:
		return true
	case o.dialect == "weblogUpdates.ping" || o.dialect == "weblogUpdates.extendedPing":
		return strings.Contains(o.body, "<name>flerror</name><value><boolean>1</boolean>")
	case o.dialect == "rssCloud.ping":
		return strings.Contains(o.body, "<fault>")
	}
	return false
}

// pingDialects pings u in every dialect pingd takes; each dialect gets its
// own URL (u + the dialect's number) so that no rate limit is shared.
var pingDialects = []string{"REST", "form", "weblogUpdates.ping", "weblogUpdates.extendedPing", "rssCloud.ping", "CNWS", "WebSub"}

func (d *daemon) pingAs(dialect, u string) relPingOutcome {
	out := relPingOutcome{dialect: dialect, url: u}
	rpc := func(method string, params ...string) (*http.Response, error) {
		var b strings.Builder
		fmt.Fprintf(&b, `<?xml version="1.0"?><methodCall><methodName>%s</methodName><params>`, method)
		for _, p := range params {
			b.WriteString("<param><value><string>")
			_ = xml.EscapeText(&b, []byte(p))
			b.WriteString("</string></value></param>")
		}
		b.WriteString("</params></methodCall>")
		return http.Post(d.URL+"/RPC2", "text/xml", strings.NewReader(b.String()))
	}
	var resp *http.Response
	var err error
	switch dialect {
	case "REST":
		resp, err = http.PostForm(d.URL+"/ping", url.Values{"url": {u}})
	case "form":
		resp, err = http.Get(d.URL + "/pingSiteForm?name=Blog&url=" + url.QueryEscape(u))
	case "weblogUpdates.ping":
		resp, err = rpc("weblogUpdates.ping", "Blog", u)
	case "weblogUpdates.extendedPing":
		resp, err = rpc("weblogUpdates.extendedPing", "Blog", u, "", u)
	case "rssCloud.ping":
		resp, err = rpc("rssCloud.ping", u)
	case "CNWS":
		resp, err = http.Post(d.URL+"/cnws", "text/xml", strings.NewReader(`<notification version="1.0" xmlns="http://www.owlfish.com/thoughts/cnws-2003-04-08.html">`+
			`<resourceChange><resourceID>`+u+`</resourceID></resourceChange></notification>`))
	case "WebSub":
		resp, err = http.PostForm(d.URL+"/websub", url.Values{"hub.mode": {"publish"}, "hub.url": {u}})
	default:
		d.t.Fatalf("unknown dialect %s", dialect)
	}
	if err != nil {
		out.err = err
		return out
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	out.status, out.body = resp.StatusCode, string(b)
	return out
}

// pingEveryDialect pings, concurrently, one URL per dialect under prefix.
func (d *daemon) pingEveryDialect(prefix string) []relPingOutcome {
	out := make([]relPingOutcome, len(pingDialects))
	var wg sync.WaitGroup
	for i, dialect := range pingDialects {
		wg.Go(func() { out[i] = d.pingAs(dialect, fmt.Sprintf("http://%s-%d.example/feed", prefix, i)) })
	}
	wg.Wait()
	return out
}

// storedPings reads the URLs of the pings in pingd's SQLite file.
func storedPings(t *testing.T, dsn string) map[string]bool {
	t.Helper()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT url FROM pings`)
	if err != nil {
		t.Fatalf("read the pings: %v", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			t.Fatal(err)
		}
		out[u] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDatabaseLockedPingsAreRefused holds a write transaction on pingd's
// SQLite file from outside: every ping, in every dialect, is answered with
// an error while it lasts (none is acknowledged), and pingd takes pings
// again once the lock is gone.
func TestDatabaseLockedPingsAreRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	d := newDaemon(t, p)
	d.Start(true)

	db, err := sql.Open("sqlite", "file:"+d.dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatalf("take the write lock: %v", err)
	}
	began := time.Now()
	locked := d.pingEveryDialect("locked")
	t.Logf("answers while the database was locked came within %v", time.Since(began).Round(100*time.Millisecond))
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	for _, o := range locked {
		if o.acknowledged() || !o.refusedClearly() {
			t.Errorf("%s while the database was locked: HTTP %d %v %.300s; want an error answer", o.dialect, o.status, o.err, o.body)
		}
	}

	free := d.pingEveryDialect("free")
	for _, o := range free {
		if !o.acknowledged() {
			t.Errorf("%s after the lock: HTTP %d %v %.300s", o.dialect, o.status, o.err, o.body)
		}
	}
	d.Stop()
	stored := storedPings(t, "file:"+d.dbPath)
	for _, o := range free {
		if !stored[o.url] {
			t.Errorf("the acknowledged %s ping of %s is not stored", o.dialect, o.url)
		}
	}
}

// TestDiskFullPingsAreRefused fills the disk under pingd's database: pings
// that cannot be stored are answered with an error, every acknowledged one
// is stored, pingd keeps running and takes pings again once there is room.
// The full disk is a small tmpfs where the test may mount one (root), and
// in any case SQLite's max_page_count, which makes the file full at a size.
func TestDiskFullPingsAreRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	t.Run("tmpfs", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "disk")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=8m,mode=0700"); err != nil {
			t.Skipf("cannot mount a tmpfs here (%v); the max_page_count case stands for a full disk", err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
		dbPath := filepath.Join(dir, "pingd.db")
		d := newDaemon(t, p, "PINGD_DB="+dbPath)
		d.dbPath = dbPath
		d.Start(true)
		filler := filepath.Join(dir, "filler")
		fill := func() {
			f, err := os.Create(filler)
			if err != nil && !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			if f == nil {
				return
			}
			chunk := make([]byte, 4096)
			for {
				if _, err := f.Write(chunk); err != nil {
					break
				}
			}
			f.Close()
		}
		fill()
		acked := fullDiskPings(t, d, "tmpfs", func() {
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		})
		d.Stop()
		checkStored(t, "file:"+dbPath, acked)
	})
	t.Run("max_page_count", func(t *testing.T) {
		d := newDaemon(t, p)
		d.Start(true)
		d.Stop()
		pages := pageCount(t, "file:"+d.dbPath)
		// A few pages of room: the first pings fit, then the file is full.
		full := newDaemon(t, p, fmt.Sprintf("PINGD_DB=file:%s?_pragma=max_page_count(%d)", d.dbPath, pages+3))
		full.dbPath = d.dbPath
		full.Start(true)
		acked := fullDiskPings(t, full, "pages", func() {
			full.Stop()
			full.env = append(full.env, "PINGD_DB="+d.dbPath) // the limit lifted
			full.Start(true)
		})
		full.Stop()
		checkStored(t, "file:"+d.dbPath, acked)
	})
}

// fullDiskPings pings in every dialect until the answers have been errors
// for a while, checks that no answer was an acknowledgement of a ping that
// failed, makes room, and checks that pings are taken again. It returns
// the URLs of the acknowledged pings.
func fullDiskPings(t *testing.T, d *daemon, prefix string, makeRoom func()) []string {
	t.Helper()
	var acked []string
	refused, round := 0, 0
	for ; round < 400 && refused < 3*len(pingDialects); round++ {
		for _, o := range d.pingEveryDialect(fmt.Sprintf("%s%d", prefix, round)) {
			switch {
			case o.acknowledged():
				acked = append(acked, o.url)
			case o.refusedClearly():
				refused++
			default:
				t.Errorf("%s on a full disk: neither taken nor refused: HTTP %d %v %.300s", o.dialect, o.status, o.err, o.body)
			}
		}
	}
	if refused == 0 {
		t.Fatalf("the disk never filled in %d rounds of pings", round)
	}
	t.Logf("full disk: %d pings acknowledged before it filled, %d refused with an error", len(acked), refused)
	if resp, err := http.Get(d.URL + "/healthz"); err != nil {
		t.Errorf("pingd stopped answering on a full disk: %v", err)
	} else {
		resp.Body.Close()
	}
	makeRoom()
	var after []relPingOutcome
	testenv.WaitFor(t, 30*time.Second, "pings to be taken again", func() bool {
		after = d.pingEveryDialect(fmt.Sprintf("%s-room%d", prefix, round))
		round++
		for _, o := range after {
			if !o.acknowledged() {
				return false
			}
		}
		return true
	})
	for _, o := range after {
		acked = append(acked, o.url)
	}
	return acked
}

func checkStored(t *testing.T, dsn string, acked []string) {
	t.Helper()
	stored := storedPings(t, dsn)
	lost := 0
	for _, u := range acked {
		if !stored[u] {
			lost++
			if lost <= 10 {
				t.Errorf("the acknowledged ping of %s is not stored", u)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged pings were lost", lost, len(acked))
	}
}

func pageCount(t *testing.T, dsn string) int {
	t.Helper()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`PRAGMA page_count`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// streamRecorder forwards TCP connections to a target and records what
// the client of each sent, to see how pingd ends its XMPP stream.
type streamRecorder struct {
	Addr   string
	target string
	mu     sync.Mutex
	conns  []*bytes.Buffer
	closed []bool
}

func newStreamRecorder(t *testing.T, target string) *streamRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &streamRecorder{Addr: ln.Addr().String(), target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.forward(c)
		}
	}()
	return r
}

func (r *streamRecorder) forward(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	defer up.Close()
	buf := &bytes.Buffer{}
	r.mu.Lock()
	i := len(r.conns)
	r.conns = append(r.conns, buf)
	r.closed = append(r.closed, false)
	r.mu.Unlock()
	go func() { _, _ = io.Copy(c, up) }()
	b := make([]byte, 32<<10)
	for {
		n, err := c.Read(b)
		if n > 0 {
			r.mu.Lock()
			buf.Write(b[:n])
			r.mu.Unlock()
			if _, werr := up.Write(b[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	r.mu.Lock()
	r.closed[i] = true
	r.mu.Unlock()
}

// last returns what the latest connection's client sent, and whether the
// client has closed it.
func (r *streamRecorder) last() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.conns) == 0 {
		return "", false
	}
	return r.conns[len(r.conns)-1].String(), r.closed[len(r.closed)-1]
}

// TestGracefulShutdown sends SIGTERM while a ping request is half sent, a
// webhook delivery waits for its receiver and a fetch waits for its
// origin. pingd finishes the ping request (and stores the ping), takes no
// new connection, ends its XMPP stream with </stream:stream>, exits 0,
// and hands the cut-off delivery and fetch to the next process, which does
// them at once rather than when their leases would have run out.
func TestGracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	rec := newStreamRecorder(t, p.ComponentAddr)
	release := make(chan struct{})
	var releaseOnce sync.Once
	open := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(open)
	delivering := make(chan struct{}, 16)
	var hook *relHook
	s := newRelSetupOn(t, p, 1, func(tally *relTally) []*relHook {
		hook = newRelHook(t, "held", tally, func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
			delivering <- struct{}{}
			select {
			case <-release:
				return false // take it
			case <-r.Context().Done():
				return true // pingd went away
			}
		})
		return []*relHook{hook}
	}, "PINGD_XMPP_ADDR="+rec.Addr)
	// A second node whose source's fetches answer only when released. The
	// look at the source when its node is created (discovery: a GET that
	// prefers HTML) is answered at once and is not the fetch this waits
	// for.
	const slowBody = `<?xml version="1.0"?><rss version="2.0"><channel><title>Slow</title><link>http://127.0.0.1/</link><description>d</description>` +
		`<item><title>Slow one</title><guid isPermaLink="false">slow-1</guid></item></channel></rss>`
	fetching := make(chan struct{}, 16)
	slowFeed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		if strings.HasPrefix(r.Header.Get("Accept"), "text/html") {
			fmt.Fprint(w, slowBody)
			return
		}
		select {
		case fetching <- struct{}{}:
		default:
		}
		select {
		case <-release:
			fmt.Fprint(w, slowBody)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slowFeed.Close)
	if code := s.d.api("POST", "/api/nodes", map[string]any{"node": "slow", "source": slowFeed.URL}, nil); code != 201 {
		t.Fatalf("create the slow node: HTTP %d", code)
	}
	select {
	case <-fetching:
	case <-time.After(20 * time.Second):
		t.Fatal("the slow source's baseline fetch did not start")
	}

	item := relItems("term", 0, 1)
	s.publish(item)
	s.waitSubs(t, s.subs[:1], relIDs(item), 20*time.Second, "the XMPP notification")
	select {
	case <-delivering:
	case <-time.After(20 * time.Second):
		t.Fatal("the webhook delivery did not start")
	}

	// A ping request in flight: headers and half the body sent.
	const inflightURL = "http://inflight.example/feed"
	form := "url=" + url.QueryEscape(inflightURL)
	c, err := net.Dial("tcp", strings.TrimPrefix(s.d.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /ping HTTP/1.1\r\nHost: pingd\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s",
		len(form), form[:len(form)/2])
	// The daemon reads the headers and the first half before it is told
	// to stop; nothing it exposes says it has, so it is given a moment.
	time.Sleep(200 * time.Millisecond)

	if err := s.d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	s.d.stopped = true
	termAt := time.Now()
	testenv.WaitFor(t, 10*time.Second, "pingd to stop taking connections", func() bool {
		nc, err := net.DialTimeout("tcp", strings.TrimPrefix(s.d.URL, "http://"), time.Second)
		if err != nil {
			return true
		}
		nc.Close()
		return false
	})
	// The request in flight is finished and answered.
	if _, err := io.WriteString(c, form[len(form)/2:]); err != nil {
		t.Fatalf("finish the request in flight: %v", err)
	}
	answer, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(answer), "HTTP/1.1 200") {
		t.Errorf("the ping in flight at SIGTERM was answered %.200q, want 200", answer)
	}
	select {
	case <-s.d.exited:
	case <-time.After(40 * time.Second):
		t.Fatal("pingd did not exit within 40s of SIGTERM")
	}
	t.Logf("pingd exited %v after SIGTERM", time.Since(termAt).Round(100*time.Millisecond))
	if code := s.d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
	if !strings.Contains(s.d.logs.String(), "pingd stopped") {
		t.Error("no \"pingd stopped\" in the log")
	}
	testenv.WaitFor(t, 5*time.Second, "the component connection to close", func() bool { _, closed := rec.last(); return closed })
	if sent, _ := rec.last(); !strings.HasSuffix(strings.TrimSpace(sent), "</stream:stream>") {
		t.Errorf("pingd's XMPP stream did not end with </stream:stream>; it ended with %q", sent[max(0, len(sent)-200):])
	}

	// The next process does the cut-off work at once.
	open()
	restart := time.Now()
	s.d.Start(true)
	s.waitSubs(t, []string{hook.name}, relIDs(item), 30*time.Second, "the delivery cut off by the shutdown")
	testenv.WaitFor(t, 30*time.Second, "the fetch cut off by the shutdown", func() bool {
		var st struct {
			Source struct {
				Baselined bool `json:"baselined"`
			} `json:"source"`
		}
		return s.d.api("GET", "/api/nodes/slow/status", nil, &st) == 200 && st.Source.Baselined
	})
	t.Logf("the next process did the cut-off delivery and fetch within %v of its start", time.Since(restart).Round(100*time.Millisecond))
	s.d.Stop()
	if !storedPings(t, "file:"+s.d.dbPath)[inflightURL] {
		t.Error("the ping in flight at SIGTERM was acknowledged but not stored")
	}
}
