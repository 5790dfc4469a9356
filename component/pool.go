package component

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
)

// Requests are carried out by a bounded pool of workers, not by the
// stream's reader: a publish waits for its store transaction, and a reader
// doing that one request at a time capped publishing at the speed of one
// transaction. The reader parses each stanza and hands it to the pool,
// which never makes it wait: a request beyond what the pool holds is
// refused at once (the reader answers it: resource-constraint to an IQ,
// a "busy" chat answer to a chat command). A reader that waited for room
// would stop reading the stream, and with it every other user's requests,
// the acknowledgements and the server's pings, for as long as one user's
// queue took to drain (hours, for page look-ups to a server that hangs).
//
// Shares: each sender (bare JID) may have at most perSender jobs received
// and not finished, and the pool maxPendingRequests in all, so one user
// fills its own share and nobody else's. Workers take runnable jobs from
// the senders in turn (round robin), so a sender with many jobs waiting
// does not delay the one request of another. PINGD_ADMINS are held to
// the pool's bound only; multicast bounces, which answer pingd's own
// stanzas, to none: refusing them would lose notifications.
//
// Order: requests about one node (publish, retract, subscribe, configure,
// delete, …) are carried out one after the other in the order they came,
// so a client that pipelines them sees the effects in that order; chat
// commands of one sender likewise. Requests without a node run as they
// come. Publishes from one sender to one node that are already waiting
// when their node's turn comes are carried out together, as one append
// to the node's log (one store transaction, one wake of the dispatcher),
// each still answered on its own. Every IQ get and set is answered
// exactly once, by the worker that carries it out (or by the reader when
// it refuses it outright).
//
// Slow waits: a request that names a source not fetched yet (a
// subscription, a node for a new feed) waits for that source's first fetch,
// as long as its server takes, up to the hub's baseline wait; a chat or
// ad-hoc command naming a web page waits for the page to be fetched to
// find its feed (bounded by its look-up's deadline, targets.go). The job
// tells its worker (hub.WaitObserver), and another worker is started in
// its place, up to maxExtraWorkers at a time: eight such requests would
// otherwise stop every other request of the connection for that long.
// The waiting job still holds its key, so what is queued behind it
// (requests about its node, or its sender's chat commands) still comes
// after it; its worker ends once the job is done.

// Pool sizes.
const (
	requestWorkers     = 8
	maxPendingRequests = 1024
	// DefaultPendingPerSender is how many requests one bare JID may have
	// waiting or running: room for a client that pipelines, a small share
	// of maxPendingRequests.
	DefaultPendingPerSender = 64
	// maxPublishBatch bounds the publishes carried out as one append.
	maxPublishBatch = 256
	// maxExtraWorkers bounds the workers started in place of jobs in a
	// slow wait; beyond it a waiting job keeps its worker.
	maxExtraWorkers = 64
)

// Why the pool refuses a job.
var (
	errSenderBusy = errors.New("the sender has as many requests pending as it may")
	errPoolFull   = errors.New("the component has as many requests pending as it may")
	errPoolClosed = errors.New("the connection is closing")
)

// job is one received stanza waiting for a worker, or a group of waiting
// publishes carried out together (batch).
type job struct {
	// key orders the jobs of one node or chat sender; "" runs at once.
	key string
	// sender is the bare JID whose turn and share the job takes; bounds
	// says which bounds apply to it.
	sender string
	bounds jobBounds
	// iq is set for an IQ request, with its parsed request and sender.
	iq   *element
	req  *request
	from jid.JID
	// msg is set for a message: a chat command, a multicast notification
	// the server bounced (bounced), or an error answering a notification.
	msg     *element
	bounced bool
	// notificationError is set for an error answering a notification
	// (bounces.go).
	notificationError bool
	// presence is a presence to answer (subscribe, unsubscribe, probe).
	presence *element
	// batch, when set, holds publishes carried out together (this job is
	// the first of them).
	batch []*job
}

// batchable reports whether j may be carried out together with next.
func (j *job) batchable(next *job) bool {
	return j.req != nil && next.req != nil && j.req.Op == opPublish && next.req.Op == opPublish &&
		j.req.Node == next.req.Node && j.from.Bare().Equal(next.from.Bare())
}

// jobBounds says which of the pool's bounds a job is held to.
type jobBounds int

const (
	// boundShare: the sender's share and the pool's (every request).
	boundShare jobBounds = iota
	// boundPool: the pool's only (PINGD_ADMINS, who are not limited).
	boundPool
	// boundNone: none (multicast bounces, which answer pingd's own
	// stanzas: refusing them would lose notifications).
	boundNone
)

// requestPool runs the jobs of one connection.
type requestPool struct {
	ctx       context.Context
	run       func(context.Context, *job)
	perSender int

	workers sync.WaitGroup
	// extra holds a token per worker started in place of a waiting one.
	extra chan struct{}

	mu sync.Mutex
	// ready is signalled when a job becomes runnable or the pool closes;
	// idle when the last pending job finishes.
	ready, idle sync.Cond
	// pending counts the jobs received and not finished, bySender those
	// of each sender.
	pending  int
	bySender map[string]int
	// waiting holds, per key with a job running, the jobs queued behind it.
	waiting map[string][]*job
	// runnable holds each sender's jobs whose turn has come; turns the
	// senders that have some, in the order workers serve them.
	runnable map[string][]*job
	turns    []string
	closing  bool
}

