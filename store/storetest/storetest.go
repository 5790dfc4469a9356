package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// Run checks every method of the Store contract. open must return a fresh,
// empty store for each call; Run closes it.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Check", testCheck},
		{"NodeCreateAndRead", testNodeCreateAndRead},
		{"NodeUpdates", testNodeUpdates},
		{"NodeDeleteCascades", testNodeDeleteCascades},
		{"OpenNodes", testOpenNodes},
		{"AppendSequences", testAppendSequences},
		{"AppendValidates", testAppendValidates},
		{"ItemReplace", testItemReplace},
		{"ItemRetract", testItemRetract},
		{"ItemPurge", testItemPurge},
		{"MaxItems", testMaxItems},
		{"ItemsByID", testItemsByID},
		{"EventsAfter", testEventsAfter},
		{"XMPPSeq", testXMPPSeq},
		{"ConcurrentAppend", testConcurrentAppend},
		{"EnsureSource", testEnsureSource},
		{"SourcesMatchingAndFollowed", testSourcesMatching},
		{"MarkSourceDue", testMarkSourceDue},
		{"ScheduleSource", testScheduleSource},
		{"ReviveSource", testReviveSource},
		{"ForgetSeenEntries", testForgetSeenEntries},
		{"ClaimDueSources", testClaimDueSources},
		{"ClaimDueSourcesConcurrent", testClaimDueSourcesConcurrent},
		{"FetchBaseline", testFetchBaseline},
		{"FetchNewEntries", testFetchNewEntries},
		{"FetchReorderedAndRepeated", testFetchReorderedAndRepeated},
		{"FetchChangeWithoutNewEntries", testFetchChangeWithoutNew},
		{"FetchNote", testFetchNote},
		{"FetchNoteReplacedMeanwhile", testFetchNoteReplaced},
		{"FetchStateRoundTrip", testFetchStateRoundTrip},
		{"FetchMovedSourceKeepsSeen", testFetchMovedKeepsSeen},
		{"FetchPingDuringFetch", testFetchPingDuringFetch},
		{"FetchUnknownSource", testFetchUnknownSource},
		{"FetchPublishesAtMostMaxItems", testFetchPublishesAtMostMaxItems},
		{"FetchForgetsHiddenIDsBeyondTheBound", testFetchForgetsHiddenIDs},
		{"FetchWithoutNodes", testFetchWithoutNodes},
		{"SubscriberCount", testSubscriberCount},
		{"PutSubscription", testPutSubscription},
		{"SubscriptionFilters", testSubscriptionFilters},
		{"DeleteSubscriptions", testDeleteSubscriptions},
		{"SubscriptionState", testSubscriptionState},
		{"DeleteExpiredSubscriptions", testDeleteExpired},
		{"ClaimDeliveries", testClaimDeliveries},
		{"ClaimDeliveriesLeases", testClaimDeliveriesLeases},
		{"ClaimDeliveriesConcurrent", testClaimDeliveriesConcurrent},
		{"SaveDeliveryState", testSaveDeliveryState},
		{"SaveDeliveryStates", testSaveDeliveryStates},
		{"RequestSubscription", testRequestSubscription},
		{"RequestSubscriptionConcurrent", testRequestSubscriptionConcurrent},
		{"SubscriptionChangeRefused", testSubscriptionChangeRefused},
		{"SubscriptionChangeApplied", testSubscriptionChangeApplied},
		{"RequestUnsubscription", testRequestUnsubscription},
		{"ClaimPendingChanges", testClaimPendingChanges},
		{"SubscriptionIDsNotReused", testSubscriptionIDsNotReused},
		{"NodeIDsNotReused", testNodeIDsNotReused},
		{"Affiliations", testAffiliations},
		{"Pings", testPings},
		{"Prune", testPrune},
		{"LogWindow", testLogWindow},
		{"Times", testTimes},
		{"NodeSendLastPublished", testNodeSendLastPublished},
		{"LastEvent", testLastEvent},
		{"Bounces", testBounces},
		{"Digests", testDigests},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// t0 is a fixed clock reading for the time arguments the tests pass.
var t0 = time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// must returns v after failing the test on err: must(s.Node(ctx, "n"))(t).
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

func newNode(t *testing.T, s store.Store, name string, edit ...func(*hub.Node)) *hub.Node {
	t.Helper()
	n := &hub.Node{Name: name, NodeConfig: hub.DefaultNodeConfig()}
	for _, f := range edit {
		f(n)
	}
	noErr(t, s.CreateNode(ctxOf(t), n))
	return n
}

func withMaxItems(m int) func(*hub.Node) { return func(n *hub.Node) { n.MaxItems = m } }

func withSource(id int64) func(*hub.Node) { return func(n *hub.Node) { n.SourceID = id } }

func item(id, payload string) hub.Event {
	return hub.Event{Kind: hub.EventItem, ItemID: id, Payload: []byte(payload), Title: "title " + id}
}

func appendEvents(t *testing.T, s store.Store, nodeID int64, events ...hub.Event) []hub.Event {
	t.Helper()
	return must(s.Append(ctxOf(t), nodeID, events))(t)
}

// itemIDs lists the item ids of events in their order.
func itemIDs(events []hub.Event) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		out = append(out, e.ItemID)
	}
	return out
}

func kinds(events []hub.Event) []hub.EventKind {
	out := make([]hub.EventKind, 0, len(events))
	for _, e := range events {
		out = append(out, e.Kind)
	}
	return out
}

func equalStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
}

func testCheck(t *testing.T, s store.Store) {
	noErr(t, s.Check(ctxOf(t)))
	if b := s.Backend(); b != "sqlite" && b != "postgres" {
		t.Fatalf("Backend() = %q", b)
	}
}

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

func testAppendSequences(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	before := time.Now().Add(-time.Second)
	updated := time.Date(2020, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))
	got := appendEvents(t, s, n.ID,
		hub.Event{Kind: hub.EventItem, ItemID: "1", Payload: []byte("<entry>1</entry>"), Title: "one",
			Summary: "first", Link: "https://example.org/1", Publisher: "owner@example.org", Updated: updated},
		item("2", "<entry>2</entry>"))
	if len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 2 {
		t.Fatalf("first append seqs = %+v", got)
	}
	for _, e := range got {
		if e.NodeID != n.ID || e.Created.Before(before) || e.Created.Location() != time.UTC {
			t.Fatalf("event not filled in: %+v", e)
		}
	}
	got = appendEvents(t, s, n.ID, hub.Event{Kind: hub.EventChange}, item("3", "<entry>3</entry>"))
	if got[0].Seq != 3 || got[1].Seq != 4 {
		t.Fatalf("second append seqs = %d, %d", got[0].Seq, got[1].Seq)
	}
	if n := must(s.NodeByID(ctx, n.ID))(t); n.LastSeq != 4 {
		t.Fatalf("LastSeq = %d, want 4", n.LastSeq)
	}
	stored := must(s.EventsAfter(ctx, n.ID, 0, 0))(t)
	e := stored[0]
	if e.Kind != hub.EventItem || e.ItemID != "1" || string(e.Payload) != "<entry>1</entry>" || e.Title != "one" ||
		e.Summary != "first" || e.Link != "https://example.org/1" || e.Publisher != "owner@example.org" ||
		!e.Updated.Equal(updated) || e.Updated.Location() != time.UTC {
		t.Fatalf("stored event = %+v", e)
	}
	if !stored[1].Updated.IsZero() {
		t.Fatalf("zero Updated came back as %v", stored[1].Updated)
	}

	_, err := s.Append(ctx, n.ID+1000, []hub.Event{item("x", "<x/>")})
	wantErr(t, err, hub.ErrNotFound)
	_, err = s.Append(ctx, n.ID+1000, nil)
	wantErr(t, err, hub.ErrNotFound)
}

func testAppendValidates(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	_, err := s.Append(ctx, n.ID, []hub.Event{item("ok", "<a/>"), {Kind: "bogus"}})
	wantErr(t, err, hub.ErrInvalid)
	_, err = s.Append(ctx, n.ID, []hub.Event{{Kind: hub.EventItem}})
	wantErr(t, err, hub.ErrInvalid)
	// Nothing of a refused batch is kept.
	if got := must(s.NodeByID(ctx, n.ID))(t); got.LastSeq != 0 {
		t.Fatalf("LastSeq = %d after refused appends", got.LastSeq)
	}
}

func testItemReplace(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	appendEvents(t, s, n.ID, item("a", "<a>1</a>"), item("b", "<b/>"))
	appendEvents(t, s, n.ID, item("a", "<a>2</a>"))
	items := must(s.Items(ctx, n.ID, nil, 0))(t)
	equalStrings(t, "items", itemIDs(items), []string{"a", "b"})
	if string(items[0].Payload) != "<a>2</a>" || items[0].Seq != 3 {
		t.Fatalf("replaced item = %+v", items[0])
	}
	// The log keeps both versions.
	if evs := must(s.EventsAfter(ctx, n.ID, 0, 0))(t); len(evs) != 3 {
		t.Fatalf("log has %d events, want 3", len(evs))
	}
	// Replacing within one batch: the last one is current.
	appendEvents(t, s, n.ID, item("c", "<c>1</c>"), item("c", "<c>2</c>"))
	got := must(s.Items(ctx, n.ID, []string{"c"}, 0))(t)
	if len(got) != 1 || string(got[0].Payload) != "<c>2</c>" {
		t.Fatalf("item c = %+v", got)
	}
}

func testItemRetract(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	appendEvents(t, s, n.ID, item("a", "<a/>"), item("b", "<b/>"))
	got := appendEvents(t, s, n.ID, hub.Event{Kind: hub.EventRetract, ItemID: "a", Publisher: "p@example.org"})
	if got[0].Seq != 3 {
		t.Fatalf("retract seq = %d", got[0].Seq)
	}
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"b"})
	if len(must(s.Items(ctx, n.ID, []string{"a"}, 0))(t)) != 0 {
		t.Fatal("retracted item still current")
	}
	// Republishing a retracted id makes it current again.
	appendEvents(t, s, n.ID, item("a", "<a>again</a>"))
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"a", "b"})
}

func testItemPurge(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	other := newNode(t, s, "other")
	appendEvents(t, s, n.ID, item("a", "<a/>"), item("b", "<b/>"))
	appendEvents(t, s, other.ID, item("a", "<a/>"))
	appendEvents(t, s, n.ID, hub.Event{Kind: hub.EventPurge})
	if items := must(s.Items(ctx, n.ID, nil, 0))(t); len(items) != 0 {
		t.Fatalf("items after purge: %q", itemIDs(items))
	}
	if items := must(s.Items(ctx, other.ID, nil, 0))(t); len(items) != 1 {
		t.Fatal("purge reached another node")
	}
	// A purge in the middle of a batch removes only what came before it.
	appendEvents(t, s, n.ID, item("c", "<c/>"), hub.Event{Kind: hub.EventPurge}, item("d", "<d/>"))
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"d"})
}

func testMaxItems(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n", withMaxItems(3))
	for _, id := range []string{"1", "2", "3", "4", "5"} {
		appendEvents(t, s, n.ID, item(id, "<"+id+"/>"))
	}
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"5", "4", "3"})
	// No retract event was written for the ones that scrolled off.
	if ks := kinds(must(s.EventsAfter(ctx, n.ID, 0, 0))(t)); slices.Contains(ks, hub.EventRetract) {
		t.Fatalf("log kinds %v contain a retraction", ks)
	}
	// Republishing the oldest current item makes it the newest.
	appendEvents(t, s, n.ID, item("3", "<3>new</3>"), item("6", "<6/>"))
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"6", "3", "5"})
	// A batch larger than max_items keeps its newest.
	appendEvents(t, s, n.ID, item("a", ""), item("b", ""), item("c", ""), item("d", ""))
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"d", "c", "b"})
	// Lowering max_items takes effect with the next item.
	cfg := hub.DefaultNodeConfig()
	cfg.MaxItems = 1
	noErr(t, s.UpdateNodeConfig(ctx, "n", cfg))
	appendEvents(t, s, n.ID, item("e", ""))
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"e"})
}

