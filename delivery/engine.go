package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/httpout"
)

// Config configures an Engine.
type Config struct {
	Store   Store
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
	// Lease is how long a claimed subscription stays ours without a
	// renewal (DefaultLease). Run renews the leases of what it holds
	// every third of it, so a delivery may take longer than a lease while
	// the process lives, and the subscriptions of a process that died are
	// free again within one lease.
	Lease time.Duration
	// Timeout bounds one delivery request (DefaultTimeout).
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
	// process's without a renewal: short, so that what a process that
	// died held is served by the others within seconds.
	DefaultLease = 15 * time.Second
	// DefaultTimeout bounds one delivery request.
	DefaultTimeout = 30 * time.Second
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
	// appended holds, per node, what publishes of this process appended
	// since its last claim (Appended): the claim of the node takes it, and
	// its deliveries start from it instead of reading it back.
	appended map[int64]appendedLog
	// pokes counts the calls of poke; looked is the count at the latest
	// look for work that is over (everything poked until then looked at
	// and what it found claimed), so that tests can tell that a look
	// found nothing instead of sleeping.
	pokes  uint64
	looked atomic.Uint64
	// leases counts, per subscription, the claimed entries of it not yet
	// done with (a delivery and a change's verification may both be);
	// Run renews their leases. renewed is when the last renewal of all
	// of them succeeded (Unix nanoseconds of e.now()).
	leaseMu sync.Mutex
	leases  map[int64]int
	renewed atomic.Int64
}

// queueFor is how long a busy host's queue in memory may take to drain:
// one and a half request timeouts.
func queueFor(timeout time.Duration) time.Duration { return timeout * 3 / 2 }

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
	for kind := range cfg.Senders {
		// The engine claims HTTP subscriptions only (hub's kind registry):
		// a sender of any other kind would never be called.
		if !kind.HTTP() {
			return nil, fmt.Errorf("delivery: a sender for %q, which is no HTTP subscription kind", kind)
		}
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
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
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
			queueFor: queueFor(cfg.Timeout),
			slots:    map[string]*hostSlot{},
			answers:  map[string]time.Duration{},
		},
		rand:     rand.Float64,
		freed:    make(chan struct{}, 1),
		lastWake: map[int64]uint64{},
		appended: map[int64]appendedLog{},
		leases:   map[int64]int{},
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

// appendedLog is what publishes of this process appended to a node since
// its last claim: the node as the publish read it (its LastSeq the last
// event's) and the events, consecutive.
type appendedLog struct {
	node   *hub.Node
	events []hub.Event
}

// span names the events held.
func (a appendedLog) span() hub.EventSpan {
	return hub.EventSpan{After: a.events[0].Seq - 1, Last: a.events[len(a.events)-1].Seq}
}

// Appended is Wake for a publish of this process, which hands over what it
// appended (hub.AppendedTransport): the claim of the node then reads
// neither the node nor these events if its subscribers stand right before
// them and the log ends with them (Store.ClaimNodeDeliveries), so the
// first deliveries start sooner. Otherwise the claim reads them as always.
func (e *Engine) Appended(node *hub.Node, events []hub.Event) {
	if node == nil {
		return
	}
	if len(events) > 0 && events[0].Seq > 0 {
		e.mu.Lock()
		if len(e.appended) >= maxWakeRecords {
			clear(e.appended) // a hint only: the claims of those nodes read their logs
		}
		held, ok := e.appended[node.ID]
		switch {
		case ok && held.events[len(held.events)-1].Seq+1 == events[0].Seq && len(held.events)+len(events) <= e.cfg.Batch:
			// Publishes in a row before the node's claim: it holds them all.
			e.appended[node.ID] = appendedLog{node: node, events: append(slices.Clip(held.events), events...)}
		case len(events) <= e.cfg.Batch:
			e.appended[node.ID] = appendedLog{node: node, events: events}
		default:
			delete(e.appended, node.ID) // more than one request's worth: read in batches
		}
		e.mu.Unlock()
	}
	e.Wake(node.ID)
}

// takeAppended takes what publishes appended to the node since its last
// claim, if anything.
func (e *Engine) takeAppended(nodeID int64) (appendedLog, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.appended[nodeID]
	if ok {
		delete(e.appended, nodeID)
	}
	return a, ok
}

// poke makes the engine look at the node's subscriptions, for reasons of
// its own (a retry due, a state saved).
func (e *Engine) poke(nodeID int64) {
	e.mu.Lock()
	e.woken[nodeID] = true
	e.pokes++
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
	// The save is the lease holder's: the store writes it only while the
	// lease is still the one the claim took (hub.DeliveryState).
	ds.LeaseOwner, ds.LeaseUntil = sub.LeaseOwner, time.Time{}
	e.states.save(pendingState{SavedDeliveryState: hub.SavedDeliveryState{ID: sub.ID, State: ds},
		nodeID: sub.NodeID, wake: wake, due: due})
}

// persistTimeout bounds the writes of delivery bookkeeping, which outlive
// a cancelled context (see persistContext).
const persistTimeout = 5 * time.Second

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

// redactURL drops the query and user info of a callback URL for logs:
// receivers often put secrets there.
func redactURL(raw string) string { return httpout.RedactURL(raw) }
