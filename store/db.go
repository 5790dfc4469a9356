package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pingd/pingd/hub"
)

// sqlStore implements Store on database/sql for both backends. The SQL is
// written once, with $n placeholders (which SQLite accepts too); the few
// differences between the backends are in dialect.
type sqlStore struct {
	dialect
	// read serves single statements outside transactions; write serves
	// transactions and writes. On SQLite write is one connection, so writers
	// queue in the process instead of fighting over the file lock; on
	// PostgreSQL both are the same pool.
	read, write *sql.DB
	// health is a pool of one connection of its own that only Check
	// uses, so that a health probe measures whether the database answers
	// and never queues behind a busy read pool (many readers of the lists
	// and feeds at once); nil means Check uses read.
	health *sql.DB
	// readStmts and writeStmts keep the statements prepared on each pool
	// (SQLite; nil on PostgreSQL, whose driver caches them itself), and
	// group runs the write transactions (SQLite; nil on PostgreSQL). See
	// prepared.go and groupcommit.go.
	readStmts, writeStmts *stmtCache
	group                 *groupCommitter
	timeout               time.Duration
	log                   *slog.Logger
	closeFn               func() error

	// sqlitePath is the database file (SQLite); leader locks sit beside it.
	sqlitePath string
	// pgConfig connects the dedicated sessions (PostgreSQL) that leader
	// locks and wake-ups need outside the pool.
	pgConfig *pgx.ConnConfig
	// sessions are the leader locks still held and spares the sessions
	// standbys keep between attempts; both are closed with the store.
	sessions sessionSet
	spares   spareSessions
}

// dialect is what differs between SQLite and PostgreSQL.
type dialect struct {
	backend string
	// rowLocks says the database has row locks (PostgreSQL): SELECTs whose
	// rows a transaction goes on to change lock them (forUpdate), and
	// claims pass over rows other transactions hold (skipLocked). SQLite's
	// write transactions are serial and need neither.
	rowLocks bool
	// timeArg turns a time into a query argument (NULL for the zero time).
	timeArg func(time.Time) any
	// retryable reports a transaction error worth another try (PostgreSQL
	// deadlocks and serialization failures).
	retryable func(error) bool
}

// forUpdate locks the rows a SELECT reads until the transaction ends.
func (d dialect) forUpdate() string { return d.lockClause("", "") }

// forUpdateOf locks the rows of table (an alias in the query).
func (d dialect) forUpdateOf(table string) string { return d.lockClause(table, "") }

// skipLocked locks the rows of table that no other transaction holds and
// leaves the others out.
func (d dialect) skipLocked(table string) string { return d.lockClause(table, " SKIP LOCKED") }

func (d dialect) lockClause(table, wait string) string {
	if !d.rowLocks {
		return ""
	}
	if table != "" {
		return " FOR UPDATE OF " + table + wait
	}
	return " FOR UPDATE" + wait
}

// Backend names the database behind the store.
func (s *sqlStore) Backend() string { return s.backend }

// Close releases the leader locks still held and closes the connection
// pools.
func (s *sqlStore) Close() error {
	s.sessions.closeAll()
	s.spares.closeAll()
	if s.group != nil {
		s.group.close()
	}
	s.readStmts.close()
	s.writeStmts.close()
	return s.closeFn()
}

// Check answers nil while the database answers. It runs on the health
// connection, which nothing else uses: read load cannot make it fail.
func (s *sqlStore) Check(ctx context.Context) error {
	db := s.health
	if db == nil {
		db = s.read
	}
	var one int
	if err := s.queryRow(ctx, db, `SELECT 1`, nil, &one); err != nil {
		return fmt.Errorf("check database: %w", err)
	}
	return nil
}

