package storetest

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// Requests a subscriber verifies, and the pending changes they make of
// verified subscriptions (RequestSubscription, RequestUnsubscription,
// ApplySubscriptionChange, RefuseSubscriptionChange).

// verifiedSub stores a webhook subscription as a verified one with a
// delivery record: a cursor, failures and a retry time.
func verifiedSub(t *testing.T, s store.Store, nodeID int64, address string, opts hub.Options) *hub.Subscription {
	t.Helper()
	ctx := ctxOf(t)
	sub := &hub.Subscription{NodeID: nodeID, Kind: hub.KindWebhook, Address: address, Options: opts}
	if got := must(s.RequestSubscription(ctx, sub))(t); got != hub.RequestCreated {
		t.Fatalf("first request: %q", got)
	}
	if !must(s.ApplySubscriptionChange(ctx, sub.ID, sub.Change.ID, t0.Add(240*time.Hour)))(t) {
		t.Fatal("the first request was not applied")
	}
	noErr(t, s.SaveDeliveryState(ctx, sub.ID, hub.DeliveryState{Cursor: 7, Attempts: 9, ConsecutiveErrors: 2,
		FirstFailureAt: t0, NextAttemptAt: t0.Add(time.Hour), LastError: "HTTP 503", LastStatus: 503}))
	return must(s.Subscription(ctx, sub.ID))(t)
}

// sameSubscription fails unless the subscription is as it was, but for
// its pending change.
func sameSubscription(t *testing.T, what string, got, want *hub.Subscription) {
	t.Helper()
	g, w := *got, *want
	g.Change, w.Change = hub.SubChange{}, hub.SubChange{}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s changed the subscription:\n got %+v\nwant %+v", what, g, w)
	}
}

func testRequestSubscription(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	const cb = "http://127.0.0.1:9/hook"

	// A new subscription is pending, under a request id.
	first := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: cb, Options: hub.Options{Secret: "a"}}
	first.Cursor = 3
	if got := must(s.RequestSubscription(ctx, first))(t); got != hub.RequestCreated {
		t.Fatalf("outcome %q, want created", got)
	}
	if first.ID == 0 || first.State != hub.SubPending || first.Cursor != 3 || first.Change.ID == "" ||
		first.Change.Pending() || first.NodeName != "n" || first.Options.Secret != "a" {
		t.Fatalf("created %+v", first)
	}
	// Another request before any verification takes its place: the
	// latest request is the one to verify.
	second := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: cb, Options: hub.Options{Secret: "b"},
		ExpiresAt: t0}
	if got := must(s.RequestSubscription(ctx, second))(t); got != hub.RequestReplaced {
		t.Fatalf("outcome %q, want replaced", got)
	}
	if second.ID != first.ID || second.State != hub.SubPending || second.Options.Secret != "b" || second.Cursor != 3 ||
		second.Change.ID == first.Change.ID || second.Change.Pending() || !second.ExpiresAt.Equal(t0) {
		t.Fatalf("replaced %+v", second)
	}
	// A verification of the first request applies nothing.
	if must(s.ApplySubscriptionChange(ctx, first.ID, first.Change.ID, time.Time{}))(t) {
		t.Fatal("a replaced request was applied")
	}
	if must(s.RefuseSubscriptionChange(ctx, first.ID, first.Change.ID))(t) {
		t.Fatal("a replaced request was refused")
	}
	if got := must(s.Subscription(ctx, first.ID))(t); got.State != hub.SubPending || got.Options.Secret != "b" {
		t.Fatalf("after deciding a replaced request: %+v", got)
	}
	// Verified, it is active with the expiry the verification gave.
	if !must(s.ApplySubscriptionChange(ctx, first.ID, second.Change.ID, t0.Add(time.Hour)))(t) {
		t.Fatal("the latest request was not applied")
	}
	got := must(s.Subscription(ctx, first.ID))(t)
	if got.State != hub.SubActive || got.Options.Secret != "b" || !got.ExpiresAt.Equal(t0.Add(time.Hour)) || got.Cursor != 3 {
		t.Fatalf("verified %+v", got)
	}
	if must(s.ApplySubscriptionChange(ctx, first.ID, second.Change.ID, t0))(t) {
		t.Fatal("a request was applied twice")
	}

	// A refused request of a new subscription removes it.
	lone := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebSub, Address: cb}
	must(s.RequestSubscription(ctx, lone))(t)
	if !must(s.RefuseSubscriptionChange(ctx, lone.ID, lone.Change.ID))(t) {
		t.Fatal("refusing a new subscription's request did nothing")
	}
	_, err := s.Subscription(ctx, lone.ID)
	wantErr(t, err, hub.ErrNotFound)

	_, err = s.RequestSubscription(ctx, &hub.Subscription{NodeID: n.ID, Kind: hub.KindXMPP, Address: "x@example.org"})
	wantErr(t, err, hub.ErrInvalid)
	_, err = s.RequestSubscription(ctx, &hub.Subscription{NodeID: n.ID + 1000, Kind: hub.KindWebhook, Address: cb})
	wantErr(t, err, hub.ErrNotFound)
	if must(s.ApplySubscriptionChange(ctx, first.ID+1000, "x", t0))(t) || must(s.RefuseSubscriptionChange(ctx, first.ID+1000, "x"))(t) {
		t.Fatal("a request about no subscription was decided")
	}
}

