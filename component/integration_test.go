package component

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/hub/fetching"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// Integration tests: a real Prosody started by the test with the component
// configured, real SQLite stores in temp dirs, and real mellium client
// sessions as subscribers and owners. They skip only in -short mode.

const password = "secret-pw"

// envPublicURL is the public URL of the env's pingd.
const envPublicURL = "http://pingd.test"

// logBuffer collects a component's log lines for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// env is one Prosody with pingd's hub and component attached.
type env struct {
	t      *testing.T
	ctx    context.Context
	p      *testenv.Prosody
	store  store.Store
	hub    *hub.Hub
	comp   *Component
	logs   *logBuffer
	admin  string
	stop   func()
	dbPath string
	// configure, when set, changes the component's Config before New.
	configure func(*Config)
}

type envOptions struct {
	// addr overrides the component address (a proxy in front of Prosody).
	addr  string
	level slog.Level
	// hub, when set, changes the hub's Config before hub.New; the hub's
	// loops run when it sets a Fetcher.
	hub func(*hub.Config)
	// fetching, when set, changes the fetch engine's Config (which runs
	// when hub sets a Fetcher).
	fetching func(*fetching.Config)
	// prosody adjusts the server newEnv starts.
	prosody testenv.ProsodyOptions
}

func newEnv(t *testing.T, opts envOptions) *env {
	t.Helper()
	p := testenv.StartProsody(t, opts.prosody)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, p: p, logs: &logBuffer{}, dbPath: filepath.Join(t.TempDir(), "pingd.db")}
	e.admin = p.Register("admin", password)
	p.Register("alice", password)
	p.Register("bob", password)
	st, err := store.Open(ctx, e.dbPath, store.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	e.store = st
	e.startComponent(opts)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("component log:\n%s", e.logs.String())
		}
	})
	return e
}

// startComponent starts a pingd hub and component on the env's store (a
// new pingd process, as far as the XMPP side can tell) and waits until it
// is connected.
func (e *env) startComponent(opts envOptions) {
	e.t.Helper()
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: opts.level}))
	hcfg := hub.Config{Stores: store.HubStores(e.store), Admins: []string{e.admin}, Logger: log}
	if opts.hub != nil {
		opts.hub(&hcfg)
	}
	if hcfg.Fetcher != nil {
		fcfg := fetching.Config{Store: e.store, Fetcher: hcfg.Fetcher, Now: hcfg.Now, Instance: hcfg.Instance, Logger: log}
		if opts.fetching != nil {
			opts.fetching(&fcfg)
		}
		engine, err := fetching.New(fcfg)
		if err != nil {
			e.t.Fatal(err)
		}
		hcfg.Fetches = engine
		if r, ok := hcfg.Fetcher.(hub.EntryReader); ok && hcfg.Entries == nil {
			hcfg.Entries = r // the feed fetcher, as cmd/pingd gives it
		}
	}
	h, err := hub.New(hcfg)
	if err != nil {
		e.t.Fatal(err)
	}
	addr := opts.addr
	if addr == "" {
		addr = e.p.ComponentAddr
	}
	cfg := Config{
		Hub: h, Store: e.store, Domain: e.p.ComponentDomain, Addr: addr, Secret: e.p.Secret,
		PublicURL: envPublicURL, Logger: log,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
		CompleteEntry: feed.CompleteEntry,
		Patch: func(n *hub.Node, events []hub.Event) ([]byte, error) {
			return delivery.NodePatch(envPublicURL, n, events)
		},
	}
	if e.configure != nil {
		e.configure(&cfg)
	}
	comp, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	h.Register(comp, hub.KindXMPP)
	ctx, cancel := context.WithCancel(e.ctx)
	var running sync.WaitGroup
	running.Go(func() {
		if err := comp.Run(ctx); err != nil {
			e.t.Errorf("Run: %v", err)
		}
	})
	if hcfg.Fetcher != nil {
		running.Go(func() { _ = h.Run(ctx) })
	}
	var once sync.Once
	e.stop = func() { once.Do(func() { cancel(); running.Wait() }) }
	e.t.Cleanup(e.stop)
	e.hub, e.comp = h, comp
	testenv.WaitFor(e.t, 20*time.Second, "the component to connect", comp.Connected)
}

// startComponentWith starts a new component whose Config configure changes.
func (e *env) startComponentWith(configure func(*Config)) {
	e.t.Helper()
	e.configure = configure
	e.startComponent(envOptions{})
}

func (e *env) dial(user, resource string) *testenv.Client {
	e.t.Helper()
	return testenv.Dial(e.ctx, e.t, e.p, user, password, resource)
}

// createNode creates a node through the hub, as the admin API would.
func (e *env) createNode(name, title string, model hub.AccessModel) *hub.Node {
	e.t.Helper()
	cfg := hub.DefaultNodeConfig()
	cfg.Title, cfg.AccessModel = title, model
	n, _, err := e.hub.CreateNode(e.ctx, hub.NodeSpec{Name: name, Config: cfg})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func atomEntry(id, title string) []byte {
	return []byte(fmt.Sprintf(`<entry xmlns="http://www.w3.org/2005/Atom"><id>%s</id><title>%s</title>`+
		`<link href="http://example.org/%s"/><updated>2024-01-02T03:04:05Z</updated></entry>`, id, title, id))
}

// publish publishes Atom entries through the hub (a feed's new items).
func (e *env) publish(node string, ids ...string) {
	e.t.Helper()
	var entries []hub.Entry
	for _, id := range ids {
		entries = append(entries, hub.Entry{ID: id, Title: "Title " + id, Link: "http://example.org/" + id, Payload: atomEntry(id, "Title "+id)})
	}
	if _, err := e.hub.Publish(e.ctx, node, "", entries); err != nil {
		e.t.Fatal(err)
	}
}

// request sends an IQ to the component and returns the parsed answer.
// pendingQueries counts pingd's own queries (queries.go) awaiting their
// answer on the live connection.
func (e *env) pendingQueries() int {
	cn := e.comp.connection()
	if cn == nil {
		return 0
	}
	cn.queries.mu.Lock()
	defer cn.queries.mu.Unlock()
	return len(cn.queries.m)
}

func (e *env) request(c *testenv.Client, typ, payload string) *element {
	e.t.Helper()
	return e.requestTo(c, e.p.ComponentDomain, typ, payload)
}

func (e *env) requestTo(c *testenv.Client, to, typ, payload string) *element {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 15*time.Second)
	defer cancel()
	resp, err := c.SendRaw(ctx, fmt.Sprintf(`<iq type=%q to=%q id=%q>%s</iq>`, typ, to, "r"+hub.RandomID()[:8], payload))
	if err != nil {
		e.t.Fatalf("IQ %s: %v", payload, err)
	}
	el, err := parseDocument([]byte(resp))
	if err != nil {
		e.t.Fatalf("answer %q: %v", resp, err)
	}
	return el
}

// result checks that an answer is a result and returns it.
func result(t testing.TB, el *element) *element {
	t.Helper()
	if el.attr("type") != "result" {
		t.Fatalf("want a result, got %s", el.standalone())
	}
	return el
}

