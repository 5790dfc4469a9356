package hub

import (
	"context"
	"fmt"
	"time"
)

// Subscribe adds or renews a subscription. For an existing subscription
// of the same node, kind and address, it is returned unchanged if it is an
// active XMPP subscription (subscribing twice gives the same subscription)
// or one of an HTTP kind without verification, CNWS (see below), and
// otherwise updated in place, keeping its cursor. Kinds whose subscribers
// verify their requests go through RequestSubscription instead. XMPP
// subscriptions to a whitelist node need an affiliation that allows
// reading (ErrNotMember).
// A new subscription starts at the node's newest event: it gets what comes
// after, not what came before. A subscription to a node whose source has
// no baseline yet returns once the baseline fetch is over.
func (u *SubscriptionUseCases) Subscribe(ctx context.Context, s Subscription) (*Subscription, bool, error) {
	if !s.Kind.Valid() {
		return nil, false, fmt.Errorf("%w: subscription kind %q", ErrInvalid, s.Kind)
	}
	if s.Address == "" {
		return nil, false, fmt.Errorf("%w: empty subscriber address", ErrInvalid)
	}
	n, err := u.stores.Nodes.Node(ctx, s.NodeName)
	if err != nil {
		return nil, false, err
	}
	if s.Kind == KindXMPP {
		if s.BareJID == "" {
			return nil, false, fmt.Errorf("%w: XMPP subscription without a bare JID", ErrInvalid)
		}
		if !ValidFormat(s.Options.Format) || !ValidMessageType(s.Options.MessageType) || !ValidXMPPDiff(s.Options.Diff) {
			return nil, false, fmt.Errorf("%w: notification format %q, message type %q, diff %q", ErrInvalid,
				s.Options.Format, s.Options.MessageType, s.Options.Diff)
		}
		if err := validDigest(s.Options); err != nil {
			return nil, false, err
		}
		if err := u.access.MaySubscribe(ctx, n, s.BareJID); err != nil {
			return nil, false, err
		}
		existing, err := u.stores.Subscriptions.Subscriptions(ctx, SubscriptionFilter{NodeID: n.ID, Kind: KindXMPP, Address: s.Address})
		if err != nil {
			return nil, false, err
		}
		if len(existing) > 0 && existing[0].State == SubActive {
			// Subscribing again shows the subscriber is there.
			if err := u.clearBounces(ctx, existing[:1]); err != nil {
				return nil, false, err
			}
			existing[0].ConsecutiveErrors, existing[0].FirstFailureAt, existing[0].LastError = 0, time.Time{}, ""
			return &existing[0], true, nil
		}
		if s.SubID == "" {
			s.SubID = RandomID()
		}
	}
	if s.Kind.HTTP() && !s.Kind.Verified() {
		// A callback kind without verification of intent (CNWS): anyone
		// may send a <subscribe> naming any callback, so a repeated one
		// proves nothing. "If the subscriber is already on the list … the
		// status should be true", and nothing else: its delivery record
		// stays.
		existing, err := u.stores.Subscriptions.Subscriptions(ctx, SubscriptionFilter{NodeID: n.ID, Kind: s.Kind, Address: s.Address})
		if err != nil {
			return nil, false, err
		}
		if len(existing) > 0 {
			return &existing[0], true, nil
		}
	}
	if err := u.mayAddCallback(ctx, n, s.Kind, s.Address); err != nil {
		return nil, false, err
	}
	if s.State == "" {
		s.State = SubActive
	}
	s.NodeID = n.ID
	s.NodeName = n.Name
	s.Cursor = n.LastSeq
	if s.Kind == KindXMPP && s.Options.Digest {
		s.NextAttemptAt = u.now().Add(s.Options.DigestFrequency())
	}
	created, err := u.putSubscription(ctx, n, &s)
	if err != nil {
		return nil, false, err
	}
	if n.SourceID != 0 {
		if err := u.ensureBaseline(ctx, n.SourceID); err != nil {
			return nil, false, err
		}
	}
	if s.Kind != KindXMPP {
		u.wake(n.ID, s.Kind)
	}
	return &s, !created, nil
}

// putSubscription stores a new or renewed subscription. A new XMPP one is
// first checked against the account's bounds (mayAddXMPPSubscription),
// under the account's lock until it is stored; one that exists (in any
// state) is never refused.
func (u *SubscriptionUseCases) putSubscription(ctx context.Context, n *Node, s *Subscription) (bool, error) {
	if s.Kind == KindXMPP {
		defer u.lockAccount(s.BareJID)()
		existing, err := u.stores.Subscriptions.Subscriptions(ctx, SubscriptionFilter{NodeID: n.ID, Kind: KindXMPP, Address: s.Address})
		if err != nil {
			return false, err
		}
		if len(existing) == 0 {
			if err := u.mayAddXMPPSubscription(ctx, n, s.BareJID); err != nil {
				return false, err
			}
		}
	}
	created, err := u.stores.Subscriptions.PutSubscription(ctx, s)
	if err != nil {
		return false, fmt.Errorf("subscribe %s to %q: %w", s.Kind, n.Name, err)
	}
	return created, nil
}

