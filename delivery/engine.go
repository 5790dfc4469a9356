package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingd/pingd/hub"
)

// Sender speaks one subscriber kind's protocol.
type Sender interface {
	// Wants reports whether an event is delivered to this subscriber
	// (item-level kinds take items, URL-level kinds any change).
	Wants(sub *hub.Subscription, ev hub.Event) bool
	// Deliver sends the events to the subscriber in one request.
	Deliver(ctx context.Context, d *Delivery) Result
	// Verify checks a pending subscribe or unsubscribe request with the
	// subscriber; on success for a subscribe it returns the expiry of the
	// subscription (zero: none).
	Verify(ctx context.Context, sub *hub.Subscription, node *hub.Node, mode string) (time.Time, error)
	// Policy says how failures are handled for this kind.
	Policy() Policy
}

// Policy is a kind's failure rules.
type Policy struct {
	// RetryWindow is how long a failing receiver is retried, with one last
	// retry at its end, before the subscription is removed.
	RetryWindow time.Duration
	// SuspendAfter, when > 0, suspends the subscription after that many
	// consecutive errors instead (rssCloud: until it is renewed).
	SuspendAfter int
}

// Delivery is one request's worth of work.
type Delivery struct {
	Sub  *hub.Subscription
	Node *hub.Node
	// Events are the events after the cursor this kind wants, oldest first.
	Events []hub.Event

	batch *batch
}

// Result is what a receiver answered.
type Result struct {
	Status int
	// Err is nil on success.
	Err error
	// Remove says the receiver asked to be dropped (410, a false status,
	// a CNWS HTTP error): the subscription is deleted without retries.
	Remove bool
}

