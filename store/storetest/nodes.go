package storetest

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

func testNodeCreateAndRead(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	before := time.Now().Add(-time.Second)
	n := newNode(t, s, "feeds/demo", func(n *hub.Node) {
		n.Title = "Démo ✓"
		n.AccessModel = hub.AccessWhitelist
		n.MaxItems = 7
		n.DeliverPayloads = false
		n.NotificationType = hub.NotifyNormal
		n.Implicit = true
		n.TokenHash = hub.HashToken("secret")
	})
	if n.ID == 0 || n.CreatedAt.Before(before) || n.UpdatedAt.IsZero() {
		t.Fatalf("CreateNode did not set ID and times: %+v", n)
	}
	got := must(s.Node(ctx, "feeds/demo"))(t)
	if got.ID != n.ID || got.Title != "Démo ✓" || got.AccessModel != hub.AccessWhitelist || got.MaxItems != 7 ||
		got.DeliverPayloads || got.NotificationType != hub.NotifyNormal || !got.Implicit ||
		!bytes.Equal(got.TokenHash, hub.HashToken("secret")) || got.LastSeq != 0 || got.XMPPSeq != 0 ||
		!got.CreatedAt.Equal(n.CreatedAt) {
		t.Fatalf("Node = %+v, want %+v", got, n)
	}
	byID := must(s.NodeByID(ctx, n.ID))(t)
	if byID.Name != "feeds/demo" {
		t.Fatalf("NodeByID name = %q", byID.Name)
	}

	dup := &hub.Node{Name: "feeds/demo", NodeConfig: hub.DefaultNodeConfig()}
	wantErr(t, s.CreateNode(ctx, dup), hub.ErrExists)
	_, err := s.Node(ctx, "missing")
	wantErr(t, err, hub.ErrNotFound)
	_, err = s.NodeByID(ctx, n.ID+1000)
	wantErr(t, err, hub.ErrNotFound)

	newNode(t, s, "b")
	newNode(t, s, "a")
	var names []string
	for _, n := range must(s.Nodes(ctx))(t) {
		names = append(names, n.Name)
	}
	equalStrings(t, "Nodes", names, []string{"a", "b", "feeds/demo"})
}

func testNodeUpdates(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	cfg := hub.NodeConfig{Title: "T", AccessModel: hub.AccessWhitelist, MaxItems: 3, DeliverPayloads: false, NotificationType: hub.NotifyNormal,
		SendLastPublished: hub.SendLastNever, Polling: hub.FeedPolling{TTLMinutes: 30, SkipHours: []int{0, 23}, SkipDays: []string{"Sunday"}, UpdatePeriod: "daily", UpdateFrequency: 2}}
	noErr(t, s.UpdateNodeConfig(ctx, "n", cfg))
	got := must(s.Node(ctx, "n"))(t)
	if !reflect.DeepEqual(got.NodeConfig, cfg) {
		t.Fatalf("config = %+v, want %+v", got.NodeConfig, cfg)
	}
	wantErr(t, s.UpdateNodeConfig(ctx, "missing", cfg), hub.ErrNotFound)

	noErr(t, s.SetNodeToken(ctx, "n", []byte{1, 2, 3}))
	if got := must(s.Node(ctx, "n"))(t); !bytes.Equal(got.TokenHash, []byte{1, 2, 3}) {
		t.Fatalf("token hash = %x", got.TokenHash)
	}
	wantErr(t, s.SetNodeToken(ctx, "missing", nil), hub.ErrNotFound)

	src, _ := must2(s.EnsureSource(ctx, "https://example.org/feed.xml"))(t)
	noErr(t, s.SetNodeSource(ctx, "n", src.ID))
	got = must(s.Node(ctx, "n"))(t)
	if got.SourceID != src.ID || got.SourceURL != "https://example.org/feed.xml" {
		t.Fatalf("source = %d %q", got.SourceID, got.SourceURL)
	}
	following := must(s.NodesBySource(ctx, src.ID))(t)
	if len(following) != 1 || following[0].ID != n.ID {
		t.Fatalf("NodesBySource = %+v", following)
	}
	noErr(t, s.SetNodeSource(ctx, "n", 0))
	got = must(s.Node(ctx, "n"))(t)
	if got.SourceID != 0 || got.SourceURL != "" {
		t.Fatalf("source after clearing = %d %q", got.SourceID, got.SourceURL)
	}
	if len(must(s.NodesBySource(ctx, src.ID))(t)) != 0 {
		t.Fatal("NodesBySource still lists the node")
	}
	wantErr(t, s.SetNodeSource(ctx, "missing", src.ID), hub.ErrNotFound)
}

