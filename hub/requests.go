package hub

import (
	"context"
	"fmt"
)

// RequestSubscription stores the subscribe request of a subscriber that
// verifies its requests (a GetPingd webhook, WebSub, rssCloud) and wakes
// the delivery side to verify it. Anyone can name any callback, so a
// request about a subscription that was verified changes nothing yet: it
// becomes that subscription's pending change (replacing an earlier one),
// and the subscription, its settings, lease, cursor and delivery record go
// on as they are until the callback verifies the change; a refused change
// leaves them exactly so. A new subscription, or one not verified yet, is
// pending until verified (see Store.RequestSubscription). Like Subscribe,
// it returns once a source without a baseline has been fetched.
func (u *SubscriptionUseCases) RequestSubscription(ctx context.Context, s Subscription) (*Subscription, RequestOutcome, error) {
	if !s.Kind.Verified() {
		return nil, "", fmt.Errorf("%w: %q subscriptions are not verified requests", ErrInvalid, s.Kind)
	}
	if s.Address == "" {
		return nil, "", fmt.Errorf("%w: empty subscriber address", ErrInvalid)
	}
	n, err := u.stores.Nodes.Node(ctx, s.NodeName)
	if err != nil {
		return nil, "", err
	}
	if err := u.mayAddCallback(ctx, n, s.Kind, s.Address); err != nil {
		return nil, "", err
	}
	s.NodeID, s.NodeName = n.ID, n.Name
	s.State = SubPending
	s.Cursor = n.LastSeq // a new subscription gets what comes after, not what came before
	outcome, err := u.stores.Subscriptions.RequestSubscription(ctx, &s)
	if err != nil {
		return nil, "", fmt.Errorf("subscribe %s to %q: %w", s.Kind, n.Name, err)
	}
	if n.SourceID != 0 {
		if err := u.ensureBaseline(ctx, n.SourceID); err != nil {
			return nil, "", err
		}
	}
	u.wake(n.ID, s.Kind)
	return &s, outcome, nil
}

// RequestUnsubscription stores an unsubscribe request about the node's
// subscription of kind and address: one not verified yet is removed at once
// (RequestCancelled); a verified one keeps being served until its callback
// verifies the unsubscription (RequestChangePending). ErrNotFound when
// there is none.
func (u *SubscriptionUseCases) RequestUnsubscription(ctx context.Context, nodeName string, kind Kind, address string) (*Subscription, RequestOutcome, error) {
	n, err := u.stores.Nodes.Node(ctx, nodeName)
	if err != nil {
		return nil, "", err
	}
	sub, outcome, err := u.stores.Subscriptions.RequestUnsubscription(ctx, n.ID, kind, address)
	if err != nil {
		return nil, "", err
	}
	if outcome == RequestChangePending {
		u.wake(n.ID, kind)
	}
	return sub, outcome, nil
}

// Serves reports whether a transport is registered for the kind: a
// subscription of a kind nobody delivers would be accepted and never
// served.
func (u *SubscriptionUseCases) Serves(kind Kind) bool { return u.serves(kind) }
