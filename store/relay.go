package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
)

// The ping relay queue (hub.RelayStore).

var _ hub.RelayStore = (*sqlStore)(nil)

const relayColumns = `id, target, name, url, feed_url, tags, state, attempts, next_attempt_at, last_error, created_at, sent_at, lease_owner`

func scanRelay(r interface{ Scan(...any) error }) (hub.Relay, error) {
	var x hub.Relay
	var tags string
	err := r.Scan(&x.ID, &x.Target, &x.Name, &x.URL, &x.FeedURL, &tags, &x.State, &x.Attempts,
		tc(&x.NextAttemptAt), &x.LastError, tc(&x.CreatedAt), tc(&x.SentAt), &x.LeaseOwner)
	if tags != "" {
		x.Tags = strings.Split(tags, "|")
	}
	return x, err
}

// EnqueueRelay adds r unless the same URL went to the same target within
// dedupe.
func (s *sqlStore) EnqueueRelay(ctx context.Context, r *hub.Relay, dedupe time.Duration) (bool, error) {
	now := dbTimeOf(time.Now())
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	if r.NextAttemptAt.IsZero() {
		r.NextAttemptAt = r.CreatedAt
	}
	r.State = hub.RelayPending
	added := false
	err := s.inTx(ctx, func(tx *txn) error {
		var n int
		if err := s.queryRow(ctx, tx, `SELECT COUNT(*) FROM relays WHERE target = $1 AND url = $2 AND created_at > $3`,
			[]any{r.Target, r.URL, s.timeArg(r.CreatedAt.Add(-dedupe))}, &n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		added = true
		return s.queryRow(ctx, tx, `INSERT INTO relays (target, name, url, feed_url, tags, state, next_attempt_at, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
			[]any{r.Target, r.Name, r.URL, r.FeedURL, strings.Join(r.Tags, "|"), r.State,
				s.timeArg(r.NextAttemptAt), s.timeArg(r.CreatedAt)}, &r.ID)
	})
	if err != nil {
		return false, fmt.Errorf("queue a relay of %s to %s: %w", r.URL, r.Target, err)
	}
	return added, nil
}

// ClaimRelays leases due pending relays, oldest first; several processes
// on PostgreSQL skip each other's rows.
func (s *sqlStore) ClaimRelays(ctx context.Context, now time.Time, limit int, owner string, until time.Time) ([]hub.Relay, error) {
	lock := ""
	if s.backend == backendPostgres {
		lock = ` FOR UPDATE SKIP LOCKED`
	}
	var out []hub.Relay
	err := s.inTx(ctx, func(tx *txn) error {
		out = out[:0]
		ids, err := s.queryInts(ctx, tx, `SELECT id FROM relays WHERE state = 'pending' AND next_attempt_at <= $1
			AND (lease_until IS NULL OR lease_until < $1) ORDER BY next_attempt_at, id LIMIT $2`+lock,
			s.timeArg(now), limit)
		if err != nil || len(ids) == 0 {
			return err
		}
		in, inArgs := inList(3, ids)
		if _, err := s.exec(ctx, tx, `UPDATE relays SET lease_owner = $1, lease_until = $2 WHERE id IN (`+in+`)`,
			append([]any{owner, s.timeArg(until)}, inArgs...)...); err != nil {
			return err
		}
		in, inArgs = inList(1, ids)
		return s.query(ctx, tx, `SELECT `+relayColumns+` FROM relays WHERE id IN (`+in+`) ORDER BY next_attempt_at, id`, inArgs,
			func(r *sql.Rows) error {
				x, err := scanRelay(r)
				if err != nil {
					return err
				}
				out = append(out, x)
				return nil
			})
	})
	if err != nil {
		return nil, fmt.Errorf("claim relays: %w", err)
	}
	return out, nil
}

// FinishRelay records an attempt and releases the lease, if it is still
// r.LeaseOwner's: a relay whose lease ran out and was claimed by another
// process is that one's to record.
func (s *sqlStore) FinishRelay(ctx context.Context, r *hub.Relay) error {
	_, err := s.writeCount(ctx, `UPDATE relays SET state = $2, attempts = $3, next_attempt_at = $4, last_error = $5,
		sent_at = $6, lease_owner = '', lease_until = NULL WHERE id = $1 AND lease_owner = $7`,
		r.ID, r.State, r.Attempts, s.timeArg(r.NextAttemptAt), r.LastError, s.timeArg(r.SentAt), r.LeaseOwner)
	if err != nil {
		return fmt.Errorf("record relay %d: %w", r.ID, err)
	}
	return nil
}

// RelayStatus sums up each target's relays.
func (s *sqlStore) RelayStatus(ctx context.Context) ([]hub.RelayTargetStatus, error) {
	byTarget := map[string]*hub.RelayTargetStatus{}
	var order []string
	err := s.query(ctx, s.read, `SELECT target, state, COUNT(*), MAX(sent_at) FROM relays GROUP BY target, state ORDER BY target`, nil,
		func(r *sql.Rows) error {
			var target, state string
			var n int
			var last time.Time
			if err := r.Scan(&target, &state, &n, tc(&last)); err != nil {
				return err
			}
			st := byTarget[target]
			if st == nil {
				st = &hub.RelayTargetStatus{Target: target}
				byTarget[target] = st
				order = append(order, target)
			}
			switch state {
			case hub.RelayPending:
				st.Pending += n
			case hub.RelaySent:
				st.Sent += n
				if last.After(st.LastSentAt) {
					st.LastSentAt = last
				}
			case hub.RelayFailed:
				st.Failed += n
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("relay status: %w", err)
	}
	out := make([]hub.RelayTargetStatus, 0, len(order))
	for _, t := range order {
		st := byTarget[t]
		var at time.Time
		var msg string
		err := s.queryRow(ctx, s.read, `SELECT last_error, next_attempt_at FROM relays WHERE target = $1 AND last_error <> ''
			ORDER BY next_attempt_at DESC LIMIT 1`, []any{t}, &msg, tc(&at))
		if err == nil {
			st.LastError, st.LastErrorAt = msg, at
		} else if err != sql.ErrNoRows {
			return nil, fmt.Errorf("relay status: %w", err)
		}
		out = append(out, *st)
	}
	return out, nil
}

// PruneRelays removes finished relays created before before.
func (s *sqlStore) PruneRelays(ctx context.Context, before time.Time) error {
	_, err := s.writeCount(ctx, `DELETE FROM relays WHERE state <> 'pending' AND created_at < $1`, s.timeArg(before))
	if err != nil {
		return fmt.Errorf("prune relays: %w", err)
	}
	return nil
}
