package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// The parts of the contract the XMPP readers' features rely on.

// testNodeSendLastPublished: the node's send_last_published_item is
// stored, defaults to on_sub and is changed by UpdateNodeConfig.
func testNodeSendLastPublished(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "last")
	got := must(s.Node(ctx, "last"))(t)
	if got.SendLastPublished != hub.SendLastOnSub {
		t.Errorf("a new node's send_last_published_item is %q, want %q", got.SendLastPublished, hub.SendLastOnSub)
	}
	cfg := got.NodeConfig
	cfg.SendLastPublished = hub.SendLastNever
	noErr(t, s.UpdateNodeConfig(ctx, n.Name, cfg))
	if got := must(s.NodeByID(ctx, n.ID))(t); got.SendLastPublished != hub.SendLastNever {
		t.Errorf("after configuring never: %q", got.SendLastPublished)
	}
}

// testLastEvent: a last-item event is in the log, with its copy of the
// item, and is not an item of the node.
func testLastEvent(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "last-event")
	appendEvents(t, s, n.ID, item("a", "<entry>a</entry>"))
	appendEvents(t, s, n.ID, hub.Event{Kind: hub.EventLast, Address: "r@example.org", ItemID: "a",
		Payload: []byte("<entry>a</entry>"), Title: "title a", Updated: t0})
	evs := must(s.EventsAfter(ctx, n.ID, 1, 0))(t)
	if len(evs) != 1 || evs[0].Kind != hub.EventLast || evs[0].Address != "r@example.org" || evs[0].ItemID != "a" ||
		string(evs[0].Payload) != "<entry>a</entry>" || !evs[0].Updated.Equal(t0) {
		t.Errorf("the last-item event reads back as %+v", evs)
	}
	items := must(s.Items(ctx, n.ID, nil, 0))(t)
	if len(items) != 1 || items[0].Kind != hub.EventItem || items[0].Seq != 1 {
		t.Errorf("current items after a last-item event: %+v", items)
	}
}

// testBounces: RecordBounce counts an XMPP subscription's bounces from
// the first one's time, ClearBounces forgets them; HTTP subscriptions are
// not touched.
func testBounces(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "bounces")
	x := &hub.Subscription{NodeID: n.ID, Kind: hub.KindXMPP, Address: "r@example.org", BareJID: "r@example.org"}
	must(s.PutSubscription(ctx, x))(t)
	h := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/cb"}
	must(s.PutSubscription(ctx, h))(t)
	count, first, err := s.RecordBounce(ctx, x.ID, "service-unavailable", t0)
	if err != nil || count != 1 || !first.Equal(t0) {
		t.Fatalf("first bounce: %d since %v, %v", count, first, err)
	}
	count, first, err = s.RecordBounce(ctx, x.ID, "remote-server-timeout: slow", t0.Add(time.Hour))
	if err != nil || count != 2 || !first.Equal(t0) {
		t.Fatalf("second bounce: %d since %v, %v", count, first, err)
	}
	got := must(s.Subscription(ctx, x.ID))(t)
	if got.ConsecutiveErrors != 2 || !got.FirstFailureAt.Equal(t0) || got.LastError != "remote-server-timeout: slow" {
		t.Errorf("after two bounces: %+v", got.DeliveryState)
	}
	if _, _, err := s.RecordBounce(ctx, h.ID, "x", t0); !errors.Is(err, hub.ErrNotFound) {
		t.Errorf("a bounce of an HTTP subscription: %v, want ErrNotFound", err)
	}
	if _, _, err := s.RecordBounce(ctx, 999999, "x", t0); !errors.Is(err, hub.ErrNotFound) {
		t.Errorf("a bounce of no subscription: %v, want ErrNotFound", err)
	}
	noErr(t, s.ClearBounces(ctx, []int64{x.ID, h.ID}))
	got = must(s.Subscription(ctx, x.ID))(t)
	if got.ConsecutiveErrors != 0 || !got.FirstFailureAt.IsZero() || got.LastError != "" {
		t.Errorf("after clearing: %+v", got.DeliveryState)
	}
	if count, first, _ := s.RecordBounce(ctx, x.ID, "gone", t0.Add(2*time.Hour)); count != 1 || !first.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("a bounce after clearing: %d since %v", count, first)
	}
}

