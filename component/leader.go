package component

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Several pingd processes on one database. Notifications follow one
// cursor per node, so one process at a time may send them: the leader,
// the holder of a lease the database grants (Config.Leader). A Prosody
// server takes one connection per component name, so there only the
// leader connects and the others stand by, asking for the lease every
// LeaderRetry; when the leader dies its lease is freed and a standby
// connects within a few seconds, carrying on from the cursors. An
// ejabberd server takes several connections under one name and spreads
// the incoming stanzas over them (Config.Shared): every process connects
// and answers requests, and only the leader sends notifications.
//
// Events appended by another process do not wake this one's dispatcher
// directly (unless the database carries wake-ups, which cmd/pingd wires
// to Wake), so the leader also looks for nodes behind their cursor every
// SweepEvery.

// Lease is a held leadership; the store's leader lock satisfies it.
type Lease interface {
	// Lost is closed when the lease is no longer held.
	Lost() <-chan struct{}
	// Release gives the lease up.
	Release()
}

// Leading reports whether this process sends the notifications: always
// without a Leader, else while it holds the lease.
func (c *Component) Leading() bool { return c.leading.Load() }

// Ready reports whether this process is fit to take requests: while it is
// connected to the XMPP server, or, when only the leader connects, while
// it is a standby that can reach the database (a standby serves HTTP like
// every instance and takes over the component when the leader goes), and
// while it is a leader taking over: for takeoverGrace after it took the
// lease it is ready without a connection, as the XMPP server may still
// hold the dead leader's session and refuse the new one for a moment; the
// HTTP side, which the process served as a standby, serves on.
func (c *Component) Ready() bool {
	if c.Connected() {
		return true
	}
	if c.leader == nil || c.shared {
		return false
	}
	if c.leading.Load() {
		return time.Since(time.Unix(0, c.leadingSince.Load())) < c.takeoverGrace
	}
	at := c.standbyAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < 3*c.leaderRetry+2*time.Second
}

// takeoverGrace is how long a process that took the lease is ready
// without a connection to the XMPP server (Ready): after it, a leader
// that cannot connect answers /readyz 503 like a single process.
const takeoverGrace = 15 * time.Second

// lead asks for the lease until ctx ends. While it holds the lease it runs
// term (nil: nothing) with a context that ends when the lease is lost, and
// gives the lease up when term returns.
func (c *Component) lead(ctx context.Context, term func(ctx context.Context)) {
	standingBy, failing := false, false
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wait.C:
		}
		lease, err := c.leader(ctx)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			c.standbyAt.Store(0)
			if !failing {
				c.log.Error("cannot ask the database for the XMPP leadership; retrying", "retry_every", c.leaderRetry, "err", err)
				failing = true
			}
		case lease == nil:
			c.standbyAt.Store(time.Now().UnixNano())
			if failing {
				c.log.Info("the database answers again about the XMPP leadership")
				failing = false
			}
			if !standingBy {
				c.log.Info("standing by: another pingd process holds the XMPP component", "retry_every", c.leaderRetry)
				standingBy = true
			}
		default:
			failing, standingBy = false, false
			c.holdLease(ctx, lease, term)
		}
		// A little jitter keeps standbys that started together apart.
		wait.Reset(c.leaderRetry + time.Duration(rand.Int64N(int64(c.leaderRetry/4)+1)))
	}
}

// holdLease leads until the lease is lost or ctx ends, then gives the
// lease up (after term has closed the stream, so a standby that connects
// next is not refused by a server that still sees this connection).
func (c *Component) holdLease(ctx context.Context, lease Lease, term func(ctx context.Context)) {
	termCtx, cancel := context.WithCancel(ctx)
	c.leadingSince.Store(time.Now().UnixNano())
	c.leading.Store(true)
	c.standbyAt.Store(0) // after leading is set: Ready stays true throughout
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-lease.Lost():
			c.leading.Store(false) // before anything else is written
			if ctx.Err() == nil {
				c.log.Warn("lost the XMPP leadership: stopping notifications; another pingd process takes over")
			}
			cancel()
		case <-termCtx.Done():
		}
	})
	c.log.Info("this pingd process now leads: it sends the XMPP notifications", "shared_connection", c.shared)
	c.dispatcher.work.add(0) // carry on from every node's cursor
	if term != nil {
		term(termCtx)
	} else {
		<-termCtx.Done()
	}
	c.leading.Store(false)
	cancel()
	wg.Wait()
	lease.Release()
}

// sweepLoop makes the leader look for nodes behind their cursor every
// SweepEvery: another process may have appended to them.
func (c *Component) sweepLoop(ctx context.Context) {
	t := time.NewTicker(c.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if c.leading.Load() && c.Connected() {
				c.dispatcher.work.add(0)
			}
		}
	}
}
