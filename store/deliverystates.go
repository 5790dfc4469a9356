package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
)

// saveDeliveryStateSQL writes one subscription's delivery bookkeeping and
// releases its lease, if the lease is still $10's: a process whose lease
// ran out and was taken by another changes nothing (fenced by the owner).
// The cursor never moves back: a node's baseline entries are kept as items
// past the cursors (ApplyFetch), and a verification or delivery claimed
// before must not take the cursor back before them. Written for
// PostgreSQL (GREATEST); SQLite runs it with its two-argument MAX
// (sqliteGreatest).
const saveDeliveryStateSQL = `UPDATE subscriptions SET cursor_seq = GREATEST(cursor_seq, $2), attempts = $3,
		consecutive_errors = $4, first_failure_at = $5, next_attempt_at = $6, last_error = $7,
		last_delivered_at = $8, last_status = $9, lease_owner = '', lease_until = NULL
		WHERE id = $1 AND lease_owner = $10`

// saveCleanDeliverySQL is saveDeliveryStateSQL for the common case, a
// success after a success: it sets only what changes, so SQLite leaves
// the index on next_attempt_at alone (it updates an index whenever a
// column of it is set, even to the same value). The WHERE clause makes it
// change nothing when the row still records a failure; the full UPDATE
// then clears it. SQLite only.
const saveCleanDeliverySQL = `UPDATE subscriptions SET cursor_seq = MAX(cursor_seq, $2), attempts = $3,
		last_delivered_at = $4, last_status = $5, lease_owner = '', lease_until = NULL
		WHERE id = $1 AND lease_owner = $6 AND consecutive_errors = 0 AND first_failure_at IS NULL
		AND next_attempt_at IS NULL AND last_error = ''`

// sqliteGreatest is a statement written with PostgreSQL's GREATEST in
// SQLite's words: its scalar MAX of several arguments is the same.
func sqliteGreatest(query string) string { return strings.ReplaceAll(query, "GREATEST(", "MAX(") }

// saveDeliveryStateSQLite is saveDeliveryStateSQL for SQLite.
var saveDeliveryStateSQLite = sqliteGreatest(saveDeliveryStateSQL)

// saveDeliveryStateQuery is saveDeliveryStateSQL for the store's backend.
func (s *sqlStore) saveDeliveryStateQuery() string {
	if s.backend == backendSQLite {
		return saveDeliveryStateSQLite
	}
	return saveDeliveryStateSQL
}

// saveDeliveryStateSQLite saves one state within tx, with the short
// statement when the state records no failure.
func (s *sqlStore) saveDeliveryStateSQLite(ctx context.Context, tx *txn, st hub.SavedDeliveryState) error {
	ds := st.State
	if ds.ConsecutiveErrors == 0 && ds.FirstFailureAt.IsZero() && ds.NextAttemptAt.IsZero() && ds.LastError == "" {
		res, err := s.execShort(ctx, tx, saveCleanDeliverySQL, st.ID, ds.Cursor, ds.Attempts,
			s.timeArg(ds.LastDeliveredAt), ds.LastStatus, ds.LeaseOwner)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		// The row records a failure, or is gone, or leased by another:
		// the full statement.
	}
	_, err := s.execShort(ctx, tx, saveDeliveryStateSQLite, s.saveDeliveryStateArgs(st.ID, st.State)...)
	return err
}

func (s *sqlStore) saveDeliveryStateArgs(id int64, st hub.DeliveryState) []any {
	return []any{id, st.Cursor, st.Attempts, st.ConsecutiveErrors, s.timeArg(st.FirstFailureAt),
		s.timeArg(st.NextAttemptAt), st.LastError, s.timeArg(st.LastDeliveredAt), st.LastStatus, st.LeaseOwner}
}

// SaveDeliveryState writes a subscription's delivery bookkeeping and
// releases its lease, if it is still st.LeaseOwner's.
func (s *sqlStore) SaveDeliveryState(ctx context.Context, id int64, st hub.DeliveryState) error {
	n, err := s.writeCount(ctx, s.saveDeliveryStateQuery(), s.saveDeliveryStateArgs(id, st)...)
	if err != nil {
		return fmt.Errorf("save delivery state of subscription %d: %w", id, err)
	}
	if n > 0 {
		return nil
	}
	// Removed, or leased by another: which one is worth a read, rarely.
	var owner string
	err = s.queryRow(ctx, s.read, `SELECT lease_owner FROM subscriptions WHERE id = $1`, []any{id}, &owner)
	if err == nil {
		return fmt.Errorf("subscription %d: lease of %q, not %q: %w", id, owner, st.LeaseOwner, hub.ErrLeaseLost)
	}
	return notFound(err, fmt.Sprintf("subscription %d", id))
}

