package hub

import (
	"fmt"
	"time"
)

// The rules of requests that a subscriber verifies (see SubChange), as
// pure functions. The store reads the subscription under its transaction,
// asks one of these what becomes of the row and writes that
// (store/changes.go): the rules are the same on every backend and tested
// without SQL, and atomicity stays the store's.

// RowChange is how a store carries out what a rule decided about one
// subscription row.
type RowChange int

const (
	// RowUnchanged: nothing is written.
	RowUnchanged RowChange = iota
	// RowInserted: the subscription is stored as a new row.
	RowInserted
	// RowUpdated: the row takes the decision's request fields.
	RowUpdated
	// RowDeleted: the row is removed.
	RowDeleted
)

// SubscriptionDecision is what a rule decided about one subscription.
//
// Sub is the subscription as it is to be (RowInserted, RowUpdated) or as
// it was (RowUnchanged, RowDeleted). A rule changes only its request
// fields: State, Options, SubID, ExpiresAt, UpdatedAt, the failure record
// (ConsecutiveErrors, FirstFailureAt, LastError, NextAttemptAt) and
// Change; the rest of the delivery state (the cursor, attempts, the last
// delivery, the delivery lease) is the delivery side's, and a store
// updating a row leaves it as it is. A new row starts with Sub's Cursor and
// nothing else of a delivery state.
type SubscriptionDecision struct {
	Row RowChange
	Sub Subscription
	// Outcome is what a request did; "" for a decision about a
	// verification.
	Outcome RequestOutcome
}

// CheckSubscribeRequest says why a subscribe request cannot be stored as
// one its subscriber verifies: its kind has no verified requests, or it
// names no subscriber.
func CheckSubscribeRequest(req Subscription) error {
	if !req.Kind.HTTP() {
		return fmt.Errorf("%w: subscription kind %q has no verified requests", ErrInvalid, req.Kind)
	}
	if req.Address == "" {
		return fmt.Errorf("%w: empty subscriber address", ErrInvalid)
	}
	return nil
}

// DecideSubscribeRequest decides a subscribe request req, under the new
// request id changeID, about the subscription cur of its node, kind and
// address (nil: there is none; see SubscriptionStore.RequestSubscription).
// With none, req is stored as a new pending subscription from req's Cursor
// (RequestCreated). One not verified yet takes req's options, SubID and
// expiry and stays pending, its latest request now changeID
// (RequestReplaced). A verified one is left as it is, its cursor, delivery
// record, settings and expiry included; the request becomes its pending
// change, replacing an earlier one and freeing that one's lease, so the new
// change is verified at once and a verification of the earlier one still
// running decides nothing (RequestChangePending).
func DecideSubscribeRequest(cur *Subscription, req Subscription, changeID string, now time.Time) SubscriptionDecision {
	switch {
	case cur == nil:
		next := req
		next.State = SubPending // only a verification makes it active
		next.CreatedAt, next.UpdatedAt = now, now
		next.DeliveryState = DeliveryState{Cursor: req.Cursor}
		next.Change = SubChange{ID: changeID, RequestedAt: now}
		return SubscriptionDecision{Row: RowInserted, Sub: next, Outcome: RequestCreated}
	case cur.State == SubPending:
		// Nobody verified it yet: the latest request is the one to verify.
		next := *cur
		next.Options, next.SubID, next.ExpiresAt, next.UpdatedAt = req.Options, req.SubID, req.ExpiresAt, now
		next.Change.ID, next.Change.RequestedAt = changeID, now
		return SubscriptionDecision{Row: RowUpdated, Sub: next, Outcome: RequestReplaced}
	default:
		next := *cur
		next.Change = SubChange{ID: changeID, Mode: ChangeSubscribe, Options: req.Options, RequestedAt: now}
		return SubscriptionDecision{Row: RowUpdated, Sub: next, Outcome: RequestChangePending}
	}
}

