package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Group commit (SQLite). All writes of one SQLite database go through its
// single write connection, one transaction after the other, and each
// commit writes the pages it changed to the WAL again: a ping, an append
// or a delivery's bookkeeping is a handful of rows but several pages. So
// the write transactions waiting for the connection are committed
// together: one goroutine takes every transaction queued at that moment
// and runs them in one database transaction, each inside a savepoint of
// its own. A transaction that fails is rolled back to its savepoint and
// only its caller sees the error; the others commit together and return
// once the commit is done. To every caller this is its own transaction:
// all of its writes or none, durable when it returns, and the transactions
// of one group see each other's writes in queue order, as if run one
// after the other. A lone writer does not wait for company: a
// transaction that finds the connection idle and nothing queued runs at
// once, alone, on its caller's goroutine (handing it to the committer's
// goroutine and back costs two goroutine wake-ups, a sizeable part of a
// lone ping's or a claim's time). Writers that collide do (see
// groupWindow).
//
// PostgreSQL runs transactions concurrently on a pool and keeps row locks
// across them; grouping transactions of unrelated callers there would
// lengthen lock holds and tie one caller's deadlock to another's, so it
// does not group.

// maxGroup bounds the transactions committed together.
const maxGroup = 128

// errStoreClosed is returned for a transaction started after Close.
var errStoreClosed = errors.New("the store is closed")

// groupCommitter runs the write transactions of an SQLite store.
type groupCommitter struct {
	s       *sqlStore
	queue   chan *groupTx
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
	// mu orders submissions with close, so nothing is queued unseen.
	mu     sync.RWMutex
	closed bool
	// conn is the write connection's token: whoever holds it runs
	// transactions on the connection, the committer's goroutine a group,
	// or a caller that found it idle its own transaction.
	conn chan struct{}
	// waiting counts the transactions queued for the committer and not
	// yet run; a caller runs its own only when there are none.
	waiting atomic.Int64
	// grouped counts the transactions that were committed in a group of
	// more than one, and lost the groups whose transaction was lost and
	// whose callers were run again one by one (tests).
	grouped, lost atomic.Int64
	// contended is when a caller last found the connection busy (Unix
	// nanoseconds).
	contended atomic.Int64
}

// While writers keep finding the connection busy, a group waits a moment
// for company, as PostgreSQL's commit_delay does while other transactions
// are active: a commit of SQLite's is short next to what its callers do
// between two writes (a ping's HTTP request), so without the wait groups
// stay at one or two and every ping pays a commit of its own. For
// contendedFor after a caller last found the connection busy, callers
// queue for the committer instead of running alone, and the committer
// waits up to groupWindow for more before it begins; a lone writer (one
// pinger, one publish) never waits.
const (
	contendedFor = 2 * time.Millisecond
	groupWindow  = 200 * time.Microsecond
)

// contendedSince reports whether a caller found the connection busy
// within contendedFor before now.
func (g *groupCommitter) contendedSince(now time.Time) bool {
	return now.UnixNano()-g.contended.Load() < int64(contendedFor)
}

// groupTx is one caller's transaction.
type groupTx struct {
	ctx  context.Context
	fn   func(tx *txn) error
	err  error
	done chan struct{}
}

