package fetching

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingd/pingd/hub"
)

// The fetch loop: it claims due sources in batches, hands each to its
// host (hosts.go) and starts a worker for a source only when its host
// may be fetched now, so workers never wait for a host. It holds up to
// sixteen times FetchWorkers sources (at least 128; above 64 workers,
// 1,024 or four times FetchWorkers) and claims again once
// half of that is free, so a claim is a large batch even under load (a
// claim is a write transaction: fewer, larger ones leave more of the
// database to the fetches' outcomes) and the half still held keeps the
// workers busy while a claim waits behind other writes (tens of
// milliseconds at times on SQLite); a claim runs beside the loop, which
// meanwhile starts what it holds and takes the reports of ended fetches,
// so the workers do not wait for it. When nothing runs or waits, a claim
// asks for only twice FetchWorkers, so the first fetches start sooner.
// When no fetch runs any more, the unchanged writer stores what it
// collected without waiting for company.
// A worker's end wakes the loop at once; having claimed all that was due,
// it sleeps until the next source falls due (the store's NextSourceDue),
// a Wake, or its one-second tick, whichever comes first.

// fetchDone is a worker's report to the loop.
type fetchDone struct {
	host string
	took time.Duration
	// pause: the host asked to be left alone until then (429, 503).
	pause time.Time
}

// claimResult is a claim's report to the loop: the sources claimed of
// asked, and when fewer were, when the next source falls due.
type claimResult struct {
	srcs    []hub.Source
	asked   int
	nextDue time.Time
}

// fetchLoad is what the fetch loop holds, for Load.
type fetchLoad struct {
	running, waiting, paused atomic.Int64
}

// Load reports what the fetch loop holds now.
func (e *Engine) Load() hub.FetchLoad {
	return hub.FetchLoad{Running: int(e.load.running.Load()), WaitingForHost: int(e.load.waiting.Load()),
		HostsPaused: int(e.load.paused.Load())}
}

// Limits reports the fetch loop's bounds, defaults applied.
func (e *Engine) Limits() hub.FetchLimits {
	return hub.FetchLimits{Workers: e.cfg.FetchWorkers, PerHost: e.cfg.FetchesPerHost, HostSpacing: e.cfg.FetchHostSpacing}
}