// testSubscriptionChangeRefused: a request about a verified subscription
// changes nothing; refused, it leaves the subscription exactly as it was.
func testSubscriptionChangeRefused(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	victim := verifiedSub(t, s, n.ID, "http://127.0.0.1:9/hook", hub.Options{Method: "POST", Secret: "mine"})

	stranger := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: victim.Address,
		Options: hub.Options{Method: "NOTIFY", Secret: "theirs"}, ExpiresAt: t0.Add(time.Minute)}
	if got := must(s.RequestSubscription(ctx, stranger))(t); got != hub.RequestChangePending {
		t.Fatalf("outcome %q, want change pending", got)
	}
	if stranger.ID != victim.ID || stranger.Change.Mode != hub.ChangeSubscribe || stranger.Change.Options.Secret != "theirs" ||
		stranger.Change.Options.Method != "NOTIFY" || stranger.Change.RequestedAt.IsZero() || stranger.Change.ID == victim.Change.ID {
		t.Fatalf("pending change %+v", stranger.Change)
	}
	sameSubscription(t, "a pending change", must(s.Subscription(ctx, victim.ID))(t), victim)
	sameSubscription(t, "a pending change (as returned)", stranger, victim)

	if !must(s.RefuseSubscriptionChange(ctx, victim.ID, stranger.Change.ID))(t) {
		t.Fatal("the change was not refused")
	}
	got := must(s.Subscription(ctx, victim.ID))(t)
	sameSubscription(t, "a refused change", got, victim)
	if got.Change.Pending() || got.Change.Outcome != hub.ChangeRefused || got.Change.ID != stranger.Change.ID {
		t.Fatalf("change after refusal %+v", got.Change)
	}
	if must(s.ApplySubscriptionChange(ctx, victim.ID, stranger.Change.ID, t0))(t) {
		t.Fatal("a refused change was applied")
	}
	sameSubscription(t, "applying a refused change", must(s.Subscription(ctx, victim.ID))(t), victim)
}

