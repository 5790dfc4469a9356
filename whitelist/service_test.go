package whitelist

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

const (
	adminToken = "admin-secret-token"
	adminJID   = "boss@example.org"
)

// fixture is a real hub over a real SQLite file with one whitelist node
// and one open node.
type fixture struct {
	hub   *hub.Hub
	store store.Store
	svc   *Service
	// tokens of the nodes "closed" (whitelist) and "open".
	tokens map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "pingd.db"), store.Options{Logger: logger})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Logger: logger, AdminToken: adminToken, Admins: []string{adminJID}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{hub: h, store: st, svc: NewService(h, logger), tokens: map[string]string{}}
	for name, model := range map[string]hub.AccessModel{"closed": hub.AccessWhitelist, "open": hub.AccessOpen} {
		cfg := hub.DefaultNodeConfig()
		cfg.AccessModel = model
		_, token, err := h.CreateNode(ctx, hub.NodeSpec{Name: name, Config: cfg})
		if err != nil {
			t.Fatalf("create node %s: %v", name, err)
		}
		f.tokens[name] = token
	}
	return f
}

// snapshot is everything a whitelist request may change on a node.
type snapshot struct {
	affs    map[string]hub.Affiliation
	subs    []string
	lastSeq int64
}

func (f *fixture) snapshot(t *testing.T, node string) snapshot {
	t.Helper()
	ctx := t.Context()
	n, err := f.hub.Node(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	affs, err := f.store.Affiliations(ctx, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	subs, err := f.store.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID})
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, s := range subs {
		addrs = append(addrs, string(s.Kind)+":"+s.Address+":"+string(s.State))
	}
	return snapshot{affs: affs, subs: addrs, lastSeq: n.LastSeq}
}

func (s snapshot) equal(o snapshot) bool {
	if len(s.affs) != len(o.affs) || s.lastSeq != o.lastSeq || !slices.Equal(s.subs, o.subs) {
		return false
	}
	for k, v := range s.affs {
		if o.affs[k] != v {
			return false
		}
	}
	return true
}

func (f *fixture) affiliation(t *testing.T, node, jid string) hub.Affiliation {
	t.Helper()
	n, err := f.hub.Node(t.Context(), node)
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.store.Affiliation(t.Context(), n.ID, jid)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// subscribeXMPP subscribes a full JID to the node as the component would.
func (f *fixture) subscribeXMPP(t *testing.T, node, full string) error {
	t.Helper()
	bare, _, _ := strings.Cut(full, "/")
	_, _, err := f.hub.Subscribe(t.Context(), hub.Subscription{
		NodeName: node, Kind: hub.KindXMPP, Address: full, BareJID: bare,
	})
	return err
}

func TestAddToAWhitelistNodeNeedsAToken(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	// A member and a subscriber already there must stay as they are.
	if _, err := f.svc.Add(ctx, "closed", "old@example.org", f.tokens["closed"]); err != nil {
		t.Fatal(err)
	}
	if err := f.subscribeXMPP(t, "closed", "old@example.org/phone"); err != nil {
		t.Fatal(err)
	}
	before := f.snapshot(t, "closed")

	for name, token := range map[string]string{
		"no token":          "",
		"wrong token":       "not-the-token",
		"other node's":      f.tokens["open"],
		"token with suffix": f.tokens["closed"] + "x",
		"admin token case":  strings.ToUpper(adminToken),
	} {
		bare, err := f.svc.Add(ctx, "closed", "new@example.org/laptop", token)
		if !errors.Is(err, ErrUnauthorized) || bare != "" {
			t.Errorf("%s: Add = %q, %v; want ErrUnauthorized", name, bare, err)
		}
		// Even a bad JID gets 401 first: nothing is said to strangers.
		if _, err := f.svc.Add(ctx, "closed", "not a jid", token); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s, bad JID: err = %v, want ErrUnauthorized", name, err)
		}
		if after := f.snapshot(t, "closed"); !after.equal(before) {
			t.Fatalf("%s changed the node: %+v → %+v", name, before, after)
		}
	}
	// Not a member: the XMPP subscription is refused.
	if err := f.subscribeXMPP(t, "closed", "new@example.org/laptop"); !errors.Is(err, hub.ErrNotMember) {
		t.Fatalf("subscribe before Add: err = %v, want ErrNotMember", err)
	}

	// The node token and the admin token both work; a full JID is reduced
	// to its bare JID, normalised.
	bare, err := f.svc.Add(ctx, "closed", "New@Example.ORG/laptop", f.tokens["closed"])
	if err != nil || bare != "new@example.org" {
		t.Fatalf("Add with the node token = %q, %v", bare, err)
	}
	if a := f.affiliation(t, "closed", "new@example.org"); a != hub.AffMember {
		t.Errorf("affiliation = %q, want member", a)
	}
	if err := f.subscribeXMPP(t, "closed", "new@example.org/laptop"); err != nil {
		t.Errorf("subscribe after Add: %v", err)
	}
	if bare, err := f.svc.Add(ctx, "closed", "third@example.org", adminToken); err != nil || bare != "third@example.org" {
		t.Errorf("Add with the admin token = %q, %v", bare, err)
	}

	// A repeated Add changes nothing.
	before = f.snapshot(t, "closed")
	if _, err := f.svc.Add(ctx, "closed", "new@example.org/other", f.tokens["closed"]); err != nil {
		t.Fatal(err)
	}
	if after := f.snapshot(t, "closed"); !after.equal(before) {
		t.Errorf("repeated Add changed the node: %+v → %+v", before, after)
	}

	got, err := f.svc.List(ctx, "closed")
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{JID: "new@example.org", Affiliation: hub.AffMember},
		{JID: "old@example.org", Affiliation: hub.AffMember},
		{JID: "third@example.org", Affiliation: hub.AffMember},
	}
	if !slices.Equal(got, want) {
		t.Errorf("List = %+v, want %+v", got, want)
	}
}

