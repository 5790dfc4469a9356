package delivery

import (
	"context"
	"time"

	"github.com/pingd/pingd/hub"
)

// Store is what the delivery engine reads and writes: the claims and
// states of the HTTP subscriptions, their verified changes, and the nodes
// and logs their deliveries read. The store package implements it;
// cmd/pingd gives it in Config. Every method must be safe for concurrent
// use.
type Store interface {
	// NodeByID returns the node by id; hub.ErrNotFound.
	NodeByID(ctx context.Context, id int64) (*hub.Node, error)
	// EventsAfter returns up to limit events with Seq > after, oldest first.
	EventsAfter(ctx context.Context, nodeID int64, after int64, limit int) ([]hub.Event, error)
	// Subscriptions lists the subscriptions matching f, oldest first.
	Subscriptions(ctx context.Context, f hub.SubscriptionFilter) ([]hub.Subscription, error)
	// SetSubscriptionState changes a subscription's state and expiry.
	SetSubscriptionState(ctx context.Context, id int64, state hub.SubState, expires time.Time) error
	// DeleteSubscription removes one subscription; hub.ErrNotFound.
	DeleteSubscription(ctx context.Context, id int64) error

	// ClaimDeliveries leases up to limit subscriptions of the HTTP kinds
	// that have work at now: pending or unsubscribing ones, and active ones
	// whose cursor is behind their node's LastSeq, in both cases with
	// NextAttemptAt <= now and no live lease of another owner. It also
	// leases the verification of pending changes whose change lease is
	// free, whatever the subscription's NextAttemptAt and delivery lease (a
	// renewal is verified at once, not after the backoff of earlier
	// failures, and a slow verification holds no delivery back): such an
	// entry has Change.Claimed set and its change lease taken, and the
	// subscription may come once more for its deliveries. nodeID > 0
	// restricts the claim to one node.
	ClaimDeliveries(ctx context.Context, now time.Time, nodeID int64, limit int, owner string, until time.Time) ([]hub.Subscription, error)
	// ClaimNodeDeliveries is ClaimDeliveries of one node's subscriptions
	// (nodeID > 0) that, when it claims any, also reads in the same
	// transaction the node and up to eventsLimit of its events after the
	// cursor most of the active subscriptions claimed stand at: what their
	// deliveries read next. When those are exactly the events held names
	// (that cursor is held.After and the log ends at held.Last, within
	// eventsLimit), it reads neither and reports Held: the caller has them.
	// A zero held holds nothing.
	ClaimNodeDeliveries(ctx context.Context, now time.Time, nodeID int64, limit int, owner string, until time.Time, eventsLimit int, held hub.EventSpan) (*hub.NodeClaim, error)
	// SaveDeliveryState writes a subscription's delivery bookkeeping and
	// releases its lease; hub.ErrNotFound if it was removed meanwhile. It
	// is the lease holder's write: it changes nothing unless the row's
	// lease is still st.LeaseOwner's ("" for a row nobody leases), and
	// reports hub.ErrLeaseLost when another process holds or released it
	// since. The cursor never moves back: the stored one is kept when it
	// is further.
	SaveDeliveryState(ctx context.Context, id int64, st hub.DeliveryState) error
	// SaveDeliveryStates does what SaveDeliveryState does for several
	// subscriptions at once, in one transaction, skipping those removed
	// meanwhile and those whose lease is no longer their state's
	// LeaseOwner's: all are saved or none. A subscription named twice gets
	// the last of its states.
	SaveDeliveryStates(ctx context.Context, states []hub.SavedDeliveryState) error
	// RenewDeliveryLeases extends to `until` the delivery and change
	// leases that owner holds of the subscriptions ids (one that ran out
	// and nobody else took included), and returns how many: a process
	// renews what it works on, so its leases can be short and a process
	// that died frees its subscriptions soon.
	RenewDeliveryLeases(ctx context.Context, owner string, ids []int64, until time.Time) (int64, error)
	// ReleaseDeliveryLeases frees every delivery and change lease owner
	// holds, whatever their time, and returns how many: a process
	// starting under the name of one that died takes back what that one
	// left leased, instead of waiting for the leases to run out.
	ReleaseDeliveryLeases(ctx context.Context, owner string) (int64, error)

	// ApplySubscriptionChange applies the request changeID, which the
	// subscriber verified, in one transaction: a subscription not verified
	// yet becomes active, expiring at expires; a pending subscribe change
	// replaces the subscription's options and expiry and makes it active;
	// a pending unsubscribe change deletes it. A (re)subscription applied
	// gets a clean failure record and no retry time (a verified renewal is
	// a sign of life); its cursor and the rest of its delivery state stay.
	// Deciding a change releases its lease. It reports false and changes
	// nothing when changeID is not the subscription's latest request (a
	// newer one replaced it), or no longer waits, or the subscription is
	// gone.
	ApplySubscriptionChange(ctx context.Context, id int64, changeID string, expires time.Time) (bool, error)
	// ReleaseSubscriptionChange gives back the lease of the verification of
	// the change changeID, undecided (a verification cut off by shutdown,
	// or put off for a busy host), so that it is claimed again.
	// Only owner's lease is given back: one that ran out and was taken
	// by another process stays that process's.
	ReleaseSubscriptionChange(ctx context.Context, id int64, changeID, owner string) error
	// RefuseSubscriptionChange records that the subscriber did not verify
	// the request changeID: a subscription not verified yet is deleted; a
	// pending change is dropped (Outcome ChangeRefused) and the verified
	// subscription stays exactly as it is. It reports false and changes
	// nothing as ApplySubscriptionChange does.
	RefuseSubscriptionChange(ctx context.Context, id int64, changeID string) (bool, error)
}

// batchStore is what a batch reads: a node and its log.
type batchStore interface {
	NodeByID(ctx context.Context, id int64) (*hub.Node, error)
	EventsAfter(ctx context.Context, nodeID int64, after int64, limit int) ([]hub.Event, error)
}

// stateStore is what the state writer writes.
type stateStore interface {
	SaveDeliveryState(ctx context.Context, id int64, st hub.DeliveryState) error
	SaveDeliveryStates(ctx context.Context, states []hub.SavedDeliveryState) error
}

// SourceReader is what the WebSub sender reads of a topic's source: its
// stored representation (Source, with its Body and content type), for a
// subscriber of a topic that is not a feed; hub.ErrNotFound.
type SourceReader interface {
	Source(ctx context.Context, id int64) (*hub.Source, error)
}
