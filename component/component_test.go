package component

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

func newTestHub(t *testing.T) (*hub.Hub, store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "pingd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hub.New(hub.Config{Stores: store.HubStores(st)})
	if err != nil {
		t.Fatal(err)
	}
	return h, st
}

func TestNewChecksConfig(t *testing.T) {
	h, st := newTestHub(t)
	good := Config{Hub: h, Store: st, Domain: "pubsub.localhost", Addr: "127.0.0.1:5347", Secret: "s"}
	for name, mutate := range map[string]func(*Config){
		"no hub":         func(c *Config) { c.Hub = nil },
		"no store":       func(c *Config) { c.Store = nil },
		"no secret":      func(c *Config) { c.Secret = "" },
		"no address":     func(c *Config) { c.Addr = "" },
		"bad address":    func(c *Config) { c.Addr = "localhost" },
		"bad JID":        func(c *Config) { c.Domain = "@@" },
		"JID with user":  func(c *Config) { c.Domain = "me@pubsub.localhost" },
		"JID with slash": func(c *Config) { c.Domain = "pubsub.localhost/x" },
	} {
		cfg := good
		mutate(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c, err := New(good)
	if err != nil {
		t.Fatal(err)
	}
	if c.minDelay != 500*time.Millisecond || c.maxDelay != time.Minute {
		t.Errorf("default backoff %s..%s, want 500ms..1m", c.minDelay, c.maxDelay)
	}
	if c.Connected() {
		t.Error("connected before Run")
	}
	c.Wake(1) // must not block without a dispatcher
	c.Wake(2)
	c.Wake(0)
	all, ids := c.dispatcher.work.take()
	if !all || len(ids) != 2 {
		t.Errorf("queued work all=%v ids=%v", all, ids)
	}
}

func TestNotificationRendering(t *testing.T) {
	h, st := newTestHub(t)
	c, err := New(Config{Hub: h, Store: st, Domain: "pubsub.localhost", Addr: "127.0.0.1:1", Secret: "s"})
	if err != nil {
		t.Fatal(err)
	}
	n := &hub.Node{Name: `a "quoted" & <odd> node`, NodeConfig: hub.DefaultNodeConfig()}
	to := `user@localhost/res "&<'`
	var escTo bytes.Buffer
	escapeAttr(&escTo, to)
	cases := []struct {
		ev   hub.Event
		want string // a path below <event/>
	}{
		{hub.Event{Kind: hub.EventItem, ItemID: "i&1", Payload: []byte(`<?xml version="1.0"?><entry xmlns="http://www.w3.org/2005/Atom"><title>T</title></entry>`)}, "items/item/entry/title"},
		{hub.Event{Kind: hub.EventItem, ItemID: "broken", Payload: []byte(`<entry><title>`)}, "items/item"},
		{hub.Event{Kind: hub.EventRetract, ItemID: "i1"}, "items/retract"},
		{hub.Event{Kind: hub.EventPurge}, "purge"},
		{hub.Event{Kind: hub.EventRevoke, Address: to}, "subscription"},
		{hub.Event{Kind: hub.EventSubscribed, Address: to}, "subscription"},
	}
	for _, tc := range cases {
		var b bytes.Buffer
		b.Write(c.dispatcher.render.messagePrefix(n))
		b.Write(escTo.Bytes())
		id := c.stanzaIDs.next()
		b.Write(c.dispatcher.render.renderEvent(n, tc.ev, id, "", nil))
		msg, err := parseDocument(b.Bytes())
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.ev.Kind, err, b.String())
		}
		if msg.attr("to") != to || msg.attr("from") != "pubsub.localhost" || msg.attr("type") != "headline" || msg.attr("id") != id {
			t.Errorf("%s: message attributes %v, want id %q", tc.ev.Kind, msg.Attr, id)
		}
		el := msg.child("", "event")
		if el == nil || el.Name.Space != "" {
			// The message has no namespace of its own here; the event has.
			el = msg.child(nsPubsubEvent, "event")
		}
		if el == nil {
			t.Fatalf("%s: no event in %s", tc.ev.Kind, b.String())
		}
		if got := find(el, strings.Split(tc.want, "/")...); got == nil {
			t.Errorf("%s: no %s in %s", tc.ev.Kind, tc.want, b.String())
		}
		for _, path := range [][]string{{"items"}, {"purge"}, {"subscription"}} {
			if x := find(el, path...); x != nil && x.attr("node") != n.Name {
				t.Errorf("%s: node attribute %q", tc.ev.Kind, x.attr("node"))
			}
		}
	}
	if got := c.dispatcher.render.renderEvent(n, hub.Event{Kind: hub.EventChange}, "x", "", nil); got != nil {
		t.Errorf("change events are not for XMPP, rendered %s", got)
	}
	del, err := parseDocument(c.dispatcher.render.renderDelete(*n, to, "d1"))
	if err != nil || find(del, "event", "delete") == nil || del.attr("to") != to || del.attr("id") != "d1" {
		t.Fatalf("delete notification %s: %v", c.dispatcher.render.renderDelete(*n, to, "d1"), err)
	}
}

// TestStanzaIDs: notification and chat ids are unique, cheap to make, and
// never look like the acknowledgement markers' or pingd's own queries'.
func TestStanzaIDs(t *testing.T) {
	a, b := newStanzaIDs(), newStanzaIDs()
	if a.prefix == b.prefix {
		t.Fatalf("two processes share the id prefix %q", a.prefix)
	}
	seen := map[string]bool{}
	for range 1000 {
		id := a.next()
		if seen[id] || strings.HasPrefix(id, "pingd-") {
			t.Fatalf("id %q repeated or shaped like a marker's or a query's", id)
		}
		seen[id] = true
	}
	d := &dispatcher{sharedState: &sharedState{domainStr: "pubsub.localhost"}}
	if d.isAckMarker(mustParse(t, `<iq type="get" id="`+a.next()+`" from="pubsub.localhost" to="pubsub.localhost"/>`)) {
		t.Error("an IQ with a notification's id was taken for an acknowledgement marker")
	}
	if n := testing.AllocsPerRun(100, func() { _ = a.next() }); n > 1 {
		t.Errorf("an id costs %.0f allocations, want at most the string's", n)
	}
}
