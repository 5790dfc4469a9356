package component

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

func TestMulticastConfig(t *testing.T) {
	cases := []struct {
		component string
		cfg       Config
		mode      string
		service   string
		domain    string
		wantErr   bool
	}{
		{component: "pubsub.example.org", mode: MulticastAuto, domain: "example.org"},
		{component: "pubsub.localhost", mode: MulticastAuto, domain: "localhost"},
		{component: "example.org", mode: MulticastAuto, domain: ""}, // no parent server to ask
		{component: "pubsub.example.org", cfg: Config{Multicast: "AUTO"}, mode: MulticastAuto, domain: "example.org"},
		{component: "pubsub.example.org", cfg: Config{Multicast: "off"}, mode: MulticastOff},
		{component: "pubsub.example.org", cfg: Config{Multicast: "multicast.example.org"}, mode: "service",
			service: "multicast.example.org", domain: "example.org"},
		{component: "pubsub.example.org", cfg: Config{MulticastDomain: "chat.example.net"}, mode: MulticastAuto, domain: "chat.example.net"},
		{component: "pubsub.example.org", cfg: Config{Multicast: "user@multicast.example.org"}, wantErr: true},
		{component: "pubsub.example.org", cfg: Config{MulticastDomain: "a@b"}, wantErr: true},
		{component: "pubsub.example.org", cfg: Config{MulticastMaxAddresses: -1}, wantErr: true},
		{component: "pubsub.example.org", cfg: Config{MulticastShare: -1}, wantErr: true},
		{component: "pubsub.example.org", cfg: Config{MulticastShare: 101}, wantErr: true},
		{component: "pubsub.example.org", cfg: Config{MulticastShare: 100}, mode: MulticastAuto, domain: "example.org"},
	}
	for _, tc := range cases {
		mode, service, domain, err := multicastConfig(tc.cfg, jid.MustParse(tc.component))
		if tc.wantErr {
			if err == nil {
				t.Errorf("%s %+v: no error", tc.component, tc.cfg)
			}
			continue
		}
		if err != nil || mode != tc.mode || service != tc.service || domain != tc.domain {
			t.Errorf("%s %+v: %q %q %q %v, want %q %q %q", tc.component, tc.cfg, mode, service, domain, err, tc.mode, tc.service, tc.domain)
		}
	}
}

// discoInfoWithLimit is a disco#info result as ejabberd's mod_multicast
// sends it when its limit for the asker was configured.
func discoInfoWithLimit(limit string) string {
	form := ""
	if limit != "" {
		form = `<x xmlns="jabber:x:data" type="result"><field var="FORM_TYPE" type="hidden"><value>` + nsAddress + `</value></field>` +
			`<field var="message"><value>` + limit + `</value></field></x>`
	}
	return `<iq type="result" from="multicast.localhost" id="x"><query xmlns="` + nsDiscoInfo + `">` +
		`<identity category="service" type="multicast" name="Multicast"/><feature var="` + nsDiscoInfo + `"/>` +
		`<feature var="` + nsAddress + `"/>` + form + `</query></iq>`
}

func TestMulticastLimits(t *testing.T) {
	cases := []struct {
		limit     string
		cfgMax    int
		want      int
		announced bool
	}{
		{limit: "", want: defaultMulticastAddresses},
		{limit: "", cfgMax: 100, want: 100},
		{limit: "infinite", want: unlimitedMulticastAddresses, announced: true},
		{limit: "infinite", cfgMax: 50, want: 50, announced: true},
		{limit: "70", want: 70, announced: true},
		{limit: "70", cfgMax: 200, want: 70, announced: true},
		{limit: "70", cfgMax: 30, want: 30, announced: true},
		{limit: "nonsense", want: defaultMulticastAddresses},
	}
	for _, tc := range cases {
		el, err := parseDocument([]byte(discoInfoWithLimit(tc.limit)))
		if err != nil {
			t.Fatal(err)
		}
		if !hasFeature(el, nsAddress) {
			t.Fatalf("feature not found in %s", el.standalone())
		}
		limit, announced := multicastLimit(el)
		if announced != tc.announced {
			t.Errorf("limit %q: announced %v", tc.limit, announced)
		}
		d := &dispatcher{multicastMax: tc.cfgMax}
		if got := d.multicastBatch(limit, announced); got != tc.want {
			t.Errorf("limit %q, configured %d: %d addresses per stanza, want %d", tc.limit, tc.cfgMax, got, tc.want)
		}
	}
	// A form of another type says nothing about addresses.
	other := strings.Replace(discoInfoWithLimit("5"), nsAddress+`</value>`, `urn:other</value>`, 1)
	el, _ := parseDocument([]byte(other))
	if _, announced := multicastLimit(el); announced {
		t.Error("a limit read from a form of another FORM_TYPE")
	}
}