// TestAddToAnOpenNodeNeedsNoToken: on an open node a request without a
// valid token is answered (the JID may subscribe) but records no
// membership, so it does not outlive a switch to the whitelist model; the
// node's token records one that does.
func TestAddToAnOpenNodeNeedsNoToken(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	before := f.snapshot(t, "open")
	for _, token := range []string{"", "wrong", f.tokens["closed"]} {
		bare, err := f.svc.Add(ctx, "open", "reader@example.org/desk", token)
		if err != nil || bare != "reader@example.org" {
			t.Fatalf("Add with token %q = %q, %v", token, bare, err)
		}
	}
	// A bad JID is still refused, with its reason.
	if _, err := f.svc.Add(ctx, "open", "a b@example.org", ""); !errors.Is(err, ErrBadJID) {
		t.Errorf("bad JID on an open node: err = %v, want ErrBadJID", err)
	}
	if after := f.snapshot(t, "open"); !after.equal(before) {
		t.Fatalf("requests without the node's token changed the open node: %+v → %+v", before, after)
	}
	// Anyone subscribes to the open node over XMPP without a membership.
	if err := f.subscribeXMPP(t, "open", "reader@example.org/desk"); err != nil {
		t.Fatalf("subscribing to the open node: %v", err)
	}
	// The owner's grant is recorded and lasts.
	if _, err := f.svc.Add(ctx, "open", "friend@example.org", f.tokens["open"]); err != nil {
		t.Fatal(err)
	}
	if a := f.affiliation(t, "open", "friend@example.org"); a != hub.AffMember {
		t.Fatalf("affiliation after the owner's grant = %q, want member", a)
	}
	cfg := hub.DefaultNodeConfig()
	cfg.AccessModel = hub.AccessWhitelist
	if err := f.hub.ConfigureNode(ctx, "open", cfg); err != nil {
		t.Fatal(err)
	}
	if err := f.subscribeXMPP(t, "open", "friend@example.org/desk"); err != nil {
		t.Errorf("granted member subscribing after the switch: %v", err)
	}
	for _, stranger := range []string{"stranger@example.org/desk", "reader@example.org/laptop"} {
		if err := f.subscribeXMPP(t, "open", stranger); !errors.Is(err, hub.ErrNotMember) {
			t.Errorf("%s subscribing after the switch: %v, want ErrNotMember", stranger, err)
		}
	}
}

func TestAddLiftsABanOnlyWithAToken(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	n, err := f.hub.Node(ctx, "open")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.hub.SetAffiliation(ctx, n, "troll@example.org", hub.AffOutcast); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Add(ctx, "open", "troll@example.org/x", ""); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("outcast adding itself: err = %v, want ErrUnauthorized", err)
	}
	if a := f.affiliation(t, "open", "troll@example.org"); a != hub.AffOutcast {
		t.Fatalf("affiliation = %q, want outcast", a)
	}
	if _, err := f.svc.Add(ctx, "open", "troll@example.org", f.tokens["open"]); err != nil {
		t.Fatal(err)
	}
	if a := f.affiliation(t, "open", "troll@example.org"); a != hub.AffMember {
		t.Errorf("affiliation after an authorised Add = %q, want member", a)
	}
}