// newRequestPool starts the workers; run carries out a job, with ctx or a
// context derived from it. perSender bounds the jobs of one sender (0:
// DefaultPendingPerSender).
func newRequestPool(ctx context.Context, perSender int, run func(context.Context, *job)) *requestPool {
	if perSender <= 0 {
		perSender = DefaultPendingPerSender
	}
	p := &requestPool{
		ctx:       ctx,
		run:       run,
		perSender: min(perSender, maxPendingRequests),
		extra:     make(chan struct{}, maxExtraWorkers),
		bySender:  map[string]int{},
		waiting:   map[string][]*job{},
		runnable:  map[string][]*job{},
	}
	p.ready.L, p.idle.L = &p.mu, &p.mu
	for range requestWorkers {
		p.workers.Go(p.work)
	}
	return p
}

// submit queues a job, or refuses it at once: errSenderBusy when its
// sender has perSender jobs pending, errPoolFull when the pool has
// maxPendingRequests. It never blocks.
func (p *requestPool) submit(j *job) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closing:
		return errPoolClosed
	case j.bounds == boundNone:
	case j.bounds == boundShare && p.bySender[j.sender] >= p.perSender:
		return errSenderBusy
	case p.pending >= maxPendingRequests:
		return errPoolFull
	}
	p.pending++
	p.bySender[j.sender]++
	if j.key != "" {
		if q, busy := p.waiting[j.key]; busy {
			p.waiting[j.key] = append(q, j)
			return nil
		}
		p.waiting[j.key] = nil // running, nothing behind it yet
	}
	p.makeRunnable(j)
	return nil
}

// makeRunnable gives j to the workers, in its sender's turn. p.mu is held.
func (p *requestPool) makeRunnable(j *job) {
	q := p.runnable[j.sender]
	if len(q) == 0 {
		p.turns = append(p.turns, j.sender)
	}
	p.runnable[j.sender] = append(q, j)
	p.ready.Signal()
}

// next waits for a runnable job, taking the senders in turn; nil once
// the pool closes.
func (p *requestPool) next() *job {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.turns) == 0 {
		if p.closing {
			return nil
		}
		p.ready.Wait()
	}
	s := p.turns[0]
	p.turns = p.turns[1:]
	q := p.runnable[s]
	j := q[0]
	if len(q) > 1 {
		p.runnable[s] = q[1:]
		p.turns = append(p.turns, s) // its next job waits for the others' turns
	} else {
		delete(p.runnable, s)
	}
	return j
}

func (p *requestPool) work() {
	var replaced atomic.Bool
	ctx := hub.WithWaitObserver(p.ctx, func() func() {
		// The first slow wait of a job starts its worker's successor,
		// when there is room for one more.
		if replaced.Load() {
			return nil
		}
		select {
		case p.extra <- struct{}{}:
			replaced.Store(true)
			p.workers.Go(p.work)
		default:
		}
		return nil
	})
	for {
		j := p.next()
		if j == nil {
			return
		}
		p.run(ctx, j)
		p.finish(j)
		if replaced.Load() {
			<-p.extra
			return
		}
	}
}

// finish releases a job's share and starts what waited behind it.
func (p *requestPool) finish(j *job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := max(1, len(j.batch))
	p.pending -= n
	if p.bySender[j.sender] -= n; p.bySender[j.sender] <= 0 {
		delete(p.bySender, j.sender)
	}
	if p.pending == 0 {
		p.idle.Broadcast()
	}
	if j.key == "" {
		return
	}
	q := p.waiting[j.key]
	if len(q) == 0 {
		delete(p.waiting, j.key)
		return
	}
	next := q[0]
	k := 1
	for k < len(q) && k < maxPublishBatch && next.batchable(q[k]) {
		k++
	}
	if k > 1 {
		// A batch's publishes are of one sender (batchable).
		next = &job{key: next.key, sender: next.sender, bounds: next.bounds, iq: next.iq, req: next.req, from: next.from, batch: q[:k:k]}
	}
	p.waiting[j.key] = q[k:]
	p.makeRunnable(next)
}

// close waits for every submitted job to finish and stops the workers.
// Nothing may be submitted meanwhile or after.
func (p *requestPool) close() {
	p.mu.Lock()
	for p.pending > 0 {
		p.idle.Wait()
	}
	p.closing = true
	p.ready.Broadcast()
	p.mu.Unlock()
	p.workers.Wait()
}

// followUps is work a request leaves for after its answer is written:
// what the answer announces (the newest item to a new subscription)
// comes after it on the stream.
type followUps struct {
	fns []func(context.Context)
}

type followUpsKey struct{}

// withFollowUps gives a request's context a list of follow-ups.
func withFollowUps(ctx context.Context) (context.Context, *followUps) {
	f := &followUps{}
	return context.WithValue(ctx, followUpsKey{}, f), f
}

// afterAnswer runs fn once the answer of the request ctx belongs to is
// written, or at once outside a request.
func afterAnswer(ctx context.Context, fn func(context.Context)) {
	if f, ok := ctx.Value(followUpsKey{}).(*followUps); ok {
		f.fns = append(f.fns, fn)
		return
	}
	fn(ctx)
}

// run carries the follow-ups out, in order.
func (f *followUps) run(ctx context.Context) {
	for _, fn := range f.fns {
		fn(ctx)
	}
	f.fns = nil
}