// testSubscriptionChangeApplied: a verified change replaces the settings
// and the expiry and clears the failure record at once, and keeps the
// cursor; of
// two requests the later wins, and the earlier one's verification applies
// nothing.
func testSubscriptionChangeApplied(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	victim := verifiedSub(t, s, n.ID, "http://127.0.0.1:9/hook", hub.Options{Method: "POST", Secret: "mine"})

	earlier := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: victim.Address, Options: hub.Options{Secret: "one"}}
	must(s.RequestSubscription(ctx, earlier))(t)
	later := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: victim.Address,
		Options: hub.Options{Method: "NOTIFY", Diff: "application/patch-ops+xml", Secret: "two"}}
	if got := must(s.RequestSubscription(ctx, later))(t); got != hub.RequestChangePending {
		t.Fatalf("outcome %q", got)
	}
	if later.Change.Options.Secret != "two" || later.Change.ID == earlier.Change.ID {
		t.Fatalf("the later request did not replace the earlier: %+v", later.Change)
	}
	if must(s.ApplySubscriptionChange(ctx, victim.ID, earlier.Change.ID, t0))(t) {
		t.Fatal("the verification of a replaced request applied it")
	}
	sameSubscription(t, "a replaced request", must(s.Subscription(ctx, victim.ID))(t), victim)

	if !must(s.ApplySubscriptionChange(ctx, victim.ID, later.Change.ID, t0.Add(48*time.Hour)))(t) {
		t.Fatal("the verified change was not applied")
	}
	got := must(s.Subscription(ctx, victim.ID))(t)
	if !reflect.DeepEqual(got.Options, later.Change.Options) {
		t.Fatalf("options %+v, want %+v", got.Options, later.Change.Options)
	}
	if got.State != hub.SubActive || !got.ExpiresAt.Equal(t0.Add(48*time.Hour)) || got.Change.Pending() ||
		got.Change.Outcome != hub.ChangeApplied {
		t.Fatalf("after the change %+v", got)
	}
	// The cursor stays; a verified renewal clears the failure record.
	want := victim.DeliveryState
	want.ConsecutiveErrors, want.FirstFailureAt, want.LastError, want.NextAttemptAt = 0, time.Time{}, "", time.Time{}
	if got.DeliveryState != want {
		t.Fatalf("delivery state %+v, want %+v", got.DeliveryState, want)
	}
	if must(s.RefuseSubscriptionChange(ctx, victim.ID, later.Change.ID))(t) {
		t.Fatal("an applied change was refused afterwards")
	}

	// A suspended subscription is a verified one too; a verified change
	// makes it active.
	noErr(t, s.SetSubscriptionState(ctx, victim.ID, hub.SubSuspended, got.ExpiresAt))
	renewal := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: victim.Address, Options: got.Options}
	if out := must(s.RequestSubscription(ctx, renewal))(t); out != hub.RequestChangePending || renewal.State != hub.SubSuspended {
		t.Fatalf("renewal of a suspended subscription: %q %+v", out, renewal)
	}
	if !must(s.ApplySubscriptionChange(ctx, victim.ID, renewal.Change.ID, time.Time{}))(t) {
		t.Fatal("the renewal was not applied")
	}
	if got := must(s.Subscription(ctx, victim.ID))(t); got.State != hub.SubActive || !got.ExpiresAt.IsZero() {
		t.Fatalf("after renewal %+v", got)
	}

	// PutSubscription, a direct write, drops a pending change.
	must(s.RequestSubscription(ctx, &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: victim.Address}))(t)
	must(s.PutSubscription(ctx, &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: victim.Address, State: hub.SubActive}))(t)
	if got := must(s.Subscription(ctx, victim.ID))(t); got.Change.Pending() {
		t.Fatalf("PutSubscription kept a pending change: %+v", got.Change)
	}
}

