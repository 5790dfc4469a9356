package hub

import (
	"context"
	"fmt"
	"time"
)

// Digests (XEP-0060 §6.3, pubsub#digest). An XMPP subscription with
// Options.Digest gets no notification per item: every DigestFrequencyMS
// it gets one carrying the items since the last. Unlike the other XMPP
// subscriptions, which share their node's cursor, a digest subscription
// keeps its own, as an HTTP subscription does: its Cursor is the last
// event a digest covered (written once the XMPP server took the digest)
// and NextAttemptAt when the next one is due. Prune keeps the events a
// cursor has not passed, so what a digest is owed survives restarts.
//
// The dispatcher leaves digest subscriptions out; a due digest is sent by
// the same dispatcher, one at a time, so nothing is in between. A
// subscription that stops asking for digests is due at once: the digest
// it is owed goes out, and from then on the dispatcher serves it (what
// both send is sent twice, at most once more, never lost).

const (
	// DefaultDigestFrequency is the digest interval when a subscription
	// asks for digests without one.
	DefaultDigestFrequency = 24 * time.Hour
	// MinDigestFrequency and MaxDigestFrequency bound what a subscriber
	// may ask for: more often than a second is no digest, and a week keeps
	// that much of the node's log.
	MinDigestFrequency = time.Second
	MaxDigestFrequency = 7 * 24 * time.Hour
)

// DigestFrequency is the interval of a subscription's digests.
func (o Options) DigestFrequency() time.Duration {
	if o.DigestFrequencyMS <= 0 {
		return DefaultDigestFrequency
	}
	return time.Duration(o.DigestFrequencyMS) * time.Millisecond
}

// validDigest checks the digest options.
func validDigest(o Options) error {
	if o.DigestFrequencyMS == 0 {
		return nil
	}
	if f := o.DigestFrequency(); f < MinDigestFrequency || f > MaxDigestFrequency {
		return fmt.Errorf("%w: digest frequency %d ms (want %d to %d)", ErrInvalid, o.DigestFrequencyMS,
			MinDigestFrequency.Milliseconds(), MaxDigestFrequency.Milliseconds())
	}
	return nil
}

// setDigest stores a subscription's new options when its digests change,
// with the cursor and due time that go with them.
func (u *SubscriptionUseCases) setDigest(ctx context.Context, sub Subscription, opts Options) error {
	now := u.now()
	cursor, next := sub.Cursor, sub.NextAttemptAt
	switch {
	case opts.Digest && !sub.Options.Digest:
		// From now on the dispatcher leaves it out: the digest covers
		// what the node's cursor has not passed yet.
		if next.IsZero() {
			n, err := u.stores.Nodes.NodeByID(ctx, sub.NodeID)
			if err != nil {
				return err
			}
			cursor = max(cursor, n.XMPPSeq)
		}
		next = now.Add(opts.DigestFrequency())
	case !opts.Digest && sub.Options.Digest:
		next = now // the digest owed goes out at once
	case opts.Digest:
		if due := now.Add(opts.DigestFrequency()); next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return u.stores.Readers.SetDigest(ctx, sub.ID, opts, cursor, next)
}

// DueDigests lists up to limit XMPP subscriptions whose digest is due at
// now (NextAttemptAt passed), the longest due first.
func (u *SubscriptionUseCases) DueDigests(ctx context.Context, limit int) ([]Subscription, error) {
	return u.stores.Readers.DueDigests(ctx, u.now(), limit)
}

// DigestSent records that a digest of the subscription, due at `due`,
// covered its log up to cursor at `sent`: the next is due one interval
// later, or never if it no longer asks for digests, or at once when more
// is owed than one digest carried (more). It reports false when the
// subscription changed meanwhile (its options or due time); the digest is
// then due again as the change says.
func (u *SubscriptionUseCases) DigestSent(ctx context.Context, sub Subscription, due time.Time, cursor int64, sent time.Time, more bool) (bool, error) {
	var next time.Time
	switch {
	case more:
		next = sent
	case sub.Options.Digest:
		next = sent.Add(sub.Options.DigestFrequency())
	}
	return u.stores.Readers.SaveDigest(ctx, sub.ID, due, cursor, next, sent)
}