// stanzaErr checks that an answer is an error with the condition (and the
// pubsub#errors condition app, if not empty).
func stanzaErr(t testing.TB, el *element, typ, cond, app string) *element {
	t.Helper()
	errEl := el.child(el.Name.Space, "error")
	if el.attr("type") != "error" || errEl == nil {
		t.Fatalf("want error %s/%s, got %s", cond, app, el.standalone())
	}
	if errEl.attr("type") != typ || errEl.child(nsStanzaErrors, cond) == nil {
		t.Fatalf("want error type %s condition %s, got %s", typ, cond, el.standalone())
	}
	if app != "" && errEl.child(nsPubsubErrors, app) == nil {
		t.Fatalf("want pubsub#errors %s, got %s", app, el.standalone())
	}
	if errEl.attr("by") == "" {
		t.Errorf("error without by: %s", el.standalone())
	}
	return errEl
}

// find walks a path of local names below el (namespaces are checked by
// the payload's first element only).
func find(el *element, path ...string) *element {
	for _, p := range path {
		if el == nil {
			return nil
		}
		var next *element
		for _, c := range el.Children {
			if c.Name.Local == p {
				next = c
				break
			}
		}
		el = next
	}
	return el
}

// atomFields are an Atom entry's id, title, alternate link and updated.
func atomFields(entry *element) [4]string {
	if entry == nil {
		return [4]string{}
	}
	return [4]string{entry.child(nsAtom, "id").text(), entry.child(nsAtom, "title").text(), atomLink(entry),
		entry.child(nsAtom, "updated").text()}
}

// event is one received pubsub#event message.
type event struct {
	msg *element
	ev  *element
}

// nextEvent waits for the next pubsub#event message.
func nextEvent(t testing.TB, c *testenv.Client, d time.Duration) *event {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case raw := <-c.Stanzas:
			el, err := parseDocument(raw)
			if err != nil {
				t.Fatalf("unparsable stanza %q: %v", raw, err)
			}
			if el.Name.Local != "message" {
				continue
			}
			if ev := el.child(nsPubsubEvent, "event"); ev != nil {
				return &event{msg: el, ev: ev}
			}
		case <-timeout:
			t.Fatalf("%s: no event within %s", c.JID, d)
			return nil
		}
	}
}

// noEvents checks that no pubsub#event arrives for a while.
func noEvents(t testing.TB, c *testenv.Client, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case raw := <-c.Stanzas:
			if bytes.Contains(raw, []byte(nsPubsubEvent)) {
				t.Fatalf("%s: unexpected event %s", c.JID, raw)
			}
		case <-timeout:
			return
		}
	}
}

// receivedItem is an item of a notification.
type receivedItem struct{ id, title string }

// itemsOf returns the items of an items event.
func itemsOf(t testing.TB, e *event, node string) []receivedItem {
	t.Helper()
	items := e.ev.child(nsPubsubEvent, "items")
	if items == nil || items.attr("node") != node {
		t.Fatalf("want items of %q, got %s", node, e.msg.standalone())
	}
	var out []receivedItem
	for _, it := range items.childrenNamed(nsPubsubEvent, "item") {
		title := ""
		if entry := it.child(nsAtom, "entry"); entry != nil {
			title = entry.child(nsAtom, "title").text()
		}
		out = append(out, receivedItem{id: it.attr("id"), title: title})
	}
	return out
}

// collectItems reads n item notifications.
func collectItems(t testing.TB, c *testenv.Client, node string, n int) []receivedItem {
	t.Helper()
	var got []receivedItem
	for len(got) < n {
		got = append(got, itemsOf(t, nextEvent(t, c, 10*time.Second), node)...)
	}
	return got
}

func subscribePayload(node, j string) string {
	return fmt.Sprintf(`<pubsub xmlns="http://jabber.org/protocol/pubsub"><subscribe node=%q jid=%q/></pubsub>`, node, j)
}

func TestDisco(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("feeds/demo", "Demo feed", hub.AccessOpen)
	e.createNode("closed", "", hub.AccessWhitelist)
	alice := e.dial("alice", "disco")

	info := result(t, e.request(alice, "get", `<query xmlns="http://jabber.org/protocol/disco#info"/>`))
	q := info.child(nsDiscoInfo, "query")
	id := q.child(nsDiscoInfo, "identity")
	if id == nil || id.attr("category") != "pubsub" || id.attr("type") != "service" {
		t.Fatalf("identity: %s", info.standalone())
	}
	var features []string
	for _, f := range q.childrenNamed(nsDiscoInfo, "feature") {
		features = append(features, f.attr("var"))
	}
	want := []string{nsDiscoInfo, nsDiscoItems, nsCommands, nsPubsub, nsRSM}
	for _, f := range pubsubFeatures {
		want = append(want, nsPubsub+"#"+f)
	}
	slices.Sort(features)
	slices.Sort(want)
	if !slices.Equal(features, want) {
		t.Fatalf("features:\n got %v\nwant %v", features, want)
	}
	for _, f := range []string{"subscribe", "publish", "access-whitelist", "retrieve-items", "modify-affiliations", "config-node-max"} {
		if !slices.Contains(features, nsPubsub+"#"+f) {
			t.Errorf("feature %s missing", f)
		}
	}

	items := result(t, e.request(alice, "get", `<query xmlns="http://jabber.org/protocol/disco#items"/>`))
	var nodes []string
	for _, it := range items.child(nsDiscoItems, "query").childrenNamed(nsDiscoItems, "item") {
		if it.attr("jid") != e.p.ComponentDomain {
			t.Errorf("item jid %q", it.attr("jid"))
		}
		nodes = append(nodes, it.attr("node")+"="+it.attr("name"))
	}
	slices.Sort(nodes)
	if !slices.Equal(nodes, []string{"closed=", "feeds/demo=Demo feed"}) {
		t.Fatalf("disco#items nodes %v", nodes)
	}

	ninfo := result(t, e.request(alice, "get", `<query xmlns="http://jabber.org/protocol/disco#info" node="feeds/demo"/>`))
	nq := ninfo.child(nsDiscoInfo, "query")
	if nq.attr("node") != "feeds/demo" {
		t.Errorf("node info query node=%q", nq.attr("node"))
	}
	nid := nq.child(nsDiscoInfo, "identity")
	if nid == nil || nid.attr("category") != "pubsub" || nid.attr("type") != "leaf" {
		t.Fatalf("node identity: %s", ninfo.standalone())
	}
	form, serr := parseForm(nq.child(nsDataForms, "x"))
	if serr != nil {
		t.Fatalf("meta-data form: %v in %s", serr, ninfo.standalone())
	}
	for k, v := range map[string]string{"FORM_TYPE": formMetaData, fieldTitle: "Demo feed", fieldAccessModel: "open",
		fieldMaxItems: "50", fieldDeliverPayloads: "1", fieldNotificationType: "headline"} {
		if got := form.Values[k]; len(got) != 1 || got[0] != v {
			t.Errorf("meta-data %s = %v, want %s", k, got, v)
		}
	}

	stanzaErr(t, e.request(alice, "get", `<query xmlns="http://jabber.org/protocol/disco#info" node="nope"/>`), "cancel", "item-not-found", "")
	stanzaErr(t, e.request(alice, "get", `<query xmlns="http://jabber.org/protocol/disco#items" node="nope"/>`), "cancel", "item-not-found", "")
}

