package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pingd/pingd/internal/testenv"
)

// Several pingd processes on one PostgreSQL: the real binary, a private
// PostgreSQL (store/testdata/start-postgres.sh, named by
// PINGD_TEST_POSTGRES), real Prosody and ejabberd, real HTTP receivers.

// testPostgres creates a schema of its own on the PINGD_TEST_POSTGRES
// server, drops it when the test ends (after the daemons, which are
// started later and so stopped first), and returns a URL working in it.
func testPostgres(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs PostgreSQL (skipped in -short mode)")
	}
	return testenv.PostgresURL(t)
}

// xmppServer is where a daemon attaches its component.
type xmppServer struct{ Addr, Domain, Secret, UserDomain string }

func prosodyServer(p *testenv.Prosody) xmppServer {
	return xmppServer{p.ComponentAddr, p.ComponentDomain, p.Secret, p.Domain}
}

// noXMPP is a component port nothing listens on: for tests of the HTTP
// side alone (the component keeps retrying in the background).
func noXMPP(t testing.TB) xmppServer {
	return xmppServer{fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), "pubsub.localhost", "unused", "localhost"}
}

// newInstance prepares (does not start) a pingd process on db attached to
// x; extra are more KEY=value environment entries.
func newInstance(t testing.TB, x xmppServer, db string, extra ...string) *daemon {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	d := &daemon{t: t, URL: "http://" + addr, dbPath: db}
	d.env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"PINGD_XMPP_ADDR=" + x.Addr,
		"PINGD_XMPP_DOMAIN=" + x.Domain,
		"PINGD_XMPP_SECRET=" + x.Secret,
		"PINGD_HTTP_ADDR=" + addr,
		"PINGD_PUBLIC_URL=" + d.URL,
		"PINGD_DB=" + db,
		"PINGD_ADMIN_TOKEN=" + testAdminToken,
		"PINGD_ADMINS=owner@" + x.UserDomain,
		"PINGD_ALLOW_PRIVATE=1",
		"PINGD_LOG_LEVEL=debug",
	}, extra...)
	t.Cleanup(func() { d.Stop(); d.dumpLogsOnFailure() })
	return d
}

// pingSource posts a REST ping for u.
func (d *daemon) pingSource(u string) {
	d.t.Helper()
	resp, err := http.PostForm(d.URL+"/ping", url.Values{"url": {u}})
	if err != nil {
		d.t.Fatalf("ping %s: %v", u, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != 200 {
		d.t.Fatalf("ping %s: HTTP %d %s", u, resp.StatusCode, body)
	}
}

// leads reports whether the daemon's log says it leads the component.
func (d *daemon) leads() bool {
	return d.logs != nil && strings.Contains(d.logs.String(), "this pingd process now leads")
}

// countLog counts log lines holding every one of the parts.
func (d *daemon) countLog(parts ...string) int {
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

// tally counts how often each subscriber got each item.
type tally struct {
	mu sync.Mutex
	n  map[string]map[string]int // subscriber → item id → times
	// welcome holds the items a subscriber may get once beyond those
	// checked: the node's newest entry, sent to a new subscription at once.
	welcome map[string]bool
}

func newTally() *tally { return &tally{n: map[string]map[string]int{}, welcome: map[string]bool{}} }

// welcomes says that id, the node's newest entry when the subscribers
// subscribe, may come once to each of them.
func (t *tally) welcomes(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.welcome[id] = true
}

func (t *tally) add(sub, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n[sub] == nil {
		t.n[sub] = map[string]int{}
	}
	t.n[sub][id]++
}

// complete reports whether every subscriber has every id at least once.
func (t *tally) complete(subs, ids []string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range subs {
		for _, id := range ids {
			if t.n[s][id] == 0 {
				return false
			}
		}
	}
	return true
}

// check returns what is missing and what came more than once, and the
// number of extra copies.
func (t *tally) check(subs, ids []string) (missing, repeated []string, extra int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range subs {
		for _, id := range ids {
			switch n := t.n[s][id]; {
			case n == 0:
				missing = append(missing, s+" "+id)
			case n > 1:
				repeated = append(repeated, fmt.Sprintf("%s %s ×%d", s, id, n))
				extra += n - 1
			}
		}
		for id, n := range t.n[s] {
			if !slices.Contains(ids, id) && (!t.welcome[id] || n > 1) {
				repeated = append(repeated, fmt.Sprintf("%s unexpected %s ×%d", s, id, n))
			}
		}
	}
	return missing, repeated, extra
}

// receive is the part every webhook receiver of these tests shares: it
// answers a verification's challenge, or counts the entries of an Atom
// delivery under the request's path (their titles name the feed items).
// It reports whether the request was a delivery it counted; otherwise it
// has answered it.
func (t *tally) receive(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet {
		fmt.Fprint(w, r.URL.Query().Get("hub.challenge"))
		return false
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	var doc struct {
		Entries []struct {
			Title string `xml:"title"`
		} `xml:"entry"`
	}
	if err := xml.Unmarshal(body, &doc); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	for _, e := range doc.Entries {
		t.add(r.URL.Path, strings.TrimPrefix(e.Title, "Item "))
	}
	return true
}

// listen feeds every item notification a client receives into the tally,
// until the test ends.
func (t *tally) listen(tb testing.TB, c *testenv.Client) {
	done := make(chan struct{})
	tb.Cleanup(func() { close(done) })
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
					t.add(c.JID.Bare().String(), it.ID)
				}
			}
		}
	}()
}