func testItemsByID(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	appendEvents(t, s, n.ID, item("a", ""), item("b", ""), item("c", ""), item("d", ""))
	equalStrings(t, "by id", itemIDs(must(s.Items(ctx, n.ID, []string{"b", "missing", "d", "a", "b"}, 0))(t)),
		[]string{"d", "b", "a"})
	equalStrings(t, "newest 2", itemIDs(must(s.Items(ctx, n.ID, nil, 2))(t)), []string{"d", "c"})
	equalStrings(t, "all", itemIDs(must(s.Items(ctx, n.ID, nil, -1))(t)), []string{"d", "c", "b", "a"})
	if got := must(s.Items(ctx, n.ID, []string{"missing"}, 0))(t); len(got) != 0 {
		t.Fatalf("missing id gave %+v", got)
	}
	// Many ids at once.
	var ids []string
	var events []hub.Event
	for i := range 1200 {
		id := fmt.Sprintf("bulk-%04d", i)
		ids = append(ids, id)
		events = append(events, item(id, ""))
	}
	big := newNode(t, s, "big", withMaxItems(hub.MaxItemsLimit))
	appendEvents(t, s, big.ID, events...)
	got := must(s.Items(ctx, big.ID, ids, 0))(t)
	if len(got) != hub.MaxItemsLimit || got[0].ItemID != "bulk-1199" || got[len(got)-1].ItemID != "bulk-0200" {
		t.Fatalf("bulk lookup gave %d items, %s … %s", len(got), got[0].ItemID, got[len(got)-1].ItemID)
	}
}

func testEventsAfter(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	other := newNode(t, s, "other")
	appendEvents(t, s, n.ID, item("a", ""), hub.Event{Kind: hub.EventRetract, ItemID: "a"},
		hub.Event{Kind: hub.EventRevoke, Address: "x@example.org"}, item("b", ""))
	appendEvents(t, s, other.ID, item("z", ""))
	all := must(s.EventsAfter(ctx, n.ID, 0, 0))(t)
	if ks := kinds(all); !slices.Equal(ks, []hub.EventKind{hub.EventItem, hub.EventRetract, hub.EventRevoke, hub.EventItem}) {
		t.Fatalf("kinds = %v", ks)
	}
	if all[2].Address != "x@example.org" {
		t.Fatalf("revoke address = %q", all[2].Address)
	}
	page := must(s.EventsAfter(ctx, n.ID, 1, 2))(t)
	if len(page) != 2 || page[0].Seq != 2 || page[1].Seq != 3 {
		t.Fatalf("page = %+v", page)
	}
	if rest := must(s.EventsAfter(ctx, n.ID, 4, 10))(t); len(rest) != 0 {
		t.Fatalf("after the end: %+v", rest)
	}
}

func testXMPPSeq(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	a := newNode(t, s, "a")
	b := newNode(t, s, "b")
	if behind := must(s.NodesBehindXMPP(ctx))(t); len(behind) != 0 {
		t.Fatalf("fresh nodes behind: %+v", behind)
	}
	appendEvents(t, s, a.ID, item("1", ""), item("2", ""))
	appendEvents(t, s, b.ID, item("1", ""))
	noErr(t, s.SetXMPPSeq(ctx, b.ID, 1))
	behind := must(s.NodesBehindXMPP(ctx))(t)
	if len(behind) != 1 || behind[0].ID != a.ID || behind[0].LastSeq != 2 || behind[0].XMPPSeq != 0 {
		t.Fatalf("behind = %+v", behind)
	}
	noErr(t, s.SetXMPPSeq(ctx, a.ID, 2))
	if behind := must(s.NodesBehindXMPP(ctx))(t); len(behind) != 0 {
		t.Fatalf("behind after catching up: %+v", behind)
	}
	if got := must(s.NodeByID(ctx, a.ID))(t); got.XMPPSeq != 2 {
		t.Fatalf("XMPPSeq = %d", got.XMPPSeq)
	}
	// Never backwards: an acknowledgement recorded late changes nothing.
	noErr(t, s.SetXMPPSeq(ctx, a.ID, 1))
	if got := must(s.NodeByID(ctx, a.ID))(t); got.XMPPSeq != 2 {
		t.Fatalf("XMPPSeq after an older cursor = %d, want 2", got.XMPPSeq)
	}
	wantErr(t, s.SetXMPPSeq(ctx, a.ID+1000, 1), hub.ErrNotFound)
	// Never past the log: a cursor beyond the newest event (a marker
	// forged or meant for another node) stops at it, so the next event
	// is still sent.
	noErr(t, s.SetXMPPSeq(ctx, b.ID, 1_000_000))
	if got := must(s.NodeByID(ctx, b.ID))(t); got.XMPPSeq != 1 {
		t.Fatalf("XMPPSeq after a cursor past the log = %d, want 1", got.XMPPSeq)
	}
	appendEvents(t, s, b.ID, item("2", ""))
	if behind := must(s.NodesBehindXMPP(ctx))(t); len(behind) != 1 || behind[0].ID != b.ID || behind[0].XMPPSeq != 1 {
		t.Fatalf("behind after a new event = %+v", behind)
	}
}

func testConcurrentAppend(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "busy", withMaxItems(hub.MaxItemsLimit))
	const workers, rounds = 8, 15
	var wg sync.WaitGroup
	var mu sync.Mutex
	var seqs []int64
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				batch := []hub.Event{item(fmt.Sprintf("%d-%d-a", w, r), "")}
				if r%3 == 0 {
					batch = append(batch, item(fmt.Sprintf("%d-%d-b", w, r), ""))
				}
				got, err := s.Append(ctx, n.ID, batch)
				if err != nil {
					errs <- err
					return
				}
				// A batch takes consecutive numbers.
				for i := 1; i < len(got); i++ {
					if got[i].Seq != got[i-1].Seq+1 {
						errs <- fmt.Errorf("batch not consecutive: %d then %d", got[i-1].Seq, got[i].Seq)
						return
					}
				}
				mu.Lock()
				for _, e := range got {
					seqs = append(seqs, e.Seq)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := workers * (rounds + (rounds+2)/3)
	slices.Sort(seqs)
	if len(seqs) != total {
		t.Fatalf("%d sequence numbers, want %d", len(seqs), total)
	}
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("sequence %d at position %d: not gap-free and unique", seq, i)
		}
	}
	if got := must(s.NodeByID(ctx, n.ID))(t); got.LastSeq != int64(total) {
		t.Fatalf("LastSeq = %d, want %d", got.LastSeq, total)
	}
	if evs := must(s.EventsAfter(ctx, n.ID, 0, 0))(t); len(evs) != total {
		t.Fatalf("log has %d events, want %d", len(evs), total)
	}
}

func testEnsureSource(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	const u = "https://example.org/feed.xml"
	src, created := must2(s.EnsureSource(ctx, u))(t)
	if !created || src.ID == 0 || src.OriginalURL != u || src.URL != u || src.Baselined || src.CreatedAt.IsZero() {
		t.Fatalf("new source = %+v, created %v", src, created)
	}
	again, created := must2(s.EnsureSource(ctx, u))(t)
	if created || again.ID != src.ID {
		t.Fatalf("second EnsureSource = %d, created %v", again.ID, created)
	}
	got := must(s.Source(ctx, src.ID))(t)
	if got.URL != u || got.PendingNote != nil || got.LeaseOwner != "" || !got.LeaseUntil.IsZero() || !got.NextFetchAt.IsZero() {
		t.Fatalf("Source = %+v", got)
	}
	_, err := s.Source(ctx, src.ID+1000)
	wantErr(t, err, hub.ErrNotFound)

	// Many callers at once get one source.
	var wg sync.WaitGroup
	ids := make([]int64, 8)
	createdCount := make([]bool, 8)
	for i := range ids {
		wg.Go(func() {
			src, c, err := s.EnsureSource(ctx, "https://example.org/other.xml")
			if err != nil {
				t.Error(err)
				return
			}
			ids[i], createdCount[i] = src.ID, c
		})
	}
	wg.Wait()
	n := 0
	for i := range ids {
		if ids[i] != ids[0] {
			t.Fatalf("concurrent EnsureSource gave ids %v", ids)
		}
		if createdCount[i] {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d callers were told they created the source", n)
	}
}

// newSource makes a source followed by a new node.
func newSource(t *testing.T, s store.Store, url, node string) (*hub.Source, *hub.Node) {
	t.Helper()
	src, _ := must2(s.EnsureSource(ctxOf(t), url))(t)
	n := newNode(t, s, node, withSource(src.ID))
	return src, n
}

func testSourcesMatching(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	followed, _ := newSource(t, s, "https://a.example/feed", "a")
	lonely, _ := must2(s.EnsureSource(ctx, "https://b.example/feed"))(t)

	// Give the followed source a site and a new home.
	st := followed.SourceState
	st.URL = "https://a.example/new-feed"
	st.MovedFrom = "https://a.example/feed"
	st.MovedAt = t0
	st.SiteURL = "https://a.example/"
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: followed.ID, State: st}))(t)

	for _, u := range []string{"https://a.example/feed", "https://a.example/new-feed", "https://a.example/"} {
		got := must(s.SourcesMatching(ctx, u))(t)
		if len(got) != 1 || got[0].ID != followed.ID {
			t.Fatalf("SourcesMatching(%s) = %+v", u, got)
		}
	}
	if got := must(s.SourcesMatching(ctx, "https://c.example/"))(t); len(got) != 0 {
		t.Fatalf("unknown URL matched %+v", got)
	}
	if got := must(s.SourcesMatching(ctx, ""))(t); len(got) != 0 {
		t.Fatalf("empty URL matched %+v", got)
	}
	// EnsureSource finds a source by its current URL too.
	found, created := must2(s.EnsureSource(ctx, "https://a.example/new-feed"))(t)
	if created || found.ID != followed.ID {
		t.Fatalf("EnsureSource(current URL) = %d, created %v", found.ID, created)
	}

	all := must(s.Sources(ctx))(t)
	if len(all) != 1 || all[0].ID != followed.ID {
		t.Fatalf("Sources = %+v, want only the followed one (not %d)", all, lonely.ID)
	}
}

func testMarkSourceDue(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := newSource(t, s, "https://example.org/feed", "n")
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0, nil))
	got := must(s.Source(ctx, src.ID))(t)
	if !got.NextFetchAt.Equal(t0) || !got.LastPingAt.Equal(t0) || got.PendingNote != nil {
		t.Fatalf("after MarkSourceDue: next %v ping %v note %v", got.NextFetchAt, got.LastPingAt, got.PendingNote)
	}
	// Later due times do not postpone; earlier ones advance.
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0.Add(time.Hour), &hub.ChangeNote{Title: "T", Description: "D"}))
	got = must(s.Source(ctx, src.ID))(t)
	if !got.NextFetchAt.Equal(t0) || !got.LastPingAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("later mark: next %v ping %v", got.NextFetchAt, got.LastPingAt)
	}
	if got.PendingNote == nil || *got.PendingNote != (hub.ChangeNote{Title: "T", Description: "D"}) {
		t.Fatalf("note = %+v", got.PendingNote)
	}
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0.Add(-time.Hour), nil))
	got = must(s.Source(ctx, src.ID))(t)
	if !got.NextFetchAt.Equal(t0.Add(-time.Hour)) {
		t.Fatalf("earlier mark: next %v", got.NextFetchAt)
	}
	if got.PendingNote == nil {
		t.Fatal("a mark without a note dropped the pending note")
	}
	wantErr(t, s.MarkSourceDue(ctx, src.ID+1000, t0, nil), hub.ErrNotFound)
}

