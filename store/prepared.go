package store

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync"
)

// Prepared statements. Parsing SQL text was a third of pingd's CPU when
// every query was prepared afresh, so on SQLite each query text is
// prepared once per pool and kept (database/sql then prepares it on each
// connection of the pool the first time it runs there, and keeps it).
// Inside a write transaction the kept statement is bound to the
// transaction with Tx.StmtContext, once per transaction and statement. A
// statement cannot be prepared for the pool while a transaction holds the
// write pool's only connection, so a query first seen inside a transaction
// runs unprepared that time and is prepared before the next group of
// transactions begins (groupcommit.go).
//
// PostgreSQL needs none of this: pgx keeps an LRU cache of prepared
// statements on every connection (its default query mode), which already
// covers the statements database/sql sends through it.
//
// The set of query texts is bounded: IN lists are padded to a power of two
// (inList), so a query with one varies in at most a dozen ways. Beyond
// maxCachedStatements, queries run unprepared rather than growing the
// cache; nothing is ever evicted, so a statement in use is never closed
// under its user.

// maxCachedStatements bounds the statements kept per pool.
const maxCachedStatements = 512

// stmtCache keeps the prepared statements of one pool, keyed by query text.
type stmtCache struct {
	db *sql.DB
	mu sync.RWMutex
	m  map[string]*sql.Stmt
	// wanted are queries seen inside transactions, to prepare when the
	// pool has a connection free.
	wanted map[string]bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}, wanted: map[string]bool{}}
}

// lookup returns the kept statement for query, or nil after noting that
// it is wanted (prepareWanted prepares it).
func (c *stmtCache) lookup(query string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.RLock()
	st, ok := c.m[query]
	c.mu.RUnlock()
	if ok {
		return st
	}
	c.mu.Lock()
	if len(c.m)+len(c.wanted) < maxCachedStatements {
		c.wanted[query] = true
	}
	c.mu.Unlock()
	return nil
}

// prepareWanted prepares the queries lookup noted. It must be called with
// no transaction of this goroutine open on the pool.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if len(c.wanted) == 0 {
		c.mu.Unlock()
		return
	}
	queries := make([]string, 0, len(c.wanted))
	for q := range c.wanted {
		queries = append(queries, q)
	}
	clear(c.wanted)
	c.mu.Unlock()
	for _, q := range queries {
		c.get(ctx, q)
	}
}

// get returns the statement for query, preparing it the first time; nil
// when the cache is full or the text does not prepare (the caller then
// runs it unprepared and gets the error there). A nil cache has nothing.
func (c *stmtCache) get(ctx context.Context, query string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.RLock()
	st, ok := c.m[query]
	full := len(c.m) >= maxCachedStatements
	c.mu.RUnlock()
	if ok {
		return st
	}
	if full {
		return nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if have, ok := c.m[query]; ok {
		// Prepared concurrently; no one else has seen this one yet.
		_ = st.Close()
		return have
	}
	if len(c.m) >= maxCachedStatements {
		_ = st.Close()
		return nil
	}
	c.m[query] = st
	return st
}

// len reports how many statements are kept.
func (c *stmtCache) len() int {
	if c == nil {
		return 0
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// close closes every kept statement; the cache stays usable (empty).
func (c *stmtCache) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		_ = st.Close()
		delete(c.m, q)
	}
}

// txn is a write transaction that runs the store's statements prepared:
// each kept statement is bound to it once.
type txn struct {
	*sql.Tx
	stmts *stmtCache // nil: nothing kept (PostgreSQL)
	bound map[*sql.Stmt]*sql.Stmt
	// grouped marks a transaction of SQLite's group commit, whose
	// statements run detached from their callers' contexts
	// (statementCtx).
	grouped bool
}

func newTxn(tx *sql.Tx, stmts *stmtCache) *txn {
	return &txn{Tx: tx, stmts: stmts}
}

// stmt returns query's statement bound to the transaction, or nil.
func (t *txn) stmt(ctx context.Context, query string) *sql.Stmt {
	p := t.stmts.lookup(query)
	if p == nil {
		return nil
	}
	if b, ok := t.bound[p]; ok {
		return b
	}
	b := t.Tx.StmtContext(ctx, p)
	if t.bound == nil {
		t.bound = map[*sql.Stmt]*sql.Stmt{}
	}
	t.bound[p] = b
	return b
}

// prepared returns the kept statement for query on q (a pool of this store
// or one of its write transactions), or nil to run the text directly.
func (s *sqlStore) prepared(ctx context.Context, q querier, query string) *sql.Stmt {
	switch q := q.(type) {
	case *txn:
		return q.stmt(ctx, query)
	case *sql.DB:
		switch q {
		case s.read:
			return s.readStmts.get(ctx, query)
		case s.write:
			return s.writeStmts.get(ctx, query)
		}
	}
	return nil
}

// inList returns the placeholders "$from, …" of an IN list for vals and
// the arguments, padded with copies of the last value to the next power of
// two so that the query text takes few forms. Repeating a value does not
// change what an IN list matches. vals must not be empty.
func inList[T any](from int, vals []T) (string, []any) {
	n := paddedLen(len(vals))
	args := make([]any, n)
	for i := range n {
		args[i] = vals[min(i, len(vals)-1)]
	}
	return placeholders(from, n), args
}

// paddedLen is n rounded up to a power of two: the length lists of
// placeholders are padded to, so that query texts take few forms.
func paddedLen(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}

// writeValuesRows writes the rows of a VALUES list of placeholders ($1 on)
// for rows, each of len(types) arguments, padded as inList pads with
// copies of the last row (an UPDATE … FROM writes the same values again),
// and returns the arguments. With cast each placeholder carries its
// column's type ($1::bigint): a VALUES list of parameters has no types of
// its own on PostgreSQL. rows must not be empty.
func writeValuesRows(b *strings.Builder, rows [][]any, types []string, cast bool) []any {
	n, cols := paddedLen(len(rows)), len(types)
	args := make([]any, 0, n*cols)
	for r := range n {
		args = append(args, rows[min(r, len(rows)-1)]...)
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range cols {
			if c > 0 {
				b.WriteString(", ")
			}
			b.WriteString("$" + strconv.Itoa(r*cols+c+1))
			if cast {
				b.WriteString("::" + types[c])
			}
		}
		b.WriteByte(')')
	}
	return args
}