func TestSubscribePublishRetrieve(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("demo", "Demo", hub.AccessOpen)
	e.publish("demo", "old") // before anyone subscribed: sent to new subscriptions only
	alice := e.dial("alice", "phone")
	bare := alice.JID.Bare().String()

	r1 := result(t, e.request(alice, "set", subscribePayload("demo", bare)))
	sub1 := find(r1, "pubsub", "subscription")
	if sub1 == nil || sub1.attr("subscription") != "subscribed" || sub1.attr("subid") == "" || sub1.attr("jid") != bare {
		t.Fatalf("subscribe answer %s", r1.standalone())
	}
	// A new subscription is sent the newest item at once (§12.5), and
	// only that one.
	if got := collectItems(t, alice, "demo", 1); got[0].id != "old" {
		t.Fatalf("the new subscription was sent %v, want the newest item", got)
	}
	// Subscribing again gives the same subscription back.
	r2 := result(t, e.request(alice, "set", subscribePayload("demo", bare)))
	if sid := find(r2, "pubsub", "subscription").attr("subid"); sid != sub1.attr("subid") {
		t.Fatalf("second subscribe gave subid %q, want %q", sid, sub1.attr("subid"))
	}

	e.publish("demo", "a1", "a2")
	got := collectItems(t, alice, "demo", 2)
	want := []receivedItem{{"a1", "Title a1"}, {"a2", "Title a2"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got items %v, want %v", got, want)
	}
	e.publish("demo", "a3")
	if got := collectItems(t, alice, "demo", 1); !slices.Equal(got, []receivedItem{{"a3", "Title a3"}}) {
		t.Fatalf("got %v after the third publish", got)
	}
	noEvents(t, alice, time.Second) // one notification per item, nothing old

	// Retrieve items: newest first, max_items, by id.
	ids := func(el *element) []string {
		var out []string
		for _, it := range find(el, "pubsub", "items").Children {
			out = append(out, it.attr("id"))
		}
		return out
	}
	all := result(t, e.request(alice, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="demo"/></pubsub>`))
	if got := ids(all); !slices.Equal(got, []string{"a3", "a2", "a1", "old"}) {
		t.Fatalf("all items %v", got)
	}
	if title := find(all, "pubsub", "items", "item", "entry", "title"); title == nil || title.text() != "Title a3" {
		t.Fatalf("items carry no Atom payload: %s", all.standalone())
	}
	two := result(t, e.request(alice, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="demo" max_items="2"/></pubsub>`))
	if got := ids(two); !slices.Equal(got, []string{"a3", "a2"}) {
		t.Fatalf("max_items=2 gave %v", got)
	}
	one := result(t, e.request(alice, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="demo"><item id="a1"/><item id="missing"/></items></pubsub>`))
	if got := ids(one); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("by id gave %v", got)
	}
	stanzaErr(t, e.request(alice, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="nope"/></pubsub>`), "cancel", "item-not-found", "")

	// Own subscriptions and affiliations.
	subs := result(t, e.request(alice, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><subscriptions/></pubsub>`))
	list := find(subs, "pubsub", "subscriptions").Children
	if len(list) != 1 || list[0].attr("node") != "demo" || list[0].attr("subid") != sub1.attr("subid") {
		t.Fatalf("own subscriptions %s", subs.standalone())
	}
	affs := result(t, e.request(alice, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><affiliations/></pubsub>`))
	if n := len(find(affs, "pubsub", "affiliations").Children); n != 0 {
		t.Fatalf("alice has no affiliations, got %s", affs.standalone())
	}

	// Someone else's JID: refused.
	stanzaErr(t, e.request(alice, "set", subscribePayload("demo", "bob@localhost")), "modify", "bad-request", "invalid-jid")
	stanzaErr(t, e.request(alice, "set", subscribePayload("nope", bare)), "cancel", "item-not-found", "")

	// Unsubscribe, then unsubscribe again.
	result(t, e.request(alice, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><unsubscribe node="demo" jid="`+bare+`"/></pubsub>`))
	stanzaErr(t, e.request(alice, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><unsubscribe node="demo" jid="`+bare+`"/></pubsub>`),
		"cancel", "unexpected-request", "not-subscribed")
	e.publish("demo", "a4")
	noEvents(t, alice, time.Second)
}

func TestWhitelist(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("closed", "Closed", hub.AccessWhitelist)
	bob := e.dial("bob", "r")
	admin := e.dial("admin", "r")
	bobBare := bob.JID.Bare().String()

	stanzaErr(t, e.request(bob, "set", subscribePayload("closed", bobBare)), "cancel", "not-allowed", "closed-node")
	stanzaErr(t, e.request(bob, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="closed"/></pubsub>`), "cancel", "not-allowed", "closed-node")

	// The owner (an admin JID) adds bob as a member over XMPP.
	setAff := func(aff string) {
		t.Helper()
		result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><affiliations node="closed">`+
			`<affiliation jid="`+bobBare+`" affiliation="`+aff+`"/></affiliations></pubsub>`))
	}
	setAff("member")
	// The list names every owner (XEP-0060 §8.9.1.2): the admins own
	// every node.
	affs := result(t, e.request(admin, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><affiliations node="closed"/></pubsub>`))
	listed := map[string]string{}
	for _, a := range find(affs, "pubsub", "affiliations").childrenNamed(nsPubsubOwner, "affiliation") {
		listed[a.attr("jid")] = a.attr("affiliation")
	}
	if want := map[string]string{bobBare: "member", e.admin: "owner"}; !maps.Equal(listed, want) {
		t.Fatalf("affiliations %v, want %v: %s", listed, want, affs.standalone())
	}
	// An admin's ownership comes from the configuration: a change to it
	// is refused with the entries as they stand (§8.9.2.4), and the other
	// entries of the request are not made either.
	ans := e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><affiliations node="closed">`+
		`<affiliation jid="`+bobBare+`" affiliation="none"/><affiliation jid="`+e.admin+`" affiliation="member"/></affiliations></pubsub>`)
	stanzaErr(t, ans, "modify", "not-acceptable", "")
	returned := map[string]string{}
	if list := find(ans, "pubsub", "affiliations"); list != nil {
		for _, a := range list.childrenNamed(nsPubsubOwner, "affiliation") {
			returned[a.attr("jid")] = a.attr("affiliation")
		}
	}
	if want := map[string]string{bobBare: "member", e.admin: "owner"}; !maps.Equal(returned, want) {
		t.Errorf("entries returned with the refusal %v, want %v: %s", returned, want, ans.standalone())
	}
	result(t, e.request(bob, "set", subscribePayload("closed", bobBare)))
	e.publish("closed", "w1")
	if got := collectItems(t, bob, "closed", 1); got[0].id != "w1" {
		t.Fatalf("member got %v", got)
	}

	// Owner sets none: the subscription goes, bob is told, and gets no more.
	setAff("none")
	ev := nextEvent(t, bob, 10*time.Second)
	sub := ev.ev.child(nsPubsubEvent, "subscription")
	if sub == nil || sub.attr("node") != "closed" || sub.attr("subscription") != "none" || sub.attr("jid") != bobBare {
		t.Fatalf("want a subscription-state notification, got %s", ev.msg.standalone())
	}
	subs := result(t, e.request(admin, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><subscriptions node="closed"/></pubsub>`))
	if n := len(find(subs, "pubsub", "subscriptions").Children); n != 0 {
		t.Fatalf("subscription still listed: %s", subs.standalone())
	}
	e.publish("closed", "w2")
	noEvents(t, bob, time.Second)
	stanzaErr(t, e.request(bob, "set", subscribePayload("closed", bobBare)), "cancel", "not-allowed", "closed-node")

	// An outcast may not even read an open node.
	e.createNode("open", "", hub.AccessOpen)
	result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><affiliations node="open">`+
		`<affiliation jid="`+bobBare+`" affiliation="outcast"/></affiliations></pubsub>`))
	stanzaErr(t, e.request(bob, "set", subscribePayload("open", bobBare)), "auth", "forbidden", "")
	stanzaErr(t, e.request(bob, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="open"/></pubsub>`), "auth", "forbidden", "")
}

func TestOwnerUseCases(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	admin := e.dial("admin", "r")
	alice := e.dial("alice", "r")
	aliceBare := alice.JID.Bare().String()

	// Create with a configuration form.
	result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><create node="news"/><configure>`+
		submitForm("pubsub#title", "News", "pubsub#max_items", "3")+`</configure></pubsub>`))
	n, err := e.hub.Node(e.ctx, "news")
	if err != nil || n.Title != "News" || n.MaxItems != 3 {
		t.Fatalf("created node %+v, %v", n, err)
	}
	stanzaErr(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><create node="news"/></pubsub>`), "cancel", "conflict", "")
	// The ad-hoc commands' prefix is reserved: such a node would be hidden
	// behind a command in disco#info.
	for _, name := range []string{"pingd#subscribe", "pingd#mine"} {
		refused := stanzaErr(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><create node="`+name+`"/></pubsub>`), "modify", "not-acceptable", "")
		if txt := refused.child(nsStanzaErrors, "text"); txt == nil || !strings.Contains(txt.text(), "reserved") {
			t.Errorf("creating %q refused without saying the name is reserved: %s", name, refused.standalone())
		}
		if _, err := e.hub.Node(e.ctx, name); err == nil {
			t.Errorf("node %q created", name)
		}
	}
	cmdInfo := result(t, e.request(admin, "get", `<query xmlns="http://jabber.org/protocol/disco#info" node="pingd#subscribe"/>`))
	if id := find(cmdInfo, "query", "identity"); id == nil || id.attr("category") != "automation" {
		t.Errorf("disco#info on pingd#subscribe is not the command's: %s", cmdInfo.standalone())
	}
	stanzaErr(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><create node="bad"/><configure>`+
		submitForm("pubsub#access_model", "roster")+`</configure></pubsub>`), "modify", "not-acceptable", "unsupported-access-model")
	instant := result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><create/></pubsub>`))
	if name := find(instant, "pubsub", "create").attr("node"); name == "" {
		t.Fatalf("instant node without a name: %s", instant.standalone())
	} else if _, err := e.hub.Node(e.ctx, name); err != nil {
		t.Fatalf("instant node %q: %v", name, err)
	}
	stanzaErr(t, e.request(alice, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><create node="mine"/></pubsub>`), "auth", "forbidden", "")

	// Configure: get the form, submit a changed copy, get it again.
	conf := result(t, e.request(admin, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><configure node="news"/></pubsub>`))
	x := find(conf, "pubsub", "configure", "x")
	if x == nil || x.attr("type") != "form" {
		t.Fatalf("configure get: %s", conf.standalone())
	}
	for _, f := range x.Children {
		if f.attr("var") == fieldTitle {
			f.Children[0].content = []any{"Latest news"}
		}
	}
	x.Attr = []xml.Attr{{Name: xml.Name{Local: "type"}, Value: "submit"}}
	result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><configure node="news">`+
		string(x.standalone())+`</configure></pubsub>`))
	conf = result(t, e.request(admin, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><configure node="news"/></pubsub>`))
	f, serr := parseForm(find(conf, "pubsub", "configure", "x"))
	if serr != nil || f.Values[fieldTitle][0] != "Latest news" || f.Values[fieldMaxItems][0] != "3" {
		t.Fatalf("after submit: %s", conf.standalone())
	}
	stanzaErr(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><configure node="news">`+
		submitForm("pubsub#max_items", "lots")+`</configure></pubsub>`), "modify", "not-acceptable", "")
	stanzaErr(t, e.request(admin, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><configure node="nope"/></pubsub>`), "cancel", "item-not-found", "")
	def := result(t, e.request(alice, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><default/></pubsub>`))
	if find(def, "pubsub", "default", "x") == nil {
		t.Fatalf("default: %s", def.standalone())
	}

	// Publish an Atom entry; alice is subscribed.
	result(t, e.request(alice, "set", subscribePayload("news", aliceBare)))
	pub := result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><publish node="news"><item id="e1">`+
		string(atomEntry("e1", "First"))+`</item></publish></pubsub>`))
	if id := find(pub, "pubsub", "publish", "item").attr("id"); id != "e1" {
		t.Fatalf("publish answer %s", pub.standalone())
	}
	if got := collectItems(t, alice, "news", 1); got[0] != (receivedItem{"e1", "First"}) {
		t.Fatalf("alice got %v", got)
	}
	// The nodes carry Atom entries (their pubsub#type): another payload is
	// refused (XEP-0060 §7.1.3.5) and nothing is stored or sent.
	stanzaErr(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><publish node="news"><item id="geo">`+
		`<geoloc xmlns="http://jabber.org/protocol/geoloc"><lat>45.44</lat></geoloc></item></publish></pubsub>`), "modify", "bad-request", "invalid-payload")
	if items, _ := e.hub.Items(e.ctx, n, []string{"geo"}, 0); len(items) != 0 {
		t.Fatalf("a refused payload was stored: %+v", items)
	}
	// An entry with a title only, and no item id: it gets an id, the
	// entry the elements every item carries (as the node's feed shows
	// them), and notifications, items retrieval and the feed agree.
	pub = result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><publish node="news"><item>`+
		`<entry xmlns="http://www.w3.org/2005/Atom"><title>Only a title</title></entry></item></publish></pubsub>`))
	genID := find(pub, "pubsub", "publish", "item").attr("id")
	if genID == "" {
		t.Fatalf("no generated id: %s", pub.standalone())
	}
	ev := nextEvent(t, alice, 10*time.Second)
	item := find(ev.ev, "items", "item")
	if item == nil || item.attr("id") != genID {
		t.Fatalf("want the notification of %s, got %s", genID, ev.msg.standalone())
	}
	if ev.msg.attr("type") != "headline" || ev.msg.attr("from") != e.p.ComponentDomain {
		t.Fatalf("notification type/from: %s", ev.msg.standalone())
	}
	notified := atomFields(item.child(nsAtom, "entry"))
	if want := [4]string{feed.AtomID(genID), "Only a title", "http://pingd.test/feeds/news"}; notified[0] != want[0] ||
		notified[1] != want[1] || notified[2] != want[2] || notified[3] == "" {
		t.Fatalf("notified entry %q, want id, title and link %q and an updated", notified, want[:3])
	}
	retrieved := result(t, e.request(alice, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="news"><item id="`+genID+`"/></items></pubsub>`))
	if got := atomFields(find(retrieved, "pubsub", "items", "item", "entry")); got != notified {
		t.Errorf("retrieved entry %q, notified %q", got, notified)
	}
	stored, err := e.hub.Items(e.ctx, n, []string{genID}, 0)
	if err != nil || len(stored) != 1 {
		t.Fatalf("stored items %+v, %v", stored, err)
	}
	atomDoc, err := parseDocument(feed.AtomFeed(feed.FeedMeta{Title: "News"}, stored))
	if err != nil {
		t.Fatal(err)
	}
	if got := atomFields(atomDoc.child(nsAtom, "entry")); got != notified {
		t.Errorf("the node's Atom feed shows %q, notifications %q", got, notified)
	}
	if stored[0].Title != "Only a title" || stored[0].Link != notified[2] || stored[0].Updated.IsZero() {
		t.Errorf("plain fields of the stored item %+v, want those of the entry", stored[0])
	}
	// Without an item id, the entry's own Atom id names the item and stays.
	pub = result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><publish node="news"><item>`+
		`<entry xmlns="http://www.w3.org/2005/Atom"><id>tag:example.org,2024:own</id><title>Own id</title></entry></item></publish></pubsub>`))
	if id := find(pub, "pubsub", "publish", "item").attr("id"); id != "tag:example.org,2024:own" {
		t.Errorf("an entry with an Atom id and no item id was published as %q", id)
	}
	if got := atomFields(find(nextEvent(t, alice, 10*time.Second).ev, "items", "item", "entry")); got[0] != "tag:example.org,2024:own" {
		t.Errorf("the entry's own id was not kept: %q", got)
	}

	// Retract with notification.
	result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><retract node="news" notify="true"><item id="e1"/></retract></pubsub>`))
	ev = nextEvent(t, alice, 10*time.Second)
	if r := find(ev.ev, "items", "retract"); r == nil || r.attr("id") != "e1" {
		t.Fatalf("want a retract notification, got %s", ev.msg.standalone())
	}
	stanzaErr(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><retract node="news"><item id="e1"/></retract></pubsub>`), "cancel", "item-not-found", "")

	// deliver_payloads off and notification_type normal.
	result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><configure node="news">`+
		submitForm("pubsub#deliver_payloads", "0", "pubsub#notification_type", "normal")+`</configure></pubsub>`))
	result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><publish node="news"><item id="e2">`+
		string(atomEntry("e2", "Second"))+`</item></publish></pubsub>`))
	ev = nextEvent(t, alice, 10*time.Second)
	if it := find(ev.ev, "items", "item"); it == nil || it.attr("id") != "e2" || len(it.Children) != 0 || ev.msg.attr("type") != "normal" {
		t.Fatalf("want a payload-free normal notification of e2, got %s", ev.msg.standalone())
	}

	// Purge.
	result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><purge node="news"/></pubsub>`))
	ev = nextEvent(t, alice, 10*time.Second)
	if p := ev.ev.child(nsPubsubEvent, "purge"); p == nil || p.attr("node") != "news" || ev.msg.attr("id") == "" {
		t.Fatalf("want a purge notification with an id, got %s", ev.msg.standalone())
	}
	items := result(t, e.request(alice, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="news"/></pubsub>`))
	if n := len(find(items, "pubsub", "items").Children); n != 0 {
		t.Fatalf("items after purge: %s", items.standalone())
	}

	// Manage subscriptions.
	subs := result(t, e.request(admin, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><subscriptions node="news"/></pubsub>`))
	if s := find(subs, "pubsub", "subscriptions", "subscription"); s == nil || s.attr("jid") != aliceBare {
		t.Fatalf("owner subscriptions: %s", subs.standalone())
	}

	// A non-owner is refused everything an owner may do.
	for _, p := range []string{
		`<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><configure node="news"/></pubsub>`,
		`<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><subscriptions node="news"/></pubsub>`,
		`<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><affiliations node="news"/></pubsub>`,
	} {
		stanzaErr(t, e.request(alice, "get", p), "auth", "forbidden", "")
	}
	for _, p := range []string{
		`<pubsub xmlns="http://jabber.org/protocol/pubsub"><publish node="news"><item>` + string(atomEntry("x", "Not mine")) + `</item></publish></pubsub>`,
		`<pubsub xmlns="http://jabber.org/protocol/pubsub"><retract node="news"><item id="e2"/></retract></pubsub>`,
		`<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><configure node="news">` + submitForm("pubsub#title", "x") + `</configure></pubsub>`,
		`<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><purge node="news"/></pubsub>`,
		`<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><delete node="news"/></pubsub>`,
		`<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><affiliations node="news"><affiliation jid="` + aliceBare + `" affiliation="owner"/></affiliations></pubsub>`,
	} {
		stanzaErr(t, e.request(alice, "set", p), "auth", "forbidden", "")
	}

	// A publisher affiliation lets alice publish.
	result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><affiliations node="news"><affiliation jid="`+aliceBare+`" affiliation="publisher"/></affiliations></pubsub>`))
	result(t, e.request(alice, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><publish node="news"><item id="by-alice">`+string(atomEntry("by-alice", "Alice"))+`</item></publish></pubsub>`))
	if got := collectItems(t, alice, "news", 1); got[0].id != "by-alice" {
		t.Fatalf("got %v", got)
	}
	affs := result(t, e.request(alice, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><affiliations/></pubsub>`))
	if a := find(affs, "pubsub", "affiliations", "affiliation"); a == nil || a.attr("node") != "news" || a.attr("affiliation") != "publisher" {
		t.Fatalf("alice's affiliations: %s", affs.standalone())
	}

	// Delete: subscribers are told.
	result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><delete node="news"/></pubsub>`))
	ev = nextEvent(t, alice, 10*time.Second)
	if d := ev.ev.child(nsPubsubEvent, "delete"); d == nil || d.attr("node") != "news" || ev.msg.attr("id") == "" {
		t.Fatalf("want a delete notification with an id, got %s", ev.msg.standalone())
	}
	if _, err := e.hub.Node(e.ctx, "news"); err == nil {
		t.Fatal("node still there after delete")
	}
	stanzaErr(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><delete node="news"/></pubsub>`), "cancel", "item-not-found", "")
}

