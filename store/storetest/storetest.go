package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// Port is one slice of the conformance suite: the checks of one port's
// methods, which every backend runs.
type Port struct {
	Name string
	Run  func(t *testing.T, open func(t *testing.T) store.Store)
}

// Ports are the slices, one per port; Run runs them all.
var Ports = []Port{
	{"Nodes", RunNodes},
	{"Log", RunLog},
	{"Sources", RunSources},
	{"Fetches", RunFetches},
	{"Subscriptions", RunSubscriptions},
	{"Deliveries", RunDeliveries},
	{"Readers", RunReaders},
	{"Affiliations", RunAffiliations},
	{"Pings", RunPings},
	{"Maintenance", RunMaintenance},
	{"XMPP", RunXMPP},
	{"Health", RunHealth},
}

// Run checks every method of the Store contract, slice by slice. open must
// return a fresh, empty store for each call; Run closes it.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	for _, p := range Ports {
		t.Run(p.Name, func(t *testing.T) { p.Run(t, open) })
	}
}

// test is one check of the suite.
type test struct {
	name string
	fn   func(t *testing.T, s store.Store)
}

// runTests runs each test on a fresh store that open returns, and closes it.
func runTests(t *testing.T, open func(t *testing.T) store.Store, tests []test) {
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

// RunNodes checks hub.NodeStore: creating, reading, updating, deleting, listing and counting nodes.
func RunNodes(t *testing.T, open func(t *testing.T) store.Store) {
	runTests(t, open, []test{
		{"NodeCreateAndRead", testNodeCreateAndRead},
		{"NodeUpdates", testNodeUpdates},
		{"NodeDeleteCascades", testNodeDeleteCascades},
		{"NodeIDsNotReused", testNodeIDsNotReused},
		{"OpenNodes", testOpenNodes},
		{"NodesPage", testNodesPage},
		{"CountImplicitNodes", testCountImplicitNodes},
	})
}

// RunLog checks hub.LogStore: the nodes' logs, their items and window.
func RunLog(t *testing.T, open func(t *testing.T) store.Store) {
	runTests(t, open, []test{
		{"AppendSequences", testAppendSequences},
		{"AppendValidates", testAppendValidates},
		{"ItemReplace", testItemReplace},
		{"ItemRetract", testItemRetract},
		{"ItemPurge", testItemPurge},
		{"MaxItems", testMaxItems},
		{"ItemsByID", testItemsByID},
		{"EventsAfter", testEventsAfter},
		{"ConcurrentAppend", testConcurrentAppend},
		{"KeepItems", testKeepItems},
		{"LogWindow", testLogWindow},
		{"NodeSendLastPublished", testNodeSendLastPublished},
		{"LastEvent", testLastEvent},
	})
}

// RunSources checks hub.SourceStore: sources, their look-ups and due times.
func RunSources(t *testing.T, open func(t *testing.T) store.Store) {
	runTests(t, open, []test{
		{"EnsureSource", testEnsureSource},
		{"SourcesMatchingAndFollowed", testSourcesMatching},
		{"MarkSourceDue", testMarkSourceDue},
		{"ScheduleSource", testScheduleSource},
		{"ReviveSource", testReviveSource},
		{"SourceBody", testSourceBody},
	})
}

// RunFetches checks the fetch engine's Store (hub/fetching): claims, fetch outcomes, unchanged fetches, leases left behind.
func RunFetches(t *testing.T, open func(t *testing.T) store.Store) {
	runTests(t, open, []test{
		{"ClaimDueSources", testClaimDueSources},
		{"SourcesLeasedByOthers", testSourcesLeasedByOthers},
		{"ClaimDueSourcesConcurrent", testClaimDueSourcesConcurrent},
		{"ClaimCountsSubscribers", testClaimCountsSubscribers},
		{"FetchBaseline", testFetchBaseline},
		{"FetchBaselineKeepsItems", testFetchBaselineKeepsItems},
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
		{"NextSourceDue", testNextSourceDue},
		{"ApplyUnchangedFetches", testApplyUnchangedFetches},
		{"ApplyUnchangedFetchesPingDuringFetch", testApplyUnchangedFetchesPingDuringFetch},
		{"ApplyUnchangedFetchesMany", testApplyUnchangedFetchesMany},
	})
}

// RunSubscriptions checks hub.SubscriptionStore: subscriptions of every kind, their requests and counts (and upstream's SubscriberCount).
func RunSubscriptions(t *testing.T, open func(t *testing.T) store.Store) {
	runTests(t, open, []test{
		{"PutSubscription", testPutSubscription},
		{"SubscriptionFilters", testSubscriptionFilters},
		{"DeleteSubscriptions", testDeleteSubscriptions},
		{"SubscriptionState", testSubscriptionState},
		{"RequestSubscription", testRequestSubscription},
		{"RequestSubscriptionConcurrent", testRequestSubscriptionConcurrent},
		{"RequestUnsubscription", testRequestUnsubscription},
		{"SubscriptionIDsNotReused", testSubscriptionIDsNotReused},
		{"CountCallbackHostSubscriptions", testCountCallbackHostSubscriptions},
		{"CountXMPPSubscriptions", testCountXMPPSubscriptions},
		{"SubscriberCount", testSubscriberCount},
	})
}

// RunDeliveries checks delivery.Store: delivery claims and states, verified changes.
func RunDeliveries(t *testing.T, open func(t *testing.T) store.Store) {
	runTests(t, open, []test{
		{"ClaimDeliveries", testClaimDeliveries},
		{"ClaimDeliveriesLeases", testClaimDeliveriesLeases},
		{"ClaimNodeDeliveries", testClaimNodeDeliveries},
		{"ClaimNodeDeliveriesHeld", testClaimNodeDeliveriesHeld},
		{"ClaimDeliveriesConcurrent", testClaimDeliveriesConcurrent},
		{"ClaimFollowsRule", testClaimFollowsRule},
		{"SaveDeliveryState", testSaveDeliveryState},
		{"SaveDeliveryStates", testSaveDeliveryStates},
		{"SubscriptionChangeRefused", testSubscriptionChangeRefused},
		{"SubscriptionChangeApplied", testSubscriptionChangeApplied},
		{"ClaimPendingChanges", testClaimPendingChanges},
	})
}

// RunReaders checks hub.ReaderStore: XMPP readers' bounces and digests.
func RunReaders(t *testing.T, open func(t *testing.T) store.Store) {
	runTests(t, open, []test{
		{"Bounces", testBounces},
		{"Digests", testDigests},
		{"XMPPState", testXMPPState},
	})
}

// RunAffiliations checks hub.AffiliationStore.
func RunAffiliations(t *testing.T, open func(t *testing.T) store.Store) {
	runTests(t, open, []test{
		{"Affiliations", testAffiliations},
		{"JIDAffiliations", testJIDAffiliations},
	})
}

// RunPings checks hub.PingStore.
func RunPings(t *testing.T, open func(t *testing.T) store.Store) {
	runTests(t, open, []test{
		{"Pings", testPings},
		{"RecordPingMarkingDue", testRecordPingMarkingDue},
		{"RecordPingsMarkingDue", testRecordPingsMarkingDue},
	})
}

// RunMaintenance checks hub.MaintenanceStore: pruning, forgetting, expiring and deleting what is unused.
func RunMaintenance(t *testing.T, open func(t *testing.T) store.Store) {
	runTests(t, open, []test{
		{"Prune", testPrune},
		{"ForgetSeenEntries", testForgetSeenEntries},
		{"DeleteExpiredSubscriptions", testDeleteExpired},
		{"DeleteUnused", testDeleteUnused},
		{"DeleteUnusedConcurrent", testDeleteUnusedConcurrent},
	})
}

// RunXMPP checks the component's Store: the nodes' XMPP cursors and recorded node deletions.
func RunXMPP(t *testing.T, open func(t *testing.T) store.Store) {
	runTests(t, open, []test{
		{"XMPPSeq", testXMPPSeq},
		{"NodeDeletionRecorded", testNodeDeletionRecorded},
	})
}

// RunHealth checks the health check (httpapi) and how times are kept.
func RunHealth(t *testing.T, open func(t *testing.T) store.Store) {
	runTests(t, open, []test{
		{"Check", testCheck},
		{"Times", testTimes},
	})
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

func numberedEvents(prefix string, from, to int) []hub.Event {
	var out []hub.Event
	for i := from; i < to; i++ {
		out = append(out, hub.Event{ItemID: fmt.Sprintf("%s%d", prefix, i)})
	}
	return out
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
