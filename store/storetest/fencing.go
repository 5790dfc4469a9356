package storetest

import (
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// RunShared checks what two processes sharing one database rely on: the
// writes of a lease holder are fenced by the holder, so one whose lease
// ran out and was taken by the other changes nothing, and a delivery
// cursor never moves back. open must return two handles on one fresh,
// empty database (two "processes"); RunShared closes them.
func RunShared(t *testing.T, open func(t *testing.T) (a, b store.Store)) {
	tests := []struct {
		name string
		fn   func(t *testing.T, a, b store.Store)
	}{
		{"DeliverySaveFencedByOwner", testDeliverySaveFenced},
		{"DeliveryCursorNeverBack", testDeliveryCursorNeverBack},
		{"FetchFencedByOwner", testFetchFenced},
		{"RenewAndReleaseDeliveryLeases", testRenewReleaseDeliveryLeases},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := open(t)
			t.Cleanup(func() {
				for _, s := range []store.Store{a, b} {
					if err := s.Close(); err != nil {
						t.Errorf("close: %v", err)
					}
				}
			})
			tc.fn(t, a, b)
		})
	}
}

// testDeliverySaveFenced: A claims a subscription, its lease runs out, B
// claims it; A's late save, alone or in a batch, changes nothing, and B's
// lease and state stand.
func testDeliverySaveFenced(t *testing.T, a, b store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, a, "n")
	sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/cb", State: hub.SubActive}
	must(a.PutSubscription(ctx, sub))(t)
	appendEvents(t, a, n.ID, item("1", ""), item("2", ""), item("3", ""))

	ca := must(a.ClaimDeliveries(ctx, t0, n.ID, 10, "A", t0.Add(time.Minute)))(t)
	if len(ca) != 1 || ca[0].LeaseOwner != "A" {
		t.Fatalf("A claimed %+v", ca)
	}
	// A's lease runs out; B takes the subscription over.
	cb := must(b.ClaimDeliveries(ctx, t0.Add(2*time.Minute), n.ID, 10, "B", t0.Add(3*time.Minute)))(t)
	if len(cb) != 1 || cb[0].LeaseOwner != "B" {
		t.Fatalf("B claimed %+v after A's lease ran out", cb)
	}

	late := ca[0].DeliveryState
	late.Cursor, late.Attempts, late.LastStatus, late.LastError, late.ConsecutiveErrors = 3, 7, 500, "late", 1
	late.NextAttemptAt = t0.Add(time.Hour)
	wantErr(t, a.SaveDeliveryState(ctx, sub.ID, late), hub.ErrLeaseLost)
	noErr(t, a.SaveDeliveryStates(ctx, []hub.SavedDeliveryState{{ID: sub.ID, State: late}}))
	clean := ca[0].DeliveryState
	clean.Cursor, clean.Attempts, clean.LastStatus = 3, 7, 200 // the short statement of a clean success
	noErr(t, a.SaveDeliveryStates(ctx, []hub.SavedDeliveryState{{ID: sub.ID, State: clean}}))
	got := must(b.Subscription(ctx, sub.ID))(t)
	if got.LeaseOwner != "B" || !got.LeaseUntil.Equal(t0.Add(3*time.Minute)) || got.Cursor != 0 || got.Attempts != 0 ||
		got.LastError != "" || got.LastStatus != 0 || !got.NextAttemptAt.IsZero() {
		t.Fatalf("after A's late saves: %+v, want B's lease and the state B claimed", got.DeliveryState)
	}

	// B's own save goes through and releases the lease.
	mine := cb[0].DeliveryState
	mine.Cursor, mine.Attempts, mine.LastStatus = 2, 1, 204
	noErr(t, b.SaveDeliveryState(ctx, sub.ID, mine))
	got = must(a.Subscription(ctx, sub.ID))(t)
	if got.LeaseOwner != "" || !got.LeaseUntil.IsZero() || got.Cursor != 2 || got.LastStatus != 204 {
		t.Fatalf("after B's save: %+v", got.DeliveryState)
	}
	// Released, the row is nobody's: A's late save still changes nothing.
	wantErr(t, a.SaveDeliveryState(ctx, sub.ID, late), hub.ErrLeaseLost)
	if got := must(a.Subscription(ctx, sub.ID))(t); got.Cursor != 2 || got.LastStatus != 204 || got.LastError != "" {
		t.Fatalf("a late save after B released: %+v", got.DeliveryState)
	}
}

