package hub_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

// The rules of requests a subscriber verifies, without a store.

var (
	ruleNow     = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ruleBefore  = ruleNow.Add(-48 * time.Hour)
	ruleExpires = ruleNow.Add(240 * time.Hour)
)

// storedSub is a verified webhook subscription with a delivery record (a
// cursor, failures, a retry time, a delivery lease) and, as the tests set
// it, a pending change.
func storedSub(state hub.SubState, change hub.SubChange) hub.Subscription {
	return hub.Subscription{
		ID: 7, NodeID: 3, NodeName: "n", Kind: hub.KindWebhook, Address: "http://127.0.0.1:9/hook",
		SubID: "old", State: state, Options: hub.Options{Secret: "old"}, ExpiresAt: ruleBefore.Add(time.Hour),
		CreatedAt: ruleBefore, UpdatedAt: ruleBefore,
		DeliveryState: hub.DeliveryState{Cursor: 40, Attempts: 9, ConsecutiveErrors: 2, FirstFailureAt: ruleBefore,
			NextAttemptAt: ruleNow.Add(time.Hour), LastError: "HTTP 503", LastDeliveredAt: ruleBefore, LastStatus: 503,
			LeaseOwner: "deliverer", LeaseUntil: ruleNow.Add(time.Minute)},
		Change: change,
	}
}

// with returns sub changed by edit.
func with(sub hub.Subscription, edit func(*hub.Subscription)) hub.Subscription {
	edit(&sub)
	return sub
}

func sameDecision(t *testing.T, got, want hub.SubscriptionDecision) {
	t.Helper()
	if got.Row != want.Row || got.Outcome != want.Outcome {
		t.Fatalf("row %d, outcome %q; want row %d, outcome %q", got.Row, got.Outcome, want.Row, want.Outcome)
	}
	if !reflect.DeepEqual(got.Sub, want.Sub) {
		t.Fatalf("subscription\n got %+v\nwant %+v", got.Sub, want.Sub)
	}
}

func TestCheckSubscribeRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  hub.Subscription
		ok   bool
	}{
		{"webhook", hub.Subscription{Kind: hub.KindWebhook, Address: "http://127.0.0.1/"}, true},
		{"WebSub", hub.Subscription{Kind: hub.KindWebSub, Address: "http://127.0.0.1/"}, true},
		{"XMPP has no verified requests", hub.Subscription{Kind: hub.KindXMPP, Address: "a@b"}, false},
		{"an unknown kind", hub.Subscription{Kind: "carrier-pigeon", Address: "http://127.0.0.1/"}, false},
		{"no subscriber", hub.Subscription{Kind: hub.KindWebhook}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := hub.CheckSubscribeRequest(tc.req)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, hub.ErrInvalid)) {
				t.Fatalf("got %v, want ok %v (or ErrInvalid)", err, tc.ok)
			}
		})
	}
}

func TestDecideSubscribeRequest(t *testing.T) {
	req := hub.Subscription{NodeID: 3, NodeName: "n", Kind: hub.KindWebhook, Address: "http://127.0.0.1:9/hook",
		SubID: "new", State: hub.SubActive, Options: hub.Options{Secret: "new"}, ExpiresAt: ruleExpires,
		DeliveryState: hub.DeliveryState{Cursor: 12, Attempts: 5, LastError: "ignored", LeaseOwner: "x"}}
	earlier := hub.SubChange{ID: "c0", Mode: hub.ChangeUnsubscribe, RequestedAt: ruleBefore,
		LeaseOwner: "verifier", LeaseUntil: ruleNow.Add(time.Minute)}
	pending := storedSub(hub.SubPending, hub.SubChange{ID: "c0", RequestedAt: ruleBefore, Outcome: hub.ChangeRefused})
	for _, tc := range []struct {
		name string
		cur  *hub.Subscription
		want hub.SubscriptionDecision
	}{
		{"none: a new pending subscription from the request's cursor", nil, hub.SubscriptionDecision{
			Row: hub.RowInserted, Outcome: hub.RequestCreated,
			Sub: with(req, func(s *hub.Subscription) {
				s.State, s.CreatedAt, s.UpdatedAt = hub.SubPending, ruleNow, ruleNow
				s.DeliveryState = hub.DeliveryState{Cursor: 12}
				s.Change = hub.SubChange{ID: "c1", RequestedAt: ruleNow}
			})}},
		{"not verified yet: takes the request's settings, stays pending", &pending, hub.SubscriptionDecision{
			Row: hub.RowUpdated, Outcome: hub.RequestReplaced,
			Sub: with(pending, func(s *hub.Subscription) {
				s.Options, s.SubID, s.ExpiresAt, s.UpdatedAt = req.Options, "new", ruleExpires, ruleNow
				s.Change.ID, s.Change.RequestedAt = "c1", ruleNow
			})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sameDecision(t, hub.DecideSubscribeRequest(tc.cur, req, "c1", ruleNow), tc.want)
		})
	}
	// A verified subscription, of any state but pending, is left as it
	// is; the request becomes its pending change, replacing an earlier
	// one and freeing its lease.
	for _, state := range []hub.SubState{hub.SubActive, hub.SubSuspended, hub.SubUnsubscribing} {
		t.Run("verified, "+string(state)+": a pending change", func(t *testing.T) {
			cur := storedSub(state, earlier)
			sameDecision(t, hub.DecideSubscribeRequest(&cur, req, "c1", ruleNow), hub.SubscriptionDecision{
				Row: hub.RowUpdated, Outcome: hub.RequestChangePending,
				Sub: with(cur, func(s *hub.Subscription) {
					s.Change = hub.SubChange{ID: "c1", Mode: hub.ChangeSubscribe, Options: req.Options, RequestedAt: ruleNow}
				})})
		})
	}
}