// querier is what both *sql.DB and *sql.Tx offer.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// statementCtx returns the context a statement on q runs under, before
// the per-query timeout. A statement of a transaction of SQLite's group
// commit does not end with its caller's context: SQLite rolls back the
// whole transaction, every other caller's savepoint with it, when a
// writing statement is interrupted. Its caller's context is checked
// before it starts instead, so a caller that gives up stops at its next
// statement and its function's error rolls back its savepoint alone.
func statementCtx(ctx context.Context, q querier) (context.Context, error) {
	if t, ok := q.(*txn); ok && t.grouped {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return context.WithoutCancel(ctx), nil
	}
	return ctx, nil
}

// exec runs one statement under the per-query timeout.
func (s *sqlStore) exec(ctx context.Context, q querier, query string, args ...any) (sql.Result, error) {
	ctx, err := statementCtx(ctx, q)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if st := s.prepared(ctx, q, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return q.ExecContext(ctx, query, args...)
}

// execShort runs, inside a transaction of SQLite's write connection, a
// statement that touches one row by its key: work bounded by the row, so
// it is not watched for the per-query timeout. Watching costs the driver
// a goroutine per statement, about a fifth of such a statement's time; a
// loop of them checks ctx between rows instead, so the loop as a whole
// still ends with ctx. On PostgreSQL, where a statement may wait for
// another transaction's row lock, it is exec.
func (s *sqlStore) execShort(ctx context.Context, tx *txn, query string, args ...any) (sql.Result, error) {
	if s.backend != backendSQLite {
		return s.exec(ctx, tx, query, args...)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	if st := s.prepared(ctx, tx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// queryShort is query for a statement of execShort's kind (a few rows
// found by key, inside a transaction): on SQLite it is not watched for
// the per-query timeout.
func (s *sqlStore) queryShort(ctx context.Context, tx *txn, query string, args []any, each func(*sql.Rows) error) error {
	if s.backend != backendSQLite {
		return s.query(ctx, tx, query, args, each)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.queryEach(context.WithoutCancel(ctx), tx, query, args, each)
}

// queryRowShort is queryRow for a statement of execShort's kind.
func (s *sqlStore) queryRowShort(ctx context.Context, tx *txn, query string, args []any, dest ...any) error {
	if s.backend != backendSQLite {
		return s.queryRow(ctx, tx, query, args, dest...)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.rowContext(context.WithoutCancel(ctx), tx, query, args).Scan(dest...)
}

// execCount runs one statement and returns the number of rows it changed.
func (s *sqlStore) execCount(ctx context.Context, q querier, query string, args ...any) (int64, error) {
	res, err := s.exec(ctx, q, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// writeCount runs one writing statement as a transaction of its own, which
// on SQLite commits with the others waiting (group commit), and returns the
// number of rows it changed.
func (s *sqlStore) writeCount(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx *txn) error {
		var err error
		n, err = s.execCount(ctx, tx, query, args...)
		return err
	})
	return n, err
}

// queryRow runs a query that returns one row and scans it into dest;
// sql.ErrNoRows when there is none.
func (s *sqlStore) queryRow(ctx context.Context, q querier, query string, args []any, dest ...any) error {
	ctx, err := statementCtx(ctx, q)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.rowContext(ctx, q, query, args).Scan(dest...)
}

// rowContext runs a query that returns one row, prepared when it can be.
func (s *sqlStore) rowContext(ctx context.Context, q querier, query string, args []any) *sql.Row {
	if st := s.prepared(ctx, q, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.QueryRowContext(ctx, query, args...)
}

// query runs a query and calls each for every row, under one per-query
// timeout covering the reading of the rows.
func (s *sqlStore) query(ctx context.Context, q querier, query string, args []any, each func(*sql.Rows) error) error {
	ctx, err := statementCtx(ctx, q)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.queryEach(ctx, q, query, args, each)
}

// queryEach runs a query, prepared when it can be, and calls each for
// every row, under ctx alone.
func (s *sqlStore) queryEach(ctx context.Context, q querier, query string, args []any, each func(*sql.Rows) error) error {
	var rows *sql.Rows
	var err error
	if st := s.prepared(ctx, q, query); st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = q.QueryContext(ctx, query, args...)
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// queryInts returns the first column of every row as int64.
func (s *sqlStore) queryInts(ctx context.Context, q querier, query string, args ...any) ([]int64, error) {
	var out []int64
	err := s.query(ctx, q, query, args, func(r *sql.Rows) error {
		var v int64
		if err := r.Scan(&v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// txAttempts bounds retries of a transaction PostgreSQL aborted to break a
// deadlock or a serialization conflict.
const txAttempts = 3

// inTx runs fn in a write transaction and commits it when fn returns nil.
// The transaction as a whole may take a few query timeouts; each statement
// in it has its own. On SQLite it is committed together with the other
// write transactions waiting at that moment (groupcommit.go); fn must not
// start another transaction of the store.
func (s *sqlStore) inTx(ctx context.Context, fn func(tx *txn) error) error {
	if s.group != nil {
		return s.group.do(ctx, fn)
	}
	return s.inOwnTx(ctx, fn)
}

// inOwnTx runs fn in a transaction of its own, never grouped, and keeps
// no statements for it (migrations; PostgreSQL).
func (s *sqlStore) inOwnTx(ctx context.Context, fn func(tx *txn) error) error {
	return s.retried(ctx, s.tryTx, fn)
}

// retried runs fn in a transaction of try, again while PostgreSQL aborts
// it to break a deadlock or a serialization conflict.
func (s *sqlStore) retried(ctx context.Context, try func(context.Context, func(*txn) error) error, fn func(tx *txn) error) error {
	var err error
	for attempt := 1; attempt <= txAttempts; attempt++ {
		err = try(ctx, fn)
		if err == nil || !s.retryable(err) || ctx.Err() != nil {
			return err
		}
		s.log.DebugContext(ctx, "retrying transaction", "attempt", attempt, "err", err)
	}
	return err
}

func (s *sqlStore) tryTx(ctx context.Context, fn func(tx *txn) error) error {
	ctx, cancel := context.WithTimeout(ctx, 4*s.timeout)
	defer cancel()
	return s.runTx(ctx, fn)
}

// runTx runs fn in a transaction bounded by ctx alone and commits it
// when fn returns nil.
func (s *sqlStore) runTx(ctx context.Context, fn func(tx *txn) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(newTxn(tx, nil)); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Times are kept to the microsecond (PostgreSQL's precision) in UTC.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000Z"

// dbTimeOf normalises t the way the database keeps it.
func dbTimeOf(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

// sqliteTime formats t for SQLite; years beyond 9999 are clamped so text
// order stays time order.
func sqliteTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	t = dbTimeOf(t)
	if t.Year() > 9999 {
		t = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	}
	if t.Year() < 1 {
		t = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return t.Format(sqliteTimeLayout)
}

func postgresTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return dbTimeOf(t)
}

// timeCol scans a time column of either backend (NULL → zero time).
type timeCol struct{ t *time.Time }

func (c timeCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c.t = time.Time{}
	case time.Time:
		*c.t = v.UTC()
	case string:
		return c.parse(v)
	case []byte:
		return c.parse(string(v))
	default:
		return fmt.Errorf("time column holds %T", src)
	}
	return nil
}

func (c timeCol) parse(s string) error {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("time column: %w", err)
	}
	*c.t = t.UTC()
	return nil
}

// tc scans into t.
func tc(t *time.Time) timeCol { return timeCol{t} }

// placeholders returns "$from, $from+1, …" for n arguments.
func placeholders(from, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(from + i))
	}
	return b.String()
}

// chunkSize bounds the arguments of one IN list.
const chunkSize = 500

// chunks splits ids into slices of at most chunkSize.
func chunks[T any](ids []T) [][]T {
	var out [][]T
	for len(ids) > chunkSize {
		out = append(out, ids[:chunkSize])
		ids = ids[chunkSize:]
	}
	if len(ids) > 0 {
		out = append(out, ids)
	}
	return out
}

// notFound wraps hub.ErrNotFound for sql.ErrNoRows and passes other errors.
func notFound(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, hub.ErrNotFound)
	}
	return err
}