func feedItems(prefix string, n int) []feedItem {
	out := make([]feedItem, n)
	for i := range out {
		id := fmt.Sprintf("%s-%03d", prefix, i)
		out[i] = feedItem{id, "Item " + id}
	}
	return out
}

func guids(items []feedItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.GUID
	}
	return out
}

// TestScalingEjabberdShared attaches two pingd processes on one PostgreSQL
// to one ejabberd component name at once (--xmpp-shared). ejabberd spreads
// the subscribers' requests over both connections; items published over
// XMPP and pinged through both HTTP sides reach every subscriber exactly
// once, sent by the leader alone.
func TestScalingEjabberdShared(t *testing.T) {
	db := testPostgres(t)
	e := testenv.StartEjabberd(t, testenv.EjabberdOptions{})
	const readers = 6
	var names []string
	for i := range readers {
		names = append(names, e.Register(fmt.Sprintf("reader%d", i), "pw"))
	}
	e.Register("owner", "pw")
	feed := newFeedServer(t, feedItem{"old", "Old"})
	x := xmppServer{e.ComponentAddr, e.ComponentDomain, e.Secret, e.Domain}
	d1 := newInstance(t, x, db, "PINGD_XMPP_SHARED=1")
	d2 := newInstance(t, x, db, "PINGD_XMPP_SHARED=1")
	d1.Start(true)
	d2.Start(true) // ready = connected: both hold a connection under one name
	testenv.WaitFor(t, 10*time.Second, "one of them to lead", func() bool { return d1.leads() || d2.leads() })
	if d1.leads() && d2.leads() {
		t.Fatal("both processes lead")
	}

	if code := d1.api("POST", "/api/nodes", map[string]string{"node": "shared", "source": feed.URL}, nil); code != 201 {
		t.Fatalf("create node: HTTP %d", code)
	}
	d1.waitBaselined("shared")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	got := newTally()
	got.welcomes("old") // the feed's entry at its first fetch
	for i := range readers {
		c := e.Dial(ctx, t, fmt.Sprintf("reader%d", i), "pw", "r")
		// Each subscribes twice: more requests for ejabberd to spread, and
		// a repeated subscribe must not double the notifications.
		for range 2 {
			if resp := subscribe(t, ctx, c, e.ComponentDomain, "shared"); !strings.Contains(resp, `subscription="subscribed"`) {
				t.Fatalf("subscribe: %s", resp)
			}
		}
		got.listen(t, c)
	}

	// Publishes: an owner over XMPP (requests spread over both
	// connections) and feed pings through both HTTP sides.
	owner := e.Dial(ctx, t, "owner", "pw", "o")
	var want []string
	for i := range 8 {
		id := fmt.Sprintf("xmpp-%d", i)
		resp, err := owner.SendRaw(ctx, fmt.Sprintf(`<iq type="set" to="%s" id="p%d"><pubsub xmlns="http://jabber.org/protocol/pubsub">`+
			`<publish node="shared"><item id="%s"><entry xmlns="http://www.w3.org/2005/Atom"><id>%s</id><title>%s</title></entry></item></publish></pubsub></iq>`,
			e.ComponentDomain, i, id, id, id))
		if err != nil || !strings.Contains(resp, `type="result"`) {
			t.Fatalf("publish %s: %v %s", id, err, resp)
		}
		want = append(want, id)
	}
	for round, d := range []*daemon{d1, d2, d1, d2} {
		items := feedItems(fmt.Sprintf("feed-%d", round), 3)
		feed.Add(items...)
		d.pingSource(feed.URL)
		want = append(want, guids(items)...)
		testenv.WaitFor(t, 20*time.Second, "the round to arrive", func() bool { return got.complete(names, guids(items)) })
	}
	testenv.WaitFor(t, 30*time.Second, "every item at every subscriber", func() bool { return got.complete(names, want) })
	time.Sleep(1500 * time.Millisecond) // room for duplicates to show
	missing, repeated, _ := got.check(names, want)
	if len(missing) > 0 || len(repeated) > 0 {
		t.Fatalf("missing %v; repeated %v", missing, repeated)
	}
	// The markers that name the cursors came back to one process or the
	// other, and the cursor was recorded.
	testenv.WaitFor(t, 10*time.Second, "the XMPP cursor to be recorded", func() bool {
		var st struct {
			LastSeq int64 `json:"last_seq"`
			XMPPSeq int64 `json:"xmpp_seq"`
		}
		return d1.api("GET", "/api/nodes/shared/status", nil, &st) == 200 && st.LastSeq > 0 && st.XMPPSeq == st.LastSeq
	})

	// Both connections answered requests; only the leader sent.
	for i, d := range []*daemon{d1, d2} {
		n := d.countLog("XMPP in", "jabber.org/protocol/pubsub")
		t.Logf("instance %d answered %d pubsub requests, leads: %v", i+1, n, d.leads())
		if n == 0 {
			t.Errorf("instance %d received no pubsub request: ejabberd did not spread them", i+1)
		}
		if !d.leads() && d.countLog("notifications sent") > 0 {
			t.Errorf("instance %d sent notifications without leading", i+1)
		}
	}
}