// Config configures an Engine.
type Config struct {
	Store   hub.Store
	Senders map[hub.Kind]Sender
	Logger  *slog.Logger
	Now     func() time.Time
	// Instance names this process in leases.
	Instance string
	// Workers bounds concurrent deliveries (DefaultWorkers), PerHost those
	// to one receiver host (DefaultPerHost), so one slow receiver cannot
	// hold up the others.
	Workers int
	PerHost int
	// Lease is how long a claimed subscription stays ours (DefaultLease).
	Lease time.Duration
	// Timeout bounds one delivery request (default a quarter of Lease),
	// so that a delivery ends well within its lease and is never handed
	// out twice.
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the retry delays (DefaultMinBackoff
	// and DefaultMaxBackoff).
	MinBackoff, MaxBackoff time.Duration
	// Batch is the most events sent in one request (DefaultBatch).
	Batch int
	// PollInterval is how often due retries are looked for
	// (DefaultPollInterval).
	PollInterval time.Duration
	// Observe, if set, is told the outcome of every attempt (metrics).
	Observe func(kind hub.Kind, outcome string, d time.Duration)
	// Exclusive says this process is the only one using the store (an
	// SQLite file, which one pingd process serves at a time): leases found
	// when Run starts were left by a process that died, and are taken back
	// at once instead of blocking their subscriptions until they run out.
	// Never set it on a store that several processes share.
	Exclusive bool

	// stateLinger and stateGap replace maxStateLinger and stateGap
	// (tests).
	stateLinger, stateGap time.Duration
}

// Defaults of Config: what a zero (or negative) field is taken as.
const (
	// DefaultWorkers deliveries run at once over all receivers.
	DefaultWorkers = 32
	// DefaultPerHost is the most deliveries to one receiver host at once:
	// a slow receiver holds at most that many workers.
	DefaultPerHost = 4
	// DefaultLease is how long a claimed subscription stays this
	// process's; its deliveries time out at a quarter of it.
	DefaultLease = 2 * time.Minute
	// DefaultMinBackoff and DefaultMaxBackoff bound the delay before a
	// failed delivery is retried.
	DefaultMinBackoff = 30 * time.Second
	DefaultMaxBackoff = time.Hour
	// DefaultBatch is the most events sent in one request.
	DefaultBatch = 100
	// DefaultPollInterval is how often due retries are looked for.
	DefaultPollInterval = time.Second
)

// Outcomes passed to Config.Observe.
const (
	OutcomeDelivered = "delivered"
	OutcomeRetry     = "retry"
	OutcomeRemoved   = "removed"
	OutcomeSuspended = "suspended"
	OutcomeVerified  = "verified"
	OutcomeRefused   = "verify_failed"
)

// Engine runs deliveries. It implements hub.Transport.
type Engine struct {
	cfg   Config
	log   *slog.Logger
	wake  chan struct{}
	mu    sync.Mutex
	woken map[int64]bool
	hosts *hostSlots
	rand  func() float64
	// states writes finished deliveries' states; Run starts it.
	states *stateWriter
	// held counts the claimed subscriptions not yet done with (running,
	// waiting for a worker or for their host); freed is signalled each
	// time one is done with, so that Run can claim more.
	held  atomic.Int64
	freed chan struct{}
	// wakeSeq counts the wakes from outside (a publish, a new
	// subscription); lastWake records the count at each node's latest one
	// (node 0: any node). Together they tell whether anything was
	// published for a node since a subscription of it was claimed.
	wakeSeq  uint64
	lastWake map[int64]uint64
}

// heldPerWorker bounds the claimed subscriptions held in memory, per
// worker (a few hundred bytes each): enough that hosts whose queues are
// full of slow deliveries leave room for the others. maxClaim bounds one
// claim: large claims make one query serve many deliveries, but each
// holds the database's writer while it runs.
const (
	heldPerWorker = 32
	maxClaim      = 256
)

// maxWakeRecords bounds Engine.lastWake, one entry per node woken.
const maxWakeRecords = 1 << 16

// New returns an engine; Run starts it.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil {
		return nil, errors.New("delivery: no store")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Instance == "" {
		cfg.Instance = hub.RandomID()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.PerHost <= 0 {
		cfg.PerHost = DefaultPerHost
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Timeout <= 0 || cfg.Timeout > cfg.Lease/2 {
		cfg.Timeout = cfg.Lease / 4
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	return &Engine{
		cfg:   cfg,
		log:   cfg.Logger,
		wake:  make(chan struct{}, 1),
		woken: map[int64]bool{},
		hosts: &hostSlots{
			max:      cfg.PerHost,
			queueFor: (cfg.Lease - cfg.Timeout) / 2,
			slots:    map[string]*hostSlot{},
			answers:  map[string]time.Duration{},
		},
		rand:     rand.Float64,
		freed:    make(chan struct{}, 1),
		lastWake: map[int64]uint64{},
	}, nil
}

// Kinds lists the kinds this engine has senders for (to register it).
func (e *Engine) Kinds() []hub.Kind {
	kinds := make([]hub.Kind, 0, len(e.cfg.Senders))
	for k := range e.cfg.Senders {
		kinds = append(kinds, k)
	}
	return kinds
}

// Wake makes the engine look at the node's subscriptions (0: any work):
// something was published, or a subscription wants attention.
func (e *Engine) Wake(nodeID int64) {
	e.mu.Lock()
	e.wakeSeq++
	if len(e.lastWake) >= maxWakeRecords {
		// Forget the nodes, not the fact: a wake of "any node" now makes
		// every subscription claimed before it look again once.
		clear(e.lastWake)
		nodeID = 0
	}
	e.lastWake[nodeID] = e.wakeSeq
	e.mu.Unlock()
	e.poke(nodeID)
}

// poke makes the engine look at the node's subscriptions, for reasons of
// its own (a retry due, a state saved).
func (e *Engine) poke(nodeID int64) {
	e.mu.Lock()
	e.woken[nodeID] = true
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// wakeSeqNow is the current count of wakes from outside.
func (e *Engine) wakeSeqNow() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.wakeSeq
}

// publishedSince reports whether the node (or every node) was woken from
// outside after the wake count was seq: then a subscription claimed at seq
// may have missed an event while it was leased.
func (e *Engine) publishedSince(nodeID int64, seq uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastWake[nodeID] > seq || e.lastWake[0] > seq
}

func (e *Engine) now() time.Time { return e.cfg.Now().UTC() }

// wakeAt wakes the engine for a node after d. A wake after Run ended is
// harmless: Wake never blocks.
func (e *Engine) wakeAt(nodeID int64, d time.Duration) {
	time.AfterFunc(d, func() { e.poke(nodeID) })
}

// Run delivers until ctx ends. A delivery cut off when it ends is given
// back unchanged (its lease released, its cursor where it was), so the
// next process redoes it at once; if even that fails, the lease runs out
// and it is redone then. Nothing is lost either way.
func (e *Engine) Run(ctx context.Context) error {
	e.states = newStateWriter(stateWriterConfig{
		store: e.cfg.Store, log: e.log, wake: e.poke, now: e.now,
		busy:   func() bool { return e.held.Load() > 0 },
		linger: e.cfg.stateLinger, gap: e.cfg.stateGap,
	})
	// A fixed pool of workers, each serving one host's slot at a time:
	// goroutines that live as long as Run keep the stacks they grew for
	// HTTP and TLS instead of growing new ones for every host.
	type hostStart struct {
		host string
		job  hostJob
	}
	starts := make(chan hostStart)
	var wg sync.WaitGroup
	for range e.cfg.Workers {
		wg.Go(func() {
			for st := range starts {
				e.serveHost(ctx, st.host, st.job)
			}
		})
	}
	defer func() {
		close(starts)
		wg.Wait()
		e.states.close() // every answered delivery is recorded before Run returns
	}()
	if e.cfg.Exclusive {
		e.reclaimLeases(ctx)
	}
	maxHeld := e.cfg.Workers * heldPerWorker
	ticker := time.NewTicker(e.cfg.PollInterval)
	defer ticker.Stop()
	e.Wake(0) // catch up on work left by an earlier run
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-e.wake:
		case <-ticker.C:
			e.mu.Lock()
			e.woken[0] = true
			e.mu.Unlock()
		}
		e.mu.Lock()
		nodes := e.woken
		e.woken = map[int64]bool{}
		e.mu.Unlock()
		for nodeID := range nodes {
			for ctx.Err() == nil {
				room := maxHeld - int(e.held.Load())
				if room < e.cfg.Workers {
					// Most of what was claimed is still waiting: claim
					// again when some of it is done, in one large claim
					// rather than one per finished delivery.
					select {
					case <-e.freed:
						continue
					case <-ctx.Done():
						return nil
					}
				}
				now := e.now()
				// One large claim, even the first: on a loaded machine a
				// second claim running while the first few deliveries are
				// sent gets the CPU last and holds the rest back
				// (docs/benchmarks.md, measurement 3).
				limit := min(room, maxClaim)
				claimSeq := e.wakeSeqNow() // before the claim: a publish after it counts as later
				subs, err := e.cfg.Store.ClaimDeliveries(ctx, now, nodeID, limit, e.cfg.Instance, now.Add(e.cfg.Lease))
				if err != nil {
					if ctx.Err() == nil {
						e.log.ErrorContext(ctx, "claim deliveries", "node_id", nodeID, "err", err)
					}
					break
				}
				e.held.Add(int64(len(subs)))
				// A subscription whose host has no free slot waits in that
				// host's queue, served by the worker that holds the host's
				// slot, so it holds no worker itself; when the queue is full
				// it is put off, not waited for, or enough subscriptions of
				// one slow host would hold every worker.
				b := newBatch(e.cfg.Store, e.cfg.Batch)
				b.claimSeq = claimSeq
				postponed := map[string]time.Time{}
				for _, sub := range subs {
					host := hostOf(sub.Address)
					job := hostJob{sub: sub, batch: b, claimed: now}
					switch e.hosts.acquireOrEnqueue(host, job) {
					case slotQueued:
						continue
					case slotFull:
						at, seen := postponed[host]
						if !seen {
							at = now.Add(e.hosts.busyDelay(host))
							postponed[host] = at
							// Look again when they are due, not at the next
							// poll: a host with many subscribers would
							// otherwise get a queue-full per poll interval.
							e.wakeAt(nodeID, at.Sub(now))
						}
						e.postpone(ctx, &sub, at)
						e.done()
						continue
					}
					// Wait for a worker if none is free: this one holds its
					// host's slot meanwhile, so the host's next ones queue.
					// Workers take it even after ctx ends, to give it back.
					starts <- hostStart{host, job}
				}
				if len(postponed) > 0 || len(subs) < limit {
					break // the busy hosts' workers drain their queues first
				}
			}
		}
	}
}

// serveHost serves a claimed subscription, then the ones queued for the
// same host meanwhile, while it holds one of the host's slots; it gives
// the slot back when the queue is empty.
func (e *Engine) serveHost(ctx context.Context, host string, job hostJob) {
	for {
		start := time.Now()
		if ctx.Err() != nil {
			e.giveBack(ctx, &job.sub)
		} else if e.now().Before(job.claimed.Add(e.cfg.Lease - e.cfg.Timeout)) {
			e.serve(ctx, &job.sub, job.batch)
		}
		// Else it waited so long that its lease may run out before it is
		// done: it is left for the lease to expire and be claimed again,
		// rather than risk serving it twice.
		e.done()
		var ok bool
		if job, ok = e.hosts.nextOrRelease(host, time.Since(start)); !ok {
			return
		}
	}
}

// done records that a claimed subscription has been dealt with.
func (e *Engine) done() {
	if e.held.Add(-1) == 0 {
		e.states.settled()
	}
	select {
	case e.freed <- struct{}{}:
	default:
	}
}

// serve does the work of one claimed subscription and saves its state.
func (e *Engine) serve(ctx context.Context, sub *hub.Subscription, b *batch) {
	sender, ok := e.cfg.Senders[sub.Kind]
	if !ok {
		e.log.ErrorContext(ctx, "no sender for subscription kind", "kind", sub.Kind, "subscription", sub.ID)
		return
	}
	node, err := b.node(ctx, sub.NodeID)
	if errors.Is(err, hub.ErrNotFound) {
		return // the node was deleted meanwhile, with its subscriptions
	}
	if err != nil {
		if ctx.Err() != nil {
			e.giveBack(ctx, sub)
			return
		}
		e.log.ErrorContext(ctx, "load node", "node_id", sub.NodeID, "err", err)
		return
	}
	if sub.Change.Claimed {
		e.verifyChange(ctx, sender, sub, node)
		return
	}
	switch sub.State {
	case hub.SubPending, hub.SubUnsubscribing:
		e.verify(ctx, sender, sub, node)
	case hub.SubActive:
		e.deliver(ctx, sender, sub, node, b)
	}
}

func (e *Engine) observe(kind hub.Kind, outcome string, start time.Time) {
	if e.cfg.Observe != nil {
		e.cfg.Observe(kind, outcome, time.Since(start))
	}
}

func (e *Engine) verify(ctx context.Context, sender Sender, sub *hub.Subscription, node *hub.Node) {
	start := time.Now()
	mode := "subscribe"
	if sub.State == hub.SubUnsubscribing {
		mode = "unsubscribe"
	}
	expires, err := sender.Verify(ctx, sub, node, mode)
	if ctx.Err() != nil {
		e.giveBack(ctx, sub) // cut off by shutdown: verified again by the next process
		return
	}
	log := e.log.With("node", node.Name, "kind", sub.Kind, "subscriber", redactURL(sub.Address), "mode", mode)
	switch {
	case err != nil && mode == "subscribe":
		e.observe(sub.Kind, OutcomeRefused, start)
		switch dropped, serr := e.decide(ctx, sub, false, time.Time{}); {
		case serr != nil:
			log.ErrorContext(ctx, "drop an unverified subscription", "err", serr)
		case dropped:
			log.WarnContext(ctx, "verification of intent failed; subscription dropped", "err", err)
			return
		default:
			// A newer request replaced the settings meanwhile: that one
			// is verified next.
			log.InfoContext(ctx, "verification of intent failed for a request replaced meanwhile", "err", err)
		}
		e.saveThen(ctx, sub, sub.DeliveryState, true)
	case err != nil:
		// An unsubscription left by an earlier pingd (state
		// unsubscribing); newer ones are pending changes.
		e.observe(sub.Kind, OutcomeRefused, start)
		log.WarnContext(ctx, "unsubscribe not confirmed; subscription kept", "err", err)
		e.setState(ctx, sub, hub.SubActive, sub.ExpiresAt, false)
	case mode == "unsubscribe":
		e.observe(sub.Kind, OutcomeVerified, start)
		log.InfoContext(ctx, "unsubscribed")
		e.remove(ctx, sub)
	default:
		e.observe(sub.Kind, OutcomeVerified, start)
		switch applied, serr := e.decide(ctx, sub, true, expires); {
		case serr != nil:
			log.ErrorContext(ctx, "activate a verified subscription", "err", serr)
			e.saveThen(ctx, sub, sub.DeliveryState, true)
			return
		case !applied:
			log.InfoContext(ctx, "verified a request replaced meanwhile; the newer one is verified next")
			e.saveThen(ctx, sub, sub.DeliveryState, true)
			return
		}
		log.InfoContext(ctx, "subscription verified", "expires", expires)
		// Look at the node once saved: events may have arrived while it
		// was pending.
		e.saveThen(ctx, sub, cleanRecord(sub.DeliveryState), true)
	}
}

// cleanRecord is the delivery state of a subscription whose subscriber has
// just verified a (re)subscription: errors from before a renewal must not
// suspend or age it at once, and it is served now.
func cleanRecord(ds hub.DeliveryState) hub.DeliveryState {
	ds.ConsecutiveErrors, ds.FirstFailureAt, ds.LastError, ds.NextAttemptAt = 0, time.Time{}, "", time.Time{}
	return ds
}

// decide applies (verified) or refuses the request the subscription was
// claimed with, by its Change.ID. It reports false when nothing was
// decided: a newer request replaced it meanwhile, or the subscription is
// gone. A store error is returned; the request then stays and is verified
// again.
func (e *Engine) decide(ctx context.Context, sub *hub.Subscription, verified bool, expires time.Time) (bool, error) {
	ctx, cancel := persistContext(ctx)
	defer cancel()
	if verified {
		return e.cfg.Store.ApplySubscriptionChange(ctx, sub.ID, sub.Change.ID, expires)
	}
	return e.cfg.Store.RefuseSubscriptionChange(ctx, sub.ID, sub.Change.ID)
}

// verifyChange asks the callback of a verified subscription about its
// pending change, with the settings the change asks for, and applies the
// change only if the callback confirms. A refused or unanswered change
// leaves the subscription exactly as it was (settings, lease, cursor,
// delivery record). The verification holds the change's lease only: the
// subscription's deliveries go on beside it with the settings it has.
func (e *Engine) verifyChange(ctx context.Context, sender Sender, sub *hub.Subscription, node *hub.Node) {
	start := time.Now()
	change := sub.Change
	asked := *sub
	if change.Mode == hub.ChangeSubscribe {
		asked.Options = change.Options
	}
	expires, err := sender.Verify(ctx, &asked, node, change.Mode)
	if ctx.Err() != nil {
		e.giveBack(ctx, sub) // cut off by shutdown: verified again by the next process
		return
	}
	log := e.log.With("node", node.Name, "kind", sub.Kind, "subscriber", redactURL(sub.Address), "mode", change.Mode)
	if err != nil {
		e.observe(sub.Kind, OutcomeRefused, start)
		switch dropped, serr := e.decide(ctx, sub, false, time.Time{}); {
		case serr != nil:
			log.ErrorContext(ctx, "drop an unverified change", "err", serr)
		case dropped:
			log.WarnContext(ctx, "change of a subscription not confirmed; the subscription stays as it was", "err", err)
		default:
			log.InfoContext(ctx, "a change not confirmed was replaced, or its subscription removed, meanwhile", "err", err)
		}
		return
	}
	e.observe(sub.Kind, OutcomeVerified, start)
	switch applied, serr := e.decide(ctx, sub, true, expires); {
	case serr != nil:
		log.ErrorContext(ctx, "apply a verified change", "err", serr)
	case !applied:
		log.InfoContext(ctx, "verified a change replaced, or its subscription removed, meanwhile; nothing applied")
	case change.Mode == hub.ChangeUnsubscribe:
		log.InfoContext(ctx, "unsubscribed")
	default:
		log.InfoContext(ctx, "change of a subscription verified", "expires", expires)
		// A renewal clears the backoff and resumes a suspended
		// subscription: look at the node for what it may now be sent.
		e.poke(sub.NodeID)
	}
}

// releaseChange gives back the lease of a change's verification undecided.
func (e *Engine) releaseChange(ctx context.Context, sub *hub.Subscription) {
	ctx, cancel := persistContext(ctx)
	defer cancel()
	if err := e.cfg.Store.ReleaseSubscriptionChange(ctx, sub.ID, sub.Change.ID); err != nil {
		e.log.ErrorContext(ctx, "release the verification of a change", "subscription", sub.ID, "err", err)
	}
}

func (e *Engine) setState(ctx context.Context, sub *hub.Subscription, st hub.SubState, expires time.Time, wake bool) {
	ctx, cancel := persistContext(ctx)
	defer cancel()
	if err := e.cfg.Store.SetSubscriptionState(ctx, sub.ID, st, expires); err != nil && !errors.Is(err, hub.ErrNotFound) {
		e.log.ErrorContext(ctx, "save subscription state", "subscription", sub.ID, "err", err)
		return
	}
	ds := sub.DeliveryState
	ds.LeaseOwner, ds.LeaseUntil = "", time.Time{}
	ds.NextAttemptAt = time.Time{}
	e.saveThen(ctx, sub, ds, wake)
}

func (e *Engine) remove(ctx context.Context, sub *hub.Subscription) {
	ctx, cancel := persistContext(ctx)
	defer cancel()
	if err := e.cfg.Store.DeleteSubscription(ctx, sub.ID); err != nil && !errors.Is(err, hub.ErrNotFound) {
		e.log.ErrorContext(ctx, "remove subscription", "subscription", sub.ID, "err", err)
	}
}

// persistContext is the context of a write that records what a receiver
// already answered: it must happen even when shutdown has just ended ctx,
// or the delivery would be repeated after the restart.
func persistContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), persistTimeout)
}