func (e *Engine) fetchLoop(ctx context.Context, w *unchangedWriter) {
	workers := e.cfg.FetchWorkers
	// maxInHand bounds the claimed sources waiting for their hosts: the
	// leases this process holds unused. (They come without their bodies,
	// which a fetch reads only for an RFC 3229 delta, so a source in hand
	// costs about a kilobyte, whatever its feed's size.)
	// Sixteen times the workers, at least 128; above 64 workers, 1,024
	// or four times the workers, so that many workers do not hold many
	// more leases than they did.
	maxInHand := max(min(16*workers, 1024), 4*workers, 128)
	// maxClaim bounds the rows of one claim (and its statement's
	// parameters) as three times the workers did, but never below 512.
	maxClaim := max(3*workers, 512)
	// claimAtLeast: a claim waits until it can take half of that, so
	// that claims are few and large while half of what is held still
	// keeps the workers busy during the claim.
	claimAtLeast := max(workers, maxInHand/2)
	hosts := newFetchHosts(e.cfg.FetchesPerHost, e.cfg.FetchHostSpacing)
	done := make(chan fetchDone, workers)
	running := 0
	var wg sync.WaitGroup
	giveBack := func(srcs []hub.Source, at time.Time, reason string) {
		for i := range srcs {
			w.add(releaseOutcome(&srcs[i], at, reason), srcs[i].URL)
		}
	}
	// claiming: a claim runs; its report comes on claimed. woken: a
	// wake-up or a tick came meanwhile, so a claim that found fewer than
	// it asked for does not mean nothing is due (a ping may have made a
	// source due after the claim's query).
	claimed := make(chan claimResult, 1)
	claiming, woken := false, false
	defer func() {
		// Shutting down: what a claim under way brings and what waits for
		// its host go back due at once; the running fetches end with ctx
		// and give theirs back.
		if claiming {
			giveBack((<-claimed).srcs, e.now(), hub.ReasonInterrupted)
		}
		for _, src := range hosts.drain() {
			at, reason := e.now(), hub.ReasonInterrupted
			if src.Gone {
				at, reason = time.Time{}, "gone"
			}
			giveBack([]hub.Source{src}, at, reason)
		}
		wg.Wait()
		e.load.running.Store(0)
		e.load.waiting.Store(0)
		e.load.paused.Store(0)
	}()
	drained := false
	// ended: a fetch ended since the last pass.
	ended := false
	// lapsed: sources whose leases had run out were given back; their
	// release must be stored before the next claim (unchangedWriter.sync).
	lapsed := false
	// nextDue: when the next source falls due, as the store said after the
	// claim that drained what was due; zero when unknown or none.
	var nextDue time.Time
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := e.now()
		for running < workers {
			src, ok, expired := hosts.next(now, e.cfg.FetchTimeout)
			// Their lease would end before their fetch could: due again
			// at once, to be claimed afresh.
			giveBack(expired, now, hub.ReasonHostBusy)
			lapsed = lapsed || len(expired) > 0
			if !ok {
				break
			}
			running++
			host := hub.HostKey(src.URL)
			wg.Go(func() {
				started := time.Now()
				pause := e.fetchSource(ctx, &src, w)
				done <- fetchDone{host: host, took: time.Since(started), pause: pause}
			})
		}
		if ended && running == 0 {
			// Nothing runs that could join the unchanged outcomes
			// waiting for company: store them now.
			w.flushSoon()
		}
		ended = false
		room := min(maxInHand-running-hosts.startable(now), maxInHand-hosts.waiting)
		if !claiming && !drained && room >= claimAtLeast && ctx.Err() == nil {
			if lapsed {
				w.sync()
				lapsed = false
			}
			claiming, woken = true, false
			room = min(room, maxClaim)
			if running == 0 && hosts.waiting == 0 {
				// Nothing to do meanwhile: a first claim of a few starts
				// the workers sooner than one of many would.
				room = min(room, 2*workers)
			}
			go func() { claimed <- e.claim(ctx, now, room) }()
		}
		e.load.running.Store(int64(running))
		e.load.waiting.Store(int64(hosts.waiting))
		var wake <-chan time.Time
		at := hosts.wakeAt(now)
		if drained && !nextDue.IsZero() && (at.IsZero() || nextDue.Before(at)) {
			at = nextDue
		}
		if !at.IsZero() {
			timer.Reset(min(at.Sub(now), time.Second))
			wake = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case d := <-done:
			running--
			ended = true
			now := e.now()
			if srcs, at := hosts.finished(d.host, d.took, d.pause, now); len(srcs) > 0 {
				e.log.InfoContext(ctx, "host asked to wait; its other sources wait too", "host", d.host, "until", at, "sources", len(srcs))
				giveBack(srcs, at, hub.ReasonHostPaused)
			}
		case r := <-claimed:
			claiming = false
			// Fewer than asked for: nothing more is due now. The next
			// claim waits for the next due time, a wake-up or the next
			// tick, not for the next fetch to end.
			drained = len(r.srcs) < r.asked && !woken
			nextDue = time.Time{}
			if drained {
				nextDue = r.nextDue
			}
			now := e.now()
			for _, src := range r.srcs {
				if at, reason, queued := hosts.admit(src, now, e.cfg.FetchTimeout); !queued {
					giveBack([]hub.Source{src}, at, reason)
				}
			}
		case <-e.fetchWake:
			drained, woken = false, true
		case <-ticker.C:
			drained, woken = false, true
			hosts.forget(now)
			e.load.paused.Store(int64(hosts.paused(now)))
		case <-wake:
			if !nextDue.IsZero() && !e.now().Before(nextDue) {
				drained, nextDue = false, time.Time{}
			}
		}
		timer.Stop()
	}
}

// claim leases up to room due sources at now; when it finds fewer, it
// reads when the next source falls due.
func (e *Engine) claim(ctx context.Context, now time.Time, room int) claimResult {
	r := claimResult{asked: room}
	srcs, err := e.store.ClaimDueSources(ctx, now, room, e.instance, now.Add(2*e.cfg.FetchTimeout))
	if err != nil {
		if ctx.Err() == nil {
			e.log.ErrorContext(ctx, "claim due sources", "err", err)
		}
		return r
	}
	r.srcs = srcs
	if len(srcs) < room && ctx.Err() == nil {
		if r.nextDue, err = e.store.NextSourceDue(ctx, now); err != nil && ctx.Err() == nil {
			e.log.ErrorContext(ctx, "next source due", "err", err)
		}
	}
	return r
}

// releaseOutcome is the outcome that gives back a claimed source unfetched,
// its state as it was but for the next fetch (at, with reason).
func releaseOutcome(src *hub.Source, at time.Time, reason string) hub.FetchOutcome {
	st := src.SourceState
	st.NextFetchAt, st.NextFetchReason = at, reason
	return hub.FetchOutcome{SourceID: src.ID, State: st, Owner: src.LeaseOwner}
}
