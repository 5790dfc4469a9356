package fetching

import (
	"context"
	"time"

	"github.com/pingd/pingd/hub"
)

// Most polls change nothing: a 304, the same body, an error, a source
// given back for its busy host. Their outcome is the source's fetch state
// and the release of its lease, and a transaction each would make the
// database's commits the limit of the fetch rate. The unchanged writer
// collects them for a few milliseconds, or until it has
// maxUnchangedBatch, and stores them with one Store.ApplyUnchangedFetches:
// a ping stored meanwhile still makes a source due again (the store
// decides it per row), a pending note stays for the next fetch, and a
// batch that fails is logged and leaves its leases to run out, so the
// sources are fetched again then and nothing is lost.

const (
	// maxUnchangedBatch bounds the outcomes written together.
	maxUnchangedBatch = 256
	// unchangedBatchDelay is how long the first outcome of a batch waits
	// for company: short beside a fetch, long beside a commit.
	unchangedBatchDelay = 10 * time.Millisecond
)

// queuedOutcome is an unchanged outcome waiting to be stored.
type queuedOutcome struct {
	out hub.FetchOutcome
	url string
	// written, when set, marks a sync: it is closed once everything
	// queued before it is stored, and carries no outcome.
	written chan struct{}
	// flush marks a hint that no more company is coming: the batch is
	// stored without waiting out its delay. It carries no outcome.
	flush bool
}

type unchangedWriter struct {
	e    *Engine
	in   chan queuedOutcome
	done chan struct{}
	// write stores one batch; Store.ApplyUnchangedFetches.
	write func(context.Context, []hub.FetchOutcome) error
}

func newUnchangedWriter(e *Engine) *unchangedWriter {
	return &unchangedWriter{e: e, in: make(chan queuedOutcome, 2*maxUnchangedBatch), done: make(chan struct{}),
		write: e.store.ApplyUnchangedFetches}
}

// add queues an unchanged outcome; it waits while the queue is full.
func (w *unchangedWriter) add(out hub.FetchOutcome, url string) {
	w.in <- queuedOutcome{out: out, url: url}
}

// sync returns once every outcome queued before it is stored (or its
// batch failed). The fetch loop calls it before claiming again after
// giving back sources whose leases had run out: until their release is
// written they are claimable, and a claim then would be overwritten by
// that release.
func (w *unchangedWriter) sync() {
	written := make(chan struct{})
	w.in <- queuedOutcome{written: written}
	<-written
}

// flushSoon tells the writer that no fetch runs that could join the
// batch it is collecting: it stores it without waiting out
// unchangedBatchDelay. A hint: dropped when the queue is full (a full
// batch is stored at once anyway).
func (w *unchangedWriter) flushSoon() {
	select {
	case w.in <- queuedOutcome{flush: true}:
	default:
	}
}

// close stores what is queued and stops the writer; nothing may be added
// after it.
func (w *unchangedWriter) close() {
	close(w.in)
	<-w.done
}

// run writes batches until close. Its writes do not end with ctx: what
// was fetched before shutdown is stored.
func (w *unchangedWriter) run(ctx context.Context) {
	defer close(w.done)
	ctx = context.WithoutCancel(ctx)
	batch := make([]queuedOutcome, 0, maxUnchangedBatch)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		first, ok := <-w.in
		if !ok {
			return
		}
		if first.written != nil {
			close(first.written) // nothing was waiting
			continue
		}
		if first.flush {
			continue // nothing was waiting
		}
		batch = append(batch[:0], first)
		timer.Reset(unchangedBatchDelay)
		open := true
		var synced chan struct{}
	collect:
		for len(batch) < maxUnchangedBatch {
			select {
			case q, more := <-w.in:
				if !more {
					open = false
					break collect
				}
				if q.written != nil {
					synced = q.written
					break collect
				}
				if q.flush {
					break collect
				}
				batch = append(batch, q)
			case <-timer.C:
				break collect
			}
		}
		timer.Stop()
		w.flush(ctx, batch)
		if synced != nil {
			close(synced)
		}
		if !open {
			return
		}
	}
}

func (w *unchangedWriter) flush(ctx context.Context, batch []queuedOutcome) {
	outs := make([]hub.FetchOutcome, len(batch))
	for i, q := range batch {
		outs[i] = q.out
	}
	wctx, cancel := context.WithTimeout(ctx, w.e.cfg.FetchTimeout)
	err := w.write(wctx, outs)
	cancel()
	for _, q := range batch {
		w.e.signalFetched(q.out.SourceID)
	}
	if err != nil {
		w.e.log.ErrorContext(ctx, "store unchanged fetch outcomes; their sources are fetched again when their leases run out",
			"sources", len(batch), "first", batch[0].url, "err", err)
	}
}
