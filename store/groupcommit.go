package store

import (
	"context"
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
// after the other. Nothing waits for company: a transaction that finds
// the connection idle and nothing queued runs at once, alone, on its
// caller's goroutine (handing it to the committer's goroutine and back
// costs two goroutine wake-ups, a sizeable part of a lone ping's or a
// claim's time).
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
	// more than one (tests).
	grouped atomic.Int64
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
	if g.waiting.Load() == 0 {
		select {
		case g.conn <- struct{}{}:
			// Idle: run it here. Holding the read lock meanwhile keeps
			// close waiting for it.
			g.run([]*groupTx{r})
			<-g.conn
			g.mu.RUnlock()
			return r.err
		default:
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
		g.waiting.Add(-int64(len(batch)))
		g.run(batch)
		<-g.conn
	}
}

// run commits one group and tells every caller its outcome.
func (g *groupCommitter) run(batch []*groupTx) {
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	s := g.s
	// The group's transaction belongs to no caller: one caller's cancelled
	// context must not roll back the others' writes.
	ctx, cancel := context.WithTimeout(context.Background(), 4*s.timeout*time.Duration(min(len(batch), 4)))
	defer cancel()
	s.writeStmts.prepareWanted(ctx)
	sqlTx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		for _, r := range batch {
			r.err = fmt.Errorf("begin transaction: %w", err)
		}
		return
	}
	tx := newTxn(sqlTx, s.writeStmts)
	alone := len(batch) == 1
	committed := make([]*groupTx, 0, len(batch))
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		if alone {
			if r.err = r.fn(tx); r.err != nil {
				_ = sqlTx.Rollback()
				return
			}
			committed = append(committed, r)
			continue
		}
		if _, err := s.exec(ctx, tx, `SAVEPOINT grouped`); err != nil {
			g.fail(sqlTx, batch, fmt.Errorf("savepoint: %w", err))
			return
		}
		if r.err = r.fn(tx); r.err != nil {
			if _, err := s.exec(ctx, tx, `ROLLBACK TO grouped`); err != nil {
				g.fail(sqlTx, batch, fmt.Errorf("roll back to savepoint: %w", err))
				return
			}
		} else {
			committed = append(committed, r)
		}
		if _, err := s.exec(ctx, tx, `RELEASE grouped`); err != nil {
			g.fail(sqlTx, batch, fmt.Errorf("release savepoint: %w", err))
			return
		}
	}
	if len(committed) == 0 {
		_ = sqlTx.Rollback()
		return
	}
	if err := sqlTx.Commit(); err != nil {
		for _, r := range committed {
			r.err = fmt.Errorf("commit: %w", err)
		}
		return
	}
	if len(batch) > 1 {
		g.grouped.Add(int64(len(committed)))
	}
}

// fail rolls the group back and gives every caller without an error of
// its own err.
func (g *groupCommitter) fail(sqlTx interface{ Rollback() error }, batch []*groupTx, err error) {
	_ = sqlTx.Rollback()
	for _, r := range batch {
		if r.err == nil {
			r.err = err
		}
	}
}