// TestScalingProsodyFailover runs two pingd processes on one PostgreSQL
// against Prosody, which takes one connection per component name: one
// leads, the other stands by (ready for HTTP). The leader is killed with
// SIGKILL during a fan-out; the standby takes over within seconds and every
// subscriber gets every item. Items sent twice across the takeover (the
// batch the leader had written before its cursor was saved) are counted
// and reported; they carry the same item ids.
func TestScalingProsodyFailover(t *testing.T) {
	db := testPostgres(t)
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	const readers = 10
	var names []string
	for i := range readers {
		names = append(names, p.Register(fmt.Sprintf("reader%d", i), "pw"))
	}
	feed := newFeedServer(t, feedItem{"old", "Old"})
	d1 := newInstance(t, prosodyServer(p), db)
	d2 := newInstance(t, prosodyServer(p), db)
	d1.Start(true)
	testenv.WaitFor(t, 10*time.Second, "the first to lead", d1.leads)
	d2.Start(true) // ready as a healthy standby
	// A standby tries the lock every second and logs nothing when it is
	// held: a real process on real time, so the test gives it attempts.
	time.Sleep(1500 * time.Millisecond)
	if d2.leads() {
		t.Fatal("the standby leads while the first process lives")
	}

	// It keeps 1,000 items: one fetch publishes no more new entries than
	// a node keeps, and the burst below is 400.
	if code := d2.api("POST", "/api/nodes", map[string]any{"node": "news", "source": feed.URL, "max_items": 1000}, nil); code != 201 {
		t.Fatalf("create node through the standby: HTTP %d", code)
	}
	d2.waitBaselined("news")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	got := newTally()
	got.welcomes("old") // the feed's entry at its first fetch
	for i := range readers {
		c := testenv.Dial(ctx, t, p, fmt.Sprintf("reader%d", i), "pw", "r")
		if resp := subscribe(t, ctx, c, p.ComponentDomain, "news"); !strings.Contains(resp, `subscription="subscribed"`) {
			t.Fatalf("subscribe: %s", resp)
		}
		got.listen(t, c)
	}

	// A warm-up through the standby's HTTP side reaches everyone through
	// the leader.
	warm := feedItems("warm", 2)
	feed.Add(warm...)
	d2.pingSource(feed.URL)
	testenv.WaitFor(t, 15*time.Second, "the warm-up items", func() bool { return got.complete(names, guids(warm)) })

	// The fan-out: 400 items × 10 subscribers, killed at its first item.
	burst := feedItems("burst", 400)
	feed.Add(burst...)
	d2.pingSource(feed.URL)
	first := burst[0].GUID
	testenv.WaitFor(t, 20*time.Second, "the fan-out to begin", func() bool {
		for _, n := range names {
			if got.complete([]string{n}, []string{first}) {
				return true
			}
		}
		return false
	})
	d1.Kill()
	killed := time.Now()
	received := 0
	for _, n := range names {
		for _, id := range guids(burst) {
			if got.complete([]string{n}, []string{id}) {
				received++
			}
		}
	}
	testenv.WaitFor(t, 15*time.Second, "the standby to take over", func() bool {
		return d2.countLog("connected to XMPP server") > 0
	})
	takeover := time.Since(killed)

	// After the takeover: more items, through the survivor.
	after := feedItems("after", 3)
	feed.Add(after...)
	d2.pingSource(feed.URL)
	want := append(append(guids(warm), guids(burst)...), guids(after)...)
	testenv.WaitFor(t, 40*time.Second, "every item at every subscriber", func() bool { return got.complete(names, want) })
	time.Sleep(time.Second) // room for duplicates to show (real processes, real time)
	missing, repeated, extra := got.check(names, want)
	t.Logf("killed the leader %d/%d notifications into the fan-out; the standby connected %v later; "+
		"%d notifications were sent twice across the takeover", received, len(burst)*readers, takeover.Round(10*time.Millisecond), extra)
	if len(missing) > 0 {
		t.Fatalf("lost across the failover: %d notifications, e.g. %v", len(missing), missing[:min(10, len(missing))])
	}
	for _, r := range repeated {
		if !strings.Contains(r, "burst-") {
			t.Errorf("sent twice outside the fan-out the leader died in: %s", r)
		}
	}
	if takeover > 10*time.Second {
		t.Errorf("takeover took %v", takeover)
	}
}

