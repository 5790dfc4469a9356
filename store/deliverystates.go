package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/pingd/pingd/hub"
)

// saveDeliveryStateSQL writes one subscription's delivery bookkeeping and
// releases its lease. A cursor only moves forward (as in every statement
// here): a node's baseline entries are kept as items past the cursors
// (ApplyFetch), and a verification or delivery that was claimed before
// must not take the cursor back before them.
const saveDeliveryStateSQL = `UPDATE subscriptions SET cursor_seq = CASE WHEN cursor_seq > $2 THEN cursor_seq ELSE $2 END, attempts = $3,
		consecutive_errors = $4, first_failure_at = $5, next_attempt_at = $6, last_error = $7,
		last_delivered_at = $8, last_status = $9, lease_owner = '', lease_until = NULL
		WHERE id = $1`

// saveCleanDeliverySQL is saveDeliveryStateSQL for the common case, a
// success after a success: it sets only what changes, so SQLite leaves
// the index on next_attempt_at alone (it updates an index whenever a
// column of it is set, even to the same value). The WHERE clause makes it
// change nothing when the row still records a failure; the full UPDATE
// then clears it.
const saveCleanDeliverySQL = `UPDATE subscriptions SET cursor_seq = CASE WHEN cursor_seq > $2 THEN cursor_seq ELSE $2 END, attempts = $3,
		last_delivered_at = $4, last_status = $5, lease_owner = '', lease_until = NULL
		WHERE id = $1 AND consecutive_errors = 0 AND first_failure_at IS NULL
		AND next_attempt_at IS NULL AND last_error = ''`

// saveDeliveryStateSQLite saves one state within tx, with the short
// statement when the state records no failure.
func (s *sqlStore) saveDeliveryStateSQLite(ctx context.Context, tx *txn, st hub.SavedDeliveryState) error {
	ds := st.State
	if ds.ConsecutiveErrors == 0 && ds.FirstFailureAt.IsZero() && ds.NextAttemptAt.IsZero() && ds.LastError == "" {
		res, err := s.execShort(ctx, tx, saveCleanDeliverySQL, st.ID, ds.Cursor, ds.Attempts,
			s.timeArg(ds.LastDeliveredAt), ds.LastStatus)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		// The row records a failure, or is gone: the full statement.
	}
	_, err := s.execShort(ctx, tx, saveDeliveryStateSQL, s.saveDeliveryStateArgs(st.ID, st.State)...)
	return err
}

func (s *sqlStore) saveDeliveryStateArgs(id int64, st hub.DeliveryState) []any {
	return []any{id, st.Cursor, st.Attempts, st.ConsecutiveErrors, s.timeArg(st.FirstFailureAt),
		s.timeArg(st.NextAttemptAt), st.LastError, s.timeArg(st.LastDeliveredAt), st.LastStatus}
}

// SaveDeliveryState writes a subscription's delivery bookkeeping and
// releases its lease.
func (s *sqlStore) SaveDeliveryState(ctx context.Context, id int64, st hub.DeliveryState) error {
	n, err := s.writeCount(ctx, saveDeliveryStateSQL, s.saveDeliveryStateArgs(id, st)...)
	if err != nil {
		return fmt.Errorf("save delivery state of subscription %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("subscription %d: %w", id, hub.ErrNotFound)
	}
	return nil
}

// SaveDeliveryStates writes the delivery bookkeeping of several
// subscriptions in one transaction and releases their leases; those
// removed meanwhile are skipped. One transaction instead of one per
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
// SaveDeliveryStates (9 arguments each).
const maxStatesPerUpdate = 128

// saveDeliveryStateTypes are the PostgreSQL types of the columns of
// saveDeliveryStateArgs: a VALUES list of parameters has no types of its
// own there.
var saveDeliveryStateTypes = []string{"bigint", "bigint", "integer", "integer", "timestamptz", "timestamptz", "text", "timestamptz", "integer"}

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
	b.WriteString(`UPDATE subscriptions SET
		cursor_seq = CASE WHEN subscriptions.cursor_seq > v.column2 THEN subscriptions.cursor_seq ELSE v.column2 END, attempts = v.column3,
		consecutive_errors = v.column4, first_failure_at = v.column5, next_attempt_at = v.column6,
		last_error = v.column7, last_delivered_at = v.column8, last_status = v.column9,
		lease_owner = '', lease_until = NULL
		FROM (VALUES `)
	args := writeValuesRows(&b, rows, saveDeliveryStateTypes, s.backend == backendPostgres)
	b.WriteString(`) AS v WHERE subscriptions.id = v.column1`)
	return b.String(), args
}
