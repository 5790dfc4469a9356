package delivery

import (
	"context"
	"sync"
	"time"

	"github.com/pingd/pingd/hub"
)

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
	e.reclaimLeases(ctx)
	wg.Go(func() { e.renewLeases(ctx) })
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
		pokes := e.pokes
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
				b := newBatch(e.cfg.Store, e.cfg.Batch)
				b.claimSeq = claimSeq
				subs, err := e.claim(ctx, b, now, nodeID, limit)
				if err != nil {
					if ctx.Err() == nil {
						e.log.ErrorContext(ctx, "claim deliveries", "node_id", nodeID, "err", err)
					}
					break
				}
				e.held.Add(int64(len(subs)))
				e.track(subs)
				// A subscription whose host has no free slot waits in that
				// host's queue, served by the worker that holds the host's
				// slot, so it holds no worker itself; when the queue is full
				// it is put off, not waited for, or enough subscriptions of
				// one slow host would hold every worker.
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
						e.done(sub.ID)
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
		e.looked.Store(pokes)
	}
}

// claim leases up to limit subscriptions with work at now (of one node
// when nodeID > 0). A claim of one node also brings the node and its
// events after the subscribers' usual cursor into b: what a publish of
// this process handed over (Appended), when the claim finds that those are
// the events after that cursor, or else read in the claim's transaction.
// Either way the first deliveries start without reads of their own.
func (e *Engine) claim(ctx context.Context, b *batch, now time.Time, nodeID int64, limit int) ([]hub.Subscription, error) {
	until := now.Add(e.cfg.Lease)
	if nodeID <= 0 {
		return e.cfg.Store.ClaimDeliveries(ctx, now, nodeID, limit, e.cfg.Instance, until)
	}
	held, holding := e.takeAppended(nodeID)
	var span hub.EventSpan
	if holding {
		span = held.span()
	}
	c, err := e.cfg.Store.ClaimNodeDeliveries(ctx, now, nodeID, limit, e.cfg.Instance, until, b.limit, span)
	if err != nil {
		return nil, err
	}
	switch {
	case c.Held:
		b.prime(held.node, c.After, held.events)
	case c.Node != nil:
		b.prime(c.Node, c.After, c.Events)
	}
	return c.Subscriptions, nil
}

// serveHost serves a claimed subscription, then the ones queued for the
// same host meanwhile, while it holds one of the host's slots; it gives
// the slot back when the queue is empty.
func (e *Engine) serveHost(ctx context.Context, host string, job hostJob) {
	for {
		start := time.Now()
		if ctx.Err() != nil {
			e.giveBack(ctx, &job.sub)
		} else if e.leaseLive(job.claimed) {
			e.serve(ctx, &job.sub, job.batch)
		}
		// Else its lease was not renewed for so long that it may have run
		// out: it is left for another process (or this one) to claim
		// again, rather than risk serving it twice.
		e.done(job.sub.ID)
		var ok bool
		if job, ok = e.hosts.nextOrRelease(host, time.Since(start)); !ok {
			return
		}
	}
}

// done records that a claimed subscription has been dealt with: its
// state is queued for the writer, which releases the lease.
func (e *Engine) done(id int64) {
	e.untrack(id)
	if e.held.Add(-1) == 0 {
		e.states.settled()
	}
	select {
	case e.freed <- struct{}{}:
	default:
	}
}

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

// reclaimLeases releases, at start, the leases a process of this name
// left when it died (a restart under a stable Instance takes its work
// back at once, on any store) and, with Exclusive, those of any other
// name: then their holder is a process that died (kill -9, a crash, a
// power cut) before it could save them.
func (e *Engine) reclaimLeases(ctx context.Context) {
	if n, err := e.cfg.Store.ReleaseDeliveryLeases(ctx, e.cfg.Instance); err != nil {
		if ctx.Err() == nil {
			e.log.WarnContext(ctx, "take back deliveries left leased under this instance name", "instance", e.cfg.Instance, "err", err)
		}
	} else if n > 0 {
		e.log.InfoContext(ctx, "took back deliveries a process of this instance name left leased",
			"instance", e.cfg.Instance, "leases", n)
	}
	if !e.cfg.Exclusive {
		return
	}
	now := e.now()
	n := 0
	// One kind at a time, the HTTP ones: the others (XMPP subscriptions,
	// often the most numerous) have no delivery leases and are not read
	// at all.
	for _, kind := range hub.HTTPKinds() {
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
			// Saved as the holder it names (s.LeaseOwner), which the
			// store's fence asks for.
			e.saveThen(ctx, s, s.DeliveryState, true) // served as soon as it is released
			n++
		}
	}
	if n > 0 {
		e.log.InfoContext(ctx, "took back deliveries an earlier process left leased", "subscriptions", n)
	}
}

// track records claimed subscriptions whose leases Run renews.
func (e *Engine) track(subs []hub.Subscription) {
	e.leaseMu.Lock()
	defer e.leaseMu.Unlock()
	for _, s := range subs {
		e.leases[s.ID]++
	}
}

// untrack forgets one claimed entry of a subscription.
func (e *Engine) untrack(id int64) {
	e.leaseMu.Lock()
	defer e.leaseMu.Unlock()
	if e.leases[id]--; e.leases[id] <= 0 {
		delete(e.leases, id)
	}
}

// leaseLive reports whether the lease of a subscription claimed at
// `claimed` still has a renewal's margin: it was claimed, or last renewed,
// less than two thirds of a lease ago. A delivery started later could
// outlast it and be sent twice.
func (e *Engine) leaseLive(claimed time.Time) bool {
	since := claimed
	if r := e.renewed.Load(); r > since.UnixNano() {
		since = time.Unix(0, r)
	}
	return e.now().Before(since.Add(e.cfg.Lease - e.renewEvery()))
}

// renewEvery is how often the leases of what is held are renewed.
func (e *Engine) renewEvery() time.Duration { return e.cfg.Lease / 3 }

// renewLeases renews, every third of a lease until ctx ends, the leases
// of every subscription claimed and not yet done with: a delivery to a
// slow receiver keeps its lease, and a process that dies frees its
// subscriptions one lease later.
func (e *Engine) renewLeases(ctx context.Context) {
	t := time.NewTicker(e.renewEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.leaseMu.Lock()
		ids := make([]int64, 0, len(e.leases))
		for id := range e.leases {
			ids = append(ids, id)
		}
		e.leaseMu.Unlock()
		now := e.now()
		if len(ids) > 0 {
			if _, err := e.cfg.Store.RenewDeliveryLeases(ctx, e.cfg.Instance, ids, now.Add(e.cfg.Lease)); err != nil {
				if ctx.Err() == nil {
					e.log.WarnContext(ctx, "renew delivery leases", "subscriptions", len(ids), "err", err)
				}
				continue
			}
		}
		e.renewed.Store(now.UnixNano())
	}
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