// save records a subscription's delivery state and releases its lease.
func (e *Engine) save(ctx context.Context, sub *hub.Subscription, ds hub.DeliveryState) {
	e.saveThen(ctx, sub, ds, false)
}

// saveThen is save, then, if wake, a look at the subscription's node
// (only once saved: until then it is leased, and the look would skip it).
// Saves happen only within Run, whose state writer writes them even after
// ctx ended (persistContext).
func (e *Engine) saveThen(_ context.Context, sub *hub.Subscription, ds hub.DeliveryState, wake bool) {
	e.queueState(sub, ds, wake, time.Time{})
}

// queueState hands a state to the state writer, its lease released; with
// wake, the writer looks at the node once the state is written, if that is
// not before due.
func (e *Engine) queueState(sub *hub.Subscription, ds hub.DeliveryState, wake bool, due time.Time) {
	ds.LeaseOwner, ds.LeaseUntil = "", time.Time{}
	e.states.save(pendingState{SavedDeliveryState: hub.SavedDeliveryState{ID: sub.ID, State: ds},
		nodeID: sub.NodeID, wake: wake, due: due})
}

// persistTimeout bounds the writes of delivery bookkeeping, which outlive
// a cancelled context (see persistContext).
const persistTimeout = 5 * time.Second

// giveBack releases the lease of a subscription whose work shutdown cut
// off, leaving its delivery state as it was when claimed.
func (e *Engine) giveBack(ctx context.Context, sub *hub.Subscription) {
	if sub.Change.Claimed {
		e.releaseChange(ctx, sub)
		return
	}
	e.save(ctx, sub, sub.DeliveryState)
	e.log.DebugContext(ctx, "delivery cut off by shutdown; given back", "subscription", sub.ID,
		"subscriber", redactURL(sub.Address))
}