func TestAddNeverDemotes(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	n, err := f.hub.Node(ctx, "closed")
	if err != nil {
		t.Fatal(err)
	}
	for jid, a := range map[string]hub.Affiliation{"owner@example.org": hub.AffOwner, "pub@example.org": hub.AffPublisher} {
		if err := f.hub.SetAffiliation(ctx, n, jid, a); err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.Add(ctx, "closed", jid, f.tokens["closed"]); err != nil {
			t.Fatal(err)
		}
		if got := f.affiliation(t, "closed", jid); got != a {
			t.Errorf("%s: %q after Add, want %q", jid, got, a)
		}
	}
	// A configured admin owns every node already; nothing is stored.
	if bare, err := f.svc.Add(ctx, "closed", adminJID, f.tokens["closed"]); err != nil || bare != adminJID {
		t.Fatalf("Add admin = %q, %v", bare, err)
	}
	if got := f.affiliation(t, "closed", adminJID); got != hub.AffNone {
		t.Errorf("admin stored as %q", got)
	}
}

func TestRemoveNeedsATokenAndEndsSubscriptions(t *testing.T) {
	for _, node := range []string{"closed", "open"} {
		t.Run(node, func(t *testing.T) {
			f := newFixture(t)
			ctx := t.Context()
			if _, err := f.svc.Add(ctx, node, "gone@example.org", f.tokens[node]); err != nil {
				t.Fatal(err)
			}
			if _, err := f.svc.Add(ctx, node, "stays@example.org", f.tokens[node]); err != nil {
				t.Fatal(err)
			}
			for _, full := range []string{"gone@example.org/phone", "gone@example.org/desk", "stays@example.org/phone"} {
				if err := f.subscribeXMPP(t, node, full); err != nil {
					t.Fatal(err)
				}
			}
			before := f.snapshot(t, node)

			// Without or with a wrong token: 401 and nothing changes, on
			// an open node too.
			for _, token := range []string{"", "wrong", f.tokens[map[string]string{"closed": "open", "open": "closed"}[node]]} {
				if err := f.svc.Remove(ctx, node, "gone@example.org", token); !errors.Is(err, ErrUnauthorized) {
					t.Errorf("Remove with token %q: err = %v, want ErrUnauthorized", token, err)
				}
			}
			if after := f.snapshot(t, node); !after.equal(before) {
				t.Fatalf("unauthorised Remove changed the node: %+v → %+v", before, after)
			}

			if err := f.svc.Remove(ctx, node, "Gone@Example.org/whatever", f.tokens[node]); err != nil {
				t.Fatalf("Remove: %v", err)
			}
			if a := f.affiliation(t, node, "gone@example.org"); a != hub.AffNone {
				t.Errorf("affiliation after Remove = %q", a)
			}
			n, err := f.hub.Node(ctx, node)
			if err != nil {
				t.Fatal(err)
			}
			subs, err := f.store.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID})
			if err != nil {
				t.Fatal(err)
			}
			if len(subs) != 1 || subs[0].Address != "stays@example.org/phone" {
				t.Errorf("subscriptions after Remove = %+v, want only stays@example.org/phone", subs)
			}
			// Each removed subscription got a revoke event, so the
			// component tells that resource.
			events, err := f.store.EventsAfter(ctx, n.ID, before.lastSeq, 100)
			if err != nil {
				t.Fatal(err)
			}
			var revoked []string
			for _, e := range events {
				if e.Kind != hub.EventRevoke {
					t.Errorf("unexpected %s event", e.Kind)
				}
				revoked = append(revoked, e.Address)
			}
			slices.Sort(revoked)
			if !slices.Equal(revoked, []string{"gone@example.org/desk", "gone@example.org/phone"}) {
				t.Errorf("revoked = %q", revoked)
			}
			entries, err := f.svc.List(ctx, node)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(entries, []Entry{{JID: "stays@example.org", Affiliation: hub.AffMember}}) {
				t.Errorf("List after Remove = %+v", entries)
			}
			if node == "closed" {
				if err := f.subscribeXMPP(t, node, "gone@example.org/phone"); !errors.Is(err, hub.ErrNotMember) {
					t.Errorf("resubscribe after Remove: err = %v, want ErrNotMember", err)
				}
			}

			// Removing again, or a JID never there, is fine and appends nothing.
			seq := f.snapshot(t, node).lastSeq
			for _, j := range []string{"gone@example.org", "never@example.org"} {
				if err := f.svc.Remove(ctx, node, j, adminToken); err != nil {
					t.Errorf("Remove %s again: %v", j, err)
				}
			}
			if got := f.snapshot(t, node).lastSeq; got != seq {
				t.Errorf("idle Remove appended events: seq %d → %d", seq, got)
			}
		})
	}
}

