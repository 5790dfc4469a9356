package hub

import (
	"context"
	"fmt"
)

// SetSubscriptionState changes the state of an existing subscription,
// keeping its options, expiry and cursor, and wakes the transports of its
// kind (a subscription set to SubUnsubscribing waits for them to verify the
// request). Unlike Subscribe it never creates one: ErrNotFound if the
// subscription was removed meanwhile.
func (u *SubscriptionUseCases) SetSubscriptionState(ctx context.Context, sub *Subscription, state SubState) error {
	if err := u.stores.Subscriptions.SetSubscriptionState(ctx, sub.ID, state, sub.ExpiresAt); err != nil {
		return fmt.Errorf("set %s subscription of %s to %s: %w", sub.Kind, sub.Address, state, err)
	}
	sub.State = state
	u.wake(sub.NodeID, sub.Kind)
	return nil
}