// reclaimLeases releases the leases of HTTP subscriptions held by anyone
// but this engine. Only with Exclusive: then their holder is a process
// that died (kill -9, a crash, a power cut) before it could save them.
func (e *Engine) reclaimLeases(ctx context.Context) {
	now := e.now()
	n := 0
	// One kind at a time: XMPP subscriptions, often the most numerous,
	// have no delivery leases and are not read at all.
	for _, kind := range []hub.Kind{hub.KindWebhook, hub.KindWebSub, hub.KindRSSCloud, hub.KindCNWS} {
		subs, err := e.cfg.Store.Subscriptions(ctx, hub.SubscriptionFilter{Kind: kind})
		if err != nil {
			if ctx.Err() == nil {
				e.log.WarnContext(ctx, "look for deliveries left leased by an earlier process", "kind", kind, "err", err)
			}
			return
		}
		for i := range subs {
			s := &subs[i]
			if c := s.Change; c.Pending() && c.LeaseOwner != "" && c.LeaseOwner != e.cfg.Instance && c.LeaseUntil.After(now) {
				e.releaseChange(ctx, s)
				n++
			}
			if s.LeaseOwner == "" || s.LeaseOwner == e.cfg.Instance || !s.LeaseUntil.After(now) {
				continue
			}
			e.saveThen(ctx, s, s.DeliveryState, true) // served as soon as it is released
			n++
		}
	}
	if n > 0 {
		e.log.InfoContext(ctx, "took back deliveries an earlier process left leased", "subscriptions", n)
	}
}