// testRequestUnsubscription: a subscription never verified is cancelled at
// once; a verified one stays until the unsubscription is verified.
func testRequestUnsubscription(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	_, _, err := s.RequestUnsubscription(ctx, n.ID, hub.KindWebhook, "http://127.0.0.1:9/none")
	wantErr(t, err, hub.ErrNotFound)

	pending := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: "http://127.0.0.1:9/new"}
	must(s.RequestSubscription(ctx, pending))(t)
	got, outcome, err := s.RequestUnsubscription(ctx, n.ID, hub.KindWebhook, pending.Address)
	noErr(t, err)
	if outcome != hub.RequestCancelled || got.ID != pending.ID {
		t.Fatalf("unsubscribing a pending subscription: %q %+v", outcome, got)
	}
	_, err = s.Subscription(ctx, pending.ID)
	wantErr(t, err, hub.ErrNotFound)

	victim := verifiedSub(t, s, n.ID, "http://127.0.0.1:9/hook", hub.Options{Secret: "mine"})
	got, outcome, err = s.RequestUnsubscription(ctx, n.ID, hub.KindWebhook, victim.Address)
	noErr(t, err)
	if outcome != hub.RequestChangePending || got.Change.Mode != hub.ChangeUnsubscribe || got.Change.ID == "" {
		t.Fatalf("unsubscribing a verified subscription: %q %+v", outcome, got.Change)
	}
	sameSubscription(t, "a pending unsubscription", got, victim)
	if !must(s.RefuseSubscriptionChange(ctx, victim.ID, got.Change.ID))(t) {
		t.Fatal("the unsubscription was not refused")
	}
	sameSubscription(t, "a refused unsubscription", must(s.Subscription(ctx, victim.ID))(t), victim)

	// A subscribe request after an unsubscription replaces it: the later
	// request wins.
	_, _, err = s.RequestUnsubscription(ctx, n.ID, hub.KindWebhook, victim.Address)
	noErr(t, err)
	again := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: victim.Address, Options: hub.Options{Secret: "new"}}
	must(s.RequestSubscription(ctx, again))(t)
	if again.Change.Mode != hub.ChangeSubscribe {
		t.Fatalf("a subscribe request after an unsubscription: %+v", again.Change)
	}
	got, _, err = s.RequestUnsubscription(ctx, n.ID, hub.KindWebhook, victim.Address)
	noErr(t, err)
	if !must(s.ApplySubscriptionChange(ctx, victim.ID, got.Change.ID, time.Time{}))(t) {
		t.Fatal("the verified unsubscription was not applied")
	}
	_, err = s.Subscription(ctx, victim.ID)
	wantErr(t, err, hub.ErrNotFound)
}