func TestServiceErrors(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	if _, err := f.svc.Add(ctx, "nope", "a@b.example", adminToken); !errors.Is(err, hub.ErrNotFound) {
		t.Errorf("Add to a missing node: %v", err)
	}
	if err := f.svc.Remove(ctx, "nope", "a@b.example", adminToken); !errors.Is(err, hub.ErrNotFound) {
		t.Errorf("Remove from a missing node: %v", err)
	}
	if _, err := f.svc.List(ctx, "nope"); !errors.Is(err, hub.ErrNotFound) {
		t.Errorf("List of a missing node: %v", err)
	}
	for _, bad := range []string{"", "a@", "@b", "a b@c", "a@b/", strings.Repeat("x", 1100) + "@b"} {
		before := f.snapshot(t, "closed")
		if _, err := f.svc.Add(ctx, "closed", bad, adminToken); !errors.Is(err, ErrBadJID) {
			t.Errorf("Add %q: err = %v, want ErrBadJID", bad, err)
		}
		if err := f.svc.Remove(ctx, "closed", bad, adminToken); !errors.Is(err, ErrBadJID) {
			t.Errorf("Remove %q: err = %v, want ErrBadJID", bad, err)
		}
		if after := f.snapshot(t, "closed"); !after.equal(before) {
			t.Errorf("bad JID %q changed the node", bad)
		}
	}
}

func TestApply(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	req, err := ParseConsumerRequest(strings.NewReader(`<subscribe><consumer jid="Listener@Example.com/FeedListener"/></subscribe>`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Apply(ctx, "closed", req, ""); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Apply without a token: %v", err)
	}
	doc, err := f.svc.Apply(ctx, "closed", req, f.tokens["closed"])
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != `<subscribed jid="listener@example.com" node="closed"/>` {
		t.Errorf("subscribe answer = %s", doc)
	}
	req.Action = Unsubscribe
	doc, err = f.svc.Apply(ctx, "closed", req, f.tokens["closed"])
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != `<unsubscribed jid="listener@example.com" node="closed"/>` {
		t.Errorf("unsubscribe answer = %s", doc)
	}
	if a := f.affiliation(t, "closed", "listener@example.com"); a != hub.AffNone {
		t.Errorf("affiliation = %q after unsubscribe", a)
	}
	if _, err := f.svc.Apply(ctx, "closed", Request{Action: "subscribe-me", JID: "a@b"}, adminToken); !errors.Is(err, ErrMalformed) {
		t.Errorf("unknown action: %v", err)
	}
}

// TestOneWhitelistForEveryView checks that what the hub's owners change
// over XMPP (affiliations) is what List shows, and the other way round.
func TestOneWhitelistForEveryView(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	n, err := f.hub.Node(ctx, "closed")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.hub.SetAffiliation(ctx, n, "xmpp-added@example.org", hub.AffMember); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Add(ctx, "closed", "http-added@example.org", f.tokens["closed"]); err != nil {
		t.Fatal(err)
	}
	entries, err := f.svc.List(ctx, "closed")
	if err != nil {
		t.Fatal(err)
	}
	affs, err := f.hub.Affiliations(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(affs) || len(entries) != 2 {
		t.Fatalf("List = %+v, affiliations = %v", entries, affs)
	}
	for _, e := range entries {
		if affs[e.JID] != e.Affiliation {
			t.Errorf("List says %s is %s, the hub says %s", e.JID, e.Affiliation, affs[e.JID])
		}
	}
	js, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	if string(js) != `[{"jid":"http-added@example.org","affiliation":"member"},{"jid":"xmpp-added@example.org","affiliation":"member"}]` {
		t.Errorf("JSON = %s", js)
	}
	// An empty whitelist is an empty JSON list, not null.
	open, err := f.svc.List(ctx, "open")
	if err != nil {
		t.Fatal(err)
	}
	if js, _ := json.Marshal(open); string(js) != "[]" {
		t.Errorf("empty list JSON = %s", js)
	}
}