func (e *Engine) deliver(ctx context.Context, sender Sender, sub *hub.Subscription, node *hub.Node, b *batch) {
	events, err := b.eventsAfter(ctx, node.ID, sub.Cursor)
	if err != nil {
		if ctx.Err() != nil {
			e.giveBack(ctx, sub)
			return
		}
		e.log.ErrorContext(ctx, "read node log", "node", node.Name, "err", err)
		return
	}
	ds := sub.DeliveryState
	if len(events) == 0 {
		// The log was pruned past the cursor or nothing is left: catch up.
		ds.Cursor = max(ds.Cursor, node.LastSeq)
		e.save(ctx, sub, ds)
		return
	}
	last := events[len(events)-1].Seq
	wanted := events[:0:0]
	for _, ev := range events {
		if sender.Wants(sub, ev) {
			wanted = append(wanted, ev)
		}
	}
	// Once saved, look at the node again only if more may wait: events
	// beyond this batch, or a publish since the claim (its wake found this
	// subscription leased). Otherwise a fan-out of N would end in N looks
	// at the node that find nothing.
	moreMayWait := func() bool {
		return len(events) >= b.limit || e.publishedSince(node.ID, b.claimSeq)
	}
	if len(wanted) == 0 {
		ds.Cursor = last
		e.saveThen(ctx, sub, ds, moreMayWait())
		return
	}
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	res := sender.Deliver(dctx, &Delivery{Sub: sub, Node: node, Events: wanted, batch: b})
	cancel()
	if ctx.Err() != nil && res.Err != nil {
		// Cut off by shutdown: not the receiver's fault, so no attempt is
		// counted; the next process sends it again.
		e.giveBack(ctx, sub)
		return
	}
	now := e.now()
	ds.Attempts++
	ds.LastStatus = res.Status
	if res.Err == nil {
		ds.Cursor = last
		ds.ConsecutiveErrors, ds.FirstFailureAt, ds.NextAttemptAt, ds.LastError = 0, time.Time{}, time.Time{}, ""
		ds.LastDeliveredAt = now
		e.observe(sub.Kind, OutcomeDelivered, start)
		if e.log.Enabled(ctx, slog.LevelDebug) { // the common case: no logger built for it
			e.log.DebugContext(ctx, "delivered", "node", node.Name, "kind", sub.Kind, "subscriber", redactURL(sub.Address),
				"status", res.Status, "events", len(wanted), "cursor", last)
		}
		e.saveThen(ctx, sub, ds, moreMayWait())
		return
	}
	log := e.log.With("node", node.Name, "kind", sub.Kind, "subscriber", redactURL(sub.Address), "status", res.Status)
	switch {
	case res.Remove:
		e.observe(sub.Kind, OutcomeRemoved, start)
		log.InfoContext(ctx, "receiver asked to be removed; subscription deleted", "err", res.Err)
		e.remove(ctx, sub)
	default:
		ds.LastError = res.Err.Error()
		ds.ConsecutiveErrors++
		if ds.FirstFailureAt.IsZero() {
			ds.FirstFailureAt = now
		}
		policy := sender.Policy()
		if policy.SuspendAfter > 0 && ds.ConsecutiveErrors >= policy.SuspendAfter {
			e.observe(sub.Kind, OutcomeSuspended, start)
			log.WarnContext(ctx, "subscription suspended until renewed", "errors_in_a_row", ds.ConsecutiveErrors, "err", res.Err)
			pctx, cancel := persistContext(ctx)
			err := e.cfg.Store.SetSubscriptionState(pctx, sub.ID, hub.SubSuspended, sub.ExpiresAt)
			cancel()
			if err != nil && !errors.Is(err, hub.ErrNotFound) {
				log.ErrorContext(ctx, "suspend subscription", "err", err)
			}
			e.save(ctx, sub, ds)
			return
		}
		next, giveUp := e.nextAttempt(now, ds, policy)
		if giveUp {
			e.observe(sub.Kind, OutcomeRemoved, start)
			log.WarnContext(ctx, "receiver failed for the whole retry window; subscription removed",
				"failing_since", ds.FirstFailureAt, "attempts", ds.ConsecutiveErrors, "err", res.Err)
			e.remove(ctx, sub)
			return
		}
		ds.NextAttemptAt = next
		e.observe(sub.Kind, OutcomeRetry, start)
		log.InfoContext(ctx, "delivery failed; will retry", "next_attempt", next, "errors_in_a_row", ds.ConsecutiveErrors, "err", res.Err)
		e.save(ctx, sub, ds)
	}
}

