package component

import (
	"context"
	"sync"
	"sync/atomic"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
)

// Requests are carried out by a bounded pool of workers, not by the
// stream's reader: a publish waits for its store transaction, and a reader
// doing that one request at a time capped publishing at the speed of one
// transaction. The reader parses each stanza and hands it to the pool; it
// blocks only when maxPendingRequests are received and not yet answered,
// which pushes back on the server.
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
// find its feed. The job tells its worker (hub.WaitObserver), and another
// worker is started in its place, up to maxExtraWorkers at a time: eight
// such requests would otherwise stop every other request of the
// connection for that long. The waiting job still holds its key, so what
// is queued behind it (requests about its node, or its sender's chat
// commands) still comes after it; its worker ends once the job is done.

// Pool sizes.
const (
	requestWorkers     = 8
	maxPendingRequests = 1024
	// maxPublishBatch bounds the publishes carried out as one append.
	maxPublishBatch = 256
	// maxExtraWorkers bounds the workers started in place of jobs in a
	// slow wait; beyond it a waiting job keeps its worker.
	maxExtraWorkers = 64
)

// job is one received stanza waiting for a worker, or a group of waiting
// publishes carried out together (batch).
type job struct {
	// key orders the jobs of one node or chat sender; "" runs at once.
	key string
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

// requestPool runs the jobs of one connection.
type requestPool struct {
	ctx context.Context
	run func(context.Context, *job)

	slots    chan struct{} // one per job received and not finished
	runnable chan *job
	workers  sync.WaitGroup
	// extra holds a token per worker started in place of a waiting one.
	extra chan struct{}

	mu sync.Mutex
	// waiting holds, per key with a job running, the jobs queued behind it.
	waiting map[string][]*job
}

// newRequestPool starts the workers; run carries out a job, with ctx or a
// context derived from it.
func newRequestPool(ctx context.Context, run func(context.Context, *job)) *requestPool {
	p := &requestPool{
		ctx:      ctx,
		run:      run,
		slots:    make(chan struct{}, maxPendingRequests),
		runnable: make(chan *job, maxPendingRequests),
		extra:    make(chan struct{}, maxExtraWorkers),
		waiting:  map[string][]*job{},
	}
	for range requestWorkers {
		p.workers.Go(p.work)
	}
	return p
}

// submit queues a job; it blocks while maxPendingRequests jobs are pending
// and gives up (false) when ctx ends.
func (p *requestPool) submit(ctx context.Context, j *job) bool {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if j.key != "" {
		if q, busy := p.waiting[j.key]; busy {
			p.waiting[j.key] = append(q, j)
			return true
		}
		p.waiting[j.key] = nil // running, nothing behind it yet
	}
	p.runnable <- j // never blocks: it has room for every slot
	return true
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
	for j := range p.runnable {
		p.run(ctx, j)
		p.finish(j)
		if replaced.Load() {
			<-p.extra
			return
		}
	}
}

// finish releases a job's slots and starts what waited behind it.
func (p *requestPool) finish(j *job) {
	n := max(1, len(j.batch))
	for range n {
		<-p.slots
	}
	if j.key == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
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
		next = &job{key: next.key, iq: next.iq, req: next.req, from: next.from, batch: q[:k:k]}
	}
	p.waiting[j.key] = q[k:]
	p.runnable <- next
}

// close waits for every submitted job to finish and stops the workers.
// Nothing may be submitted meanwhile or after.
func (p *requestPool) close() {
	for range maxPendingRequests {
		p.slots <- struct{}{}
	}
	close(p.runnable)
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