// RenewDeliveryLeases extends to until the delivery and change leases of
// the subscriptions ids that owner holds. By id: leases are not indexed,
// and a renewal comes every few seconds. A lease that ran out is renewed
// too while nobody else took it: it is still owner's work.
func (s *sqlStore) RenewDeliveryLeases(ctx context.Context, owner string, ids []int64, until time.Time) (int64, error) {
	if owner == "" || len(ids) == 0 {
		return 0, nil
	}
	var total int64
	err := s.inTx(ctx, func(tx *txn) error {
		total = 0
		for _, chunk := range chunks(ids) {
			in, inArgs := inList(3, chunk)
			for _, q := range []string{
				`UPDATE subscriptions SET lease_until = $2 WHERE lease_owner = $1 AND id IN (` + in + `)`,
				`UPDATE subscriptions SET change_lease_until = $2 WHERE change_lease_owner = $1 AND id IN (` + in + `)`,
			} {
				n, err := s.execCount(ctx, tx, q, append([]any{owner, s.timeArg(until)}, inArgs...)...)
				if err != nil {
					return err
				}
				total += n
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("renew the delivery leases of %q: %w", owner, err)
	}
	return total, nil
}

// ReleaseDeliveryLeases frees every delivery and change lease of owner.
func (s *sqlStore) ReleaseDeliveryLeases(ctx context.Context, owner string) (int64, error) {
	if owner == "" {
		return 0, nil
	}
	var total int64
	err := s.inTx(ctx, func(tx *txn) error {
		total = 0
		for _, q := range []string{
			`UPDATE subscriptions SET lease_owner = '', lease_until = NULL WHERE lease_owner = $1`,
			`UPDATE subscriptions SET ` + freeChangeLeaseSQL + ` WHERE change_lease_owner = $1`,
		} {
			n, err := s.execCount(ctx, tx, q, owner)
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("release the delivery leases of %q: %w", owner, err)
	}
	return total, nil
}

// SaveDeliveryStates writes the delivery bookkeeping of several
// subscriptions in one transaction and releases their leases; those
// removed meanwhile, or whose lease is no longer their state's
// LeaseOwner's, are skipped. One transaction instead of one per
// delivery is what lets webhook fan-out go faster than SQLite commits.
func (s *sqlStore) SaveDeliveryStates(ctx context.Context, states []hub.SavedDeliveryState) error {
	if len(states) == 0 {
		return nil
	}
	states = lastStatePerID(states)
	err := s.inTx(ctx, func(tx *txn) error {
		if s.backend == backendSQLite {
			// In-process, a prepared statement run once per row is faster
			// than one UPDATE … FROM, which SQLite materialises first
			// (about 10 against 16 µs a row at 64 rows; docs/benchmarks.md).
			for _, st := range states {
				if err := s.saveDeliveryStateSQLite(ctx, tx, st); err != nil {
					return fmt.Errorf("subscription %d: %w", st.ID, err)
				}
			}
			return nil
		}
		// PostgreSQL pays a round trip per statement: one statement
		// writes many rows (BenchmarkSaveDeliveryStates). The transaction
		// may be run again (a deadlock), so states itself is not consumed.
		for rest := states; len(rest) > 0; {
			n := min(len(rest), maxStatesPerUpdate)
			query, args := s.saveDeliveryStatesSQL(rest[:n])
			if _, err := s.exec(ctx, tx, query, args...); err != nil {
				return err
			}
			rest = rest[n:]
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save delivery states of %d subscriptions: %w", len(states), err)
	}
	return nil
}

// lastStatePerID drops all but the last state of a subscription named
// more than once: one UPDATE … FROM would apply any one of them.
func lastStatePerID(states []hub.SavedDeliveryState) []hub.SavedDeliveryState {
	last := make(map[int64]int, len(states))
	for i, st := range states {
		last[st.ID] = i
	}
	if len(last) == len(states) {
		return states
	}
	out := make([]hub.SavedDeliveryState, 0, len(last))
	for i, st := range states {
		if last[st.ID] == i {
			out = append(out, st)
		}
	}
	return out
}

// maxStatesPerUpdate bounds the rows of one statement of
// SaveDeliveryStates (10 arguments each).
const maxStatesPerUpdate = 128

// saveDeliveryStateTypes are the PostgreSQL types of the columns of
// saveDeliveryStateArgs: a VALUES list of parameters has no types of its
// own there.
var saveDeliveryStateTypes = []string{"bigint", "bigint", "integer", "integer", "timestamptz", "timestamptz", "text", "timestamptz", "integer", "text"}

// saveDeliveryStatesSQL is one UPDATE writing the states of several
// subscriptions from a VALUES list (PostgreSQL; SQLite ≥ 3.33 takes it
// too). The rows are padded to a power of two with copies
// of the last, which write the same values again, so that few distinct
// statements are prepared.
func (s *sqlStore) saveDeliveryStatesSQL(states []hub.SavedDeliveryState) (string, []any) {
	rows := make([][]any, len(states))
	for i, st := range states {
		rows[i] = s.saveDeliveryStateArgs(st.ID, st.State)
	}
	var b strings.Builder
	b.WriteString(`UPDATE subscriptions SET cursor_seq = GREATEST(subscriptions.cursor_seq, v.column2), attempts = v.column3,
		consecutive_errors = v.column4, first_failure_at = v.column5, next_attempt_at = v.column6,
		last_error = v.column7, last_delivered_at = v.column8, last_status = v.column9,
		lease_owner = '', lease_until = NULL
		FROM (VALUES `)
	args := writeValuesRows(&b, rows, saveDeliveryStateTypes, s.backend == backendPostgres)
	b.WriteString(`) AS v WHERE subscriptions.id = v.column1 AND subscriptions.lease_owner = v.column10`)
	query := b.String()
	if s.backend == backendSQLite {
		query = sqliteGreatest(query)
	}
	return query, args
}