// testDeliveryCursorNeverBack: a save with a cursor behind the stored one
// (a late or repeated delivery of older events) keeps the stored cursor,
// through every statement the saves use.
func testDeliveryCursorNeverBack(t *testing.T, a, b store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, a, "n")
	sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1/cb", State: hub.SubActive}
	must(a.PutSubscription(ctx, sub))(t)
	appendEvents(t, a, n.ID, item("1", ""), item("2", ""), item("3", ""), item("4", ""))
	claim := func(s store.Store, at time.Time) hub.DeliveryState {
		t.Helper()
		c := must(s.ClaimDeliveries(ctx, at, n.ID, 10, "A", at.Add(time.Minute)))(t)
		if len(c) != 1 {
			t.Fatalf("claimed %d at %v", len(c), at)
		}
		return c[0].DeliveryState
	}
	ds := claim(a, t0)
	ds.Cursor, ds.LastStatus = 3, 200
	noErr(t, a.SaveDeliveryState(ctx, sub.ID, ds))

	for i, save := range []func(hub.DeliveryState) error{
		func(st hub.DeliveryState) error { return b.SaveDeliveryState(ctx, sub.ID, st) },
		func(st hub.DeliveryState) error {
			return b.SaveDeliveryStates(ctx, []hub.SavedDeliveryState{{ID: sub.ID, State: st}})
		},
		func(st hub.DeliveryState) error {
			st.ConsecutiveErrors, st.LastError, st.NextAttemptAt = 1, "HTTP 500", t0.Add(time.Hour)
			return b.SaveDeliveryStates(ctx, []hub.SavedDeliveryState{{ID: sub.ID, State: st}})
		},
	} {
		st := claim(b, t0.Add(time.Duration(2*i+2)*time.Hour))
		st.Cursor, st.LastStatus = 1, 200+i
		noErr(t, save(st))
		got := must(a.Subscription(ctx, sub.ID))(t)
		if got.Cursor != 3 || got.LastStatus != 200+i || got.LeaseOwner != "" {
			t.Fatalf("save %d with cursor 1 over 3: cursor %d, status %d, lease %q; want cursor 3 kept, the rest saved",
				i, got.Cursor, got.LastStatus, got.LeaseOwner)
		}
	}
}

// testFetchFenced: A claims a source, its lease runs out, B claims it;
// A's late outcome (a changed fetch with a new entry, an unchanged one)
// writes nothing: no state, no seen id, no event. B's goes through.
func testFetchFenced(t *testing.T, a, b store.Store) {
	ctx := ctxOf(t)
	src, node := newSource(t, a, "https://example.org/feed", "n")
	must(a.ApplyFetch(ctx, fetchOutcome(src, entry("old"))))(t) // the baseline
	noErr(t, a.MarkSourceDue(ctx, src.ID, t0, nil))
	ca := must(a.ClaimDueSources(ctx, t0, 10, "A", t0.Add(time.Minute)))(t)
	if len(ca) != 1 {
		t.Fatalf("A claimed %d", len(ca))
	}
	cb := must(b.ClaimDueSources(ctx, t0.Add(2*time.Minute), 10, "B", t0.Add(3*time.Minute)))(t)
	if len(cb) != 1 || cb[0].LeaseOwner != "B" {
		t.Fatalf("B claimed %+v after A's lease ran out", cb)
	}
	before := must(a.NodeByID(ctx, node.ID))(t).LastSeq

	late := fetchOutcome(&ca[0], entry("old"), entry("new"))
	if late.Owner != "A" {
		t.Fatalf("the claimed source's owner %q", late.Owner)
	}
	late.State.LastStatus, late.State.NextFetchAt = 299, t0.Add(time.Hour)
	_, err := a.ApplyFetch(ctx, late)
	wantErr(t, err, hub.ErrLeaseLost)
	unchanged := hub.FetchOutcome{SourceID: src.ID, State: ca[0].SourceState, Owner: "A"}
	unchanged.State.LastStatus, unchanged.State.NextFetchAt = 304, t0.Add(time.Hour)
	noErr(t, a.ApplyUnchangedFetches(ctx, []hub.FetchOutcome{unchanged}))

	got := must(b.Source(ctx, src.ID))(t)
	if got.LeaseOwner != "B" || got.LastStatus == 299 || got.LastStatus == 304 || got.NextFetchAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("after A's late outcomes: status %d, next %v, lease %q; want B's claim as it was",
			got.LastStatus, got.NextFetchAt, got.LeaseOwner)
	}
	if seq := must(a.NodeByID(ctx, node.ID))(t).LastSeq; seq != before {
		t.Fatalf("A's late fetch appended to the log: last seq %d, was %d", seq, before)
	}
	// Listed by the name holding it, run out or not (a restart of B).
	if got := must(a.SourcesLeasedBy(ctx, "B"))(t); len(got) != 1 || got[0].ID != src.ID {
		t.Fatalf("sources leased by B: %v", sourceIDs(got))
	}
	if got := must(a.SourcesLeasedBy(ctx, "A"))(t); len(got) != 0 {
		t.Fatalf("sources leased by A, whose lease B took: %v", sourceIDs(got))
	}
	// B's fetch finds the entry new: A's late write did not record it.
	applied := must(b.ApplyFetch(ctx, fetchOutcome(&cb[0], entry("old"), entry("new"))))(t)
	if len(applied.New) != 1 || applied.New[0].ID != "new" || applied.Published != 1 {
		t.Fatalf("B's fetch: %+v, want the one new entry published", applied)
	}
	if got := must(a.Source(ctx, src.ID))(t); got.LeaseOwner != "" {
		t.Fatalf("B's fetch left the lease with %q", got.LeaseOwner)
	}
}