// testClaimPendingChanges: the verification of a pending change is
// claimed at once, whatever the subscription's retry time, under a lease
// of its own: it neither waits for nor holds back the deliveries.
func testClaimPendingChanges(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	other := newNode(t, s, "other")
	var events []hub.Event
	for i := range 9 {
		events = append(events, item(fmt.Sprint(i), ""))
	}
	appendEvents(t, s, n.ID, events...)
	// Behind its node's log (cursor 7 of 9) and waiting for a retry an
	// hour from t0.
	victim := verifiedSub(t, s, n.ID, "http://127.0.0.1:9/hook", hub.Options{Secret: "mine"})
	verifiedSub(t, s, other.ID, "http://127.0.0.1:9/other", hub.Options{})
	if got := must(s.ClaimDeliveries(ctx, t0, 0, 10, "me", t0.Add(time.Minute)))(t); len(got) != 0 {
		t.Fatalf("claimed %v before their retry time", subIDs(got))
	}
	req := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: victim.Address, Options: hub.Options{Secret: "x"}}
	must(s.RequestSubscription(ctx, req))(t)
	if got := must(s.ClaimDeliveries(ctx, t0, other.ID, 10, "me", t0.Add(time.Minute)))(t); len(got) != 0 {
		t.Fatalf("a claim of another node took %v", subIDs(got))
	}
	got := must(s.ClaimDeliveries(ctx, t0, n.ID, 10, "me", t0.Add(time.Minute)))(t)
	if len(got) != 1 || got[0].ID != victim.ID || !got[0].Change.Claimed || got[0].Change.ID != req.Change.ID ||
		got[0].Change.Options.Secret != "x" || got[0].Options.Secret != "mine" || got[0].Change.LeaseOwner != "me" ||
		!got[0].Change.LeaseUntil.Equal(t0.Add(time.Minute)) || got[0].LeaseOwner != "" {
		t.Fatalf("claimed %+v", got)
	}
	if got := must(s.ClaimDeliveries(ctx, t0, 0, 10, "other", t0.Add(time.Minute)))(t); len(got) != 0 {
		t.Fatalf("claimed a live lease of a change again: %+v", got)
	}
	// Given back by anyone but its holder, it stays leased; by its holder,
	// undecided, it is claimed again.
	noErr(t, s.ReleaseSubscriptionChange(ctx, victim.ID, req.Change.ID, "other"))
	if got := must(s.ClaimDeliveries(ctx, t0, 0, 10, "other", t0.Add(time.Minute)))(t); len(got) != 0 {
		t.Fatalf("claimed a change whose lease another owner gave back: %+v", got)
	}
	noErr(t, s.ReleaseSubscriptionChange(ctx, victim.ID, req.Change.ID, "me"))
	if got := must(s.ClaimDeliveries(ctx, t0, 0, 10, "other", t0.Add(time.Minute)))(t); len(got) != 1 || !got[0].Change.Claimed {
		t.Fatalf("after release claimed %+v", got)
	}
	// Decided, nothing is left to claim before the retry time.
	must(s.RefuseSubscriptionChange(ctx, victim.ID, req.Change.ID))(t)
	if got := must(s.Subscription(ctx, victim.ID))(t); got.Change.LeaseOwner != "" || !got.Change.LeaseUntil.IsZero() {
		t.Fatalf("a decided change keeps its lease: %+v", got.Change)
	}
	if got := must(s.ClaimDeliveries(ctx, t0, 0, 10, "me", t0.Add(time.Minute)))(t); len(got) != 0 {
		t.Fatalf("claimed %v before the retry time once the change was decided", subIDs(got))
	}

	// Due and with a pending change: once for the change, once for the
	// deliveries, each with its own lease.
	due := t0.Add(2 * time.Hour)
	must(s.RequestSubscription(ctx, &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: victim.Address}))(t)
	got = must(s.ClaimDeliveries(ctx, due, 0, 10, "me", due.Add(time.Minute)))(t)
	if len(got) != 2 || got[0].ID != victim.ID || got[1].ID != victim.ID || got[0].Change.Claimed == got[1].Change.Claimed {
		t.Fatalf("claimed %+v, want the change and the deliveries of %d", got, victim.ID)
	}
	for _, g := range got {
		if g.Change.Claimed != (g.LeaseOwner == "") {
			t.Fatalf("entry %+v leases the wrong part", g)
		}
	}
	// A newer request frees the change's lease: it is verified at once,
	// beside the deliveries still leased.
	newer := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: victim.Address, Options: hub.Options{Secret: "y"}}
	must(s.RequestSubscription(ctx, newer))(t)
	got = must(s.ClaimDeliveries(ctx, due, 0, 10, "other", due.Add(time.Minute)))(t)
	if len(got) != 1 || !got[0].Change.Claimed || got[0].Change.ID != newer.Change.ID || got[0].LeaseOwner != "me" {
		t.Fatalf("claimed %+v, want the newer change beside the leased deliveries", got)
	}
}

// testRequestSubscriptionConcurrent: requests racing for one callback all
// succeed, and exactly one creates the subscription.
func testRequestSubscriptionConcurrent(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	n := newNode(t, s, "n")
	const workers = 8
	var wg sync.WaitGroup
	outcomes := make([]hub.RequestOutcome, workers)
	errs := make([]error, workers)
	for i := range workers {
		wg.Go(func() {
			outcomes[i], errs[i] = s.RequestSubscription(ctx, &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebSub,
				Address: "http://127.0.0.1:9/cb", Options: hub.Options{Secret: fmt.Sprint(i)}})
		})
	}
	wg.Wait()
	created := 0
	for i, err := range errs {
		noErr(t, err)
		if outcomes[i] == hub.RequestCreated {
			created++
		}
	}
	subs := must(s.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID}))(t)
	if created != 1 || len(subs) != 1 || subs[0].State != hub.SubPending {
		t.Fatalf("%d created, stored %+v", created, subs)
	}
}
