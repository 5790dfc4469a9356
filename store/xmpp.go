package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pingd/pingd/hub"
)

// Delivery bookkeeping of XMPP subscriptions. The XMPP side keeps one
// cursor per node (nodes.xmpp_seq); a subscription row's delivery columns,
// which the HTTP kinds use for their own cursor and failures, hold what
// is particular to one XMPP subscriber: the bounces of its notifications
// (consecutive_errors, first_failure_at, last_error).

// RecordBounce counts one bounced notification of an XMPP subscription.
func (s *sqlStore) RecordBounce(ctx context.Context, id int64, reason string, at time.Time) (int, time.Time, error) {
	var count int
	var first time.Time
	err := s.inTx(ctx, func(tx *txn) error {
		return s.queryRow(ctx, tx, `UPDATE subscriptions SET consecutive_errors = consecutive_errors + 1,
			first_failure_at = COALESCE(first_failure_at, $2), last_error = $3
			WHERE id = $1 AND kind = 'xmpp' RETURNING consecutive_errors, first_failure_at`,
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
		if _, err := s.writeCount(ctx, `UPDATE subscriptions SET consecutive_errors = 0, first_failure_at = NULL, last_error = ''
			WHERE kind = 'xmpp' AND consecutive_errors > 0 AND id IN (`+in+`)`, inArgs...); err != nil {
			return fmt.Errorf("clear bounces: %w", err)
		}
	}
	return nil
}

// statusBouncing lists the XMPP subscriptions with bounces (status page).
func (s *sqlStore) statusBouncing(ctx context.Context, tx *sql.Tx, q StatusQuery, rep *StatusReport) error {
	const where = ` WHERE s.kind = 'xmpp' AND s.consecutive_errors > 0`
	if err := s.queryRow(ctx, tx, `SELECT COUNT(*) FROM subscriptions s`+where, nil, &rep.BouncingTotal); err != nil {
		return err
	}
	if rep.BouncingTotal == 0 {
		return nil
	}
	return s.query(ctx, tx, `SELECT s.id, n.name, s.address, s.consecutive_errors, s.first_failure_at, s.last_error
		FROM subscriptions s JOIN nodes n ON n.id = s.node_id`+where+`
		ORDER BY s.first_failure_at, s.id LIMIT $1`, []any{q.Limit}, func(r *sql.Rows) error {
		var b BouncingStatus
		if err := r.Scan(&b.ID, &b.NodeName, &b.Address, &b.Bounces, tc(&b.FirstBounce), &b.LastError); err != nil {
			return err
		}
		rep.Bouncing = append(rep.Bouncing, b)
		return nil
	})
}

// Digests: an XMPP subscription with digests keeps its own cursor
// (cursor_seq) and the time its next digest is due (next_attempt_at);
// subscriptions_digests (migration 0010) finds the due ones.

// SetDigest replaces an XMPP subscription's options with its digest
// cursor and due time.
func (s *sqlStore) SetDigest(ctx context.Context, id int64, opts hub.Options, cursor int64, next time.Time) error {
	options, err := json.Marshal(opts)
	if err != nil {
		return fmt.Errorf("subscription options: %w", err)
	}
	n, err := s.writeCount(ctx, `UPDATE subscriptions SET options = $2, cursor_seq = $3, next_attempt_at = $4, updated_at = $5
		WHERE id = $1 AND kind = 'xmpp'`, id, string(options), cursor, s.timeArg(next), s.timeArg(time.Now()))
	if err != nil {
		return fmt.Errorf("set digest of subscription %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("XMPP subscription %d: %w", id, hub.ErrNotFound)
	}
	return nil
}

// DueDigests lists XMPP subscriptions whose digest is due.
func (s *sqlStore) DueDigests(ctx context.Context, now time.Time, limit int) ([]hub.Subscription, error) {
	out, err := s.subsWhere(ctx, s.read, `WHERE s.kind = 'xmpp' AND s.next_attempt_at IS NOT NULL AND s.next_attempt_at <= $1
		ORDER BY s.next_attempt_at, s.id LIMIT $2`, s.timeArg(now), limit)
	if err != nil {
		return nil, fmt.Errorf("list due digests: %w", err)
	}
	return out, nil
}

// SaveDigest records a sent digest, unless the subscription's due time
// changed meanwhile. Its cursor only moves forward: a baseline kept as
// items meanwhile moved it past them (ApplyFetch).
func (s *sqlStore) SaveDigest(ctx context.Context, id int64, due time.Time, cursor int64, next, sent time.Time) (bool, error) {
	n, err := s.writeCount(ctx, `UPDATE subscriptions SET
		cursor_seq = CASE WHEN cursor_seq > $3 THEN cursor_seq ELSE $3 END, next_attempt_at = $4, last_delivered_at = $5
		WHERE id = $1 AND kind = 'xmpp' AND next_attempt_at = $2`,
		id, s.timeArg(due), cursor, s.timeArg(next), s.timeArg(sent))
	if err != nil {
		return false, fmt.Errorf("save digest of subscription %d: %w", id, err)
	}
	return n > 0, nil
}