func testScheduleSource(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := newSource(t, s, "https://example.org/feed", "n")
	noErr(t, s.ScheduleSource(ctx, src.ID, t0, "new source"))
	got := must(s.Source(ctx, src.ID))(t)
	if !got.NextFetchAt.Equal(t0) || got.NextFetchReason != "new source" || !got.LastPingAt.IsZero() {
		t.Fatalf("after ScheduleSource: next %v reason %q ping %v", got.NextFetchAt, got.NextFetchReason, got.LastPingAt)
	}
	// A later time neither postpones nor renames; an earlier one does both.
	noErr(t, s.ScheduleSource(ctx, src.ID, t0.Add(time.Hour), "later"))
	got = must(s.Source(ctx, src.ID))(t)
	if !got.NextFetchAt.Equal(t0) || got.NextFetchReason != "new source" {
		t.Fatalf("later schedule: next %v reason %q", got.NextFetchAt, got.NextFetchReason)
	}
	noErr(t, s.ScheduleSource(ctx, src.ID, t0.Add(-time.Hour), "sooner"))
	got = must(s.Source(ctx, src.ID))(t)
	if !got.NextFetchAt.Equal(t0.Add(-time.Hour)) || got.NextFetchReason != "sooner" || !got.LastPingAt.IsZero() {
		t.Fatalf("earlier schedule: next %v reason %q ping %v", got.NextFetchAt, got.NextFetchReason, got.LastPingAt)
	}
	wantErr(t, s.ScheduleSource(ctx, src.ID+1000, t0, "x"), hub.ErrNotFound)
}

// testReviveSource: a gone source is claimed again once revived; a live
// one is left as it is.
func testReviveSource(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := newSource(t, s, "https://example.org/gone", "n")
	st := src.SourceState
	st.Gone, st.Baselined = true, true
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st}))(t)
	if got := must(s.ClaimDueSources(ctx, t0, 10, "me", t0.Add(time.Minute)))(t); len(got) != 0 {
		t.Fatalf("claimed a gone source: %+v", got)
	}
	if revived := must(s.ReviveSource(ctx, src.ID, t0, "node created"))(t); !revived {
		t.Fatal("a gone source was not revived")
	}
	got := must(s.Source(ctx, src.ID))(t)
	if got.Gone || !got.NextFetchAt.Equal(t0) || got.NextFetchReason != "node created" || !got.Baselined {
		t.Fatalf("revived source = %+v", got.SourceState)
	}
	if claimed := must(s.ClaimDueSources(ctx, t0, 10, "me", t0.Add(time.Minute)))(t); len(claimed) != 1 || claimed[0].ID != src.ID {
		t.Fatalf("claimed %v after the revival", sourceIDs(claimed))
	}
	// Live: nothing changes.
	if revived := must(s.ReviveSource(ctx, src.ID, t0.Add(time.Hour), "again"))(t); revived {
		t.Fatal("a live source was revived")
	}
	if got := must(s.Source(ctx, src.ID))(t); got.NextFetchReason != "node created" {
		t.Fatalf("a live source was rescheduled: %q", got.NextFetchReason)
	}
	_, err := s.ReviveSource(ctx, src.ID+1000, t0, "x")
	wantErr(t, err, hub.ErrNotFound)
}

// testForgetSeenEntries: the ids a source stopped showing long before its
// latest fetch are forgotten (and new again if they come back); those it
// still shows, and every id of a source that has not changed, are kept.
func testForgetSeenEntries(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	day := 24 * time.Hour
	fetch := func(src *hub.Source, at time.Time, ids ...string) []string {
		t.Helper()
		st := src.SourceState
		st.LastFetchAt = at
		var entries []hub.Entry
		for _, id := range ids {
			entries = append(entries, hub.Entry{ID: id})
		}
		applied := must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st, Changed: true, Entries: entries}))(t)
		var fresh []string
		for _, e := range applied.New {
			fresh = append(fresh, e.ID)
		}
		return fresh
	}
	busy, _ := newSource(t, s, "https://example.org/busy", "busy")
	still, _ := newSource(t, s, "https://example.org/still", "still")
	fetch(busy, t0, "old", "kept")              // baseline
	fetch(still, t0, "x", "y")                  // baseline, never changes again
	fetch(busy, t0.Add(50*day), "kept", "mid")  // "old" leaves the feed
	fetch(busy, t0.Add(100*day), "kept", "new") // "mid" leaves too

	n := must(s.ForgetSeenEntries(ctx, 90*day))(t)
	if n != 1 {
		t.Fatalf("forgot %d ids, want 1 (old)", n)
	}
	// "old" is new again; "mid" (left 50 days before the latest fetch) and
	// "kept" (still shown) are not; the unchanging source kept its ids.
	if got := fetch(busy, t0.Add(101*day), "old", "mid", "kept", "new"); !slices.Equal(got, []string{"old"}) {
		t.Errorf("new after forgetting: %v, want [old]", got)
	}
	if got := fetch(still, t0.Add(200*day), "x", "y"); len(got) != 0 {
		t.Errorf("an unchanging source's ids were forgotten: %v new", got)
	}
	if n := must(s.ForgetSeenEntries(ctx, 90*day))(t); n != 0 {
		t.Errorf("forgot %d more", n)
	}
}

func testClaimDueSources(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	due, _ := newSource(t, s, "https://example.org/due", "due")
	later, _ := newSource(t, s, "https://example.org/later", "later")
	gone, _ := newSource(t, s, "https://example.org/gone", "gone")
	lonely, _ := must2(s.EnsureSource(ctx, "https://example.org/lonely"))(t)
	newSource(t, s, "https://example.org/never", "never") // never marked due

	noErr(t, s.MarkSourceDue(ctx, due.ID, t0.Add(-time.Minute), nil))
	noErr(t, s.MarkSourceDue(ctx, later.ID, t0.Add(time.Minute), nil))
	noErr(t, s.MarkSourceDue(ctx, lonely.ID, t0.Add(-time.Minute), nil))
	noErr(t, s.MarkSourceDue(ctx, gone.ID, t0.Add(-time.Minute), nil))
	st := gone.SourceState
	st.Gone = true
	st.NextFetchAt = t0.Add(-time.Minute) // even with a due time, gone is never fetched
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: gone.ID, State: st}))(t)

	lease := t0.Add(time.Minute)
	claimed := must(s.ClaimDueSources(ctx, t0, 10, "one", lease))(t)
	if len(claimed) != 1 || claimed[0].ID != due.ID {
		t.Fatalf("claimed %+v, want only %d", claimed, due.ID)
	}
	if claimed[0].LeaseOwner != "one" || !claimed[0].LeaseUntil.Equal(lease) || claimed[0].URL != "https://example.org/due" {
		t.Fatalf("claimed source = %+v", claimed[0])
	}
	// Nobody else, nor the owner again, gets it while the lease lives.
	if got := must(s.ClaimDueSources(ctx, t0.Add(30*time.Second), 10, "two", t0.Add(2*time.Minute)))(t); len(got) != 0 {
		t.Fatalf("second owner claimed %+v during the lease", got)
	}
	if got := must(s.ClaimDueSources(ctx, t0.Add(30*time.Second), 10, "one", t0.Add(2*time.Minute)))(t); len(got) != 0 {
		t.Fatalf("owner re-claimed %+v during its own lease", got)
	}
	// After the lease expires another owner takes over (and the later
	// source has come due).
	got := must(s.ClaimDueSources(ctx, lease, 10, "two", lease.Add(time.Minute)))(t)
	if ids := sourceIDs(got); !slices.Equal(ids, []int64{due.ID, later.ID}) {
		t.Fatalf("after expiry claimed %v, want [%d %d]", ids, due.ID, later.ID)
	}
	for _, src := range got {
		if src.LeaseOwner != "two" {
			t.Fatalf("lease owner %q", src.LeaseOwner)
		}
	}
	// Applying the fetch releases the lease.
	st = got[0].SourceState
	st.NextFetchAt = lease.Add(time.Hour)
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: due.ID, State: st}))(t)
	released := must(s.Source(ctx, due.ID))(t)
	if released.LeaseOwner != "" || !released.LeaseUntil.IsZero() || !released.NextFetchAt.Equal(lease.Add(time.Hour)) {
		t.Fatalf("after ApplyFetch: owner %q until %v next %v", released.LeaseOwner, released.LeaseUntil, released.NextFetchAt)
	}
	if got := must(s.ClaimDueSources(ctx, lease.Add(30*time.Second), 10, "three", lease.Add(2*time.Minute)))(t); len(got) != 0 {
		t.Fatalf("claimed %v before their next fetch", sourceIDs(got))
	}

	// limit bounds the claim, earliest due first.
	var many []int64
	for i := range 5 {
		src, _ := newSource(t, s, fmt.Sprintf("https://example.org/many/%d", i), fmt.Sprintf("many-%d", i))
		noErr(t, s.MarkSourceDue(ctx, src.ID, t0.Add(time.Duration(10-i)*time.Second), nil))
		many = append(many, src.ID)
	}
	got = must(s.ClaimDueSources(ctx, t0.Add(time.Minute), 2, "four", t0.Add(time.Hour)))(t)
	if ids := sourceIDs(got); !slices.Equal(ids, []int64{many[4], many[3]}) {
		t.Fatalf("limited claim = %v, want [%d %d]", ids, many[4], many[3])
	}
	if got := must(s.ClaimDueSources(ctx, t0, 0, "four", t0.Add(time.Hour)))(t); len(got) != 0 {
		t.Fatalf("limit 0 claimed %d", len(got))
	}
}

func sourceIDs(srcs []hub.Source) []int64 {
	out := make([]int64, 0, len(srcs))
	for _, s := range srcs {
		out = append(out, s.ID)
	}
	return out
}