// TestScalingDeleteThroughStandby: against Prosody only the leader holds
// the XMPP connection; a node deleted through the standby's admin API
// still reaches its XMPP subscriber as a delete notification, sent by the
// leader from the deletion the standby recorded in the database.
func TestScalingDeleteThroughStandby(t *testing.T) {
	db := testPostgres(t)
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")
	feed := newFeedServer(t, feedItem{"old", "Old"})
	d1 := newInstance(t, prosodyServer(p), db)
	d2 := newInstance(t, prosodyServer(p), db)
	d1.Start(true)
	testenv.WaitFor(t, 10*time.Second, "the first to lead", d1.leads)
	d2.Start(true)
	if code := d2.api("POST", "/api/nodes", map[string]any{"node": "news", "source": feed.URL}, nil); code != 201 {
		t.Fatalf("create node through the standby: HTTP %d", code)
	}
	d2.waitBaselined("news")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := testenv.Dial(ctx, t, p, "reader", "pw", "r")
	if resp := subscribe(t, ctx, c, p.ComponentDomain, "news"); !strings.Contains(resp, `subscription="subscribed"`) {
		t.Fatalf("subscribe: %s", resp)
	}
	if d2.leads() {
		t.Fatal("the standby leads while the first process lives")
	}
	if code := d2.api("DELETE", "/api/nodes/news", nil, nil); code != 204 && code != 200 {
		t.Fatalf("delete node through the standby: HTTP %d", code)
	}
	deadline := time.After(15 * time.Second)
	for {
		select {
		case raw := <-c.Stanzas:
			var msg struct {
				Event struct {
					Delete *struct {
						Node string `xml:"node,attr"`
					} `xml:"delete"`
				} `xml:"http://jabber.org/protocol/pubsub#event event"`
			}
			if xml.Unmarshal(raw, &msg) == nil && msg.Event.Delete != nil && msg.Event.Delete.Node == "news" {
				return
			}
		case <-deadline:
			t.Fatal("no delete notification within 15 s of a delete through the standby")
		}
	}
}

// TestScalingWebhooksAndPollsOnce runs three pingd processes on one
// PostgreSQL with no XMPP server: sources created through all of them are
// fetched once each for their baseline, and a fan-out of webhook
// deliveries pinged through all of them reaches every receiver exactly
// once per item, the processes sharing the work through their leases.
func TestScalingWebhooksAndPollsOnce(t *testing.T) {
	db := testPostgres(t)
	x := noXMPP(t)
	ds := []*daemon{newInstance(t, x, db), newInstance(t, x, db), newInstance(t, x, db)}
	for _, d := range ds {
		d.Start(false)
	}

	// Polls: 24 sources on one feed server, each baselined exactly once.
	var mu sync.Mutex
	hits := map[string]int{}
	feeds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		// Node creation looks at the source once to see whether it is a
		// page (discovery, which prefers HTML); only fetches count here.
		if !strings.HasPrefix(r.Header.Get("Accept"), "text/html") {
			hits[r.URL.Path]++
		}
		n := max(hits[r.URL.Path], 1)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/rss+xml")
		fmt.Fprintf(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>%s</title><link>http://127.0.0.1/</link><description>d</description>`, r.URL.Path)
		for i := n; i >= 1; i-- { // one more item per fetch
			fmt.Fprintf(w, `<item><title>%s %d</title><guid isPermaLink="false">%s-%d</guid></item>`, r.URL.Path, i, r.URL.Path, i)
		}
		fmt.Fprint(w, `</channel></rss>`)
	}))
	defer feeds.Close()
	const sources = 24
	for i := range sources {
		d := ds[i%len(ds)]
		if code := d.api("POST", "/api/nodes", map[string]string{"node": fmt.Sprintf("src-%d", i), "source": fmt.Sprintf("%s/s%d", feeds.URL, i)}, nil); code != 201 {
			t.Fatalf("create node %d: HTTP %d", i, code)
		}
	}
	testenv.WaitFor(t, 20*time.Second, "every baseline fetch", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(hits) == sources
	})
	time.Sleep(2500 * time.Millisecond) // two more polls of every process
	mu.Lock()
	for path, n := range hits {
		if n != 1 {
			t.Errorf("%s fetched %d times for its baseline, want once", path, n)
		}
	}
	mu.Unlock()

	// Webhooks: 30 receivers on one node, subscribed through all processes.
	got := newTally()
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.receive(w, r) }))
	defer sink.Close()
	feed := newFeedServer(t, feedItem{"old", "Old"})
	if code := ds[0].api("POST", "/api/nodes", map[string]string{"node": "hooks", "source": feed.URL}, nil); code != 201 {
		t.Fatalf("create node: HTTP %d", code)
	}
	ds[0].waitBaselined("hooks")
	const receivers = 30
	var subs []string
	for i := range receivers {
		path := fmt.Sprintf("/hook/%d", i)
		subs = append(subs, path)
		d := ds[i%len(ds)]
		body := fmt.Sprintf(`<subscribe><url href="%s%s" method="POST" diff="none"/></subscribe>`, sink.URL, path)
		req, _ := http.NewRequest("POST", d.URL+"/feeds/hooks?method=subscribe", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/getpingd+http+subscribe+xml")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("subscribe %s: HTTP %d", path, resp.StatusCode)
		}
	}
	testenv.WaitFor(t, 20*time.Second, "every subscription verified", func() bool {
		var list struct {
			Subscribers []map[string]any `json:"subscribers"`
		}
		ds[1].api("GET", "/api/nodes/hooks/subscribers", nil, &list)
		active := 0
		for _, s := range list.Subscribers {
			if s["state"] == "active" {
				active++
			}
		}
		return active == receivers
	})
	var want []string
	for round := range 6 {
		items := feedItems(fmt.Sprintf("hook-%d", round), 2)
		feed.Add(items...)
		want = append(want, guids(items)...)
		ds[round%len(ds)].pingSource(feed.URL)
		time.Sleep(100 * time.Millisecond) // rounds spread over time, as pings come

	}
	testenv.WaitFor(t, 30*time.Second, "every delivery", func() bool { return got.complete(subs, want) })
	time.Sleep(1500 * time.Millisecond) // room for duplicates to show (real processes, real time)
	if missing, repeated, _ := got.check(subs, want); len(missing) > 0 || len(repeated) > 0 {
		t.Fatalf("missing %d, e.g. %v; delivered more than once %d, e.g. %v",
			len(missing), missing[:min(len(missing), 10)], len(repeated), repeated[:min(len(repeated), 10)])
	}
	for i, d := range ds {
		t.Logf("instance %d: %d webhook requests, %d fetches", i+1, d.countLog(`msg=delivered`), d.countLog("source fetched")+d.countLog("source baselined"))
	}
}

