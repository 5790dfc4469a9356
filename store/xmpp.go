package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
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

// BouncingStatus is one XMPP subscription whose notifications bounce.
type BouncingStatus struct {
	ID       int64
	NodeName string
	// Address is the subscribed JID.
	Address string
	// Bounces counts them in a row, since FirstBounce; LastError is the
	// last one's condition and text.
	Bounces     int
	FirstBounce time.Time
	LastError   string
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