// testClaimDueSourcesConcurrent has several owners claim at once: every
// due source goes to exactly one of them.
func testClaimDueSourcesConcurrent(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	const sources, owners = 30, 4
	for i := range sources {
		src, _ := newSource(t, s, fmt.Sprintf("https://example.org/%d", i), fmt.Sprintf("n%d", i))
		noErr(t, s.MarkSourceDue(ctx, src.ID, t0, nil))
	}
	var mu sync.Mutex
	owner := map[int64]string{}
	var wg sync.WaitGroup
	for o := range owners {
		name := fmt.Sprintf("owner-%d", o)
		wg.Go(func() {
			for {
				got, err := s.ClaimDueSources(ctx, t0, 3, name, t0.Add(time.Hour))
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, src := range got {
					if prev, ok := owner[src.ID]; ok {
						t.Errorf("source %d claimed by %s and %s", src.ID, prev, name)
					}
					owner[src.ID] = name
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(owner) != sources {
		t.Fatalf("%d sources claimed, want %d", len(owner), sources)
	}
}

// fetchOutcome is a successful fetch with content of src.
func fetchOutcome(src *hub.Source, entries ...hub.Entry) hub.FetchOutcome {
	st := src.SourceState
	st.Baselined = true
	st.LastStatus = 200
	st.IsFeed = true
	return hub.FetchOutcome{SourceID: src.ID, State: st, Changed: true, Entries: entries}
}

func entry(id string) hub.Entry {
	return hub.Entry{ID: id, Payload: []byte("<entry><id>" + id + "</id></entry>"), Title: "T " + id,
		Summary: "S " + id, Link: "https://example.org/" + id, Updated: t0}
}

func testFetchBaseline(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, n := newSource(t, s, "https://example.org/feed", "n")
	// A failed first fetch is no baseline.
	failed := src.SourceState
	failed.LastError = "connection refused"
	failed.ConsecutiveErrors = 1
	applied := must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: failed}))(t)
	if applied.Baseline || len(applied.New) != 0 || len(applied.Nodes) != 0 {
		t.Fatalf("failed fetch applied = %+v", applied)
	}
	applied = must(s.ApplyFetch(ctx, fetchOutcome(src, entry("1"), entry("2"))))(t)
	if !applied.Baseline || len(applied.New) != 0 || len(applied.Nodes) != 0 {
		t.Fatalf("baseline applied = %+v", applied)
	}
	if evs := must(s.EventsAfter(ctx, n.ID, 0, 0))(t); len(evs) != 0 {
		t.Fatalf("baseline wrote events: %+v", evs)
	}
	got := must(s.Source(ctx, src.ID))(t)
	if !got.Baselined || got.LastNewItems != 0 {
		t.Fatalf("after baseline: baselined %v, last new %d", got.Baselined, got.LastNewItems)
	}
	// The baseline's entries were recorded as seen.
	applied = must(s.ApplyFetch(ctx, fetchOutcome(got, entry("1"), entry("2"), entry("3"))))(t)
	if applied.Baseline || len(applied.New) != 1 || applied.New[0].ID != "3" {
		t.Fatalf("after baseline applied = %+v", applied)
	}
}

func testFetchNewEntries(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, a := newSource(t, s, "https://example.org/feed", "a")
	b := newNode(t, s, "b", withSource(src.ID))
	unrelated := newNode(t, s, "unrelated")
	must(s.ApplyFetch(ctx, fetchOutcome(src, entry("1"))))(t)
	src = must(s.Source(ctx, src.ID))(t)

	applied := must(s.ApplyFetch(ctx, fetchOutcome(src, entry("1"), entry("2"), entry("3"))))(t)
	if applied.Baseline {
		t.Fatal("second fetch was a baseline")
	}
	var newIDs []string
	for _, e := range applied.New {
		newIDs = append(newIDs, e.ID)
	}
	equalStrings(t, "new", newIDs, []string{"2", "3"})
	if !slices.Equal(sortedIDs(applied.Nodes), sortedIDs([]int64{a.ID, b.ID})) {
		t.Fatalf("nodes = %v, want %d and %d", applied.Nodes, a.ID, b.ID)
	}
	for _, n := range []*hub.Node{a, b} {
		evs := must(s.EventsAfter(ctx, n.ID, 0, 0))(t)
		equalStrings(t, "events of "+n.Name, itemIDs(evs), []string{"2", "3"})
		e := evs[0]
		want := entry("2")
		if e.Kind != hub.EventItem || string(e.Payload) != string(want.Payload) || e.Title != want.Title ||
			e.Summary != want.Summary || e.Link != want.Link || !e.Updated.Equal(want.Updated) {
			t.Fatalf("item event = %+v", e)
		}
		equalStrings(t, "items of "+n.Name, itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"3", "2"})
	}
	if evs := must(s.EventsAfter(ctx, unrelated.ID, 0, 0))(t); len(evs) != 0 {
		t.Fatal("a node not following the source got events")
	}
	if got := must(s.Source(ctx, src.ID))(t); got.LastNewItems != 2 {
		t.Fatalf("LastNewItems = %d", got.LastNewItems)
	}
	// The same entries again are not new.
	applied = must(s.ApplyFetch(ctx, fetchOutcome(src, entry("1"), entry("2"), entry("3"))))(t)
	if len(applied.New) != 0 {
		t.Fatalf("repeated fetch found new %+v", applied.New)
	}
	if got := must(s.Source(ctx, src.ID))(t); got.LastNewItems != 0 {
		t.Fatalf("LastNewItems = %d after no new entries", got.LastNewItems)
	}
}

func sortedIDs(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func testFetchReorderedAndRepeated(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, n := newSource(t, s, "https://example.org/feed", "n")
	must(s.ApplyFetch(ctx, fetchOutcome(src, entry("1"), entry("2"), entry("3"))))(t)
	src = must(s.Source(ctx, src.ID))(t)
	// Reordered entries, one repeated within the document, one new one
	// repeated: only the new one, once.
	applied := must(s.ApplyFetch(ctx, fetchOutcome(src, entry("3"), entry("4"), entry("1"), entry("2"), entry("1"), entry("4"))))(t)
	if len(applied.New) != 1 || applied.New[0].ID != "4" {
		t.Fatalf("new = %+v", applied.New)
	}
	equalStrings(t, "events", itemIDs(must(s.EventsAfter(ctx, n.ID, 0, 0))(t)), []string{"4"})
	// An entry that dropped out of the feed and comes back is not new.
	must(s.ApplyFetch(ctx, fetchOutcome(src, entry("4"))))(t)
	applied = must(s.ApplyFetch(ctx, fetchOutcome(src, entry("2"), entry("4"))))(t)
	if len(applied.New) != 0 {
		t.Fatalf("returning entry counted as new: %+v", applied.New)
	}
	// Entries without an id cannot be told apart and are left out.
	applied = must(s.ApplyFetch(ctx, fetchOutcome(src, hub.Entry{Title: "no id"}, entry("5"))))(t)
	if len(applied.New) != 1 || applied.New[0].ID != "5" {
		t.Fatalf("new with an id-less entry = %+v", applied.New)
	}
}

func testFetchChangeWithoutNew(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, n := newSource(t, s, "https://example.org/page.html", "n")
	must(s.ApplyFetch(ctx, fetchOutcome(src)))(t)
	src = must(s.Source(ctx, src.ID))(t)
	// Changed, nothing new: one change event.
	applied := must(s.ApplyFetch(ctx, fetchOutcome(src)))(t)
	if len(applied.Nodes) != 1 || applied.Nodes[0] != n.ID {
		t.Fatalf("nodes = %v", applied.Nodes)
	}
	evs := must(s.EventsAfter(ctx, n.ID, 0, 0))(t)
	if ks := kinds(evs); !slices.Equal(ks, []hub.EventKind{hub.EventChange}) {
		t.Fatalf("kinds = %v", ks)
	}
	// Not changed: nothing.
	st := src.SourceState
	st.Unchanged = 1
	applied = must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st}))(t)
	if len(applied.Nodes) != 0 || len(applied.New) != 0 {
		t.Fatalf("unchanged fetch applied = %+v", applied)
	}
	if evs := must(s.EventsAfter(ctx, n.ID, 1, 0))(t); len(evs) != 0 {
		t.Fatalf("unchanged fetch wrote %+v", evs)
	}
	// New entries and no note: items only, no extra change event.
	must(s.ApplyFetch(ctx, fetchOutcome(src, entry("x"))))(t)
	if ks := kinds(must(s.EventsAfter(ctx, n.ID, 1, 0))(t)); !slices.Equal(ks, []hub.EventKind{hub.EventItem}) {
		t.Fatalf("kinds after new entry = %v", ks)
	}
}

func testFetchNote(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, n := newSource(t, s, "https://example.org/feed", "n")
	note := &hub.ChangeNote{Title: "Big news", Description: "It changed."}
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0, note))
	src = must(s.Source(ctx, src.ID))(t)

	// On the baseline the note still notifies (and consumes the note).
	out := fetchOutcome(src, entry("1"))
	out.Note = src.PendingNote
	applied := must(s.ApplyFetch(ctx, out))(t)
	if !applied.Baseline || len(applied.Nodes) != 1 {
		t.Fatalf("baseline with note applied = %+v", applied)
	}
	evs := must(s.EventsAfter(ctx, n.ID, 0, 0))(t)
	if len(evs) != 1 || evs[0].Kind != hub.EventChange || evs[0].Title != "Big news" || evs[0].Summary != "It changed." {
		t.Fatalf("events = %+v", evs)
	}
	src = must(s.Source(ctx, src.ID))(t)
	if src.PendingNote != nil {
		t.Fatalf("consumed note still pending: %+v", src.PendingNote)
	}

	// A note with an unchanged fetch: one change event carrying it.
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0, &hub.ChangeNote{Title: "Again"}))
	src = must(s.Source(ctx, src.ID))(t)
	applied = must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: src.SourceState, Note: src.PendingNote}))(t)
	evs = must(s.EventsAfter(ctx, n.ID, 1, 0))(t)
	if len(evs) != 1 || evs[0].Kind != hub.EventChange || evs[0].Title != "Again" || len(applied.Nodes) != 1 {
		t.Fatalf("unchanged fetch with note: events %+v applied %+v", evs, applied)
	}

	// A note with a change but nothing new: still one change event.
	out = fetchOutcome(src)
	out.Note = &hub.ChangeNote{Title: "Edited"}
	must(s.ApplyFetch(ctx, out))(t)
	evs = must(s.EventsAfter(ctx, n.ID, 2, 0))(t)
	if len(evs) != 1 || evs[0].Title != "Edited" {
		t.Fatalf("changed fetch with note: events %+v", evs)
	}

	// A note with new entries: the items and the note.
	out = fetchOutcome(src, entry("1"), entry("2"))
	out.Note = &hub.ChangeNote{Title: "New post"}
	must(s.ApplyFetch(ctx, out))(t)
	evs = must(s.EventsAfter(ctx, n.ID, 3, 0))(t)
	if ks := kinds(evs); !slices.Equal(ks, []hub.EventKind{hub.EventItem, hub.EventChange}) || evs[1].Title != "New post" {
		t.Fatalf("new entries with note: %+v", evs)
	}
}

func testFetchNoteReplaced(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := newSource(t, s, "https://example.org/feed", "n")
	must(s.ApplyFetch(ctx, fetchOutcome(src)))(t)
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0, &hub.ChangeNote{Title: "first"}))
	claimed := must(s.ClaimDueSources(ctx, t0, 1, "me", t0.Add(time.Minute)))(t)
	if len(claimed) != 1 {
		t.Fatalf("claimed %d", len(claimed))
	}
	// A second announcement arrives while the fetch runs.
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0.Add(time.Second), &hub.ChangeNote{Title: "second"}))
	out := hub.FetchOutcome{SourceID: src.ID, State: claimed[0].SourceState, Note: claimed[0].PendingNote}
	must(s.ApplyFetch(ctx, out))(t)
	got := must(s.Source(ctx, src.ID))(t)
	if got.PendingNote == nil || got.PendingNote.Title != "second" {
		t.Fatalf("pending note = %+v, want the second one kept", got.PendingNote)
	}
	// A fetch without a note leaves the pending one alone.
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: got.SourceState}))(t)
	if got := must(s.Source(ctx, src.ID))(t); got.PendingNote == nil {
		t.Fatal("a fetch without a note cleared the pending note")
	}
}