// TestSQLiteSecondServeRefused: an SQLite file serves one pingd process;
// a second one on the same file refuses to start and says why, and once
// the first is gone (even by SIGKILL) the file is free again.
func TestSQLiteSecondServeRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real pingd processes (skipped in -short mode)")
	}
	x := noXMPP(t)
	db := filepath.Join(t.TempDir(), "pingd.db")
	d1 := newInstance(t, x, db)
	d1.Start(false)

	d2 := newInstance(t, x, db)
	cmd := exec.Command(pingdBinary(t), "serve")
	cmd.Env = d2.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the second pingd exited 0:\n%s", out.String())
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the second pingd did not refuse to start:\n%s", out.String())
	}
	msg := out.String()
	for _, want := range []string{"is in use by another pingd process", db + "-serve.lock",
		fmt.Sprintf("held by pid %d", d1.cmd.Process.Pid), "PostgreSQL"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, msg)
		}
	}
	if resp, err := http.Get(d2.URL + "/healthz"); err == nil {
		resp.Body.Close()
		t.Error("the refused pingd serves HTTP")
	}

	d1.Kill()
	d2.Start(false)
}

// TestMigrateDBToPostgres copies a used SQLite installation, while it
// runs and again after it stopped, into PostgreSQL, and runs pingd there:
// the same nodes, whitelist and subscriptions, and the XMPP subscriber
// gets the next item, and only it.
func TestMigrateDBToPostgres(t *testing.T) {
	target := testPostgres(t)
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	p.Register("reader", "pw")
	feed := newFeedServer(t, feedItem{"a", "A"})
	sqlitePath := filepath.Join(t.TempDir(), "pingd.db")
	d1 := newInstance(t, prosodyServer(p), sqlitePath)
	d1.Start(true)
	var created map[string]any
	if code := d1.api("POST", "/api/nodes", map[string]string{"node": "news", "source": feed.URL, "access_model": "whitelist"}, &created); code != 201 {
		t.Fatalf("create: HTTP %d", code)
	}
	if code := d1.api("PUT", "/api/nodes/news/whitelist/reader@"+p.Domain, nil, nil); code/100 != 2 {
		t.Fatalf("whitelist: HTTP %d", code)
	}
	d1.waitBaselined("news")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	reader := testenv.Dial(ctx, t, p, "reader", "pw", "r")
	if resp := subscribe(t, ctx, reader, p.ComponentDomain, "news"); !strings.Contains(resp, `subscription="subscribed"`) {
		t.Fatalf("subscribe: %s", resp)
	}
	// The feed's entry at the first fetch is the node's newest item, sent
	// to the new subscription.
	wantNewestOnSubscribe(t, reader, receivedItem{"news", "a", "A"})
	feed.Add(feedItem{"b", "B"})
	d1.pingSource(feed.URL)
	if got := collectItems(t, reader, 1, 15*time.Second, 300*time.Millisecond); !slices.Equal(got, []receivedItem{{"news", "b", "B"}}) {
		t.Fatalf("before the migration: %v", got)
	}

	migrate := func(args ...string) (string, error) {
		cmd := exec.Command(pingdBinary(t), append([]string{"migrate-db", "--from", "sqlite:" + sqlitePath, "--to", target}, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// While it runs: a consistent snapshot.
	if out, err := migrate(); err != nil || !strings.Contains(out, "counts checked") {
		t.Fatalf("migrate-db of a running pingd: %v\n%s", err, out)
	}
	// The target is no longer empty.
	if out, err := migrate(); err == nil || !strings.Contains(out, "not empty") || !strings.Contains(out, "--force") {
		t.Fatalf("migrate-db into a used target: %v\n%s", err, out)
	}
	snapshot := func(d *daemon) string {
		var b strings.Builder
		for _, path := range []string{"/api/nodes", "/api/nodes/news/whitelist", "/api/nodes/news/subscribers"} {
			var v any
			if code := d.api("GET", path, nil, &v); code != 200 {
				t.Fatalf("GET %s: HTTP %d", path, code)
			}
			fmt.Fprintf(&b, "%s %v\n", path, v)
		}
		u, _ := url.Parse(d.URL)
		return strings.NewReplacer(d.URL, "BASE", `port="`+u.Port()+`"`, `port="PORT"`).Replace(b.String())
	}
	before := snapshot(d1)
	d1.Stop()
	// The final copy, after the source stopped.
	out, err := migrate("--force")
	if err != nil {
		t.Fatalf("migrate-db --force: %v\n%s", err, out)
	}
	t.Logf("migrate-db:\n%s", out)
	// The reader's XMPP subscription has its state row (its digest and
	// bounces), copied with it.
	if !regexp.MustCompile(`(?m)^\s+xmpp_subscription_state\s+1 rows$`).MatchString(out) {
		t.Fatalf("migrate-db did not copy the XMPP subscription's state:\n%s", out)
	}

	d2 := newInstance(t, prosodyServer(p), target)
	d2.Start(true)
	if after := snapshot(d2); after != before {
		t.Fatalf("pingd on the copy serves other state\nbefore: %s\nafter:  %s", before, after)
	}
	noEvents := collectItems(t, reader, 1, 1500*time.Millisecond, 0)
	if len(noEvents) != 0 {
		t.Fatalf("the copy sent old items again: %v", noEvents)
	}
	feed.Add(feedItem{"c", "C"})
	d2.pingSource(feed.URL)
	if got := collectItems(t, reader, 1, 15*time.Second, 500*time.Millisecond); !slices.Equal(got, []receivedItem{{"news", "c", "C"}}) {
		t.Fatalf("after the migration: %v, want only c", got)
	}
}

// The throughput of 1, 2 and 3 pingd processes on one PostgreSQL, for
// docs/scaling.md. It is a benchmark, not a test: make test does not run
// it. Run it with
//
//	PINGD_TEST_POSTGRES="$(store/testdata/start-postgres.sh)" \
//	  go test ./cmd/pingd -run '^$' -bench BenchmarkScaling -benchtime 1x -timeout 30m
//
// Each size starts its processes (built without the race detector, logging
// at warn) on a fresh schema, then measures
//   - pings/s: REST pings of distinct, unknown URLs from 32 concurrent
//     clients spread over the processes (each ping is recorded: one
//     transaction), and
//   - deliveries/s: webhook deliveries to a loopback sink: 40 sources, each
//     followed by one node with 25 GetPingd webhook subscribers (1,000
//     subscriptions on 16 loopback addresses); 10 rounds, each adding an item
//     to every source and pinging it through the processes in turn; the
//     time from the first ping to the last item at the sink. requests/s
//     counts the POSTs (a request may carry several items: items/request).
//
// It also reports PostgreSQL's transactions per delivered item and per
// request, the fetches made, how busy the machine's CPUs were during each
// phase (ping-busy-%, fanout-busy-%) and the pingd processes' share of that
// busy time (fanout-pingd-%; the rest is PostgreSQL, the sink and the load).
func BenchmarkScaling(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			for range b.N {
				benchScaling(b, n)
			}
		})
	}
}

