package hub

import (
	"context"
	"fmt"
)

// EventsAfter returns up to limit events of the node's log with Seq > after,
// oldest first (see Store.EventsAfter). Request handlers use it to tell
// what changed since a version of the node's content they served (RFC 3229
// deltas of the node's own feeds); the log may have been pruned, so callers
// check that the first event follows after.
func (h *Hub) EventsAfter(ctx context.Context, node *Node, after int64, limit int) ([]Event, error) {
	return h.store.EventsAfter(ctx, node.ID, after, limit)
}

// SetSubscriptionState changes the state of an existing subscription,
// keeping its options, expiry and cursor, and wakes the transports of its
// kind (a subscription set to SubUnsubscribing waits for them to verify the
// request). Unlike Subscribe it never creates one: ErrNotFound if the
// subscription was removed meanwhile.
func (h *Hub) SetSubscriptionState(ctx context.Context, sub *Subscription, state SubState) error {
	if err := h.store.SetSubscriptionState(ctx, sub.ID, state, sub.ExpiresAt); err != nil {
		return fmt.Errorf("set %s subscription of %s to %s: %w", sub.Kind, sub.Address, state, err)
	}
	sub.State = state
	h.wake(sub.NodeID, sub.Kind)
	return nil
}
