package hub

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Bounced notifications (XEP-0060 §12.3). An XMPP server that cannot
// deliver a notification answers it with an error; the component matches
// the error to its subscription and tells the hub, which ends the
// subscription when the error says the subscriber is gone for good and
// otherwise counts it. A subscription whose notifications bounce
// BounceLimit times or more, over at least BounceWindow since the first
// of them, ends too: a subscriber that is only away for a while (its
// server restarting, offline messages not kept) stays. Anything the
// subscriber does (subscribing again, a chat command) shows it is there
// and clears the count.

const (
	// BounceLimit is how many bounces in a row end a subscription, if
	// they span BounceWindow.
	BounceLimit = 3
	// BounceWindow is how long bounces must have lasted to end one.
	BounceWindow = 24 * time.Hour
)

// BounceOutcome says what a bounce did to its subscription.
type BounceOutcome struct {
	// Sub is the subscription the bounce was for (as it was before).
	Sub Subscription
	// Ended is set when the subscription was removed; Count is the bounces
	// in a row counted so far (with this one).
	Ended bool
	Count int
}

// NotificationBounced takes an error answering a notification of the node
// sent to address: permanent when the error says the address is gone for
// good, with reason (the condition and text) for the record. It reports
// what it did; ErrNotFound when no XMPP subscription of address to the
// node exists (an error to something else, or a subscription ended
// already).
func (u *SubscriptionUseCases) NotificationBounced(ctx context.Context, nodeID int64, address string, permanent bool, reason string) (*BounceOutcome, error) {
	subs, err := u.stores.Subscriptions.Subscriptions(ctx, SubscriptionFilter{NodeID: nodeID, Kind: KindXMPP, Address: address})
	if err != nil {
		return nil, err
	}
	if len(subs) == 0 {
		return nil, fmt.Errorf("%w: no XMPP subscription of %s to node %d", ErrNotFound, address, nodeID)
	}
	out := &BounceOutcome{Sub: subs[0]}
	if !permanent {
		now := u.now()
		count, first, err := u.stores.Readers.RecordBounce(ctx, out.Sub.ID, reason, now)
		if err != nil {
			return nil, err
		}
		out.Count = count
		if count < BounceLimit || now.Sub(first) < BounceWindow {
			return out, nil
		}
	}
	if err := u.stores.Subscriptions.DeleteSubscription(ctx, out.Sub.ID); err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("end the bouncing subscription of %s to %q: %w", address, out.Sub.NodeName, err)
	}
	out.Ended = true
	u.log.InfoContext(ctx, "XMPP subscription ended: its notifications bounce", "node", out.Sub.NodeName,
		"jid", address, "reason", reason, "permanent", permanent, "bounces", max(out.Count, 1))
	return out, nil
}

// SubscriberIsThere clears the bounce counts of a bare JID's XMPP
// subscriptions: it just showed it can be reached (a chat command).
func (u *SubscriptionUseCases) SubscriberIsThere(ctx context.Context, bareJID string) error {
	subs, err := u.stores.Subscriptions.Subscriptions(ctx, SubscriptionFilter{Kind: KindXMPP, BareJID: bareJID})
	if err != nil {
		return err
	}
	return u.clearBounces(ctx, subs)
}

// clearBounces forgets the bounces of the subscriptions that have some.
func (u *SubscriptionUseCases) clearBounces(ctx context.Context, subs []Subscription) error {
	var ids []int64
	for _, s := range subs {
		if s.Kind == KindXMPP && s.ConsecutiveErrors > 0 {
			ids = append(ids, s.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return u.stores.Readers.ClearBounces(ctx, ids)
}