// testRenewReleaseDeliveryLeases: a renewal keeps a claimed subscription
// its holder's past the claim's lease, and renews only the holder's own;
// releasing a name's leases (a restart under the same name) frees them.
func testRenewReleaseDeliveryLeases(t *testing.T, a, b store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, a, "n")
	var ids []int64
	for _, addr := range []string{"http://127.0.0.1/one", "http://127.0.0.1/two"} {
		sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: addr, State: hub.SubActive}
		must(a.PutSubscription(ctx, sub))(t)
		ids = append(ids, sub.ID)
	}
	appendEvents(t, a, n.ID, item("1", ""))
	if c := must(a.ClaimDeliveries(ctx, t0, n.ID, 1, "A", t0.Add(15*time.Second)))(t); len(c) != 1 || c[0].ID != ids[0] {
		t.Fatalf("A claimed %v", subIDs(c))
	}
	if c := must(b.ClaimDeliveries(ctx, t0, n.ID, 1, "B", t0.Add(15*time.Second)))(t); len(c) != 1 || c[0].ID != ids[1] {
		t.Fatalf("B claimed %v", subIDs(c))
	}
	// A renews both ids: only its own lease moves.
	if got := must(a.RenewDeliveryLeases(ctx, "A", ids, t0.Add(time.Minute)))(t); got != 1 {
		t.Fatalf("A renewed %d leases, want 1", got)
	}
	if got := must(b.Subscription(ctx, ids[1]))(t); got.LeaseOwner != "B" || !got.LeaseUntil.Equal(t0.Add(15*time.Second)) {
		t.Fatalf("A's renewal touched B's lease: %q until %v", got.LeaseOwner, got.LeaseUntil)
	}
	// Past the claim's lease, A's renewed one holds; B's ran out.
	c := must(b.ClaimDeliveries(ctx, t0.Add(30*time.Second), n.ID, 10, "B2", t0.Add(45*time.Second)))(t)
	if len(c) != 1 || c[0].ID != ids[1] {
		t.Fatalf("claimed %v past the first lease, want only [%d] (A's was renewed)", subIDs(c), ids[1])
	}
	// A restarts under its name: its leases are freed at once.
	if got := must(a.ReleaseDeliveryLeases(ctx, "A"))(t); got != 1 {
		t.Fatalf("released %d leases of A, want 1", got)
	}
	c = must(b.ClaimDeliveries(ctx, t0.Add(31*time.Second), n.ID, 10, "B", t0.Add(46*time.Second)))(t)
	if len(c) != 1 || c[0].ID != ids[0] {
		t.Fatalf("claimed %v after A's release, want [%d]", subIDs(c), ids[0])
	}
	if got := must(b.Subscription(ctx, ids[1]))(t); got.LeaseOwner != "B2" {
		t.Fatalf("releasing A's leases touched B2's: %q", got.LeaseOwner)
	}
}