// nextAttempt schedules the retry after a failure at now: exponential
// backoff with ±20% jitter, never past the end of the retry window, where
// one last retry happens; giveUp is true once that last retry failed.
func (e *Engine) nextAttempt(now time.Time, ds hub.DeliveryState, p Policy) (next time.Time, giveUp bool) {
	window := p.RetryWindow
	if window <= 0 {
		window = 24 * time.Hour
	}
	deadline := ds.FirstFailureAt.Add(window)
	if !now.Before(deadline) {
		return time.Time{}, true
	}
	d := e.cfg.MinBackoff << min(ds.ConsecutiveErrors-1, 20)
	if d <= 0 || d > e.cfg.MaxBackoff {
		d = e.cfg.MaxBackoff
	}
	d = time.Duration(float64(d) * (0.8 + 0.4*e.rand()))
	next = now.Add(d)
	if next.After(deadline) {
		next = deadline
	}
	return next, false
}

// Bounds of the delay before another try at a subscription whose host was
// busy.
const (
	minBusyDelay = 10 * time.Millisecond
	maxBusyDelay = time.Minute
)

// hostSlots bounds concurrent deliveries per receiver host and keeps a
// moving average of how long that host takes to answer. Slots live only
// while some delivery to that host runs; the averages of idle hosts are
// remembered in answers (a bounded map) for their next deliveries.
type hostSlots struct {
	mu  sync.Mutex
	max int
	// queueFor is how long a host's queue may take to drain, from its
	// answer times: a fast host may have many subscriptions waiting in
	// memory, a slow one few, so none waits until its lease runs out.
	queueFor time.Duration
	slots    map[string]*hostSlot
	answers  map[string]time.Duration
}