func testFetchStateRoundTrip(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := newSource(t, s, "https://example.org/feed", "n")
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0, nil))
	claimed := must(s.ClaimDueSources(ctx, t0, 1, "me", t0.Add(time.Minute)))(t)
	st := hub.SourceState{
		URL: "https://example.org/feed", ETag: `"abc"`, LastModified: "Tue, 15 Nov 1994 12:45:26 GMT",
		BodyHash: "sha256:00ff", ContentType: "application/rss+xml", Body: []byte("<rss>\x00binary\xff</rss>"),
		IsFeed: true, Title: "Feed", Description: "A feed", SiteURL: "https://example.org/",
		Hints: hub.PollHints{TTL: 30 * time.Minute, SkipHours: []int{0, 23}, SkipDays: []time.Weekday{time.Sunday},
			UpdatePeriod: "hourly", UpdateFrequency: 2, UpdateBase: t0.Add(-time.Hour), MaxAge: time.Minute,
			Expires: t0.Add(time.Hour), RetryAfter: t0.Add(2 * time.Hour)},
		Baselined: true, LastFetchAt: t0, LastStatus: 200, LastBytes: 12345, LastError: "",
		ConsecutiveErrors: 0, Unchanged: 4, LastChangeAt: t0.Add(-time.Minute), LastPingAt: t0,
		NextFetchAt: t0.Add(time.Hour), NextFetchReason: "ttl",
	}
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: claimed[0].ID, State: st}))(t)
	got := must(s.Source(ctx, src.ID))(t)
	want := st
	want.LastNewItems = 0
	if got.URL != want.URL || got.ETag != want.ETag || got.LastModified != want.LastModified ||
		got.BodyHash != want.BodyHash || got.ContentType != want.ContentType || !bytes.Equal(got.Body, want.Body) ||
		!got.IsFeed || got.Title != want.Title || got.Description != want.Description || got.SiteURL != want.SiteURL ||
		!got.Baselined || got.Gone || !got.LastFetchAt.Equal(t0) || got.LastStatus != 200 || got.LastBytes != 12345 ||
		got.Unchanged != 4 || !got.LastChangeAt.Equal(want.LastChangeAt) || !got.LastPingAt.Equal(t0) ||
		!got.NextFetchAt.Equal(want.NextFetchAt) || got.NextFetchReason != "ttl" || got.OriginalURL != src.OriginalURL {
		t.Fatalf("stored state\n got %+v\nwant %+v", got.SourceState, want)
	}
	h := got.Hints
	if h.TTL != 30*time.Minute || !slices.Equal(h.SkipHours, []int{0, 23}) || !slices.Equal(h.SkipDays, []time.Weekday{time.Sunday}) ||
		h.UpdatePeriod != "hourly" || h.UpdateFrequency != 2 || !h.UpdateBase.Equal(t0.Add(-time.Hour)) ||
		h.MaxAge != time.Minute || !h.Expires.Equal(t0.Add(time.Hour)) || !h.RetryAfter.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("hints = %+v", h)
	}
	if !got.MovedAt.IsZero() || got.MovedFrom != "" {
		t.Fatalf("moved = %q %v", got.MovedFrom, got.MovedAt)
	}

	// An error state and Gone.
	st2 := got.SourceState
	st2.LastError, st2.LastStatus, st2.ConsecutiveErrors, st2.Gone, st2.Body = "HTTP 410", 410, 3, true, nil
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st2}))(t)
	got = must(s.Source(ctx, src.ID))(t)
	if !got.Gone || got.LastError != "HTTP 410" || got.ConsecutiveErrors != 3 || got.Body != nil || !got.NextFetchAt.IsZero() {
		t.Fatalf("gone state = %+v", got.SourceState)
	}
}

func testFetchMovedKeepsSeen(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, n := newSource(t, s, "https://old.example/feed", "n")
	must(s.ApplyFetch(ctx, fetchOutcome(src, entry("1"), entry("2"))))(t)
	src = must(s.Source(ctx, src.ID))(t)
	out := fetchOutcome(src, entry("1"), entry("2"), entry("3"))
	out.State.URL, out.State.MovedFrom, out.State.MovedAt = "https://new.example/feed", "https://old.example/feed", t0
	applied := must(s.ApplyFetch(ctx, out))(t)
	if len(applied.New) != 1 || applied.New[0].ID != "3" {
		t.Fatalf("new after move = %+v", applied.New)
	}
	got := must(s.Source(ctx, src.ID))(t)
	if got.URL != "https://new.example/feed" || got.OriginalURL != "https://old.example/feed" ||
		got.MovedFrom != "https://old.example/feed" || !got.MovedAt.Equal(t0) {
		t.Fatalf("moved source = %+v", got)
	}
	if node := must(s.NodeByID(ctx, n.ID))(t); node.SourceURL != "https://new.example/feed" {
		t.Fatalf("node's source URL = %q", node.SourceURL)
	}
	applied = must(s.ApplyFetch(ctx, fetchOutcome(got, entry("1"), entry("2"), entry("3"))))(t)
	if len(applied.New) != 0 {
		t.Fatalf("seen ids lost in the move: %+v", applied.New)
	}
}

func testFetchPingDuringFetch(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := newSource(t, s, "https://example.org/feed", "n")
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0, nil))
	claimed := must(s.ClaimDueSources(ctx, t0, 1, "me", t0.Add(time.Minute)))(t)[0]
	// A ping arrives while the fetch runs; the fetch's schedule must not
	// hide it.
	noErr(t, s.MarkSourceDue(ctx, src.ID, t0.Add(10*time.Second), nil))
	out := fetchOutcome(&claimed)
	out.State.NextFetchAt = t0.Add(time.Hour)
	must(s.ApplyFetch(ctx, out))(t)
	got := must(s.Source(ctx, src.ID))(t)
	if got.NextFetchAt.After(t0.Add(10 * time.Second)) {
		t.Fatalf("next fetch %v: the ping during the fetch was lost", got.NextFetchAt)
	}
	if !got.LastPingAt.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("last ping = %v", got.LastPingAt)
	}
	// Without a ping meanwhile the fetch's schedule stands.
	claimed = must(s.ClaimDueSources(ctx, t0.Add(time.Minute), 1, "me", t0.Add(2*time.Minute)))(t)[0]
	out = fetchOutcome(&claimed)
	out.State.NextFetchAt = t0.Add(time.Hour)
	must(s.ApplyFetch(ctx, out))(t)
	if got := must(s.Source(ctx, src.ID))(t); !got.NextFetchAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("next fetch = %v, want %v", got.NextFetchAt, t0.Add(time.Hour))
	}
}

func testFetchUnknownSource(t *testing.T, s store.Store) {
	_, err := s.ApplyFetch(ctxOf(t), hub.FetchOutcome{SourceID: 4242, Changed: true})
	wantErr(t, err, hub.ErrNotFound)
}

func testSubscriberCount(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, a := newSource(t, s, "https://example.org/feed", "a")
	b := newNode(t, s, "b", withSource(src.ID))
	other := newNode(t, s, "other")
	if n := must(s.SubscriberCount(ctx, src.ID))(t); n != 0 {
		t.Fatalf("count = %d", n)
	}
	for i, k := range hub.Kinds {
		must(s.PutSubscription(ctx, &hub.Subscription{NodeID: a.ID, Kind: k, Address: fmt.Sprintf("addr-%d", i), BareJID: "x@example.org"}))(t)
	}
	must(s.PutSubscription(ctx, &hub.Subscription{NodeID: b.ID, Kind: hub.KindWebSub, Address: "http://127.0.0.1/ws", State: hub.SubPending}))(t)
	must(s.PutSubscription(ctx, &hub.Subscription{NodeID: other.ID, Kind: hub.KindWebSub, Address: "http://127.0.0.1/ws"}))(t)
	if n := must(s.SubscriberCount(ctx, src.ID))(t); n != len(hub.Kinds)+1 {
		t.Fatalf("count = %d, want %d", n, len(hub.Kinds)+1)
	}
}

func testPutSubscription(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	expires := t0.Add(24 * time.Hour)
	sub := &hub.Subscription{
		NodeID: n.ID, Kind: hub.KindWebSub, Address: "http://127.0.0.1:9/cb", State: hub.SubPending,
		Options: hub.Options{Secret: "s3cret", Topic: "https://example.org/feed", LeaseSeconds: 86400,
			SigAlgo: "sha256", Verify: map[string]string{"hub.verify_token": "tok"}},
		ExpiresAt: expires,
	}
	sub.Cursor = 5
	created := must(s.PutSubscription(ctx, sub))(t)
	if !created || sub.ID == 0 || sub.NodeName != "n" || sub.CreatedAt.IsZero() {
		t.Fatalf("created %v sub %+v", created, sub)
	}
	got := must(s.Subscription(ctx, sub.ID))(t)
	if got.NodeName != "n" || got.Kind != hub.KindWebSub || got.State != hub.SubPending || got.Cursor != 5 ||
		got.Options.Secret != "s3cret" || got.Options.Verify["hub.verify_token"] != "tok" ||
		got.Options.LeaseSeconds != 86400 || !got.ExpiresAt.Equal(expires) {
		t.Fatalf("stored %+v", got)
	}

	// The same node, kind and address updates in place, keeping the cursor.
	noErr(t, s.SaveDeliveryState(ctx, sub.ID, hub.DeliveryState{Cursor: 9}))
	upd := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebSub, Address: "http://127.0.0.1:9/cb",
		State: hub.SubActive, Options: hub.Options{Secret: "new"}, SubID: "sid"}
	upd.Cursor = 1
	created = must(s.PutSubscription(ctx, upd))(t)
	if created || upd.ID != sub.ID {
		t.Fatalf("update created %v id %d (want %d)", created, upd.ID, sub.ID)
	}
	got = must(s.Subscription(ctx, sub.ID))(t)
	if got.State != hub.SubActive || got.Options.Secret != "new" || got.Options.Topic != "" || got.SubID != "sid" ||
		got.Cursor != 9 || !got.ExpiresAt.IsZero() {
		t.Fatalf("updated %+v", got)
	}
	if upd.Cursor != 9 {
		t.Fatalf("PutSubscription left the caller's cursor at %d, stored %d", upd.Cursor, got.Cursor)
	}
	// Another kind or address is another subscription.
	other := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1:9/cb"}
	if !must(s.PutSubscription(ctx, other))(t) || other.ID == sub.ID {
		t.Fatal("another kind did not create a subscription")
	}
	if other.State != hub.SubActive {
		t.Fatalf("default state = %q", other.State)
	}

	_, err := s.Subscription(ctx, 999999)
	wantErr(t, err, hub.ErrNotFound)
	_, err = s.PutSubscription(ctx, &hub.Subscription{NodeID: n.ID + 1000, Kind: hub.KindWebhook, Address: "x"})
	wantErr(t, err, hub.ErrNotFound)
	_, err = s.PutSubscription(ctx, &hub.Subscription{NodeID: n.ID, Kind: "carrier-pigeon", Address: "x"})
	wantErr(t, err, hub.ErrInvalid)
}

func testSubscriptionFilters(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	a := newNode(t, s, "a")
	b := newNode(t, s, "b")
	subs := []*hub.Subscription{
		{NodeID: a.ID, Kind: hub.KindXMPP, Address: "x@example.org/r1", BareJID: "x@example.org", State: hub.SubActive},
		{NodeID: a.ID, Kind: hub.KindXMPP, Address: "x@example.org/r2", BareJID: "x@example.org", State: hub.SubPending},
		{NodeID: b.ID, Kind: hub.KindXMPP, Address: "x@example.org/r1", BareJID: "x@example.org", State: hub.SubActive},
		{NodeID: a.ID, Kind: hub.KindRSSCloud, Address: "http://127.0.0.1/notify", State: hub.SubActive},
		{NodeID: b.ID, Kind: hub.KindCNWS, Address: "http://127.0.0.1/notify", State: hub.SubSuspended},
	}
	for _, sub := range subs {
		must(s.PutSubscription(ctx, sub))(t)
	}
	ids := func(f hub.SubscriptionFilter) []int64 {
		var out []int64
		for _, sub := range must(s.Subscriptions(ctx, f))(t) {
			if sub.NodeName == "" {
				t.Fatalf("subscription %d without node name", sub.ID)
			}
			out = append(out, sub.ID)
		}
		return out
	}
	cases := []struct {
		f    hub.SubscriptionFilter
		want []int
	}{
		{hub.SubscriptionFilter{}, []int{0, 1, 2, 3, 4}},
		{hub.SubscriptionFilter{NodeID: a.ID}, []int{0, 1, 3}},
		{hub.SubscriptionFilter{Kind: hub.KindXMPP}, []int{0, 1, 2}},
		{hub.SubscriptionFilter{Address: "http://127.0.0.1/notify"}, []int{3, 4}},
		{hub.SubscriptionFilter{BareJID: "x@example.org", NodeID: a.ID}, []int{0, 1}},
		{hub.SubscriptionFilter{State: hub.SubActive}, []int{0, 2, 3}},
		{hub.SubscriptionFilter{NodeID: b.ID, Kind: hub.KindCNWS, Address: "http://127.0.0.1/notify", State: hub.SubSuspended}, []int{4}},
		{hub.SubscriptionFilter{NodeID: b.ID, Kind: hub.KindWebhook}, nil},
	}
	for _, c := range cases {
		var want []int64
		for _, i := range c.want {
			want = append(want, subs[i].ID)
		}
		if got := ids(c.f); !slices.Equal(got, want) {
			t.Errorf("filter %+v = %v, want %v", c.f, got, want)
		}
	}
}

