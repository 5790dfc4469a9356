package hub

import (
	"context"
	"fmt"
)

// NotifyChat is the message type a subscriber may choose for its
// notifications besides the node's headline or normal.
const NotifyChat = "chat"

// ValidMessageType reports whether t is a notification message type a
// subscription may ask for ("" keeps the node's).
func ValidMessageType(t string) bool {
	switch t {
	case "", NotifyHeadline, NotifyNormal, NotifyChat:
		return true
	}
	return false
}

// The formats of XMPP notifications (Options.Format). FormatPubsub is the
// XEP-0060 event (with a readable <body> when IncludeBody asks for one),
// for clients that read pubsub; FormatMessage is a plain message every
// client shows: the readable body and an XEP-0066 link, no pubsub#event
// element, which some clients (Profanity, and others that use PEP
// themselves) drop whatever else the message carries.
const (
	FormatPubsub  = "pubsub"
	FormatMessage = "message"
)

// ValidFormat reports whether f is a notification format ("" is pubsub).
func ValidFormat(f string) bool {
	return f == "" || f == FormatPubsub || f == FormatMessage
}

// DiffPatchOps is the diff an XMPP subscription may ask for (Options.Diff;
// "" is none): beside each pubsub event, the RFC 7351 patch of RFC 5261
// operations that turns the node's previous Atom document into the next,
// the document a GetPingd webhook with that diff gets.
const DiffPatchOps = "application/patch-ops+xml"

// ValidXMPPDiff reports whether d is a diff an XMPP subscription may ask
// for ("" is none).
func ValidXMPPDiff(d string) bool { return d == "" || d == DiffPatchOps }

// MessageTypeOf is the message type of an XMPP subscription's
// notifications on node n: the subscription's own, else chat for plain
// messages (stored offline and archived by servers, shown in a
// conversation by every client), else the node's.
func MessageTypeOf(n *Node, o Options) string {
	switch {
	case o.MessageType != "" && ValidMessageType(o.MessageType):
		return o.MessageType
	case o.Format == FormatMessage:
		return NotifyChat
	case n != nil && n.NotificationType == NotifyNormal:
		return NotifyNormal
	}
	return NotifyHeadline
}

// SetSubscriptionOptions replaces the options of an existing subscription
// (XEP-0060 §6.3); its state, cursor and delivery state are kept.
func (u *SubscriptionUseCases) SetSubscriptionOptions(ctx context.Context, sub Subscription, opts Options) (*Subscription, error) {
	if !ValidMessageType(opts.MessageType) {
		return nil, fmt.Errorf("%w: message type %q", ErrInvalid, opts.MessageType)
	}
	if !ValidFormat(opts.Format) {
		return nil, fmt.Errorf("%w: notification format %q", ErrInvalid, opts.Format)
	}
	if !ValidXMPPDiff(opts.Diff) {
		return nil, fmt.Errorf("%w: diff %q", ErrInvalid, opts.Diff)
	}
	if err := validDigest(opts); err != nil {
		return nil, err
	}
	if opts.Digest || sub.Options.Digest {
		if err := u.setDigest(ctx, sub, opts); err != nil {
			return nil, fmt.Errorf("set options of %s's subscription to %q: %w", sub.Address, sub.NodeName, err)
		}
		return u.stores.Subscriptions.Subscription(ctx, sub.ID)
	}
	sub.Options = opts
	if _, err := u.stores.Subscriptions.PutSubscription(ctx, &sub); err != nil {
		return nil, fmt.Errorf("set options of %s's subscription to %q: %w", sub.Address, sub.NodeName, err)
	}
	return &sub, nil
}
