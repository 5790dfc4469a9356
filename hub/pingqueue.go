package hub

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrPingQueueFull is Ping's refusal while Config.PingCommitDelay is on
// and MaxQueuedPings pings wait for their commit: the database is
// behind, and the publisher should try again shortly.
var ErrPingQueueFull = errors.New("too many pings waiting to be stored")

// MaxQueuedPings bounds the pings answered and not yet committed while
// Config.PingCommitDelay is on: what a crash of pingd can lose.
const MaxQueuedPings = 4096

// maxPingBatch bounds the pings committed in one transaction.
const maxPingBatch = 512

// pingQueue holds the pings answered before their commit
// (Config.PingCommitDelay): its committer, which Run runs, stores them
// in batches, one transaction each, no later than delay after the first
// of a batch arrived, and tells the ping listeners and the fetch engine
// after each commit, as Ping does after its own.
type pingQueue struct {
	delay time.Duration
	queue chan queuedPing
	// mu orders submissions with the committer's stop: once closed,
	// Ping records synchronously, so nothing is queued unseen.
	mu     sync.RWMutex
	closed bool
}

type queuedPing struct {
	ctx  context.Context
	rec  PingToRecord
	urls []string
}

func newPingQueue(delay time.Duration) *pingQueue {
	return &pingQueue{delay: delay, queue: make(chan queuedPing, MaxQueuedPings)}
}

// add queues a ping; it reports false when the committer has stopped
// (the caller records it itself) and ErrPingQueueFull when the queue is
// full.
func (q *pingQueue) add(ctx context.Context, p queuedPing) (bool, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return false, nil
	}
	// The request's context ends with its answer; the ping outlives it.
	p.ctx = context.WithoutCancel(ctx)
	select {
	case q.queue <- p:
		return true, nil
	default:
		return true, ErrPingQueueFull
	}
}

// runPingCommitter commits the queued pings until ctx ends, then closes
// the queue and commits what is left before it returns: Run returns, and
// the store may be closed, only after every answered ping is stored.
func (h *Hub) runPingCommitter(ctx context.Context) {
	q := h.pingQueue
	batch := make([]queuedPing, 0, maxPingBatch)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case p := <-q.queue:
			batch = append(batch[:0], p)
		case <-ctx.Done():
			q.mu.Lock()
			q.closed = true
			q.mu.Unlock()
			for {
				batch = batch[:0]
				for len(batch) < maxPingBatch && len(q.queue) > 0 {
					batch = append(batch, <-q.queue)
				}
				if len(batch) == 0 {
					return
				}
				h.commitPings(batch)
			}
		}
		timer.Reset(q.delay)
	collect:
		for len(batch) < maxPingBatch {
			select {
			case p := <-q.queue:
				batch = append(batch, p)
			case <-timer.C:
				break collect
			}
		}
		timer.Stop()
		h.commitPings(batch)
	}
}

// commitPings stores a batch in one transaction; if that fails, each
// ping alone, so that one bad ping loses no other. A ping that cannot be
// stored was answered already: it is logged, as lost.
func (h *Hub) commitPings(batch []queuedPing) {
	recs := make([]PingToRecord, len(batch))
	for i, p := range batch {
		recs[i] = p.rec
	}
	// Detached from Run's context: the last batches are committed after
	// it ended.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stored := make([]bool, len(batch))
	marked, err := h.stores.Pings.RecordPingsMarkingDue(ctx, recs, h.now())
	if err == nil {
		for i := range stored {
			stored[i] = true
		}
	} else {
		if len(batch) > 1 {
			h.log.WarnContext(ctx, "storing queued pings together failed; storing them one by one", "pings", len(batch), "err", err)
		}
		marked = make([][]int64, len(batch))
		for i, p := range batch {
			p.rec.Ping.ID = 0 // set by the transaction that was rolled back
			if len(batch) > 1 {
				m, err1 := h.stores.Pings.RecordPingsMarkingDue(ctx, recs[i:i+1], h.now())
				if err1 == nil {
					marked[i], stored[i] = m[0], true
					continue
				}
				err = err1
			}
			h.log.ErrorContext(p.ctx, "answered ping lost: it could not be stored", "url", p.rec.Ping.URL, "err", err)
		}
	}
	woken := false
	for i, p := range batch {
		if !stored[i] {
			continue
		}
		if len(marked[i]) > 0 && !woken {
			h.WakeFetcher()
			woken = true
		}
		h.pingRecorded(p.ctx, PingRecord{Ping: *p.rec.Ping, URLs: p.urls, Matched: len(marked[i])})
	}
}