func testDeleteSubscriptions(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	a := newNode(t, s, "a")
	b := newNode(t, s, "b")
	put := func(node int64, kind hub.Kind, addr, bare string) *hub.Subscription {
		sub := &hub.Subscription{NodeID: node, Kind: kind, Address: addr, BareJID: bare}
		must(s.PutSubscription(ctx, sub))(t)
		return sub
	}
	x1 := put(a.ID, hub.KindXMPP, "x@example.org/1", "x@example.org")
	x2 := put(b.ID, hub.KindXMPP, "x@example.org/1", "x@example.org")
	y := put(a.ID, hub.KindXMPP, "y@example.org/1", "y@example.org")
	hook := put(a.ID, hub.KindWebhook, "http://127.0.0.1/hook", "")

	_, err := s.DeleteSubscriptions(ctx, hub.SubscriptionFilter{Kind: hub.KindXMPP})
	wantErr(t, err, hub.ErrInvalid)

	removed := must(s.DeleteSubscriptions(ctx, hub.SubscriptionFilter{BareJID: "x@example.org"}))(t)
	if len(removed) != 2 || removed[0].ID != x1.ID || removed[1].ID != x2.ID || removed[0].NodeName != "a" || removed[1].NodeName != "b" {
		t.Fatalf("removed %+v", removed)
	}
	for _, id := range []int64{x1.ID, x2.ID} {
		_, err := s.Subscription(ctx, id)
		wantErr(t, err, hub.ErrNotFound)
	}
	removed = must(s.DeleteSubscriptions(ctx, hub.SubscriptionFilter{NodeID: a.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/hook"}))(t)
	if len(removed) != 1 || removed[0].ID != hook.ID {
		t.Fatalf("removed %+v", removed)
	}
	if removed := must(s.DeleteSubscriptions(ctx, hub.SubscriptionFilter{NodeID: b.ID}))(t); len(removed) != 0 {
		t.Fatalf("removed again: %+v", removed)
	}
	must(s.Subscription(ctx, y.ID))(t)

	noErr(t, s.DeleteSubscription(ctx, y.ID))
	wantErr(t, s.DeleteSubscription(ctx, y.ID), hub.ErrNotFound)
}

func testSubscriptionState(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindRSSCloud, Address: "http://127.0.0.1/cb", State: hub.SubActive, ExpiresAt: t0}
	must(s.PutSubscription(ctx, sub))(t)
	noErr(t, s.SetSubscriptionState(ctx, sub.ID, hub.SubSuspended, t0.Add(time.Hour)))
	got := must(s.Subscription(ctx, sub.ID))(t)
	if got.State != hub.SubSuspended || !got.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("state %q expires %v", got.State, got.ExpiresAt)
	}
	noErr(t, s.SetSubscriptionState(ctx, sub.ID, hub.SubActive, time.Time{}))
	if got := must(s.Subscription(ctx, sub.ID))(t); got.State != hub.SubActive || !got.ExpiresAt.IsZero() {
		t.Fatalf("state %q expires %v", got.State, got.ExpiresAt)
	}
	wantErr(t, s.SetSubscriptionState(ctx, sub.ID+1000, hub.SubActive, time.Time{}), hub.ErrNotFound)
}

func testDeleteExpired(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	put := func(addr string, expires time.Time) *hub.Subscription {
		sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebSub, Address: addr, ExpiresAt: expires}
		must(s.PutSubscription(ctx, sub))(t)
		return sub
	}
	old := put("http://127.0.0.1/old", t0.Add(-time.Second))
	exact := put("http://127.0.0.1/exact", t0)
	fresh := put("http://127.0.0.1/fresh", t0.Add(time.Second))
	forever := put("http://127.0.0.1/forever", time.Time{})
	removed := must(s.DeleteExpiredSubscriptions(ctx, t0))(t)
	var ids []int64
	for _, r := range removed {
		ids = append(ids, r.ID)
		if r.NodeName != "n" {
			t.Fatalf("removed without node name: %+v", r)
		}
	}
	if !slices.Equal(ids, []int64{old.ID, exact.ID}) {
		t.Fatalf("removed %v, want [%d %d]", ids, old.ID, exact.ID)
	}
	must(s.Subscription(ctx, fresh.ID))(t)
	must(s.Subscription(ctx, forever.ID))(t)
}

func subIDs(subs []hub.Subscription) []int64 {
	out := make([]int64, 0, len(subs))
	for _, s := range subs {
		out = append(out, s.ID)
	}
	return out
}

func testClaimDeliveries(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	a := newNode(t, s, "a")
	b := newNode(t, s, "b")
	put := func(node int64, kind hub.Kind, addr string, state hub.SubState, cursor int64) *hub.Subscription {
		sub := &hub.Subscription{NodeID: node, Kind: kind, Address: addr, State: state, BareJID: "j@example.org"}
		sub.Cursor = cursor
		must(s.PutSubscription(ctx, sub))(t)
		return sub
	}
	appendEvents(t, s, a.ID, item("1", ""), item("2", ""))
	pending := put(a.ID, hub.KindWebSub, "http://127.0.0.1/pending", hub.SubPending, 2)
	unsub := put(b.ID, hub.KindWebhook, "http://127.0.0.1/unsub", hub.SubUnsubscribing, 0)
	behind := put(a.ID, hub.KindWebhook, "http://127.0.0.1/behind", hub.SubActive, 1)
	put(a.ID, hub.KindCNWS, "http://127.0.0.1/caught-up", hub.SubActive, 2)
	put(a.ID, hub.KindXMPP, "j@example.org/r", hub.SubActive, 0)              // XMPP is never an HTTP delivery
	put(a.ID, hub.KindXMPP, "k@example.org/r", hub.SubPending, 0)             // not even pending
	put(a.ID, hub.KindRSSCloud, "http://127.0.0.1/susp", hub.SubSuspended, 0) // suspended gets nothing
	waiting := put(a.ID, hub.KindWebSub, "http://127.0.0.1/later", hub.SubActive, 0)
	noErr(t, s.SaveDeliveryState(ctx, waiting.ID, hub.DeliveryState{Cursor: 0, NextAttemptAt: t0.Add(time.Minute), Attempts: 1}))

	got := must(s.ClaimDeliveries(ctx, t0, 0, 100, "me", t0.Add(time.Minute)))(t)
	if ids := sortedIDs(subIDs(got)); !slices.Equal(ids, sortedIDs([]int64{pending.ID, unsub.ID, behind.ID})) {
		t.Fatalf("claimed %v, want %d %d %d", ids, pending.ID, unsub.ID, behind.ID)
	}
	for _, sub := range got {
		if sub.LeaseOwner != "me" || !sub.LeaseUntil.Equal(t0.Add(time.Minute)) || sub.NodeName == "" {
			t.Fatalf("claimed %+v", sub)
		}
	}
	// When its next attempt comes, the waiting one is claimable.
	got = must(s.ClaimDeliveries(ctx, t0.Add(time.Minute), a.ID, 100, "other", t0.Add(2*time.Minute)))(t)
	if ids := subIDs(got); !slices.Contains(ids, waiting.ID) {
		t.Fatalf("claimed %v at its next attempt, want %d", ids, waiting.ID)
	}
	// nodeID restricts the claim.
	for _, sub := range got {
		if sub.NodeID != a.ID {
			t.Fatalf("claim for node %d returned a subscription of node %d", a.ID, sub.NodeID)
		}
	}

	// A new event makes the caught-up subscription behind.
	fresh := newNode(t, s, "fresh")
	h1 := put(fresh.ID, hub.KindWebhook, "http://127.0.0.1/h1", hub.SubActive, 0)
	h2 := put(fresh.ID, hub.KindWebSub, "http://127.0.0.1/h2", hub.SubActive, 0)
	if got := must(s.ClaimDeliveries(ctx, t0, fresh.ID, 10, "me", t0.Add(time.Minute)))(t); len(got) != 0 {
		t.Fatalf("claimed %v on a node without events", subIDs(got))
	}
	appendEvents(t, s, fresh.ID, item("x", ""))
	got = must(s.ClaimDeliveries(ctx, t0, fresh.ID, 1, "me", t0.Add(time.Minute)))(t)
	if len(got) != 1 {
		t.Fatalf("limit 1 claimed %d", len(got))
	}
	got2 := must(s.ClaimDeliveries(ctx, t0, fresh.ID, 10, "other", t0.Add(time.Minute)))(t)
	if len(got2) != 1 || got2[0].ID == got[0].ID {
		t.Fatalf("second claim %v after %v", subIDs(got2), subIDs(got))
	}
	if ids := sortedIDs([]int64{got[0].ID, got2[0].ID}); !slices.Equal(ids, sortedIDs([]int64{h1.ID, h2.ID})) {
		t.Fatalf("claimed %v, want %d and %d", ids, h1.ID, h2.ID)
	}
}

func testClaimDeliveriesLeases(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/cb", State: hub.SubActive}
	must(s.PutSubscription(ctx, sub))(t)
	appendEvents(t, s, n.ID, item("1", ""))
	lease := t0.Add(time.Minute)
	if got := must(s.ClaimDeliveries(ctx, t0, 0, 10, "one", lease))(t); len(got) != 1 {
		t.Fatalf("first claim %d", len(got))
	}
	if got := must(s.ClaimDeliveries(ctx, t0.Add(59*time.Second), 0, 10, "two", t0.Add(time.Hour)))(t); len(got) != 0 {
		t.Fatal("another owner claimed a live lease")
	}
	if got := must(s.ClaimDeliveries(ctx, t0.Add(59*time.Second), n.ID, 10, "two", t0.Add(time.Hour)))(t); len(got) != 0 {
		t.Fatal("another owner claimed a live lease by node")
	}
	got := must(s.ClaimDeliveries(ctx, lease, 0, 10, "two", lease.Add(time.Minute)))(t)
	if len(got) != 1 || got[0].LeaseOwner != "two" {
		t.Fatalf("after expiry: %+v", got)
	}
	// Not even the owner gets a live lease again: its delivery is under way.
	if got := must(s.ClaimDeliveries(ctx, lease.Add(time.Second), 0, 10, "two", lease.Add(2*time.Minute)))(t); len(got) != 0 {
		t.Fatalf("owner re-claimed its live lease: %+v", got)
	}
}