var (
	fastOnce sync.Once
	fastPath string
	fastErr  error
)

// pingdBinaryFast builds pingd without the race detector, for measurements.
func pingdBinaryFast(tb testing.TB) string {
	tb.Helper()
	fastOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pingd-bench-bin")
		if err != nil {
			fastErr = err
			return
		}
		fastPath = filepath.Join(dir, "pingd")
		out, err := exec.Command("go", "build", "-o", fastPath, ".").CombinedOutput()
		if err != nil {
			fastErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if fastErr != nil {
		tb.Fatal(fastErr)
	}
	return fastPath
}

// startBinary runs d with the given binary and waits for /healthz.
func (d *daemon) startBinary(bin string) {
	d.t.Helper()
	d.logs = &syncBuffer{}
	cmd := exec.Command(bin, "serve")
	cmd.Env = d.env
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	if err := cmd.Start(); err != nil {
		d.t.Fatalf("start pingd: %v", err)
	}
	d.cmd, d.stopped = cmd, false
	d.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(d.exited) }()
	testenv.WaitFor(d.t, 30*time.Second, "pingd /healthz", func() bool {
		select {
		case <-d.exited:
			d.t.Fatalf("pingd exited:\n%s", d.logs.String())
		default:
		}
		resp, err := http.Get(d.URL + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// sink counts webhook deliveries on several loopback addresses, so the
// per-host limit of the delivery workers is not what is measured.
type sink struct {
	mu       sync.Mutex
	verified int
	items    int
	requests int
	done     chan struct{}
	want     int
	servers  []*httptest.Server
}

func newSink(tb testing.TB, hosts int) *sink {
	s := &sink{done: make(chan struct{})}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			fmt.Fprint(w, r.URL.Query().Get("hub.challenge"))
			s.mu.Lock()
			s.verified++
			s.mu.Unlock()
			return
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		n := bytes.Count(body, []byte("<entry"))
		s.mu.Lock()
		s.items += n
		s.requests++
		if s.want > 0 && s.items >= s.want {
			select {
			case <-s.done:
			default:
				close(s.done)
			}
		}
		s.mu.Unlock()
	})
	for i := range hosts {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", i+1))
		if err != nil {
			tb.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(h)
		srv.Listener.Close()
		srv.Listener = ln
		srv.Start()
		tb.Cleanup(srv.Close)
		s.servers = append(s.servers, srv)
	}
	return s
}

func (s *sink) expect(items int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items, s.requests, s.want = 0, 0, items
	s.done = make(chan struct{})
}

func (s *sink) counts() (items, requests int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.items, s.requests
}

func benchScaling(b *testing.B, instances int) {
	b.StopTimer()
	db := testPostgres(b)
	x := noXMPP(b)
	bin := pingdBinaryFast(b)
	var ds []*daemon
	for range instances {
		d := newInstance(b, x, db, "PINGD_LOG_LEVEL=warn")
		d.startBinary(bin)
		ds = append(ds, d)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}

	// Pings of unknown URLs: what ingesting costs, without fetches.
	const pings, clients = 6000, 32
	var next, failed int64
	var mu sync.Mutex
	pingCPU := takeCPU(ds)
	began := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= pings {
					return
				}
				d := ds[(int(i)+c)%len(ds)]
				// A host of its own per URL, as pings from many weblogs
				// come (pings are limited per pinged host); never fetched,
				// since no node follows it.
				u := fmt.Sprintf("http://127.%d.%d.%d:9/blog", 1+i>>16&0xff, i>>8&0xff, i&0xff)
				resp, err := client.PostForm(d.URL+"/ping", url.Values{"url": {u}})
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode != 200 {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	pingRate := float64(pings) / time.Since(began).Seconds()
	pingBusy, _ := pingCPU.since(ds)
	if failed > 0 {
		b.Fatalf("%d pings failed", failed)
	}

	// Webhook fan-out.
	const sources, perNode, rounds, hosts = 40, 25, 10, 16
	feeds := make([]*feedServer, sources)
	for i := range feeds {
		feeds[i] = newFeedServer(b, feedItem{"old", "Old"})
		d := ds[i%len(ds)]
		testenv.WaitFor(b, 30*time.Second, "node creation", func() bool {
			return d.api("POST", "/api/nodes", map[string]string{"node": fmt.Sprintf("n%d", i), "source": feeds[i].URL}, nil) == 201
		})
	}
	s := newSink(b, hosts)
	for i := range sources {
		for j := range perNode {
			srv := s.servers[(i*perNode+j)%hosts]
			body := fmt.Sprintf(`<subscribe><url href="%s/n%d/%d" method="POST" diff="none"/></subscribe>`, srv.URL, i, j)
			req, _ := http.NewRequest("POST", fmt.Sprintf("%s/feeds/n%d?method=subscribe", ds[(i+j)%len(ds)].URL, i), strings.NewReader(body))
			req.Header.Set("Content-Type", "application/getpingd+http+subscribe+xml")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				b.Fatalf("subscribe: HTTP %d", resp.StatusCode)
			}
		}
	}
	// The sink answers each verification once; the state is saved right
	// after, so a little later every subscription is active.
	testenv.WaitFor(b, 120*time.Second, "every subscription verified", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.verified >= sources*perNode
	})
	testenv.WaitFor(b, 30*time.Second, "every source baselined and every subscription active", func() bool {
		for i := range feeds {
			node := fmt.Sprintf("n%d", i)
			if st := ds[0].status(node); st.Source == nil || !st.Source.Baselined {
				return false
			}
			for _, sub := range ds[0].nodeSubscribers(node) {
				if sub.State != "active" {
					return false
				}
			}
		}
		return true
	})

	s.expect(sources * perNode * rounds)
	hitsBefore := 0
	for _, f := range feeds {
		hitsBefore += f.Hits()
	}
	xactsBefore := pgTransactions(b, db)
	fanCPU := takeCPU(ds)
	b.StartTimer()
	began = time.Now()
	for r := range rounds {
		for i, f := range feeds {
			f.Add(feedItem{fmt.Sprintf("r%d", r), fmt.Sprintf("Round %d", r)})
			d := ds[(i+r)%len(ds)]
			resp, err := client.PostForm(d.URL+"/ping", url.Values{"url": {f.URL}})
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	select {
	case <-s.done:
	case <-time.After(5 * time.Minute):
		items, _ := s.counts()
		b.Fatalf("only %d of %d deliveries arrived", items, sources*perNode*rounds)
	}
	took := time.Since(began)
	b.StopTimer()
	fanBusy, fanPingd := fanCPU.since(ds)
	items, requests := s.counts()
	xacts := pgTransactions(b, db) - xactsBefore
	fetches := -hitsBefore
	for _, f := range feeds {
		fetches += f.Hits()
	}
	b.ReportMetric(float64(fetches), "fetches")
	b.ReportMetric(float64(xacts)/float64(items), "db-xacts/delivery")
	b.ReportMetric(float64(xacts)/float64(requests), "db-xacts/request")
	b.ReportMetric(float64(items)/float64(requests), "items/request")
	b.ReportMetric(pingBusy, "ping-busy-%")
	b.ReportMetric(fanBusy, "fanout-busy-%")
	b.ReportMetric(fanPingd, "fanout-pingd-%")
	b.ReportMetric(pingRate, "pings/s")
	b.ReportMetric(float64(items)/took.Seconds(), "deliveries/s")
	b.ReportMetric(float64(requests)/took.Seconds(), "requests/s")
	for _, d := range ds {
		d.Stop()
	}
}

// cpuReading is the machine's CPU time (from /proc/stat) and that of the
// pingd processes (from /proc/PID/stat), in clock ticks.
type cpuReading struct{ total, idle, pingd int64 }

func takeCPU(ds []*daemon) cpuReading {
	var r cpuReading
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(data), "\n")
		for i, f := range strings.Fields(line)[1:] {
			var v int64
			fmt.Sscan(f, &v)
			r.total += v
			if i == 3 || i == 4 { // idle, iowait
				r.idle += v
			}
		}
	}
	for _, d := range ds {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
		if err != nil {
			continue
		}
		// Fields after "(comm)": state is the first; utime and stime the
		// 12th and 13th.
		_, rest, _ := strings.Cut(string(data), ") ")
		fields := strings.Fields(rest)
		if len(fields) > 12 {
			var u, s int64
			fmt.Sscan(fields[11], &u)
			fmt.Sscan(fields[12], &s)
			r.pingd += u + s
		}
	}
	return r
}

// since returns how busy the machine was since r (percent of all CPUs)
// and the pingd processes' share of that busy time (percent).
func (r cpuReading) since(ds []*daemon) (busy, pingdShare float64) {
	now := takeCPU(ds)
	total, idle := now.total-r.total, now.idle-r.idle
	if total <= 0 || total == idle {
		return 0, 0
	}
	return 100 * float64(total-idle) / float64(total), 100 * float64(now.pingd-r.pingd) / float64(total-idle)
}

// TestScalingOptions: the options of several processes parse, default and
// validate like the others.
func TestScalingOptions(t *testing.T) {
	cfg, err := loadConfig(newFlagSet("serve", &bytes.Buffer{}), []string{"--xmpp-secret", "s"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DBMaxConns != 10 || cfg.XMPPShared {
		t.Fatalf("defaults: db-max-conns %d, xmpp-shared %v", cfg.DBMaxConns, cfg.XMPPShared)
	}
	cfg, err = loadConfig(newFlagSet("serve", &bytes.Buffer{}), []string{"--xmpp-secret", "s", "--xmpp-shared"},
		env(map[string]string{"PINGD_DB_MAX_CONNS": " 25 "}))
	if err != nil || cfg.DBMaxConns != 25 || !cfg.XMPPShared || cfg.Validate() != nil {
		t.Fatalf("set: %+v, %v", cfg, err)
	}
	var out bytes.Buffer
	cfg.write(&out)
	for _, want := range []string{"PINGD_DB_MAX_CONNS=25\n", "PINGD_XMPP_SHARED=1\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("config output lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := loadConfig(newFlagSet("serve", &bytes.Buffer{}), nil, env(map[string]string{"PINGD_DB_MAX_CONNS": "ten"})); err == nil ||
		!strings.Contains(err.Error(), "PINGD_DB_MAX_CONNS") || !strings.Contains(err.Error(), "whole number") {
		t.Fatalf("a word for a number: %v", err)
	}
	for _, n := range []string{"0", "-1", "100000"} {
		cfg, err := loadConfig(newFlagSet("serve", &bytes.Buffer{}), []string{"--xmpp-secret", "s", "--db-max-conns", n}, env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "PINGD_DB_MAX_CONNS") {
			t.Errorf("db-max-conns %s: %v", n, err)
		}
	}
	var help bytes.Buffer
	usage(&help)
	for _, want := range []string{"--db-max-conns", "PINGD_XMPP_SHARED", "pingd migrate-db --from sqlite:PATH --to postgres://"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// TestMigrateDBUsage: the subcommand's mistakes are explained.
func TestMigrateDBUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "both --from and --to are required"},
		{[]string{"--from", "x.db"}, 2, "both --from and --to are required"},
		{[]string{"--from", "x.db", "--to", "postgres://127.0.0.1:1/x", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--from", "postgres://127.0.0.1:1/x", "--to", "postgres://127.0.0.1:1/y"}, 1, "copying is from an SQLite file"},
		{[]string{"--from", filepath.Join(t.TempDir(), "missing.db"), "--to", "postgres://127.0.0.1:1/y"}, 1, "no such file"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"migrate-db"}, tc.args...), &stdout, &stderr, env(nil))
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("migrate-db %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}

// pgTransactions is the number of transactions the database has finished,
// from PostgreSQL's statistics (updated within a second or so).
func pgTransactions(tb testing.TB, dsn string) int64 {
	tb.Helper()
	time.Sleep(1500 * time.Millisecond) // let the statistics settle
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}
