package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

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
		NextAttemptAt: t0.Add(-time.Second), LastError: "HTTP 500", LastDeliveredAt: t0.Add(-time.Minute), LastStatus: 500,
		LeaseOwner: "me"}
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
		{ID: ids[0], State: hub.DeliveryState{Cursor: 2, Attempts: 1, LastStatus: 204, LastDeliveredAt: t0, LeaseOwner: "me"}},
		{ID: ids[1], State: hub.DeliveryState{Cursor: 2, LeaseOwner: "me"}},
		{ID: ids[2], State: hub.DeliveryState{Cursor: 2, Attempts: 9, LeaseOwner: "me"}},
		{ID: ids[2], State: hub.DeliveryState{Cursor: 1, Attempts: 1, ConsecutiveErrors: 1, FirstFailureAt: t0,
			NextAttemptAt: t0.Add(time.Minute), LastError: "HTTP 503", LastStatus: 503, LeaseOwner: "me"}},
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
		{ID: ids[2], State: hub.DeliveryState{Cursor: 2, Attempts: 2, LastStatus: 200, LastDeliveredAt: t0.Add(time.Minute),
			LeaseOwner: "other"}},
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

// testClaimNodeDeliveries: a claim of one node's subscriptions brings
// the node and its events after the cursor most of them stand at; a claim
// of nothing brings nothing.
func testClaimNodeDeliveries(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	a := newNode(t, s, "a")
	other := newNode(t, s, "other")
	put := func(node int64, addr string, cursor int64) *hub.Subscription {
		sub := &hub.Subscription{NodeID: node, Kind: hub.KindWebhook, Address: addr, State: hub.SubActive}
		sub.Cursor = cursor
		must(s.PutSubscription(ctx, sub))(t)
		return sub
	}
	appendEvents(t, s, a.ID, item("1", ""), item("2", ""), item("3", ""))
	appendEvents(t, s, other.ID, item("x", ""))
	put(a.ID, "http://127.0.0.1/one", 1)
	put(a.ID, "http://127.0.0.1/two", 2)
	put(a.ID, "http://127.0.0.1/three", 2)
	put(other.ID, "http://127.0.0.1/other", 0)

	_, err := s.ClaimNodeDeliveries(ctx, t0, 0, 10, "me", t0.Add(time.Minute), 10, hub.EventSpan{})
	wantErr(t, err, hub.ErrInvalid)
	c := must(s.ClaimNodeDeliveries(ctx, t0, a.ID, 10, "me", t0.Add(time.Minute), 10, hub.EventSpan{}))(t)
	if len(c.Subscriptions) != 3 || c.Node == nil || c.Node.ID != a.ID || c.Node.Name != "a" || c.Node.LastSeq != 3 {
		t.Fatalf("claim of node a: %d subscriptions, node %+v", len(c.Subscriptions), c.Node)
	}
	for _, sub := range c.Subscriptions {
		if sub.NodeID != a.ID || sub.LeaseOwner != "me" {
			t.Fatalf("claimed %+v", sub)
		}
	}
	if c.After != 2 || len(c.Events) != 1 || c.Events[0].Seq != 3 || c.Events[0].ItemID != "3" {
		t.Fatalf("events after %d: %+v, want item 3 after cursor 2", c.After, c.Events)
	}
	// The events are bounded like EventsAfter's.
	d := must(s.ClaimNodeDeliveries(ctx, t0.Add(2*time.Minute), a.ID, 1, "you", t0.Add(3*time.Minute), 1, hub.EventSpan{}))(t)
	if len(d.Subscriptions) != 1 || d.Node == nil || len(d.Events) != 1 || d.Events[0].Seq != d.After+1 {
		t.Fatalf("bounded claim: %d subscriptions, after %d, events %+v", len(d.Subscriptions), d.After, d.Events)
	}
	// Everything of node a is leased: nothing claimed, nothing read.
	e := must(s.ClaimNodeDeliveries(ctx, t0, a.ID, 10, "you", t0.Add(time.Minute), 10, hub.EventSpan{}))(t)
	if len(e.Subscriptions) != 0 || e.Node != nil || len(e.Events) != 0 {
		t.Fatalf("empty claim brought %+v", e)
	}
}