func testClaimDeliveriesConcurrent(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	const subs, owners = 40, 4
	for i := range subs {
		must(s.PutSubscription(ctx, &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook,
			Address: fmt.Sprintf("http://127.0.0.1/%d", i), State: hub.SubActive}))(t)
	}
	appendEvents(t, s, n.ID, item("1", ""))
	var mu sync.Mutex
	owner := map[int64]string{}
	var wg sync.WaitGroup
	for o := range owners {
		name := fmt.Sprintf("owner-%d", o)
		wg.Go(func() {
			for {
				got, err := s.ClaimDeliveries(ctx, t0, 0, 3, name, t0.Add(time.Hour))
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, sub := range got {
					if prev, ok := owner[sub.ID]; ok {
						t.Errorf("subscription %d claimed by %s and %s", sub.ID, prev, name)
					}
					owner[sub.ID] = name
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(owner) != subs {
		t.Fatalf("%d subscriptions claimed, want %d", len(owner), subs)
	}
}

func testSaveDeliveryState(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/cb", State: hub.SubActive}
	must(s.PutSubscription(ctx, sub))(t)
	appendEvents(t, s, n.ID, item("1", ""), item("2", ""))
	claimed := must(s.ClaimDeliveries(ctx, t0, n.ID, 10, "me", t0.Add(time.Minute)))(t)
	if len(claimed) != 1 {
		t.Fatalf("claimed %d", len(claimed))
	}
	st := hub.DeliveryState{Cursor: 2, Attempts: 3, ConsecutiveErrors: 2, FirstFailureAt: t0.Add(-time.Hour),
		NextAttemptAt: t0.Add(-time.Second), LastError: "HTTP 500", LastDeliveredAt: t0.Add(-time.Minute), LastStatus: 500}
	noErr(t, s.SaveDeliveryState(ctx, sub.ID, st))
	got := must(s.Subscription(ctx, sub.ID))(t)
	if got.Cursor != 2 || got.Attempts != 3 || got.ConsecutiveErrors != 2 || !got.FirstFailureAt.Equal(st.FirstFailureAt) ||
		!got.NextAttemptAt.Equal(st.NextAttemptAt) || got.LastError != "HTTP 500" || !got.LastDeliveredAt.Equal(st.LastDeliveredAt) ||
		got.LastStatus != 500 || got.LeaseOwner != "" || !got.LeaseUntil.IsZero() {
		t.Fatalf("delivery state = %+v", got.DeliveryState)
	}
	// Caught up and lease released: nothing to claim until the log grows.
	if got := must(s.ClaimDeliveries(ctx, t0, 0, 10, "other", t0.Add(time.Minute)))(t); len(got) != 0 {
		t.Fatalf("claimed a caught-up subscription: %v", subIDs(got))
	}
	appendEvents(t, s, n.ID, item("3", ""))
	got2 := must(s.ClaimDeliveries(ctx, t0, 0, 10, "other", t0.Add(time.Minute)))(t)
	if len(got2) != 1 || got2[0].Cursor != 2 {
		t.Fatalf("after a new event claimed %+v", got2)
	}
	noErr(t, s.DeleteSubscription(ctx, sub.ID))
	wantErr(t, s.SaveDeliveryState(ctx, sub.ID, st), hub.ErrNotFound)
}

// testSaveDeliveryStates: several states saved in one call each land on
// their own subscription, leases released; a subscription deleted
// meanwhile is skipped without failing the others; one named twice gets
// the last state.
func testSaveDeliveryStates(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	var ids []int64
	for i := range 3 {
		sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: fmt.Sprintf("http://127.0.0.1/cb%d", i), State: hub.SubActive}
		must(s.PutSubscription(ctx, sub))(t)
		ids = append(ids, sub.ID)
	}
	appendEvents(t, s, n.ID, item("1", ""), item("2", ""))
	if claimed := must(s.ClaimDeliveries(ctx, t0, n.ID, 10, "me", t0.Add(time.Minute)))(t); len(claimed) != 3 {
		t.Fatalf("claimed %d", len(claimed))
	}
	noErr(t, s.DeleteSubscription(ctx, ids[1]))
	noErr(t, s.SaveDeliveryStates(ctx, nil))
	noErr(t, s.SaveDeliveryStates(ctx, []hub.SavedDeliveryState{
		{ID: ids[0], State: hub.DeliveryState{Cursor: 2, Attempts: 1, LastStatus: 204, LastDeliveredAt: t0}},
		{ID: ids[1], State: hub.DeliveryState{Cursor: 2}},
		{ID: ids[2], State: hub.DeliveryState{Cursor: 2, Attempts: 9}},
		{ID: ids[2], State: hub.DeliveryState{Cursor: 1, Attempts: 1, ConsecutiveErrors: 1, FirstFailureAt: t0,
			NextAttemptAt: t0.Add(time.Minute), LastError: "HTTP 503", LastStatus: 503}},
	}))
	first := must(s.Subscription(ctx, ids[0]))(t)
	if first.Cursor != 2 || first.LastStatus != 204 || !first.LastDeliveredAt.Equal(t0) || first.LeaseOwner != "" || !first.LeaseUntil.IsZero() {
		t.Errorf("first subscription's state = %+v", first.DeliveryState)
	}
	third := must(s.Subscription(ctx, ids[2]))(t)
	if third.Cursor != 1 || third.ConsecutiveErrors != 1 || third.LastError != "HTTP 503" ||
		!third.NextAttemptAt.Equal(t0.Add(time.Minute)) || third.LeaseOwner != "" {
		t.Errorf("third subscription's state = %+v", third.DeliveryState)
	}
	if _, err := s.Subscription(ctx, ids[1]); !errors.Is(err, hub.ErrNotFound) {
		t.Errorf("deleted subscription came back: %v", err)
	}
	// Released: the one caught up is not claimed again, the failing one
	// only when its retry is due.
	if got := must(s.ClaimDeliveries(ctx, t0, 0, 10, "other", t0.Add(time.Minute)))(t); len(got) != 0 {
		t.Fatalf("claimed %v before the retry was due", subIDs(got))
	}
	got := must(s.ClaimDeliveries(ctx, t0.Add(time.Minute), 0, 10, "other", t0.Add(2*time.Minute)))(t)
	if len(got) != 1 || got[0].ID != ids[2] {
		t.Fatalf("claimed %v when the retry was due, want [%d]", subIDs(got), ids[2])
	}
	if got[0].LeaseOwner != "other" || !got[0].LeaseUntil.Equal(t0.Add(2*time.Minute)) || got[0].LastError != "HTTP 503" {
		t.Errorf("claimed subscription = %+v", got[0].DeliveryState)
	}
	// A success after the failure clears every trace of it.
	noErr(t, s.SaveDeliveryStates(ctx, []hub.SavedDeliveryState{
		{ID: ids[2], State: hub.DeliveryState{Cursor: 2, Attempts: 2, LastStatus: 200, LastDeliveredAt: t0.Add(time.Minute)}},
	}))
	third = must(s.Subscription(ctx, ids[2]))(t)
	if third.Cursor != 2 || third.Attempts != 2 || third.ConsecutiveErrors != 0 || third.LastError != "" ||
		!third.FirstFailureAt.IsZero() || !third.NextAttemptAt.IsZero() || third.LastStatus != 200 ||
		!third.LastDeliveredAt.Equal(t0.Add(time.Minute)) || third.LeaseOwner != "" || !third.LeaseUntil.IsZero() {
		t.Errorf("third subscription's state after a success = %+v", third.DeliveryState)
	}

	// More than one statement's worth (the store splits them), each its
	// own cursor.
	many := newNode(t, s, "many")
	var states []hub.SavedDeliveryState
	for i := range 131 {
		sub := &hub.Subscription{NodeID: many.ID, Kind: hub.KindWebhook, Address: fmt.Sprintf("http://127.0.0.1/m%d", i), State: hub.SubActive}
		must(s.PutSubscription(ctx, sub))(t)
		states = append(states, hub.SavedDeliveryState{ID: sub.ID, State: hub.DeliveryState{Cursor: int64(i + 1), Attempts: i}})
	}
	noErr(t, s.SaveDeliveryStates(ctx, states))
	for i, st := range states {
		got := must(s.Subscription(ctx, st.ID))(t)
		if got.Cursor != int64(i+1) || got.Attempts != i {
			t.Fatalf("subscription %d of %d: cursor %d, attempts %d", i, len(states), got.Cursor, got.Attempts)
		}
	}
}

// testSubscriptionIDsNotReused: the id of a deleted subscription, even
// the highest, is never given to a new one, so that a delivery state
// saved for the old one cannot land on the new one.
func testSubscriptionIDsNotReused(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	var last int64
	for i := range 3 {
		sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: fmt.Sprintf("http://127.0.0.1/%d", i), State: hub.SubActive}
		must(s.PutSubscription(ctx, sub))(t)
		if sub.ID <= last {
			t.Fatalf("subscription %d got id %d after %d", i, sub.ID, last)
		}
		noErr(t, s.DeleteSubscription(ctx, sub.ID))
		last = sub.ID
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

func testPings(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	var ids []int64
	for i := range 5 {
		p := &hub.Ping{Dialect: "xmlrpc-weblogupdates", Name: fmt.Sprintf("blog %d", i),
			URL: fmt.Sprintf("https://example.org/%d", i), Remote: "127.0.0.1", ReceivedAt: t0.Add(time.Duration(i) * time.Minute)}
		noErr(t, s.RecordPing(ctx, p))
		if p.ID == 0 {
			t.Fatal("RecordPing did not set the ID")
		}
		ids = append(ids, p.ID)
	}
	pings, total := must2(s.Pings(ctx, t0.Add(2*time.Minute), 0))(t)
	if total != 5 || len(pings) != 3 || pings[0].URL != "https://example.org/4" || pings[2].URL != "https://example.org/2" {
		t.Fatalf("pings since +2m: total %d, %+v", total, pings)
	}
	p := pings[0]
	if p.ID != ids[4] || p.Dialect != "xmlrpc-weblogupdates" || p.Name != "blog 4" || p.Remote != "127.0.0.1" ||
		!p.ReceivedAt.Equal(t0.Add(4*time.Minute)) || p.ReceivedAt.Location() != time.UTC {
		t.Fatalf("ping = %+v", p)
	}
	pings, _ = must2(s.Pings(ctx, time.Time{}, 2))(t)
	if len(pings) != 2 || pings[0].ID != ids[4] || pings[1].ID != ids[3] {
		t.Fatalf("limited pings = %+v", pings)
	}
	// The total counts pings ever received, pruned ones too.
	noErr(t, s.Prune(ctx, t0.Add(3*time.Minute)))
	pings, total = must2(s.Pings(ctx, time.Time{}, 0))(t)
	if total != 5 || len(pings) != 2 {
		t.Fatalf("after prune: total %d, %d pings", total, len(pings))
	}
	// A ping without a time gets one.
	p = hub.Ping{Dialect: "rest", URL: "https://example.org/now"}
	noErr(t, s.RecordPing(ctx, &p))
	if p.ReceivedAt.IsZero() {
		t.Fatal("ReceivedAt not set")
	}
	// An extendedPing keeps the weblog's URL and its feed apart.
	p = hub.Ping{Dialect: "xmlrpc-extended", URL: "https://example.org/", FeedURL: "https://example.org/feed.xml", ReceivedAt: t0.Add(time.Hour)}
	noErr(t, s.RecordPing(ctx, &p))
	pings, _ = must2(s.PingsBetween(ctx, t0.Add(time.Hour), t0.Add(2*time.Hour), 0))(t)
	if len(pings) != 1 || pings[0].URL != "https://example.org/" || pings[0].FeedURL != "https://example.org/feed.xml" {
		t.Fatalf("extendedPing read back as %+v", pings)
	}
}

func testPrune(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n", withMaxItems(2))
	// seq 1 a, 2 b, 3 retract a, 4 c, 5 d, 6 change
	appendEvents(t, s, n.ID, item("a", ""), item("b", ""), hub.Event{Kind: hub.EventRetract, ItemID: "a"},
		item("c", ""), item("d", ""), hub.Event{Kind: hub.EventChange})
	hook := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/a", State: hub.SubActive}
	must(s.PutSubscription(ctx, hook))(t)
	slow := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebSub, Address: "http://127.0.0.1/b", State: hub.SubPending}
	must(s.PutSubscription(ctx, slow))(t)
	// An XMPP subscription's own cursor does not hold the log: the node's
	// XMPP cursor does.
	must(s.PutSubscription(ctx, &hub.Subscription{NodeID: n.ID, Kind: hub.KindXMPP, Address: "x@example.org", BareJID: "x@example.org"}))(t)

	seqs := func() []int64 {
		var out []int64
		for _, e := range must(s.EventsAfter(ctx, n.ID, 0, 0))(t) {
			out = append(out, e.Seq)
		}
		return out
	}
	// Nobody has passed anything yet.
	noErr(t, s.Prune(ctx, time.Time{}))
	if got := seqs(); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("pruned with every cursor at 0: %v", got)
	}
	noErr(t, s.SetXMPPSeq(ctx, n.ID, 6))
	noErr(t, s.SaveDeliveryState(ctx, hook.ID, hub.DeliveryState{Cursor: 6}))
	noErr(t, s.SaveDeliveryState(ctx, slow.ID, hub.DeliveryState{Cursor: 3}))
	noErr(t, s.Prune(ctx, time.Time{}))
	// Below 3, only what is not current goes: a (retracted) at 1, b at 2
	// (scrolled off), the retraction at 3.
	if got := seqs(); !slices.Equal(got, []int64{4, 5, 6}) {
		t.Fatalf("after prune to 3: %v", got)
	}
	noErr(t, s.SaveDeliveryState(ctx, slow.ID, hub.DeliveryState{Cursor: 6}))
	noErr(t, s.Prune(ctx, time.Time{}))
	// Current items c (4) and d (5) stay.
	if got := seqs(); !slices.Equal(got, []int64{4, 5}) {
		t.Fatalf("after prune to 6: %v", got)
	}
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"d", "c"})
	// The XMPP cursor holds the log too.
	appendEvents(t, s, n.ID, hub.Event{Kind: hub.EventChange})
	noErr(t, s.SaveDeliveryState(ctx, hook.ID, hub.DeliveryState{Cursor: 7}))
	noErr(t, s.SaveDeliveryState(ctx, slow.ID, hub.DeliveryState{Cursor: 7}))
	noErr(t, s.Prune(ctx, time.Time{}))
	if got := seqs(); !slices.Equal(got, []int64{4, 5, 7}) {
		t.Fatalf("with the XMPP cursor at 6: %v", got)
	}
	// Pruning keeps LastSeq: new events continue the sequence.
	got := appendEvents(t, s, n.ID, item("e", ""))
	if got[0].Seq != 8 {
		t.Fatalf("seq after prune = %d", got[0].Seq)
	}
}

