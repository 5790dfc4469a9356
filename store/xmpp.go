package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pingd/pingd/hub"
)

// An XMPP subscription's own state. The XMPP side keeps one cursor per
// node (nodes.xmpp_seq); what is particular to one XMPP subscriber is in
// xmpp_subscription_state (migration 0021), one row per XMPP
// subscription: the bounces of its notifications and its digests. It is
// read into the subscription's hub.DeliveryState (see subColumns).

// putXMPPState writes the state row of a new XMPP subscription, from the
// fields of its DeliveryState that the state stands for.
func (s *sqlStore) putXMPPState(ctx context.Context, tx *txn, id int64, d hub.DeliveryState) error {
	_, err := s.exec(ctx, tx, `INSERT INTO xmpp_subscription_state (subscription_id, digest_cursor, digest_due_at,
		digest_sent_at, bounces, first_bounce_at, last_bounce) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (subscription_id) DO NOTHING`,
		id, d.Cursor, s.timeArg(d.NextAttemptAt), s.timeArg(d.LastDeliveredAt), d.ConsecutiveErrors,
		s.timeArg(d.FirstFailureAt), d.LastError)
	if err != nil {
		return fmt.Errorf("state of XMPP subscription %d: %w", id, err)
	}
	return nil
}

// RecordBounce counts one bounced notification of an XMPP subscription.
func (s *sqlStore) RecordBounce(ctx context.Context, id int64, reason string, at time.Time) (int, time.Time, error) {
	var count int
	var first time.Time
	err := s.inTx(ctx, func(tx *txn) error {
		// Every XMPP subscription has its row from its start (PutSubscription,
		// migration 0021), and no subscription of another kind has one.
		return s.queryRow(ctx, tx, `UPDATE xmpp_subscription_state SET bounces = bounces + 1,
			first_bounce_at = COALESCE(first_bounce_at, $2), last_bounce = $3
			WHERE subscription_id = $1 RETURNING bounces, first_bounce_at`,
			[]any{id, s.timeArg(at), reason}, &count, tc(&first))
	})
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("record a bounce: %w", notFound(err, fmt.Sprintf("XMPP subscription %d", id)))
	}
	return count, first, nil
}

// ClearBounces forgets the bounces of XMPP subscriptions.
func (s *sqlStore) ClearBounces(ctx context.Context, ids []int64) error {
	for _, chunk := range chunks(ids) {
		in, inArgs := inList(1, chunk)
		if _, err := s.writeCount(ctx, `UPDATE xmpp_subscription_state SET bounces = 0, first_bounce_at = NULL, last_bounce = ''
			WHERE bounces > 0 AND subscription_id IN (`+in+`)`, inArgs...); err != nil {
			return fmt.Errorf("clear bounces: %w", err)
		}
	}
	return nil
}

// statusBouncing lists the XMPP subscriptions with bounces (status page).
func (s *sqlStore) statusBouncing(ctx context.Context, tx *sql.Tx, q StatusQuery, rep *StatusReport) error {
	const where = ` WHERE x.bounces > 0`
	if err := s.queryRow(ctx, tx, `SELECT COUNT(*) FROM xmpp_subscription_state x`+where, nil, &rep.BouncingTotal); err != nil {
		return err
	}
	if rep.BouncingTotal == 0 {
		return nil
	}
	return s.query(ctx, tx, `SELECT s.id, n.name, s.address, x.bounces, x.first_bounce_at, x.last_bounce
		FROM xmpp_subscription_state x JOIN subscriptions s ON s.id = x.subscription_id
		JOIN nodes n ON n.id = s.node_id`+where+`
		ORDER BY x.first_bounce_at, s.id LIMIT $1`, []any{q.Limit}, func(r *sql.Rows) error {
		var b BouncingStatus
		if err := r.Scan(&b.ID, &b.NodeName, &b.Address, &b.Bounces, tc(&b.FirstBounce), &b.LastError); err != nil {
			return err
		}
		rep.Bouncing = append(rep.Bouncing, b)
		return nil
	})
}

// Digests: an XMPP subscription with digests keeps its own cursor
// (digest_cursor) and the time its next digest is due (digest_due_at);
// xmpp_subscription_state_digests finds the due ones.

// SetDigest replaces an XMPP subscription's options with its digest
// cursor and due time.
func (s *sqlStore) SetDigest(ctx context.Context, id int64, opts hub.Options, cursor int64, next time.Time) error {
	options, err := json.Marshal(opts)
	if err != nil {
		return fmt.Errorf("subscription options: %w", err)
	}
	err = s.inTx(ctx, func(tx *txn) error {
		n, err := s.execCount(ctx, tx, `UPDATE subscriptions SET options = $2, updated_at = $3
			WHERE id = $1 AND kind = 'xmpp'`, id, string(options), s.timeArg(time.Now()))
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("XMPP subscription %d: %w", id, hub.ErrNotFound)
		}
		_, err = s.exec(ctx, tx, `INSERT INTO xmpp_subscription_state (subscription_id, digest_cursor, digest_due_at)
			VALUES ($1, $2, $3)
			ON CONFLICT (subscription_id) DO UPDATE SET digest_cursor = excluded.digest_cursor,
				digest_due_at = excluded.digest_due_at`, id, cursor, s.timeArg(next))
		return err
	})
	if err != nil {
		return fmt.Errorf("set digest of subscription %d: %w", id, err)
	}
	return nil
}

// dueDigestsWhere finds the due digests ($1 now, $2 the limit) through
// xmpp_subscription_state_digests.
const dueDigestsWhere = `WHERE x.digest_due_at IS NOT NULL AND x.digest_due_at <= $1
	ORDER BY x.digest_due_at, s.id LIMIT $2`

// DueDigests lists XMPP subscriptions whose digest is due.
func (s *sqlStore) DueDigests(ctx context.Context, now time.Time, limit int) ([]hub.Subscription, error) {
	out, err := s.subsWhere(ctx, s.read, dueDigestsWhere, s.timeArg(now), limit)
	if err != nil {
		return nil, fmt.Errorf("list due digests: %w", err)
	}
	return out, nil
}

// SaveDigest records a sent digest, unless the subscription's due time
// changed meanwhile. Its cursor only moves forward: a baseline kept as
// items meanwhile moved it past them (ApplyFetch).
func (s *sqlStore) SaveDigest(ctx context.Context, id int64, due time.Time, cursor int64, next, sent time.Time) (bool, error) {
	n, err := s.writeCount(ctx, `UPDATE xmpp_subscription_state SET
		digest_cursor = CASE WHEN digest_cursor > $3 THEN digest_cursor ELSE $3 END, digest_due_at = $4, digest_sent_at = $5
		WHERE subscription_id = $1 AND digest_due_at = $2`,
		id, s.timeArg(due), cursor, s.timeArg(next), s.timeArg(sent))
	if err != nil {
		return false, fmt.Errorf("save digest of subscription %d: %w", id, err)
	}
	return n > 0, nil
}