// DecideUnsubscribeRequest decides an unsubscribe request, under the new
// request id changeID, about the subscription cur. One not verified yet is
// removed at once (RequestCancelled): verifying the unsubscription would
// let a refused check activate what nobody confirmed. A verified one is
// left as it is with the request as its pending change, replacing an
// earlier one and freeing that one's lease (RequestChangePending).
func DecideUnsubscribeRequest(cur Subscription, changeID string, now time.Time) SubscriptionDecision {
	if cur.State == SubPending {
		return SubscriptionDecision{Row: RowDeleted, Sub: cur, Outcome: RequestCancelled}
	}
	next := cur
	next.Change = SubChange{ID: changeID, Mode: ChangeUnsubscribe, RequestedAt: now}
	return SubscriptionDecision{Row: RowUpdated, Sub: next, Outcome: RequestChangePending}
}

// DecideVerifiedChange decides what the subscriber's verification of the
// request changeID does to the subscription cur, expires being the expiry
// the verification gave. Only the latest request is applied: a
// verification of an older one changes nothing. A pending unsubscription
// removes the subscription; a pending subscribe change takes effect (its
// options, expires, active) and is marked ChangeApplied, its lease freed;
// a subscription not verified yet becomes active until expires. Either way
// the failure record and retry time are cleared: errors from before a
// renewal must not suspend or age it at once. With nothing waiting,
// nothing changes.
func DecideVerifiedChange(cur Subscription, changeID string, expires, now time.Time) SubscriptionDecision {
	if cur.Change.ID != changeID {
		return SubscriptionDecision{Row: RowUnchanged, Sub: cur}
	}
	next := cur
	switch {
	case cur.Change.Mode == ChangeUnsubscribe:
		return SubscriptionDecision{Row: RowDeleted, Sub: cur}
	case cur.Change.Mode == ChangeSubscribe:
		next.Options = cur.Change.Options
		next.Change.Mode, next.Change.Options, next.Change.Outcome = "", Options{}, ChangeApplied
		next.Change.LeaseOwner, next.Change.LeaseUntil = "", time.Time{}
	case cur.State == SubPending:
	default:
		return SubscriptionDecision{Row: RowUnchanged, Sub: cur} // nothing waits
	}
	next.State, next.ExpiresAt, next.UpdatedAt = SubActive, expires, now
	next.ConsecutiveErrors, next.FirstFailureAt, next.LastError, next.NextAttemptAt = 0, time.Time{}, "", time.Time{}
	return SubscriptionDecision{Row: RowUpdated, Sub: next}
}

// DecideRefusedChange decides what a refused (or failed) verification of
// the request changeID does to the subscription cur. Only the latest
// request is refused. A pending change is dropped and marked
// ChangeRefused, its lease freed, and the subscription goes on exactly as
// it was; a subscription not verified yet is removed. With nothing
// waiting, nothing changes.
func DecideRefusedChange(cur Subscription, changeID string) SubscriptionDecision {
	if cur.Change.ID != changeID {
		return SubscriptionDecision{Row: RowUnchanged, Sub: cur}
	}
	switch {
	case cur.Change.Pending():
		next := cur
		next.Change.Mode, next.Change.Options, next.Change.Outcome = "", Options{}, ChangeRefused
		next.Change.LeaseOwner, next.Change.LeaseUntil = "", time.Time{}
		return SubscriptionDecision{Row: RowUpdated, Sub: next}
	case cur.State == SubPending:
		return SubscriptionDecision{Row: RowDeleted, Sub: cur}
	default:
		return SubscriptionDecision{Row: RowUnchanged, Sub: cur} // nothing waits
	}
}

// DecideChangeRelease gives back the lease of the verification of the
// request changeID that owner holds, undecided (the verification could not
// be made now): the change stays pending and may be claimed again. A lease
// of another request, or another owner's, is left alone.
func DecideChangeRelease(cur Subscription, changeID, owner string) SubscriptionDecision {
	if cur.Change.ID != changeID || cur.Change.LeaseOwner != owner {
		return SubscriptionDecision{Row: RowUnchanged, Sub: cur}
	}
	next := cur
	next.Change.LeaseOwner, next.Change.LeaseUntil = "", time.Time{}
	return SubscriptionDecision{Row: RowUpdated, Sub: next}
}