func newGroupCommitter(s *sqlStore) *groupCommitter {
	g := &groupCommitter{
		s:       s,
		queue:   make(chan *groupTx, maxGroup),
		conn:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go g.loop()
	return g
}

// do runs fn as one transaction of a group and returns its outcome.
func (g *groupCommitter) do(ctx context.Context, fn func(tx *txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &groupTx{ctx: ctx, fn: fn, done: make(chan struct{})}
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return errStoreClosed
	}
	now := time.Now()
	switch {
	case g.waiting.Load() > 0 || len(g.conn) > 0:
		g.contended.Store(now.UnixNano())
	case !g.contendedSince(now):
		select {
		case g.conn <- struct{}{}:
			// Idle: run it here. Holding the read lock meanwhile keeps
			// close waiting for it.
			g.run([]*groupTx{r})
			<-g.conn
			g.mu.RUnlock()
			return r.err
		default:
			g.contended.Store(now.UnixNano())
		}
	}
	g.waiting.Add(1)
	select {
	case g.queue <- r:
		g.mu.RUnlock()
	case <-ctx.Done():
		g.waiting.Add(-1)
		g.mu.RUnlock()
		return ctx.Err()
	}
	// Once queued it is run or refused, never dropped: its caller must
	// learn whether it committed, so it waits even if ctx ends (the
	// transaction then fails fast on its own statements).
	<-r.done
	return r.err
}

// close stops the committer after the transactions already queued.
func (g *groupCommitter) close() {
	g.once.Do(func() {
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
		close(g.stop)
		<-g.stopped
	})
}

func (g *groupCommitter) loop() {
	defer close(g.stopped)
	batch := make([]*groupTx, 0, maxGroup)
	window := time.NewTimer(time.Hour)
	window.Stop()
	for {
		select {
		case r := <-g.queue:
			batch = append(batch[:0], r)
		case <-g.stop:
			// Submissions are closed; run what is left, then stop.
			// (close waited for any caller running its own.)
			for {
				select {
				case r := <-g.queue:
					g.waiting.Add(-1)
					g.run([]*groupTx{r})
				default:
					return
				}
			}
		}
		g.conn <- struct{}{} // wait for a caller running its own, if any
	collect:
		for len(batch) < maxGroup {
			select {
			case r := <-g.queue:
				batch = append(batch, r)
			default:
				break collect
			}
		}
		if len(batch) < maxGroup && g.contendedSince(time.Now()) {
			window.Reset(groupWindow)
		wait:
			for len(batch) < maxGroup {
				select {
				case r := <-g.queue:
					batch = append(batch, r)
				case <-window.C:
					break wait
				}
			}
			window.Stop()
		}
		g.waiting.Add(-int64(len(batch)))
		g.run(batch)
		<-g.conn
	}
}

// run commits one group and tells every caller its outcome.
//
// The group's transaction belongs to no caller: its statements run
// detached from their callers' contexts (statementCtx), each under the
// per-query timeout, and a caller's context is checked before its
// function starts and between its statements instead. SQLite rolls back
// the whole transaction, savepoints included, when a writing statement in
// it is interrupted (a statement that outran the per-query timeout) or
// fails in some other ways (a full disk): a caller's cancellation would
// otherwise undo the writes of every other caller of its group. When the
// transaction is gone anyway (a savepoint that cannot be rolled back to
// or released, a failed commit), the callers without an error of their
// own are run again one by one, each in a transaction of its own, so
// only the caller whose statement failed sees an error. Functions may be
// run again: PostgreSQL's retries already ask that of them.
func (g *groupCommitter) run(batch []*groupTx) {
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	if len(batch) == 1 {
		g.runAlone(batch[0])
		return
	}
	for _, r := range g.runGroup(batch) {
		g.runAlone(r)
	}
}

// begin starts a transaction of the write connection for n callers.
func (g *groupCommitter) begin(n int) (*sql.Tx, *txn, context.Context, context.CancelFunc, error) {
	s := g.s
	ctx, cancel := context.WithTimeout(context.Background(), 4*s.timeout*time.Duration(min(n, 4)))
	s.writeStmts.prepareWanted(ctx)
	sqlTx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		cancel()
		return nil, nil, nil, nil, fmt.Errorf("begin transaction: %w", err)
	}
	tx := newTxn(sqlTx, s.writeStmts)
	tx.grouped = true
	return sqlTx, tx, ctx, cancel, nil
}

// runAlone runs one caller's function in a transaction of its own.
func (g *groupCommitter) runAlone(r *groupTx) {
	if r.err = r.ctx.Err(); r.err != nil {
		return
	}
	sqlTx, tx, _, cancel, err := g.begin(1)
	if err != nil {
		r.err = err
		return
	}
	defer cancel()
	if r.err = r.fn(tx); r.err != nil {
		_ = sqlTx.Rollback()
		return
	}
	if err := sqlTx.Commit(); err != nil {
		r.err = fmt.Errorf("commit: %w", err)
	}
}

// runGroup runs batch in one transaction, each caller in a savepoint of
// its own, and returns the callers to run again on their own because the
// transaction was lost.
func (g *groupCommitter) runGroup(batch []*groupTx) (again []*groupTx) {
	s := g.s
	sqlTx, tx, ctx, cancel, err := g.begin(len(batch))
	if err != nil {
		for _, r := range batch {
			r.err = err
		}
		return nil
	}
	defer cancel()
	// lost rolls back what is left of the transaction and returns the
	// callers without an error of their own.
	lost := func(err error) []*groupTx {
		_ = sqlTx.Rollback()
		g.lost.Add(1)
		s.log.Warn("group commit lost its transaction; running its callers one by one",
			"callers", len(batch), "err", err)
		var out []*groupTx
		for _, r := range batch {
			if r.err == nil {
				out = append(out, r)
			}
		}
		return out
	}
	committed := make([]*groupTx, 0, len(batch))
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		if _, err := s.exec(ctx, tx, `SAVEPOINT grouped`); err != nil {
			return lost(fmt.Errorf("savepoint: %w", err))
		}
		if r.err = r.fn(tx); r.err != nil {
			if _, err := s.exec(ctx, tx, `ROLLBACK TO grouped`); err != nil {
				return lost(fmt.Errorf("roll back to savepoint: %w", err))
			}
		} else {
			committed = append(committed, r)
		}
		if _, err := s.exec(ctx, tx, `RELEASE grouped`); err != nil {
			return lost(fmt.Errorf("release savepoint: %w", err))
		}
	}
	if len(committed) == 0 {
		_ = sqlTx.Rollback()
		return nil
	}
	if err := sqlTx.Commit(); err != nil {
		return lost(fmt.Errorf("commit: %w", err))
	}
	g.grouped.Add(int64(len(committed)))
	return nil
}