type hostSlot struct {
	busy  int
	avg   time.Duration
	queue []hostJob
	// since is when the host got busy: before its first answer, how long
	// it has kept us waiting is the best guess of its answer time.
	since time.Time
}

// hostJob is a claimed subscription waiting for its host.
type hostJob struct {
	sub     hub.Subscription
	batch   *batch
	claimed time.Time
}

// Bounds of the subscriptions waiting in memory for one busy host, per
// slot; beyond it they are put off in the store. A host whose answer
// times are not known yet gets the default.
const (
	defaultQueuedPerSlot = 16
	maxQueuedPerSlot     = 1024
	maxRememberedHosts   = 4096
)

// Outcomes of acquireOrEnqueue.
const (
	slotAcquired = iota
	slotQueued
	slotFull
)

// acquireOrEnqueue takes a slot for host if one is free, or else queues
// the job for the holders of the host's slots, if the queue has room.
func (h *hostSlots) acquireOrEnqueue(host string, job hostJob) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, found := h.slots[host]
	if !found {
		s = &hostSlot{avg: h.answers[host], since: time.Now()}
		h.slots[host] = s
	}
	switch {
	case s.busy < h.max:
		s.busy++
		return slotAcquired
	case len(s.queue) < h.queueLimit(s):
		s.queue = append(s.queue, job)
		return slotQueued
	}
	return slotFull
}