func TestDomainOf(t *testing.T) {
	for in, want := range map[string]string{
		"alice@example.org/phone": "example.org",
		"alice@example.org":       "example.org",
		"example.org/res@x":       "example.org",
		"example.org":             "example.org",
		"a@b/c/d@e":               "b",
	} {
		if got := domainOf(in); got != want {
			t.Errorf("domainOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// ejEnv is an ejabberd with pingd's hub and component attached.
type ejEnv struct {
	t     *testing.T
	ctx   context.Context
	ej    *testenv.Ejabberd
	hub   *hub.Hub
	comp  *Component
	logs  *logBuffer
	store store.Store
}

func newEjabberdEnv(t *testing.T, cfg Config) *ejEnv {
	t.Helper()
	return newEjabberdEnvWith(t, cfg, testenv.EjabberdOptions{LogLevel: "warning"})
}

// newEjabberdEnvWith is newEjabberdEnv on an ejabberd started with opts.
func newEjabberdEnvWith(t *testing.T, cfg Config, opts testenv.EjabberdOptions) *ejEnv {
	t.Helper()
	ej := testenv.StartEjabberd(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "pingd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Hub, cfg.Domain, cfg.Addr, cfg.Secret, cfg.Logger = h, ej.ComponentDomain, ej.ComponentAddr, ej.Secret, log
	cfg.Store = st
	cfg.MinBackoff, cfg.MaxBackoff = 50*time.Millisecond, 300*time.Millisecond
	comp, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.Register(comp, hub.KindXMPP)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = comp.Run(runCtx)
	}()
	t.Cleanup(func() { stop(); <-done })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("component log:\n%s", logs.String())
		}
	})
	testenv.WaitFor(t, 30*time.Second, "the component to connect", comp.Connected)
	testenv.WaitFor(t, 30*time.Second, "the look for a multicast service", func() bool { return comp.dispatcher.multicastChecked.Load() > 0 })
	return &ejEnv{t: t, ctx: ctx, ej: ej, hub: h, comp: comp, logs: logs, store: st}
}

// subscribers logs in n resources of one account, each subscribed to node.
func (e *ejEnv) subscribers(node string, n int) []*testenv.Client {
	e.t.Helper()
	e.ej.Register("fan", password)
	clients := make([]*testenv.Client, n)
	for i := range n {
		c := e.ej.Dial(e.ctx, e.t, "fan", password, fmt.Sprintf("r%d", i))
		if _, _, err := e.hub.Subscribe(e.ctx, hub.Subscription{NodeName: node, Kind: hub.KindXMPP,
			Address: c.JID.String(), BareJID: c.JID.Bare().String()}); err != nil {
			e.t.Fatal(err)
		}
		clients[i] = c
	}
	return clients
}

func (e *ejEnv) publish(node string, ids ...string) {
	e.t.Helper()
	var entries []hub.Entry
	for _, id := range ids {
		entries = append(entries, hub.Entry{ID: id, Payload: atomEntry(id, "Title "+id)})
	}
	if _, err := e.hub.Publish(e.ctx, node, "", entries); err != nil {
		e.t.Fatal(err)
	}
}

// expectEachOnce checks that every client gets exactly the items, each
// once, with the node's notification type and from the component.
func expectEachOnce(t *testing.T, clients []*testenv.Client, node, msgType string, ids []string) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	stanzaIDs := map[string]map[string]bool{} // item → the ids of the stanzas that carried it
	for _, c := range clients {
		wg.Go(func() {
			seen := map[string]int{}
			for range ids {
				ev := nextEvent(t, c, 20*time.Second)
				mu.Lock()
				for _, it := range itemsOf(t, ev, node) {
					if stanzaIDs[it.id] == nil {
						stanzaIDs[it.id] = map[string]bool{}
					}
					stanzaIDs[it.id][ev.msg.attr("id")] = true
				}
				mu.Unlock()
				typ := ev.msg.attr("type")
				if typ == "" {
					typ = hub.NotifyNormal // the default type; servers may leave it out
				}
				if typ != msgType || !strings.HasPrefix(ev.msg.attr("from"), "pubsub.") {
					t.Errorf("%s: notification %s", c.JID, ev.msg.standalone())
				}
				if ev.msg.child(nsAddress, "addresses") != nil {
					t.Errorf("%s: the bcc addresses reached the subscriber: %s", c.JID, ev.msg.standalone())
				}
				for _, it := range itemsOf(t, ev, node) {
					seen[it.id]++
				}
			}
			noEvents(t, c, 500*time.Millisecond)
			for _, id := range ids {
				if seen[id] != 1 {
					t.Errorf("%s got item %s %d times (all: %v)", c.JID, id, seen[id], seen)
				}
			}
		})
	}
	wg.Wait()
	// Every copy of a notification carries the one id it was rendered
	// with, through the multicast service too; no two items share one.
	used := map[string]string{}
	for item, set := range stanzaIDs {
		if len(set) != 1 || set[""] {
			t.Errorf("item %s came in stanzas with the ids %v, want one id shared by its copies", item, slices.Collect(maps.Keys(set)))
			continue
		}
		for id := range set {
			if other, ok := used[id]; ok {
				t.Errorf("items %s and %s were sent with the same id %q", item, other, id)
			}
			used[id] = item
		}
	}
}