// Unsubscribe removes the subscriptions of the node matching kind and
// address; ErrNotFound if there were none.
func (u *SubscriptionUseCases) Unsubscribe(ctx context.Context, nodeName string, kind Kind, address string) ([]Subscription, error) {
	n, err := u.stores.Nodes.Node(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	removed, err := u.stores.Subscriptions.DeleteSubscriptions(ctx, SubscriptionFilter{NodeID: n.ID, Kind: kind, Address: address})
	if err != nil {
		return nil, err
	}
	if len(removed) == 0 {
		return nil, fmt.Errorf("%w: no %s subscription of %s to %q", ErrNotFound, kind, address, nodeName)
	}
	return removed, nil
}

// Subscriptions lists subscriptions matching f.
func (u *SubscriptionUseCases) Subscriptions(ctx context.Context, f SubscriptionFilter) ([]Subscription, error) {
	return u.stores.Subscriptions.Subscriptions(ctx, f)
}

// GrantSubscription subscribes an XMPP JID on an owner's word (XEP-0060
// §8.8.2), with Subscribe's rules. A new subscription also appends a
// subscribed event that tells the JID (§8.8.4): like a revoke it is one
// event in the node's log, written to that one address, so subscribing
// costs no more than the subscription itself. An existing subscription is
// returned as it is, and nobody is told of a change that did not happen.
func (u *SubscriptionUseCases) GrantSubscription(ctx context.Context, s Subscription) (*Subscription, bool, error) {
	if s.Kind != KindXMPP {
		return nil, false, fmt.Errorf("%w: owners grant XMPP subscriptions only, not %q", ErrInvalid, s.Kind)
	}
	sub, existed, err := u.Subscribe(ctx, s)
	if err != nil || existed {
		return sub, existed, err
	}
	events := []Event{{Kind: EventSubscribed, Address: sub.Address}}
	last, err := u.lastPublishedFor(ctx, sub)
	if err != nil {
		return nil, false, err
	}
	if last != nil {
		events = append(events, *last) // approval by an owner sends it too (§12.5)
	}
	if _, err := u.stores.Log.Append(ctx, sub.NodeID, events); err != nil {
		return nil, false, fmt.Errorf("tell %s of its subscription to %q: %w", sub.Address, sub.NodeName, err)
	}
	u.wake(sub.NodeID, KindXMPP)
	return sub, false, nil
}

// SendLastPublished sends the node's newest item to a new XMPP
// subscription alone, when the node's configuration says so (XEP-0060
// §12.5, on_sub): one event in the node's log, written to that address,
// so it is delivered like every notification (acknowledged, sent again
// after a lost connection). It reports whether there was an item to send.
// A subscription that existed already is not sent it again: the caller
// calls this for new ones only.
func (u *SubscriptionUseCases) SendLastPublished(ctx context.Context, sub *Subscription) (bool, error) {
	last, err := u.lastPublishedFor(ctx, sub)
	if err != nil || last == nil {
		return false, err
	}
	if _, err := u.stores.Log.Append(ctx, sub.NodeID, []Event{*last}); err != nil {
		return false, fmt.Errorf("send the newest item of %q to %s: %w", sub.NodeName, sub.Address, err)
	}
	u.wake(sub.NodeID, KindXMPP)
	return true, nil
}

// lastPublishedFor is the EventLast that sends the node's newest item to
// the XMPP subscription, nil when there is none to send.
func (u *SubscriptionUseCases) lastPublishedFor(ctx context.Context, sub *Subscription) (*Event, error) {
	if sub.Kind != KindXMPP {
		return nil, nil
	}
	n, err := u.stores.Nodes.NodeByID(ctx, sub.NodeID)
	if err != nil {
		return nil, err
	}
	if n.SendLastPublished == SendLastNever {
		return nil, nil
	}
	items, err := u.stores.Log.Items(ctx, n.ID, nil, 1)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	it := items[0]
	// Its Updated is the time the copy is stamped with: the entry's, else
	// when the item was published.
	updated := it.Updated
	if updated.IsZero() {
		updated = it.Created
	}
	return &Event{Kind: EventLast, Address: sub.Address, ItemID: it.ItemID, Payload: it.Payload,
		Title: it.Title, Summary: it.Summary, Link: it.Link, Updated: updated, Publisher: it.Publisher}, nil
}
