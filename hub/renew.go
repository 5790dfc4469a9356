package hub

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ClearDeliveryBackoff clears the failure record and retry backoff of the
// node's subscription of this kind and address, if there is one, so that
// what it does next (a verification after Subscribe, a delivery) happens
// at once. Handlers call it before storing a renewal (rssCloud
// pleaseNotify, a repeated CNWS subscribe, a WebSub re-subscribe): a
// renewal is a sign of life, and a registration answered synchronously
// must not wait out an old backoff. It must come before the renewal is
// stored: once a subscription is pending the delivery side may claim it,
// and this write would release that claim. A subscription being served
// right now (a live lease) is left to that delivery.
func (h *Hub) ClearDeliveryBackoff(ctx context.Context, node *Node, kind Kind, address string) error {
	subs, err := h.store.Subscriptions(ctx, SubscriptionFilter{NodeID: node.ID, Kind: kind, Address: address})
	if err != nil {
		return fmt.Errorf("find %s subscription of %s: %w", kind, address, err)
	}
	for _, sub := range subs {
		if sub.LeaseUntil.After(h.now()) {
			continue
		}
		if sub.ConsecutiveErrors == 0 && sub.FirstFailureAt.IsZero() && sub.NextAttemptAt.IsZero() && sub.LastError == "" {
			continue
		}
		ds := sub.DeliveryState
		ds.ConsecutiveErrors, ds.FirstFailureAt, ds.NextAttemptAt, ds.LastError = 0, time.Time{}, time.Time{}, ""
		ds.LeaseOwner, ds.LeaseUntil = "", time.Time{}
		if err := h.store.SaveDeliveryState(ctx, sub.ID, ds); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("reset delivery state of %s subscription %d: %w", kind, sub.ID, err)
		}
	}
	return nil
}

// Serves reports whether a transport is registered for the kind: a
// subscription of a kind nobody delivers would be accepted and never
// served.
func (h *Hub) Serves(kind Kind) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.transports[kind]) > 0
}