// TestMulticastEjabberd fans out through ejabberd's mod_multicast: every
// subscriber gets every item exactly once, in batches of the configured
// size, and a subscriber on another server gets its own stanza.
func TestMulticastEjabberd(t *testing.T) {
	testenv.RequireEjabberd(t)
	const batch = 4
	e := newEjabberdEnv(t, Config{MulticastMaxAddresses: batch, MulticastShare: 100})
	if svc, n := e.comp.MulticastService(); svc != e.ej.Multicast || n != batch {
		t.Fatalf("multicast service %q with %d addresses, want %s with %d\n%s", svc, n, e.ej.Multicast, batch, e.logs.String())
	}
	if _, _, err := e.hub.CreateNode(e.ctx, hub.NodeSpec{Name: "news", Config: hub.DefaultNodeConfig()}); err != nil {
		t.Fatal(err)
	}
	clients := e.subscribers("news", 10)
	// A subscriber of another server is not addressed through this one's
	// multicast service.
	if _, _, err := e.hub.Subscribe(e.ctx, hub.Subscription{NodeName: "news", Kind: hub.KindXMPP,
		Address: "ghost@elsewhere.example", BareJID: "ghost@elsewhere.example"}); err != nil {
		t.Fatal(err)
	}
	uni, multi := e.comp.dispatcher.sentUnicast.Load(), e.comp.dispatcher.sentMulticast.Load()
	ids := []string{"m1", "m2", "m3"}
	e.publish("news", ids[:1]...)
	e.publish("news", ids[1:]...)
	expectEachOnce(t, clients, "news", hub.NotifyHeadline, ids)
	// 10 local subscribers in batches of 4: 3 stanzas per item; the remote
	// one: 1 stanza per item.
	if got := e.comp.dispatcher.sentMulticast.Load() - multi; got != int64(3*len(ids)) {
		t.Errorf("%d multicast stanzas, want %d", got, 3*len(ids))
	}
	if got := e.comp.dispatcher.sentUnicast.Load() - uni; got != int64(len(ids)) {
		t.Errorf("%d stanzas one by one, want %d (the remote subscriber's)", got, len(ids))
	}
	if svc, _ := e.comp.MulticastService(); svc == "" {
		t.Errorf("the multicast service was given up:\n%s", e.logs.String())
	}
	// ejabberd routes the component's acknowledgement markers back too:
	// the cursor catches up.
	testenv.WaitFor(t, 10*time.Second, "ejabberd to acknowledge the notifications", func() bool {
		n, err := e.store.Node(e.ctx, "news")
		return err == nil && n.XMPPSeq == n.LastSeq
	})
	if strings.Contains(e.logs.String(), "did not route the component's own IQ back") {
		t.Error("ejabberd's routing of the component's own IQs was not recognised")
	}
}