// TestOwnerSubscriptionChangesAreNotified: an owner's subscription
// changes tell the subscriber (XEP-0060 §8.8.4), since pingd advertises
// subscription-notifications.
func TestOwnerSubscriptionChangesAreNotified(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("n1", "", hub.AccessOpen)
	admin := e.dial("admin", "r")
	bob := e.dial("bob", "r")
	bobBare := bob.JID.Bare().String()
	setSubscription := func(state string) {
		t.Helper()
		result(t, e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><subscriptions node="n1">`+
			`<subscription jid="`+bobBare+`" subscription="`+state+`"/></subscriptions></pubsub>`))
	}
	wantSubscriptionEvent := func(state string) {
		t.Helper()
		ev := nextEvent(t, bob, 10*time.Second)
		sub := ev.ev.child(nsPubsubEvent, "subscription")
		if sub == nil || sub.attr("node") != "n1" || sub.attr("jid") != bobBare || sub.attr("subscription") != state ||
			ev.msg.attr("from") != e.p.ComponentDomain {
			t.Fatalf("want a %q subscription notification for %s, got %s", state, bobBare, ev.msg.standalone())
		}
	}

	setSubscription("subscribed")
	wantSubscriptionEvent("subscribed")
	e.publish("n1", "s1")
	if got := collectItems(t, bob, "n1", 1); got[0].id != "s1" {
		t.Fatalf("bob subscribed by the owner got %v", got)
	}
	// Subscribed again: nothing changed, so the next event is the item.
	setSubscription("subscribed")
	e.publish("n1", "s2")
	if got := collectItems(t, bob, "n1", 1); got[0].id != "s2" {
		t.Fatalf("after subscribing bob again he got %v, want only the item s2", got)
	}

	setSubscription("none")
	wantSubscriptionEvent("none")
	subs := result(t, e.request(admin, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><subscriptions node="n1"/></pubsub>`))
	if n := len(find(subs, "pubsub", "subscriptions").Children); n != 0 {
		t.Fatalf("subscription still listed: %s", subs.standalone())
	}
	// None again: nothing to remove, nobody told; and no more items.
	setSubscription("none")
	e.publish("n1", "s3")
	noEvents(t, bob, time.Second)

	// pending has no place in pingd; manage-subscriptions is advertised,
	// so the answer is XEP-0060 §8.8.2.4's not-acceptable with every entry
	// as it stands, and none of them is carried out.
	alice := e.dial("alice", "r")
	aliceBare := alice.JID.Bare().String()
	result(t, e.request(alice, "set", subscribePayload("n1", aliceBare)))
	if got := collectItems(t, alice, "n1", 1); got[0].id != "s3" { // the newest item, to a new subscription
		t.Fatalf("alice's new subscription was sent %v", got)
	}
	ans := e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><subscriptions node="n1">`+
		`<subscription jid="`+bobBare+`" subscription="subscribed"/>`+
		`<subscription jid="`+aliceBare+`" subscription="pending"/></subscriptions></pubsub>`)
	errEl := stanzaErr(t, ans, "modify", "not-acceptable", "")
	if errEl.child(nsPubsubErrors, "unsupported") != nil || errEl.child(nsStanzaErrors, "text") == nil {
		t.Errorf("pending refused as an unsupported feature, or without a text: %s", ans.standalone())
	}
	returned := map[string]string{}
	if list := find(ans, "pubsub", "subscriptions"); list != nil && list.attr("node") == "n1" {
		for _, sub := range list.childrenNamed(nsPubsubOwner, "subscription") {
			returned[sub.attr("jid")] = sub.attr("subscription")
		}
	}
	if want := map[string]string{bobBare: "none", aliceBare: "subscribed"}; !maps.Equal(returned, want) {
		t.Errorf("entries returned with the error %v, want the unchanged states %v: %s", returned, want, ans.standalone())
	}
	e.publish("n1", "s4")
	noEvents(t, bob, time.Second) // bob was not subscribed after all
	if got := collectItems(t, alice, "n1", 1); got[0].id != "s4" {
		t.Fatalf("alice's subscription did not stay as it was: got %v", got)
	}

	// On a whitelist node an owner cannot subscribe a JID that is not on
	// the whitelist: the same not-acceptable with every entry as it
	// stands (not the subscriber's closed-node, nor a bare forbidden,
	// which would read as "you are not an owner"), and nothing changes.
	e.createNode("closed1", "", hub.AccessWhitelist)
	ans = e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><subscriptions node="closed1">`+
		`<subscription jid="`+aliceBare+`" subscription="none"/>`+
		`<subscription jid="`+bobBare+`" subscription="subscribed"/></subscriptions></pubsub>`)
	errEl = stanzaErr(t, ans, "modify", "not-acceptable", "")
	if text := errEl.child(nsStanzaErrors, "text"); text == nil || !strings.Contains(text.text(), "whitelist") {
		t.Errorf("the refusal does not say why: %s", ans.standalone())
	}
	returned = map[string]string{}
	if list := find(ans, "pubsub", "subscriptions"); list != nil && list.attr("node") == "closed1" {
		for _, sub := range list.childrenNamed(nsPubsubOwner, "subscription") {
			returned[sub.attr("jid")] = sub.attr("subscription")
		}
	}
	if want := map[string]string{bobBare: "none", aliceBare: "none"}; !maps.Equal(returned, want) {
		t.Errorf("entries returned with the whitelist refusal %v, want %v: %s", returned, want, ans.standalone())
	}
	subs = result(t, e.request(admin, "get", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><subscriptions node="closed1"/></pubsub>`))
	if n := len(find(subs, "pubsub", "subscriptions").Children); n != 0 {
		t.Fatalf("a refused grant left a subscription: %s", subs.standalone())
	}

	// An outcast cannot be subscribed either, even to an open node.
	open1, err := e.hub.Node(e.ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.hub.SetAffiliation(e.ctx, open1, bobBare, hub.AffOutcast); err != nil {
		t.Fatal(err)
	}
	ans = e.request(admin, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><subscriptions node="n1">`+
		`<subscription jid="`+bobBare+`" subscription="subscribed"/></subscriptions></pubsub>`)
	errEl = stanzaErr(t, ans, "modify", "not-acceptable", "")
	if text := errEl.child(nsStanzaErrors, "text"); text == nil || !strings.Contains(text.text(), "banned") {
		t.Errorf("the refusal of an outcast does not say why: %s", ans.standalone())
	}
}