func TestDecideUnsubscribeRequest(t *testing.T) {
	earlier := hub.SubChange{ID: "c0", Mode: hub.ChangeSubscribe, Options: hub.Options{Secret: "asked"},
		RequestedAt: ruleBefore, Outcome: hub.ChangeApplied, LeaseOwner: "verifier", LeaseUntil: ruleNow}
	pending := storedSub(hub.SubPending, hub.SubChange{ID: "c0", RequestedAt: ruleBefore})
	sameDecision(t, hub.DecideUnsubscribeRequest(pending, "c1", ruleNow),
		hub.SubscriptionDecision{Row: hub.RowDeleted, Outcome: hub.RequestCancelled, Sub: pending})
	for _, state := range []hub.SubState{hub.SubActive, hub.SubSuspended} {
		cur := storedSub(state, earlier)
		sameDecision(t, hub.DecideUnsubscribeRequest(cur, "c1", ruleNow), hub.SubscriptionDecision{
			Row: hub.RowUpdated, Outcome: hub.RequestChangePending,
			Sub: with(cur, func(s *hub.Subscription) {
				s.Change = hub.SubChange{ID: "c1", Mode: hub.ChangeUnsubscribe, RequestedAt: ruleNow}
			})})
	}
}

// cleared is sub with its failure record and retry time cleared.
func cleared(s *hub.Subscription) {
	s.ConsecutiveErrors, s.FirstFailureAt, s.LastError, s.NextAttemptAt = 0, time.Time{}, "", time.Time{}
}

func TestDecideVerifiedChange(t *testing.T) {
	asked := hub.Options{Secret: "asked"}
	lease := func(c hub.SubChange) hub.SubChange {
		c.LeaseOwner, c.LeaseUntil = "verifier", ruleNow.Add(time.Minute)
		return c
	}
	subscribe := storedSub(hub.SubSuspended, lease(hub.SubChange{ID: "c1", Mode: hub.ChangeSubscribe, Options: asked,
		RequestedAt: ruleBefore}))
	unsubscribe := storedSub(hub.SubActive, lease(hub.SubChange{ID: "c1", Mode: hub.ChangeUnsubscribe, RequestedAt: ruleBefore}))
	pending := storedSub(hub.SubPending, hub.SubChange{ID: "c1", RequestedAt: ruleBefore})
	settled := storedSub(hub.SubActive, hub.SubChange{ID: "c1", RequestedAt: ruleBefore, Outcome: hub.ChangeApplied})
	for _, tc := range []struct {
		name     string
		cur      hub.Subscription
		changeID string
		want     hub.SubscriptionDecision
	}{
		{"a subscribe change takes effect, the record cleared", subscribe, "c1", hub.SubscriptionDecision{
			Row: hub.RowUpdated, Sub: with(subscribe, func(s *hub.Subscription) {
				s.Options, s.State, s.ExpiresAt, s.UpdatedAt = asked, hub.SubActive, ruleExpires, ruleNow
				cleared(s)
				s.Change = hub.SubChange{ID: "c1", RequestedAt: ruleBefore, Outcome: hub.ChangeApplied}
			})}},
		{"an unsubscription removes it", unsubscribe, "c1", hub.SubscriptionDecision{Row: hub.RowDeleted, Sub: unsubscribe}},
		{"a pending subscription becomes active", pending, "c1", hub.SubscriptionDecision{
			Row: hub.RowUpdated, Sub: with(pending, func(s *hub.Subscription) {
				s.State, s.ExpiresAt, s.UpdatedAt = hub.SubActive, ruleExpires, ruleNow
				cleared(s)
			})}},
		{"nothing waits", settled, "c1", hub.SubscriptionDecision{Row: hub.RowUnchanged, Sub: settled}},
		{"an older request's change", subscribe, "c0", hub.SubscriptionDecision{Row: hub.RowUnchanged, Sub: subscribe}},
		{"an older request's unsubscription", unsubscribe, "c0", hub.SubscriptionDecision{Row: hub.RowUnchanged, Sub: unsubscribe}},
		{"an older request of a pending one", pending, "c0", hub.SubscriptionDecision{Row: hub.RowUnchanged, Sub: pending}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sameDecision(t, hub.DecideVerifiedChange(tc.cur, tc.changeID, ruleExpires, ruleNow), tc.want)
		})
	}
}

