package component

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/netguard"
	"github.com/pingd/pingd/internal/ratelimit"
	"github.com/pingd/pingd/internal/testenv"
)

// TestOneUsersFloodStaysItsOwn is the attack of one ordinary local user
// on everyone else: 1,100 chat commands "subscribe <page>" for pages whose
// server never answers. Each is a job; before, once 1,024 waited the
// stream's reader blocked, and nothing from the XMPP server was read for
// anyone (another user's help went unanswered for 36 s, notifications
// stopped). Now the user fills its own share and is refused beyond it: its
// own IQ gets resource-constraint, it gets one "busy" answer however many
// commands were refused, the page's server sees one look-up at a time;
// and meanwhile another user's help and disco#info are answered within a
// second and a notification published reaches a third user. The per-JID
// request rate is off here, so the share of pending requests alone holds.
func TestOneUsersFloodStaysItsOwn(t *testing.T) {
	testenv.RequireProsody(t)
	hang := make(chan struct{})
	var asked atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	stopHanging := sync.OnceFunc(func() { close(hang) })
	defer stopHanging() // before the server closes: deferred calls run last in, first out

	e := newEnv(t, envOptions{})
	e.p.Register("carol", password)
	e.createNode("demo", "Demo", hub.AccessOpen)
	e.stop()
	e.startComponentWith(func(c *Config) {
		c.OpenSources = true
		c.Resolver = &discovery.Client{HTTP: netguard.NewClient(netguard.Options{AllowPrivate: true, Timeout: time.Minute})}
		c.IQRate = -1
	})
	bob := e.dial("bob", "reader")
	result(t, e.request(bob, "set", subscribePayload("demo", bob.JID.String())))
	carol := e.dial("carol", "x")
	alice := e.dial("alice", "flood")

	const flood = 1100
	for i := range flood {
		sendNoWait(t, e.ctx, alice, fmt.Sprintf(`<message type="chat" to=%q><body>subscribe %s/p/%d</body></message>`,
			e.p.ComponentDomain, slow.URL, i))
	}
	// alice's own IQ comes after her commands on her stream: by its
	// answer the reader has taken them all, and her share is full.
	if el := e.request(alice, "get", `<query xmlns="http://jabber.org/protocol/disco#info"/>`); el.attr("type") != "error" {
		t.Errorf("with her share full, alice's disco#info was answered %s", el.standalone())
	} else {
		stanzaErr(t, el, "wait", "resource-constraint", "")
	}

	// Everyone else is served at once.
	start := time.Now()
	if got := chatSay(t, e, carol, "help"); !strings.Contains(got, "subscribe NODE") {
		t.Errorf("carol's help answered %q", got)
	}
	helpTook := time.Since(start)
	if helpTook > time.Second {
		t.Errorf("carol's help took %s during the flood, want under 1s", helpTook)
	}
	start = time.Now()
	info := result(t, e.request(carol, "get", `<query xmlns="http://jabber.org/protocol/disco#info"/>`))
	infoTook := time.Since(start)
	if infoTook > time.Second {
		t.Errorf("carol's disco#info took %s during the flood, want under 1s", infoTook)
	}
	if find(info, "query", "identity") == nil {
		t.Errorf("disco#info without an identity: %s", info.standalone())
	}
	start = time.Now()
	e.publish("demo", "during-flood")
	if items := itemsOf(t, nextEvent(t, bob, 5*time.Second), "demo"); len(items) != 1 || items[0].id != "during-flood" {
		t.Errorf("bob got %+v, want the item published during the flood", items)
	}
	t.Logf("during the flood: help answered in %s, disco#info in %s, a notification delivered in %s",
		helpTook.Round(time.Millisecond), infoTook.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	// alice: one "busy" answer for all her refused commands (they are
	// spaced busyNoteEvery apart), and her pages looked at one at a time.
	busy := 0
	for {
		select {
		case raw := <-alice.Stanzas:
			if el, err := parseDocument(raw); err == nil && el.Name.Local == "message" && strings.Contains(bodyOf(el), "busy with your earlier requests") {
				busy++
			}
			continue
		default:
		}
		break
	}
	if busy != 1 {
		t.Errorf("alice got %d busy answers for %d refused commands, want 1", busy, flood-DefaultPendingPerSender)
	}
	if n := asked.Load(); n < 1 || n > 2 {
		t.Errorf("the slow server was asked %d times, want one look-up at a time", n)
	}
}

// TestRequestRatePerJID: IQ requests and chat commands of one bare JID
// take tokens of one bucket (Config.IQRate, Config.IQBurst); beyond it an
// IQ is refused with resource-constraint (type wait), every IQ still
// answered exactly once, and a chat command gets the "busy" answer.
// Another user and the admins are not held to that user's bucket.
func TestRequestRatePerJID(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.stop()
	const burst = 5
	e.startComponentWith(func(c *Config) {
		c.IQRate, c.IQBurst = 0.01, burst // no token comes back during the test
	})
	alice := e.dial("alice", "fast")
	bob := e.dial("bob", "calm")
	admin := e.dial("admin", "ops")

	const sent = 40
	want := map[string]bool{}
	for i := range sent {
		id := fmt.Sprintf("rate-%d", i)
		want[id] = true
		sendNoWait(t, e.ctx, alice, fmt.Sprintf(`<iq type="get" to=%q id=%q><query xmlns="http://jabber.org/protocol/disco#info"/></iq>`,
			e.p.ComponentDomain, id))
	}
	results, refused := 0, 0
	for _, el := range collectAnswers(t, alice, want, 20*time.Second) {
		switch el.attr("type") {
		case "result":
			results++
		default:
			stanzaErr(t, el, "wait", "resource-constraint", "")
			refused++
		}
	}
	if results != burst || refused != sent-burst {
		t.Errorf("%d results and %d refusals, want %d and %d", results, refused, burst, sent-burst)
	}
	if got := chatSay(t, e, alice, "help"); !strings.Contains(got, "busy with your earlier requests") {
		t.Errorf("a chat command over the rate answered %q", got)
	}
	result(t, e.request(bob, "get", `<query xmlns="http://jabber.org/protocol/disco#info"/>`))
	for range 2 * burst {
		result(t, e.request(admin, "get", `<query xmlns="http://jabber.org/protocol/disco#info"/>`))
	}
}

// TestPageLookupsAreCountedPerRequest: the HTTP requests pingd makes to
// find the feed of a page a user names are counted per JID, each of them:
// before, 30 "subscribe <page>" commands for pages that redirect five
// times and name three descriptors that redirect five times each made
// 720 requests, and created no node, so no per-JID budget was used. Now
// the JID's budget (half an hour's worth in a burst: 60 requests by
// default) stops them, a look-up over it is cut, the next ones are
// refused before any request with a plain answer, and another user's
// look-up is not affected.
func TestPageLookupsAreCountedPerRequest(t *testing.T) {
	testenv.RequireProsody(t)
	var hits atomic.Int32
	var site *httptest.Server
	site = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		var kind string
		var page, desc, hop int
		if n, _ := fmt.Sscanf(r.URL.Path, "/p/%d/%d", &page, &hop); n == 2 {
			kind = "page"
		} else if n, _ := fmt.Sscanf(r.URL.Path, "/d/%d/%d/%d", &page, &desc, &hop); n == 3 {
			kind = "descriptor"
		} else {
			http.NotFound(w, r)
			return
		}
		switch {
		case hop < 5 && kind == "page":
			http.Redirect(w, r, fmt.Sprintf("/p/%d/%d", page, hop+1), http.StatusFound)
		case hop < 5:
			http.Redirect(w, r, fmt.Sprintf("/d/%d/%d/%d", page, desc, hop+1), http.StatusFound)
		case kind == "page":
			w.Header().Set("Link", fmt.Sprintf(`<%s/d/%d/2/0>; rel="getpingd.updates.descriptor"`, site.URL, page))
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<html><head><meta http-equiv="X-XRDS-Location" content="%[1]s/d/%[2]d/0/0">`+
				`<link rel="getpingd.updates.descriptor" href="%[1]s/d/%[2]d/1/0"></head><body>no feed</body></html>`, site.URL, page)
		default:
			w.Header().Set("Content-Type", "application/xrds+xml")
			fmt.Fprint(w, `<?xml version="1.0"?><xrds:XRDS xmlns:xrds="xri://$xrds" xmlns="xri://$xrd*($v*2.0)"><XRD/></xrds:XRDS>`)
		}
	}))
	defer site.Close()

	e := newEnv(t, envOptions{})
	e.stop()
	e.startComponentWith(func(c *Config) {
		c.OpenSources = true
		c.Resolver = &discovery.Client{HTTP: netguard.NewClient(netguard.Options{AllowPrivate: true, Timeout: time.Minute})}
	})
	alice := e.dial("alice", "pages")
	const pages = 30
	var answers []string
	for i := range pages {
		answers = append(answers, chatSay(t, e, alice, fmt.Sprintf("subscribe %s/p/%d/0", site.URL, i)))
	}
	budget := ratelimit.DefaultLookupRequestsPerHour / 2
	if got := hits.Load(); got < 24 || got > int32(budget)+1 {
		t.Errorf("the site got %d requests for %d commands; want at most the budget of %d", got, pages, budget)
	}
	if !strings.Contains(answers[0], "could not find a feed") {
		t.Errorf("the first look-up answered %q", answers[0])
	}
	last := answers[pages-1]
	if !strings.Contains(last, "you have had it look at many pages recently") || !strings.Contains(last, "Try again in") {
		t.Errorf("a look-up over the budget answered %q", last)
	}
	before := hits.Load()
	if got := chatSay(t, e, alice, fmt.Sprintf("subscribe %s/p/99/0", site.URL)); !strings.Contains(got, "many pages recently") {
		t.Errorf("one more look-up answered %q", got)
	}
	if hits.Load() != before {
		t.Error("a look-up over the budget made a request")
	}
	bob := e.dial("bob", "pages")
	if got := chatSay(t, e, bob, fmt.Sprintf("subscribe %s/p/100/0", site.URL)); !strings.Contains(got, "could not find a feed") {
		t.Errorf("another user's look-up answered %q", got)
	}
	t.Logf("%d commands made %d requests", pages, before)
}

// TestLookUpsEndWithTheirStream: a page look-up's only outcome is an
// answer on the stream it came by, so when that stream ends the look-up
// is abandoned: the component reconnects at once, not after every
// queued look-up has run (before, about 5 h for the flood of 1,100
// commands at 18 s each).
func TestLookUpsEndWithTheirStream(t *testing.T) {
	hang := make(chan struct{})
	var asked atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hang)
	e, proxy, alice := newProxiedEnv(t, func(c *Config) {
		c.OpenSources = true
		c.Resolver = &discovery.Client{HTTP: netguard.NewClient(netguard.Options{AllowPrivate: true, Timeout: time.Minute})}
		c.LookupTimeout = time.Minute
	})
	for i := range 5 {
		sendNoWait(t, e.ctx, alice, fmt.Sprintf(`<message type="chat" to=%q><body>subscribe %s/p/%d</body></message>`,
			e.p.ComponentDomain, slow.URL, i))
	}
	testenv.WaitFor(t, 10*time.Second, "the first page to be asked for", func() bool { return asked.Load() == 1 })
	proxy.Block()
	testenv.WaitFor(t, 10*time.Second, "the component to notice", func() bool { return !e.comp.Connected() })
	proxy.Allow()
	testenv.WaitFor(t, 10*time.Second, "the component to reconnect", e.comp.Connected)
	if n := asked.Load(); n != 1 {
		t.Errorf("the slow server was asked %d times: the look-ups queued behind the stream's end ran", n)
	}
}