// testClaimNodeDeliveriesHeld: a claim of one node told that the caller
// holds some events reads neither the node nor the events when they are
// exactly the events after the usual cursor, and reads them as always
// when they are not: another cursor, a log that grew since, more than the
// events limit.
func testClaimNodeDeliveriesHeld(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	node := func(name string, cursor int64, subscribers int) *hub.Node {
		n := newNode(t, s, name)
		appendEvents(t, s, n.ID, item("1", ""), item("2", ""), item("3", ""))
		for i := range subscribers {
			sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: fmt.Sprintf("http://127.0.0.1/%s/%d", name, i), State: hub.SubActive}
			sub.Cursor = cursor
			must(s.PutSubscription(ctx, sub))(t)
		}
		return n
	}
	claim := func(n *hub.Node, eventsLimit int, held hub.EventSpan) *hub.NodeClaim {
		t.Helper()
		c := must(s.ClaimNodeDeliveries(ctx, t0, n.ID, 10, "me", t0.Add(time.Minute), eventsLimit, held))(t)
		if len(c.Subscriptions) == 0 {
			t.Fatalf("claim of %s took nothing", n.Name)
		}
		return c
	}
	seqs := func(events []hub.Event) []int64 {
		var out []int64
		for _, e := range events {
			out = append(out, e.Seq)
		}
		return out
	}

	exact := node("exact", 2, 2)
	if c := claim(exact, 10, hub.EventSpan{After: 2, Last: 3}); !c.Held || c.After != 2 || c.Node != nil || len(c.Events) != 0 {
		t.Fatalf("claim holding exactly the events after the cursor: held %v, after %d, node %v, events %v", c.Held, c.After, c.Node, seqs(c.Events))
	}
	other := node("other-cursor", 1, 2)
	if c := claim(other, 10, hub.EventSpan{After: 2, Last: 3}); c.Held || c.After != 1 || c.Node == nil || !slices.Equal(seqs(c.Events), []int64{2, 3}) {
		t.Fatalf("claim holding events after another cursor: held %v, after %d, events %v", c.Held, c.After, seqs(c.Events))
	}
	grown := node("grown", 2, 1)
	appendEvents(t, s, grown.ID, item("4", ""))
	if c := claim(grown, 10, hub.EventSpan{After: 2, Last: 3}); c.Held || c.Node == nil || c.Node.LastSeq != 4 || !slices.Equal(seqs(c.Events), []int64{3, 4}) {
		t.Fatalf("claim holding less than the log has: held %v, node %v, events %v", c.Held, c.Node, seqs(c.Events))
	}
	long := node("long", 0, 1)
	if c := claim(long, 2, hub.EventSpan{After: 0, Last: 3}); c.Held || !slices.Equal(seqs(c.Events), []int64{1, 2}) {
		t.Fatalf("claim holding more than the events limit: held %v, events %v", c.Held, seqs(c.Events))
	}
}