// testDigests: an XMPP subscription's digest state is set with its
// options, found when due, saved only while its due time is the one the
// sender saw, and its cursor holds the node's log.
func testDigests(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "digests", withMaxItems(1))
	x := &hub.Subscription{NodeID: n.ID, Kind: hub.KindXMPP, Address: "d@example.org", BareJID: "d@example.org"}
	must(s.PutSubscription(ctx, x))(t)
	y := &hub.Subscription{NodeID: n.ID, Kind: hub.KindXMPP, Address: "e@example.org", BareJID: "e@example.org"}
	must(s.PutSubscription(ctx, y))(t)
	if due := must(s.DueDigests(ctx, t0.Add(time.Hour), 10))(t); len(due) != 0 {
		t.Fatalf("due digests without any: %v", subIDs(due))
	}
	opts := hub.Options{Digest: true, DigestFrequencyMS: 60000}
	noErr(t, s.SetDigest(ctx, x.ID, opts, 2, t0))
	noErr(t, s.SetDigest(ctx, y.ID, opts, 0, t0.Add(-time.Minute)))
	got := must(s.Subscription(ctx, x.ID))(t)
	if !got.Options.Digest || got.Options.DigestFrequencyMS != 60000 || got.Cursor != 2 || !got.NextAttemptAt.Equal(t0) {
		t.Errorf("after SetDigest: %+v %+v", got.Options, got.DeliveryState)
	}
	wantErr(t, s.SetDigest(ctx, 999999, opts, 0, t0), hub.ErrNotFound)
	if due := must(s.DueDigests(ctx, t0, 10))(t); !slices.Equal(subIDs(due), []int64{y.ID, x.ID}) {
		t.Errorf("due at t0: %v, want %d then %d", subIDs(due), y.ID, x.ID)
	}
	if due := must(s.DueDigests(ctx, t0.Add(-30*time.Second), 10))(t); !slices.Equal(subIDs(due), []int64{y.ID}) {
		t.Errorf("due before t0: %v", subIDs(due))
	}
	if due := must(s.DueDigests(ctx, t0, 1))(t); len(due) != 1 {
		t.Errorf("a limit of 1 gave %d", len(due))
	}
	// Saved only with the due time it was sent for.
	if ok := must(s.SaveDigest(ctx, x.ID, t0.Add(time.Second), 5, t0.Add(time.Minute), t0))(t); ok {
		t.Error("a digest saved for a due time the subscription no longer has")
	}
	if ok := must(s.SaveDigest(ctx, x.ID, t0, 5, t0.Add(time.Minute), t0))(t); !ok {
		t.Error("a digest not saved")
	}
	got = must(s.Subscription(ctx, x.ID))(t)
	if got.Cursor != 5 || !got.NextAttemptAt.Equal(t0.Add(time.Minute)) || !got.LastDeliveredAt.Equal(t0) {
		t.Errorf("after SaveDigest: %+v", got.DeliveryState)
	}
	// The last digest of one that stopped: no next one.
	if ok := must(s.SaveDigest(ctx, y.ID, t0.Add(-time.Minute), 1, time.Time{}, t0))(t); !ok {
		t.Error("a last digest not saved")
	}
	if got := must(s.Subscription(ctx, y.ID))(t); !got.NextAttemptAt.IsZero() {
		t.Errorf("after the last digest, due at %v", got.NextAttemptAt)
	}

	// x's cursor (5) holds the log; y, with no digest due, does not.
	for i := range 8 {
		appendEvents(t, s, n.ID, item(string(rune('a'+i)), ""))
	}
	noErr(t, s.SetXMPPSeq(ctx, n.ID, 8))
	noErr(t, s.Prune(ctx, time.Time{}))
	var seqs []int64
	for _, e := range must(s.EventsAfter(ctx, n.ID, 0, 0))(t) {
		seqs = append(seqs, e.Seq)
	}
	if !slices.Equal(seqs, []int64{6, 7, 8}) {
		t.Errorf("after pruning with a digest cursor at 5: events %v, want 6 7 8", seqs)
	}
}