// must2 is must for two results.
func must2[A, B any](a A, b B, err error) func(t *testing.T) (A, B) {
	return func(t *testing.T) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}

func testNodeDeleteCascades(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "doomed")
	other := newNode(t, s, "other")
	appendEvents(t, s, n.ID, item("a", "<a/>"), item("b", "<b/>"))
	appendEvents(t, s, other.ID, item("a", "<a/>"))
	sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/cb", State: hub.SubActive}
	must(s.PutSubscription(ctx, sub))(t)
	otherSub := &hub.Subscription{NodeID: other.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/cb", State: hub.SubActive}
	must(s.PutSubscription(ctx, otherSub))(t)
	noErr(t, s.SetAffiliation(ctx, n.ID, "a@example.org", hub.AffMember))

	noErr(t, s.DeleteNode(ctx, "doomed"))
	wantErr(t, s.DeleteNode(ctx, "doomed"), hub.ErrNotFound)
	_, err := s.Node(ctx, "doomed")
	wantErr(t, err, hub.ErrNotFound)
	if items := must(s.Items(ctx, n.ID, nil, 0))(t); len(items) != 0 {
		t.Fatalf("items survived: %+v", items)
	}
	if evs := must(s.EventsAfter(ctx, n.ID, 0, 0))(t); len(evs) != 0 {
		t.Fatalf("events survived: %+v", evs)
	}
	_, err = s.Subscription(ctx, sub.ID)
	wantErr(t, err, hub.ErrNotFound)
	if affs := must(s.Affiliations(ctx, n.ID))(t); len(affs) != 0 {
		t.Fatalf("affiliations survived: %v", affs)
	}
	// The other node is untouched.
	if items := must(s.Items(ctx, other.ID, nil, 0))(t); len(items) != 1 {
		t.Fatalf("other node's items = %d", len(items))
	}
	must(s.Subscription(ctx, otherSub.ID))(t)
}