// testClaimFollowsRule: a claim takes exactly what hub.DeliveryWork says
// has work, among subscriptions of every kind and state, behind or caught
// up, waiting for a retry or not, leased or not, with a pending change
// (leased or not) or without.
func testClaimFollowsRule(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	now := t0
	a := newNode(t, s, "a")
	appendEvents(t, s, a.ID, item("1", ""), item("2", ""), item("3", ""))
	i := 0
	for _, kind := range hub.Kinds {
		for _, state := range []hub.SubState{hub.SubPending, hub.SubActive, hub.SubUnsubscribing, hub.SubSuspended} {
			for _, cursor := range []int64{1, 3} {
				i++
				sub := &hub.Subscription{NodeID: a.ID, Kind: kind, State: state, BareJID: "j@example.org"}
				sub.Address = fmt.Sprintf("http://127.0.0.1:9/%d", i)
				if kind == hub.KindXMPP {
					sub.Address = fmt.Sprintf("j@example.org/%d", i)
				}
				sub.Cursor = cursor
				must(s.PutSubscription(ctx, sub))(t)
				if kind == hub.KindXMPP {
					continue
				}
				switch i % 3 { // a retry time to come, one passed, none
				case 1:
					noErr(t, s.SaveDeliveryState(ctx, sub.ID, hub.DeliveryState{Cursor: cursor, NextAttemptAt: now.Add(time.Minute)}))
				case 2:
					noErr(t, s.SaveDeliveryState(ctx, sub.ID, hub.DeliveryState{Cursor: cursor, NextAttemptAt: now.Add(-time.Minute)}))
				}
				if i%4 == 0 && kind.Verified() && state != hub.SubPending {
					must(s.RequestSubscription(ctx, &hub.Subscription{NodeID: a.ID, Kind: kind, Address: sub.Address}))(t)
				}
			}
		}
	}
	// Leases, some live at now and some run out: claims made before, of
	// nodes whose subscriptions have work then.
	for j, until := range []time.Time{now.Add(time.Minute), now, now.Add(-time.Second)} {
		n := newNode(t, s, fmt.Sprint("leased", j))
		appendEvents(t, s, n.ID, item("1", ""))
		for k, kind := range []hub.Kind{hub.KindWebhook, hub.KindWebSub, hub.KindRSSCloud} {
			sub := &hub.Subscription{NodeID: n.ID, Kind: kind, Address: fmt.Sprintf("http://127.0.0.1:9/leased/%d", k)}
			must(s.RequestSubscription(ctx, sub))(t)
			if k > 0 {
				must(s.ApplySubscriptionChange(ctx, sub.ID, sub.Change.ID, time.Time{}))(t)
				must(s.RequestSubscription(ctx, sub))(t) // a change to verify
			}
			if k == 2 {
				noErr(t, s.SetSubscriptionState(ctx, sub.ID, hub.SubSuspended, time.Time{}))
			}
		}
		must(s.ClaimDeliveries(ctx, now.Add(-time.Hour), n.ID, 100, "other", until))(t)
	}

	// What the rule expects, from the rows as they stand.
	type entry struct {
		id     int64
		change bool
	}
	var want []entry
	lastSeq := map[int64]int64{}
	for _, sub := range must(s.Subscriptions(ctx, hub.SubscriptionFilter{}))(t) {
		if _, ok := lastSeq[sub.NodeID]; !ok {
			lastSeq[sub.NodeID] = must(s.NodeByID(ctx, sub.NodeID))(t).LastSeq
		}
		verify, deliver := hub.DeliveryWork(sub, lastSeq[sub.NodeID], now)
		if verify {
			want = append(want, entry{sub.ID, true})
		}
		if deliver {
			want = append(want, entry{sub.ID, false})
		}
	}
	// A claim of each node, in one query, takes the same; its leases run
	// out at now, so the claim of every node below finds the same work.
	var byNode []entry
	nodes := map[int64]bool{}
	for _, sub := range must(s.Subscriptions(ctx, hub.SubscriptionFilter{}))(t) {
		if nodes[sub.NodeID] {
			continue
		}
		nodes[sub.NodeID] = true
		c := must(s.ClaimNodeDeliveries(ctx, now, sub.NodeID, 1000, "me", now, 100, hub.EventSpan{}))(t)
		for _, sub := range c.Subscriptions {
			byNode = append(byNode, entry{sub.ID, sub.Change.Claimed})
		}
	}
	var got []entry
	for _, sub := range must(s.ClaimDeliveries(ctx, now, 0, 1000, "me", now.Add(time.Minute)))(t) {
		got = append(got, entry{sub.ID, sub.Change.Claimed})
	}
	order := func(x, y entry) int {
		if x.id != y.id {
			return int(x.id - y.id)
		}
		if x.change == y.change {
			return 0
		}
		if x.change {
			return -1
		}
		return 1
	}
	slices.SortFunc(want, order)
	slices.SortFunc(got, order)
	if len(want) < 10 || !slices.ContainsFunc(want, func(e entry) bool { return e.change }) {
		t.Fatalf("the fixture leaves too little work to tell: %v", want)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("claimed (id, change) %v\nthe rule says %v", got, want)
	}
	slices.SortFunc(byNode, order)
	if !slices.Equal(byNode, want) {
		t.Fatalf("claimed node by node (id, change) %v\nthe rule says %v", byNode, want)
	}
}