// TestMulticastShare sends a share of the local subscribers through the
// multicast service and writes the rest one stanza each: every subscriber
// still gets every item exactly once.
func TestMulticastShare(t *testing.T) {
	testenv.RequireEjabberd(t)
	e := newEjabberdEnv(t, Config{MulticastMaxAddresses: 10, MulticastShare: 60})
	if svc, _ := e.comp.MulticastService(); svc != e.ej.Multicast {
		t.Fatalf("multicast service %q, want %s\n%s", svc, e.ej.Multicast, e.logs.String())
	}
	if _, _, err := e.hub.CreateNode(e.ctx, hub.NodeSpec{Name: "news", Config: hub.DefaultNodeConfig()}); err != nil {
		t.Fatal(err)
	}
	clients := e.subscribers("news", 10)
	uni, multi := e.comp.dispatcher.sentUnicast.Load(), e.comp.dispatcher.sentMulticast.Load()
	ids := []string{"s1", "s2"}
	e.publish("news", ids...)
	expectEachOnce(t, clients, "news", hub.NotifyHeadline, ids)
	// 60 % of 10: 6 addresses in one multicast stanza per item, 4
	// stanzas one by one.
	if got := e.comp.dispatcher.sentMulticast.Load() - multi; got != int64(len(ids)) {
		t.Errorf("%d multicast stanzas, want %d", got, len(ids))
	}
	if got := e.comp.dispatcher.sentUnicast.Load() - uni; got != int64(4*len(ids)) {
		t.Errorf("%d stanzas one by one, want %d", got, 4*len(ids))
	}
}