// testNodeDeletionRecorded: deleting a node with XMPP subscriptions
// records, in the same transaction, what they are to be told (the node's
// name, title and notification type, each XMPP subscriber's address and
// options), kept until forgotten; a node without XMPP subscriptions
// records nothing.
func testNodeDeletionRecorded(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := &hub.Node{Name: "doomed", NodeConfig: hub.DefaultNodeConfig()}
	n.Title, n.NotificationType = "Doomed ✓", hub.NotifyNormal
	noErr(t, s.CreateNode(ctx, n))
	quiet := newNode(t, s, "quiet")
	for _, sub := range []*hub.Subscription{
		{NodeID: n.ID, Kind: hub.KindXMPP, Address: "a@example.org/x", BareJID: "a@example.org", State: hub.SubActive,
			Options: hub.Options{Format: hub.FormatMessage, MessageType: hub.NotifyChat}},
		{NodeID: n.ID, Kind: hub.KindXMPP, Address: "b@example.org", BareJID: "b@example.org", State: hub.SubActive},
		{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/cb", State: hub.SubActive},
		{NodeID: quiet.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/cb", State: hub.SubActive},
	} {
		must(s.PutSubscription(ctx, sub))(t)
	}
	noErr(t, s.DeleteNode(ctx, "doomed"))
	noErr(t, s.DeleteNode(ctx, "quiet"))
	dels := must(s.NodeDeletions(ctx, 10))(t)
	if len(dels) != 1 {
		t.Fatalf("%d deletions recorded, want doomed's alone: %+v", len(dels), dels)
	}
	d := dels[0]
	if d.ID == 0 || d.Node.ID != n.ID || d.Node.Name != "doomed" || d.Node.Title != "Doomed ✓" ||
		d.Node.NotificationType != hub.NotifyNormal || d.DeletedAt.IsZero() {
		t.Fatalf("deletion %+v", d)
	}
	if len(d.Subscribers) != 2 || d.Subscribers[0].Address != "a@example.org/x" || d.Subscribers[1].Address != "b@example.org" ||
		d.Subscribers[0].Kind != hub.KindXMPP || d.Subscribers[0].Options.Format != hub.FormatMessage ||
		d.Subscribers[0].Options.MessageType != hub.NotifyChat || d.Subscribers[1].Options.Format == hub.FormatMessage {
		t.Fatalf("subscribers %+v", d.Subscribers)
	}
	// A node of the same name made afterwards is a new node: the
	// deletion stays as it was.
	newNode(t, s, "doomed")
	if again := must(s.NodeDeletions(ctx, 10))(t); len(again) != 1 || again[0].Node.ID != n.ID {
		t.Fatalf("deletions after a new node of the name: %+v", again)
	}
	noErr(t, s.ForgetNodeDeletions(ctx, []int64{d.ID}))
	noErr(t, s.ForgetNodeDeletions(ctx, []int64{d.ID})) // gone already: no error
	if left := must(s.NodeDeletions(ctx, 10))(t); len(left) != 0 {
		t.Fatalf("deletions left after forgetting: %+v", left)
	}
}

// testNodeIDsNotReused: the id of a deleted node, even the highest, is
// never given to a new one, so that what is recorded late for the old
// node (an XMPP acknowledgement naming its id and cursor) cannot land on
// the new one.
func testNodeIDsNotReused(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	var last int64
	for i := range 3 {
		n := newNode(t, s, fmt.Sprintf("n%d", i))
		if n.ID <= last {
			t.Fatalf("node %d got id %d after %d", i, n.ID, last)
		}
		appendEvents(t, s, n.ID, item("1", ""), item("2", ""))
		noErr(t, s.DeleteNode(ctx, n.Name))
		last = n.ID
	}
}

func testAffiliations(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	other := newNode(t, s, "other")
	if a := must(s.Affiliation(ctx, n.ID, "a@example.org"))(t); a != hub.AffNone {
		t.Fatalf("fresh affiliation = %q", a)
	}
	noErr(t, s.SetAffiliation(ctx, n.ID, "a@example.org", hub.AffMember))
	noErr(t, s.SetAffiliation(ctx, n.ID, "b@example.org", hub.AffOwner))
	noErr(t, s.SetAffiliation(ctx, other.ID, "a@example.org", hub.AffOutcast))
	noErr(t, s.SetAffiliation(ctx, n.ID, "a@example.org", hub.AffPublisher))
	if a := must(s.Affiliation(ctx, n.ID, "a@example.org"))(t); a != hub.AffPublisher {
		t.Fatalf("affiliation = %q", a)
	}
	all := must(s.Affiliations(ctx, n.ID))(t)
	if len(all) != 2 || all["a@example.org"] != hub.AffPublisher || all["b@example.org"] != hub.AffOwner {
		t.Fatalf("affiliations = %v", all)
	}
	noErr(t, s.SetAffiliation(ctx, n.ID, "a@example.org", hub.AffNone))
	if a := must(s.Affiliation(ctx, n.ID, "a@example.org"))(t); a != hub.AffNone {
		t.Fatalf("after none = %q", a)
	}
	if all := must(s.Affiliations(ctx, n.ID))(t); len(all) != 1 {
		t.Fatalf("affiliations after removal = %v", all)
	}
	if a := must(s.Affiliation(ctx, other.ID, "a@example.org"))(t); a != hub.AffOutcast {
		t.Fatalf("other node's affiliation = %q", a)
	}
	wantErr(t, s.SetAffiliation(ctx, n.ID, "a@example.org", "emperor"), hub.ErrInvalid)
	wantErr(t, s.SetAffiliation(ctx, n.ID+1000, "a@example.org", hub.AffMember), hub.ErrNotFound)
}