func TestDecideRefusedChange(t *testing.T) {
	change := hub.SubChange{ID: "c1", Mode: hub.ChangeSubscribe, Options: hub.Options{Secret: "asked"},
		RequestedAt: ruleBefore, LeaseOwner: "verifier", LeaseUntil: ruleNow}
	subscribe := storedSub(hub.SubActive, change)
	unsubscribe := storedSub(hub.SubSuspended, hub.SubChange{ID: "c1", Mode: hub.ChangeUnsubscribe, RequestedAt: ruleBefore})
	pending := storedSub(hub.SubPending, hub.SubChange{ID: "c1", RequestedAt: ruleBefore})
	settled := storedSub(hub.SubActive, hub.SubChange{ID: "c1", RequestedAt: ruleBefore, Outcome: hub.ChangeApplied})
	refused := func(s *hub.Subscription) {
		s.Change = hub.SubChange{ID: "c1", RequestedAt: ruleBefore, Outcome: hub.ChangeRefused}
	}
	for _, tc := range []struct {
		name     string
		cur      hub.Subscription
		changeID string
		want     hub.SubscriptionDecision
	}{
		{"a subscribe change is dropped, the subscription as it was", subscribe, "c1",
			hub.SubscriptionDecision{Row: hub.RowUpdated, Sub: with(subscribe, refused)}},
		{"an unsubscription is dropped", unsubscribe, "c1",
			hub.SubscriptionDecision{Row: hub.RowUpdated, Sub: with(unsubscribe, refused)}},
		{"a pending subscription is removed", pending, "c1", hub.SubscriptionDecision{Row: hub.RowDeleted, Sub: pending}},
		{"nothing waits", settled, "c1", hub.SubscriptionDecision{Row: hub.RowUnchanged, Sub: settled}},
		{"an older request's change", subscribe, "c0", hub.SubscriptionDecision{Row: hub.RowUnchanged, Sub: subscribe}},
		{"an older request of a pending one", pending, "c0", hub.SubscriptionDecision{Row: hub.RowUnchanged, Sub: pending}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sameDecision(t, hub.DecideRefusedChange(tc.cur, tc.changeID), tc.want)
		})
	}
}

func TestDecideChangeRelease(t *testing.T) {
	leased := storedSub(hub.SubActive, hub.SubChange{ID: "c1", Mode: hub.ChangeSubscribe, Options: hub.Options{Secret: "asked"},
		RequestedAt: ruleBefore, LeaseOwner: "verifier", LeaseUntil: ruleNow})
	for _, tc := range []struct {
		name            string
		changeID, owner string
		want            hub.SubscriptionDecision
	}{
		{"the holder gives it back, the change still pending", "c1", "verifier", hub.SubscriptionDecision{
			Row: hub.RowUpdated, Sub: with(leased, func(s *hub.Subscription) {
				s.Change.LeaseOwner, s.Change.LeaseUntil = "", time.Time{}
			})}},
		{"another owner's lease", "c1", "other", hub.SubscriptionDecision{Row: hub.RowUnchanged, Sub: leased}},
		{"an older request's", "c0", "verifier", hub.SubscriptionDecision{Row: hub.RowUnchanged, Sub: leased}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sameDecision(t, hub.DecideChangeRelease(leased, tc.changeID, tc.owner), tc.want)
		})
	}
}