// TestMulticastRefusedIsResent points the component at a "service" that
// does not exist: the server bounces the multicast stanza, and the
// component sends the notification to each subscriber itself, then stops
// using the service.
func TestMulticastRefusedIsResent(t *testing.T) {
	testenv.RequireEjabberd(t)
	e := newEjabberdEnv(t, Config{Multicast: "nosuch.localhost"})
	if svc, n := e.comp.MulticastService(); svc != "nosuch.localhost" || n != defaultMulticastAddresses {
		t.Fatalf("multicast service %q with %d addresses", svc, n)
	}
	cfg := hub.DefaultNodeConfig()
	cfg.NotificationType = hub.NotifyNormal
	if _, _, err := e.hub.CreateNode(e.ctx, hub.NodeSpec{Name: "news", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	clients := e.subscribers("news", 3)
	e.publish("news", "b1")
	expectEachOnce(t, clients, "news", hub.NotifyNormal, []string{"b1"})
	testenv.WaitFor(t, 10*time.Second, "the service to be given up", func() bool {
		svc, _ := e.comp.MulticastService()
		return svc == ""
	})
	if !strings.Contains(e.logs.String(), "refused a notification") {
		t.Errorf("the refusal was not logged:\n%s", e.logs.String())
	}
	// From now on, one stanza per subscriber.
	multi := e.comp.dispatcher.sentMulticast.Load()
	e.publish("news", "b2")
	expectEachOnce(t, clients, "news", hub.NotifyNormal, []string{"b2"})
	if e.comp.dispatcher.sentMulticast.Load() != multi {
		t.Error("multicast used after the service refused")
	}
}

// TestNoMulticastOnProsody: Prosody offers no XEP-0033 service; the
// component finds none and notifies one stanza per subscriber, as always.
func TestNoMulticastOnProsody(t *testing.T) {
	testenv.RequireProsody(t)
	e := newEnv(t, envOptions{level: slog.LevelDebug})
	testenv.WaitFor(t, 30*time.Second, "the look for a multicast service", func() bool { return e.comp.dispatcher.multicastChecked.Load() > 0 })
	if svc, _ := e.comp.MulticastService(); svc != "" {
		t.Fatalf("Prosody has no multicast service, found %q", svc)
	}
	if !strings.Contains(e.logs.String(), "offers no XEP-0033 multicast service") {
		t.Errorf("the absence was not logged:\n%s", e.logs.String())
	}
	e.createNode("demo", "", hub.AccessOpen)
	alice := e.dial("alice", "a")
	bob := e.dial("bob", "b")
	result(t, e.request(alice, "set", subscribePayload("demo", alice.JID.String())))
	result(t, e.request(bob, "set", subscribePayload("demo", bob.JID.String())))
	before := e.comp.dispatcher.sentUnicast.Load()
	e.publish("demo", "p1", "p2")
	var stanzaIDs [][]string // per client, the ids of the notifications of p1 and p2
	for _, c := range []*testenv.Client{alice, bob} {
		var got []receivedItem
		var ids []string
		for len(got) < 2 {
			ev := nextEvent(t, c, 10*time.Second)
			items := itemsOf(t, ev, "demo")
			got = append(got, items...)
			for range items {
				ids = append(ids, ev.msg.attr("id"))
			}
		}
		if got[0].id != "p1" || got[1].id != "p2" {
			t.Fatalf("%s: %v", c.JID, got)
		}
		stanzaIDs = append(stanzaIDs, ids)
		noEvents(t, c, 300*time.Millisecond)
	}
	// Each notification is rendered once with its id; its copies differ
	// only in "to".
	if a, b := stanzaIDs[0], stanzaIDs[1]; a[0] == "" || a[0] == a[1] || !slices.Equal(a, b) ||
		strings.HasPrefix(a[0], ackIDPrefix) || strings.HasPrefix(a[0], cursorIDPrefix) {
		t.Errorf("notification ids %q (alice) and %q (bob), want one id per item, shared by its copies, not a marker's", a, b)
	}
	if e.comp.dispatcher.sentMulticast.Load() != 0 || e.comp.dispatcher.sentUnicast.Load()-before != 4 {
		t.Errorf("%d multicast and %d single stanzas, want 0 and 4", e.comp.dispatcher.sentMulticast.Load(), e.comp.dispatcher.sentUnicast.Load()-before)
	}
}

// TestMulticastRefusedPlainIsResent: a refused multicast stanza of plain
// messages (readers' notifications, no pubsub#event) is sent again to each
// of its addresses, with the readers' message type.
func TestMulticastRefusedPlainIsResent(t *testing.T) {
	testenv.RequireEjabberd(t)
	e := newEjabberdEnv(t, Config{Multicast: "nosuch.localhost"})
	if _, _, err := e.hub.CreateNode(e.ctx, hub.NodeSpec{Name: "news", Config: hub.DefaultNodeConfig()}); err != nil {
		t.Fatal(err)
	}
	e.ej.Register("reader", password)
	var clients []*testenv.Client
	for i := range 3 {
		c := e.ej.Dial(e.ctx, t, "reader", password, fmt.Sprintf("r%d", i))
		if _, _, err := e.hub.Subscribe(e.ctx, hub.Subscription{NodeName: "news", Kind: hub.KindXMPP,
			Address: c.JID.String(), BareJID: c.JID.Bare().String(), Options: hub.Options{Format: hub.FormatMessage}}); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	e.publish("news", "p1")
	for _, c := range clients {
		m := nextMessage(t, c, 20*time.Second, isNotification)
		if m.attr("type") != hub.NotifyChat || isEvent(m) || !strings.Contains(bodyOf(m), "p1") || m.child(nsAddress, "addresses") != nil {
			t.Errorf("%s got %s, want the plain chat message", c.JID, m.standalone())
		}
		noNotifications(t, c, 300*time.Millisecond)
	}
	if !strings.Contains(e.logs.String(), "refused a notification") {
		t.Errorf("the refusal was not logged")
	}
}