func TestEveryIQIsAnswered(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("demo", "", hub.AccessOpen)
	alice := e.dial("alice", "r")
	cases := []struct {
		typ, payload, errType, cond, app string
	}{
		{"get", `<query xmlns="jabber:iq:version"/>`, "cancel", "service-unavailable", ""},
		{"get", `<ping xmlns="urn:xmpp:ping"/>`, "cancel", "service-unavailable", ""},
		{"set", `<query xmlns="jabber:iq:register"/>`, "cancel", "service-unavailable", ""},
		{"get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"/>`, "modify", "bad-request", ""},
		{"get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><items/></pubsub>`, "modify", "bad-request", "nodeid-required"},
		{"set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><subscribe jid="alice@localhost"/></pubsub>`, "modify", "bad-request", "nodeid-required"},
		{"set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><subscribe node="demo"/></pubsub>`, "modify", "bad-request", "jid-required"},
		{"set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><unsubscribe node="demo"/></pubsub>`, "modify", "bad-request", "jid-required"},
		{"get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><options node="demo"/></pubsub>`, "modify", "bad-request", "jid-required"},
		{"set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><subscribe node="demo" jid="@@"/></pubsub>`, "modify", "bad-request", "invalid-jid"},
		{"set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><publish><item/></publish></pubsub>`, "modify", "bad-request", "nodeid-required"},
		{"set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><delete/></pubsub>`, "modify", "bad-request", "nodeid-required"},
		{"set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><purge/></pubsub>`, "modify", "bad-request", "nodeid-required"},
		{"get", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><configure/></pubsub>`, "modify", "bad-request", "nodeid-required"},
		{"get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><options node="demo" jid="alice@localhost"/></pubsub>`, "cancel", "unexpected-request", "not-subscribed"},
		{"set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><publish node="demo"><item><entry xmlns="http://www.w3.org/2005/Atom"/></item></publish><publish-options><x xmlns="jabber:x:data" type="submit"><field var="FORM_TYPE"><value>urn:other</value></field></x></publish-options></pubsub>`, "modify", "bad-request", ""},
		{"get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><bogus/></pubsub>`, "modify", "bad-request", ""},
		{"get", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="demo" max_items="x"/></pubsub>`, "modify", "bad-request", ""},
		{"set", `<pubsub xmlns="http://jabber.org/protocol/pubsub"><items node="demo"/></pubsub>`, "modify", "bad-request", ""},
	}
	for _, tc := range cases {
		stanzaErr(t, e.request(alice, tc.typ, tc.payload), tc.errType, tc.cond, tc.app)
	}
	// An entity at the component, not the service.
	stanzaErr(t, e.requestTo(alice, "someone@"+e.p.ComponentDomain, "get", `<query xmlns="http://jabber.org/protocol/disco#info"/>`), "cancel", "service-unavailable", "")

	// A stanza beyond pingd's limits (here: nesting) is refused, and the
	// stream survives.
	deep := `<pubsub xmlns="http://jabber.org/protocol/pubsub"><publish node="demo"><item>` +
		strings.Repeat("<a>", maxStanzaDepth) + strings.Repeat("</a>", maxStanzaDepth) + `</item></publish></pubsub>`
	stanzaErr(t, e.request(alice, "set", deep), "modify", "policy-violation", "")

	// Nothing was answered twice: a second answer would reach the
	// client's stanza handler as an unmatched IQ. It would have been
	// written with the first, so it is in before the answer to one more
	// request, which the client's session reads after it.
	result(t, e.request(alice, "get", `<query xmlns="http://jabber.org/protocol/disco#info"/>`))
	for len(alice.Stanzas) > 0 {
		raw := <-alice.Stanzas
		if bytes.HasPrefix(raw, []byte("<iq")) {
			t.Fatalf("an IQ was answered twice: %s", raw)
		}
	}
	if !e.comp.Connected() {
		t.Fatal("the component lost its stream")
	}
}

func TestReconnectAndRestart(t *testing.T) {
	e, proxy, alice := newProxiedEnv(t)
	p := e.p

	// The XMPP server goes away; an item is published meanwhile.
	p.Stop()
	testenv.WaitFor(t, 10*time.Second, "the component to notice", func() bool { return !e.comp.Connected() })
	proxy.Block() // keep the component out until the subscriber is back
	e.publish("demo", "while-down")
	p.Start()
	alice = e.dial("alice", "r2")
	proxy.Allow()
	testenv.WaitFor(t, 20*time.Second, "the component to reconnect by itself", e.comp.Connected)
	if got := collectItems(t, alice, "demo", 1); got[0].id != "while-down" {
		t.Fatalf("after reconnecting: %v", got)
	}
	if !strings.Contains(e.logs.String(), "retrying in") && !strings.Contains(e.logs.String(), "reconnecting in") {
		t.Errorf("no reconnect delay logged:\n%s", e.logs.String())
	}
	if n := e.comp.Reconnections(); n != 1 {
		t.Errorf("%d reconnections counted (pingd_component_reconnects_total), want 1", n)
	}

	// pingd restarts: a new hub and component on the same store.
	e.stop()
	if e.comp.Connected() {
		t.Fatal("Connected after Run returned")
	}
	e.startComponent(envOptions{addr: proxy.Addr})
	noEvents(t, alice, 1500*time.Millisecond) // nothing is sent again
	e.publish("demo", "after-restart")
	if got := collectItems(t, alice, "demo", 1); got[0].id != "after-restart" {
		t.Fatalf("after restart: %v", got)
	}
	noEvents(t, alice, 500*time.Millisecond)
}

func TestConnectionFailuresAreLogged(t *testing.T) {
	testenv.RequireProsody(t)
	p := testenv.StartProsody(t, testenv.ProsodyOptions{})
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "pingd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run := func(addr, secret string, level slog.Level, until func(*Component, *logBuffer) bool) (*Component, string) {
		t.Helper()
		logs := &logBuffer{}
		log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: level}))
		h, err := hub.New(hub.Config{Stores: store.HubStores(st), Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		c, err := New(Config{Hub: h, Store: st, Domain: p.ComponentDomain, Addr: addr, Secret: secret, Logger: log,
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = c.Run(ctx) }()
		testenv.WaitFor(t, 20*time.Second, "the expected state", func() bool { return until(c, logs) })
		cancel()
		<-done
		return c, logs.String()
	}

	closed := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	c, logs := run(closed, p.Secret, slog.LevelInfo, func(_ *Component, l *logBuffer) bool {
		return strings.Count(l.String(), "unreachable, retrying in") >= 3
	})
	if c.Connected() {
		t.Error("connected to nothing")
	}
	if !strings.Contains(logs, "XMPP server "+closed+" unreachable, retrying in ") {
		t.Errorf("unreachable server not logged plainly:\n%s", logs)
	}

	c, logs = run(p.ComponentAddr, "wrong-secret", slog.LevelInfo, func(_ *Component, l *logBuffer) bool {
		return strings.Contains(l.String(), "not-authorized")
	})
	if c.Connected() {
		t.Error("connected with a wrong secret")
	}
	if !strings.Contains(logs, "wrong component secret (not-authorized)") {
		t.Errorf("wrong secret not logged plainly:\n%s", logs)
	}

	// At debug level the stream is traced, without the handshake digest;
	// at info level it is not.
	_, logs = run(p.ComponentAddr, p.Secret, slog.LevelDebug, func(c *Component, _ *logBuffer) bool { return c.Connected() })
	if !strings.Contains(logs, "XMPP out") || !strings.Contains(logs, "XMPP in") || !strings.Contains(logs, "<handshake>…</handshake>") {
		t.Errorf("no XML trace at debug level:\n%s", logs)
	}
	_, logs = run(p.ComponentAddr, p.Secret, slog.LevelInfo, func(c *Component, _ *logBuffer) bool { return c.Connected() })
	if strings.Contains(logs, "XMPP out") || strings.Contains(logs, "XMPP in") {
		t.Errorf("XML traced at info level:\n%s", logs)
	}
	if !strings.Contains(logs, "connected to XMPP server") {
		t.Errorf("connection not logged:\n%s", logs)
	}
}

func TestChatCommands(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{})
	e.createNode("demo", "Demo feed", hub.AccessOpen)
	e.createNode("closed", "", hub.AccessWhitelist)
	e.publish("demo", "c1", "c2", "c3")
	alice := e.dial("alice", "chat")

	answerIDs := map[string]string{} // id → the command it answered
	say := func(body string) string {
		t.Helper()
		if _, err := alice.SendRaw(e.ctx, fmt.Sprintf(`<message type="chat" to=%q><body>%s</body></message>`, e.p.ComponentDomain, body)); err != nil {
			t.Fatal(err)
		}
		timeout := time.After(10 * time.Second)
		for {
			select {
			case raw := <-alice.Stanzas:
				el, err := parseDocument(raw)
				if err != nil || el.Name.Local != "message" || el.attr("type") != "chat" || isNotification(el) {
					continue
				}
				// Each answer has an id of its own (RFC 6120 §8.1.3).
				if id := el.attr("id"); id == "" || answerIDs[id] != "" {
					t.Errorf("the answer to %q has the id %q, already that of the answer to %q", body, id, answerIDs[id])
				} else {
					answerIDs[id] = body
				}
				return el.child(el.Name.Space, "body").text()
			case <-timeout:
				t.Fatalf("no answer to %q", body)
				return ""
			}
		}
	}
	expect := func(body string, want ...string) {
		t.Helper()
		got := say(body)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%q answered %q; want it to contain %q", body, got, w)
			}
		}
	}
	expect("help", "subscribe NODE", "last NODE [n]", "nodes")
	expect("what?", "I did not understand “what?”. Commands: subscribe") // unknown: said so, and a short list
	expect("nodes", "demo — Demo feed", "closed (whitelist)", "http://pingd.test/feeds/demo")
	expect("list", "no subscriptions")
	expect("subscribe nope", `no node called "nope"`)
	expect("subscribe closed", `"closed" is closed`)
	expect("subscribe demo", `Subscribed to "demo"`)
	expect("subscribe demo", "already subscribed")
	expect("list", "demo")
	expect("last demo 2", "Title c3", "http://example.org/c3", "Title c2")
	if got := say("last demo 2"); strings.Contains(got, "Title c1") {
		t.Errorf("last demo 2 listed three items: %q", got)
	}
	expect("last demo", "Title c1")
	expect("last closed", "closed")

	e.publish("demo", "c4")
	nextMessage(t, alice, 10*time.Second, func(el *element) bool { return isPlain(el) && strings.Contains(bodyOf(el), "Title c4") })
	expect("unsubscribe demo", `Unsubscribed from "demo"`)
	expect("unsubscribe demo", "not subscribed")
	e.publish("demo", "c5")
	noNotifications(t, alice, time.Second)

	// Only the service lives at the component's domain: a chat or normal
	// message to anyone else there is refused (RFC 6120 §10.5.3.2), never
	// answered as a command; a headline or an error gets nothing.
	nobody := "nobody@" + e.p.ComponentDomain
	for _, typ := range []string{"chat", "normal", ""} {
		id := "to-nobody-" + typ
		msg := `<message to="` + nobody + `" id="` + id + `"><body>list</body></message>`
		if typ != "" {
			msg = `<message type="` + typ + `" to="` + nobody + `" id="` + id + `"><body>list</body></message>`
		}
		if _, err := alice.SendRaw(e.ctx, msg); err != nil {
			t.Fatal(err)
		}
		got := nextMessage(t, alice, 10*time.Second, func(el *element) bool { return el.attr("id") == id || el.attr("type") == "chat" })
		errEl := got.child(got.Name.Space, "error")
		if got.attr("type") != "error" || got.attr("from") != nobody || got.attr("id") != id || errEl == nil || errEl.attr("type") != "cancel" ||
			errEl.child(nsStanzaErrors, "service-unavailable") == nil {
			t.Errorf("a %q message to %s answered with %s, want a service-unavailable error from it", typ, nobody, got.standalone())
		}
	}
	for _, msg := range []string{
		`<message type="headline" to="` + nobody + `"><body>list</body></message>`,
		`<message type="groupchat" to="` + nobody + `"><body>list</body></message>`,
		`<message type="error" to="` + nobody + `"><error type="cancel"><item-not-found xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/></error></message>`,
	} {
		if _, err := alice.SendRaw(e.ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	// The service itself still answers, and the answer to "list" is the
	// first message alice gets: nothing came back for the three above.
	if _, err := alice.SendRaw(e.ctx, `<message type="chat" to="`+e.p.ComponentDomain+`"><body>list</body></message>`); err != nil {
		t.Fatal(err)
	}
	select {
	case raw := <-alice.Stanzas:
		el, err := parseDocument(raw)
		if err != nil || el.attr("type") != "chat" || el.attr("from") != e.p.ComponentDomain || !strings.Contains(bodyOf(el), "no subscriptions") {
			t.Errorf("after a headline, a groupchat and an error message to %s, alice got %s first", nobody, raw)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to list")
	}
}

// TestLastOwnerStays: without admins, a node's last owner may not give up
// ownership; the refusal is XEP-0060 §8.9.2.4's not-acceptable with the
// entries as they stand, and nothing changes.
func TestLastOwnerStays(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{hub: func(c *hub.Config) { c.Admins = nil }})
	n := e.createNode("owned", "", hub.AccessOpen)
	alice := e.dial("alice", "r")
	aliceBare := alice.JID.Bare().String()
	if err := e.hub.SetAffiliation(e.ctx, n, aliceBare, hub.AffOwner); err != nil {
		t.Fatal(err)
	}
	ans := e.request(alice, "set", `<pubsub xmlns="http://jabber.org/protocol/pubsub#owner"><affiliations node="owned">`+
		`<affiliation jid="bob@localhost" affiliation="member"/><affiliation jid="`+aliceBare+`" affiliation="none"/></affiliations></pubsub>`)
	stanzaErr(t, ans, "modify", "not-acceptable", "")
	returned := map[string]string{}
	if list := find(ans, "pubsub", "affiliations"); list != nil {
		for _, a := range list.childrenNamed(nsPubsubOwner, "affiliation") {
			returned[a.attr("jid")] = a.attr("affiliation")
		}
	}
	if want := map[string]string{"bob@localhost": "none", aliceBare: "owner"}; !maps.Equal(returned, want) {
		t.Errorf("entries returned with the refusal %v, want %v: %s", returned, want, ans.standalone())
	}
	affs, err := e.hub.Affiliations(e.ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]hub.Affiliation{aliceBare: hub.AffOwner}; !maps.Equal(affs, want) {
		t.Errorf("affiliations after the refusal %v, want %v", affs, want)
	}
}