func testTimes(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	local := time.Date(2031, 5, 6, 9, 8, 9, 123456789, time.FixedZone("CEST", 2*3600))
	sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/", ExpiresAt: local}
	must(s.PutSubscription(ctx, sub))(t)
	got := must(s.Subscription(ctx, sub.ID))(t)
	if got.ExpiresAt.Location() != time.UTC || !got.ExpiresAt.Equal(local.Truncate(time.Microsecond)) {
		t.Fatalf("expires = %v, want %v in UTC", got.ExpiresAt, local)
	}
	if !got.FirstFailureAt.IsZero() || !got.NextAttemptAt.IsZero() || !got.LastDeliveredAt.IsZero() || !got.LeaseUntil.IsZero() {
		t.Fatalf("zero times came back non-zero: %+v", got.DeliveryState)
	}
	if got.CreatedAt.Location() != time.UTC || got.UpdatedAt.Location() != time.UTC {
		t.Fatal("created/updated not in UTC")
	}
	node := must(s.NodeByID(ctx, n.ID))(t)
	if node.CreatedAt.Location() != time.UTC {
		t.Fatal("node time not in UTC")
	}
}

// numberedEntries are the entries prefix0 … prefix(n-1), oldest first.
func numberedEntries(prefix string, n int) []hub.Entry {
	out := make([]hub.Entry, n)
	for i := range out {
		out[i] = entry(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// fetchAt is fetchOutcome at a fetch time of its own: the seen record
// tells fetches apart by it.
func fetchAt(src *hub.Source, at time.Time, entries ...hub.Entry) hub.FetchOutcome {
	o := fetchOutcome(src, entries...)
	o.State.LastFetchAt = at
	return o
}

// testFetchPublishesAtMostMaxItems: a fetch with 12,000 new entries (more
// than one document may carry; 50,000 would run into the store's
// transaction bound under the race detector) publishes to each node only
// the newest of them up to its max_items, and records every one as seen:
// none of them is new again.
func testFetchPublishesAtMostMaxItems(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := must2(s.EnsureSource(ctx, "https://example.org/flood"))(t)
	ten := newNode(t, s, "ten", withSource(src.ID), withMaxItems(10))
	three := newNode(t, s, "three", withSource(src.ID), withMaxItems(3))
	must(s.ApplyFetch(ctx, fetchAt(src, t0, entry("old"))))(t) // baseline

	const n = 12_000
	flood := numberedEntries("e", n)
	applied := must(s.ApplyFetch(ctx, fetchAt(src, t0.Add(time.Minute), flood...)))(t)
	if len(applied.New) != n || applied.Published != 13 || len(applied.Nodes) != 2 {
		t.Fatalf("applied: %d new, %d published to %v; want %d new, 13 published to 2 nodes",
			len(applied.New), applied.Published, applied.Nodes, n)
	}
	for _, want := range []struct {
		node *hub.Node
		ids  []string
	}{
		{ten, itemIDs(numberedEvents("e", n-10, n))},
		{three, itemIDs(numberedEvents("e", n-3, n))},
	} {
		equalStrings(t, "events of "+want.node.Name, itemIDs(must(s.EventsAfter(ctx, want.node.ID, 0, 0))(t)), want.ids)
	}
	if got := must(s.Source(ctx, src.ID))(t); got.LastNewItems != len(flood) {
		t.Errorf("LastNewItems = %d, want %d", got.LastNewItems, len(flood))
	}
	// Every one of them was recorded, the oldest as the newest: shown
	// again with one more, only that one is new.
	shown := append(slices.Clone(flood[:100]), flood[len(flood)-100:]...)
	again := must(s.ApplyFetch(ctx, fetchAt(src, t0.Add(2*time.Minute), append(shown, entry("next"))...)))(t)
	if len(again.New) != 1 || again.New[0].ID != "next" || again.Published != 2 {
		t.Fatalf("some of the flood again with one more: %d new, %d published", len(again.New), again.Published)
	}
}

func numberedEvents(prefix string, from, to int) []hub.Event {
	var out []hub.Event
	for i := from; i < to; i++ {
		out = append(out, hub.Event{ItemID: fmt.Sprintf("%s%d", prefix, i)})
	}
	return out
}

// testFetchForgetsHiddenIDs: once a fetch recorded new ids, the ids it did
// not show are kept only up to hub.MaxHiddenSeen, the most recently shown
// first (those shown by one fetch go together), so a feed of ever new
// entries keeps a bounded record; a forgotten id shown again is new.
func testFetchForgetsHiddenIDs(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := newSource(t, s, "https://example.org/churn", "churn")
	batch := hub.MaxHiddenSeen * 6 / 10 // two batches are more than the bound, one is not
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	must(s.ApplyFetch(ctx, fetchAt(src, at(0), numberedEntries("a", batch)...)))(t) // baseline
	must(s.ApplyFetch(ctx, fetchAt(src, at(1), numberedEntries("b", batch)...)))(t)
	must(s.ApplyFetch(ctx, fetchAt(src, at(2), numberedEntries("c", batch)...)))(t)
	// Hidden now: a (older) and b; a went. The feed shows a few of each
	// again: those of a are new, those of b and c are not.
	shown := []hub.Entry{entry("a1"), entry("a2"), entry("b1"), entry("c1")}
	applied := must(s.ApplyFetch(ctx, fetchAt(src, at(3), shown...)))(t)
	var fresh []string
	for _, e := range applied.New {
		fresh = append(fresh, e.ID)
	}
	equalStrings(t, "new after the churn", fresh, []string{"a1", "a2"})
}

// testFetchWithoutNodes: a source no node follows records what it shows
// and publishes nothing; a node that follows it later starts from there.
func testFetchWithoutNodes(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	src, _ := must2(s.EnsureSource(ctx, "https://example.org/lonely"))(t)
	must(s.ApplyFetch(ctx, fetchAt(src, t0, entry("1"))))(t) // baseline
	applied := must(s.ApplyFetch(ctx, fetchAt(src, t0.Add(time.Minute), entry("1"), entry("2"))))(t)
	if len(applied.New) != 1 || applied.Published != 0 || len(applied.Nodes) != 0 {
		t.Fatalf("applied without nodes: %+v", applied)
	}
	n := newNode(t, s, "late", withSource(src.ID))
	applied = must(s.ApplyFetch(ctx, fetchAt(src, t0.Add(2*time.Minute), entry("1"), entry("2"), entry("3"))))(t)
	if applied.Published != 1 {
		t.Fatalf("published %d, want 1 (3)", applied.Published)
	}
	equalStrings(t, "events of the late node", itemIDs(must(s.EventsAfter(ctx, n.ID, 0, 0))(t)), []string{"3"})
}

// testLogWindow: a node's log keeps its newest hub.LogWindow events and
// its current items, whatever the cursors: a subscriber further behind
// finds the window after its cursor and skips ahead.
func testLogWindow(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	const window = hub.LogWindow
	n := newNode(t, s, "n", withMaxItems(2))
	stuck := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/slow", State: hub.SubActive}
	must(s.PutSubscription(ctx, stuck))(t) // its cursor stays at 0, and so does the XMPP one
	seqs := func() []int64 {
		var out []int64
		for _, e := range must(s.EventsAfter(ctx, n.ID, 0, 0))(t) {
			out = append(out, e.Seq)
		}
		return out
	}
	span := func(from, to int64) []int64 { // from … to
		var out []int64
		for i := from; i <= to; i++ {
			out = append(out, i)
		}
		return out
	}
	// Two and a half windows of items, in batches of 100.
	var last int64
	for b := range 5 * window / 2 / 100 {
		batch := make([]hub.Event, 100)
		for i := range batch {
			batch[i] = item(fmt.Sprint("i", b*100+i), "")
		}
		appendEvents(t, s, n.ID, batch...)
		last += int64(len(batch))
	}
	if got := seqs(); !slices.Equal(got, span(last-window+1, last)) {
		t.Fatalf("after %d events the log holds %d from %d, want the newest %d", last, len(got), got[0], window)
	}
	if got := must(s.EventsAfter(ctx, n.ID, stuck.Cursor, 1))(t); len(got) != 1 || got[0].Seq != last-window+1 {
		t.Fatalf("after a cursor at 0: %+v, want the window's first event", got)
	}
	noErr(t, s.Prune(ctx, time.Time{}))
	if got := seqs(); len(got) != window {
		t.Fatalf("Prune with a cursor at 0 left %d events, want %d", len(got), window)
	}
	// A batch larger than the window keeps its newest part; the two
	// current items, older than the window now, stay.
	batch := make([]hub.Event, window+10)
	for i := range batch {
		batch[i] = hub.Event{Kind: hub.EventChange}
	}
	appendEvents(t, s, n.ID, batch...)
	last += int64(len(batch))
	before := last - int64(len(batch))
	want := append([]int64{before - 1, before}, span(last-window+1, last)...)
	if got := seqs(); !slices.Equal(got, want) {
		t.Fatalf("after a batch of %d changes: %d events %v…, want %v…", len(batch), len(got), got[:min(4, len(got))], want[:4])
	}
	// When they stop being current, Prune takes them.
	appendEvents(t, s, n.ID, item("x", ""), item("y", ""))
	last += 2
	noErr(t, s.Prune(ctx, time.Time{}))
	if got := seqs(); !slices.Equal(got, span(last-window+1, last)) {
		t.Fatalf("after two new items and Prune: %d events from %d", len(got), got[0])
	}
	equalStrings(t, "items", itemIDs(must(s.Items(ctx, n.ID, nil, 0))(t)), []string{"y", "x"})
}