// queueLimit is how many subscriptions may wait for a host: as many as its
// slots serve in queueFor at its recent answer time.
func (h *hostSlots) queueLimit(s *hostSlot) int {
	perSlot := defaultQueuedPerSlot
	if s.avg > 0 {
		perSlot = int(min(int64(h.queueFor/s.avg), maxQueuedPerSlot))
	}
	return max(perSlot, 1) * h.max
}

// nextOrRelease records how long the host took for the job just done and
// hands the slot's holder the next queued job; with none queued it gives
// the slot back. Both under one lock, so no job is queued for a host whose
// last holder has just left.
func (h *hostSlots) nextOrRelease(host string, took time.Duration) (hostJob, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.slots[host]
	if s.avg == 0 {
		s.avg = took
	} else {
		s.avg = (4*s.avg + took) / 5
	}
	if len(s.queue) > 0 {
		job := s.queue[0]
		s.queue[0] = hostJob{}
		s.queue = s.queue[1:]
		return job, true
	}
	if s.busy--; s.busy == 0 {
		delete(h.slots, host)
		if len(h.answers) >= maxRememberedHosts {
			clear(h.answers) // forget them all rather than keep a list
		}
		h.answers[host] = s.avg
	}
	return hostJob{}, false
}

// busyDelay is how long to put off the subscriptions found waiting for a
// busy host whose queue is full: about when the host will have served
// half of its queue, from its recent answer times. All of them come back
// together, with one look at their node (Run schedules it), and those the
// queue cannot take then are put off again.
func (h *hostSlots) busyDelay(host string) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	var avg time.Duration
	queued := 0
	if s := h.slots[host]; s != nil {
		queued = len(s.queue)
	}
	switch s := h.slots[host]; {
	case s != nil && s.avg > 0:
		avg = s.avg
	case s != nil:
		// No answer yet: at least as long as it has been busy. Those put
		// off come back sooner than a guess of a second would bring them,
		// and are put off again, for longer, while it stays silent.
		avg = time.Since(s.since)
	default:
		avg = h.answers[host]
	}
	d := avg * time.Duration(1+queued/(2*h.max))
	return min(max(d, minBusyDelay), maxBusyDelay)
}

// postpone gives back a claimed subscription untouched but for its next
// attempt time, for when its host had no free slot.
func (e *Engine) postpone(ctx context.Context, sub *hub.Subscription, at time.Time) {
	if sub.Change.Claimed {
		// Its lease is the change's, not the deliveries': given back, it is
		// claimed again when Run looks at the node at `at`.
		e.releaseChange(ctx, sub)
		return
	}
	ds := sub.DeliveryState
	if at.After(ds.NextAttemptAt) {
		ds.NextAttemptAt = at
	}
	e.log.DebugContext(ctx, "receiver host busy; postponed", "subscription", sub.ID,
		"subscriber", redactURL(sub.Address), "until", ds.NextAttemptAt)
	// Run wakes the node when it is due, but the state writer may write
	// this after that (it waits for running deliveries), and a look at the
	// node before the write finds it leased: so look again once written,
	// if that is after it was due.
	e.queueState(sub, ds, true, ds.NextAttemptAt)
}

// hostOf is the receiver's origin, the key of the per-host limit: in
// canonical form (hub.HostKey), so one host spelled several ways (a
// zero-padded port, a trailing dot) is one host.
func hostOf(raw string) string {
	if key := hub.HostKey(raw); key != "" {
		return key
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return strings.ToLower(u.Host)
}

// redactURL drops the query and user info of a callback URL for logs:
// receivers often put secrets there.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable URL>"
	}
	u.User = nil
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	return u.String()
}

// errStatus formats an unexpected HTTP status as an error.
func errStatus(code int) error { return fmt.Errorf("HTTP %d", code) }
