package component

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/pingd/pingd/hub"
)

// Notifications. Each node has one cursor, Node.XMPPSeq: the newest event
// the XMPP server has acknowledged. The dispatcher reads a node's log
// after that cursor (or after what this connection already wrote), renders
// each event once, writes it to every XMPP subscriber (changing only the
// "to") and flushes; the cursor advances when the server has processed
// the write (acks.go). Items published while disconnected therefore go out
// after the next connection, and nothing written is lost with the server:
// what it had not processed is written again (at-least-once, with the
// same item id).

// workQueue collects the nodes that need the dispatcher's attention.
type workQueue struct {
	mu     sync.Mutex
	all    bool
	nodes  map[int64]struct{}
	signal chan struct{}
}

func newWorkQueue() *workQueue {
	return &workQueue{nodes: map[int64]struct{}{}, signal: make(chan struct{}, 1)}
}

// add queues a node (0: every node behind its cursor) and wakes the
// dispatcher without blocking.
func (q *workQueue) add(nodeID int64) {
	q.mu.Lock()
	if nodeID == 0 {
		q.all = true
	} else {
		q.nodes[nodeID] = struct{}{}
	}
	q.mu.Unlock()
	q.notify()
}

func (q *workQueue) notify() {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// requeue puts nodes back without waking the dispatcher.
func (q *workQueue) requeue(ids []int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		q.nodes[id] = struct{}{}
	}
}

// take empties the queue.
func (q *workQueue) take() (all bool, ids []int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	all = q.all
	q.all = false
	for id := range q.nodes {
		ids = append(ids, id)
	}
	clear(q.nodes)
	return all, ids
}

// Dispatch sizes: events read per batch, and the number of messages one
// batch (one locked write, followed by a marker of its own) may hold, so
// answers to requests are not held up for long and a node's cursor
// follows the server's acknowledgements closely: a leader that dies
// leaves at most what the server had not acknowledged to be sent again,
// not a whole burst (an event is never split: one to more subscribers
// than this is a batch of its own).
const (
	eventBatch        = 256
	messagesPerFlush  = 250
	retryAfterFailure = time.Second
	cursorTimeout     = 10 * time.Second
)

// dispatchLoop serves the work queue, and sends the digests that are due,
// until ctx ends.
func (d *dispatcher) dispatchLoop(ctx context.Context) {
	digests := time.NewTicker(digestCheckEvery)
	defer digests.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.work.signal:
			d.dispatch(ctx)
		case <-digests.C:
			d.sendDueDigests(ctx)
		}
	}
}

// errStream marks a failure of the stream (as opposed to the store).
var errStream = errors.New("XMPP stream")

// errNotLeading stops a dispatch when the lease was lost half-way.
var errNotLeading = errors.New("no longer the leader")

// dispatch delivers everything queued while a connection is up. Without
// one it leaves the work: the next connection queues every node anyway.
func (d *dispatcher) dispatch(ctx context.Context) {
	for ctx.Err() == nil {
		conn := d.connection()
		if conn == nil || !d.leading.Load() {
			// A standby leaves the work: the lease, when it comes, queues
			// every node anyway.
			return
		}
		if err := d.writeMarker(conn); err != nil {
			return // the reader notices the lost stream and reconnects
		}
		all, ids := d.work.take()
		if !all && len(ids) == 0 {
			return
		}
		nodeIDs, err := d.nodesToServe(ctx, all, ids)
		if err != nil {
			if ctx.Err() == nil {
				d.log.ErrorContext(ctx, "find nodes with notifications to send", "err", err)
				d.requeueLater(0)
			}
			return
		}
		if all {
			// Deleted nodes are in no list of nodes: their recorded
			// deletions are looked at with every node (deletions.go).
			nodeIDs = append([]int64{0}, nodeIDs...)
		}
		for i, id := range nodeIDs {
			err := d.deliverNode(ctx, conn, id)
			if err == nil {
				continue
			}
			if ctx.Err() != nil {
				return
			}
			d.work.requeue(nodeIDs[i:])
			if errors.Is(err, errNotLeading) {
				return // the new leader carries on from the cursors
			}
			if errors.Is(err, errStream) {
				// The reader notices the lost stream and reconnects; the
				// new connection queues every node.
				d.log.WarnContext(ctx, "notifications interrupted by the lost stream", "err", err)
				return
			}
			d.log.ErrorContext(ctx, "send notifications", "node_id", id, "err", err)
			d.requeueLater(id)
			return
		}
	}
}

// requeueLater retries a node (0: all) after a store failure.
func (d *dispatcher) requeueLater(nodeID int64) {
	time.AfterFunc(retryAfterFailure, func() { d.work.add(nodeID) })
}

// nodesToServe lists the ids of the nodes to look at.
func (d *dispatcher) nodesToServe(ctx context.Context, all bool, ids []int64) ([]int64, error) {
	if !all {
		return ids, nil
	}
	behind, err := d.store.NodesBehindXMPP(ctx)
	if err != nil {
		return nil, err
	}
	seen := make(map[int64]bool, len(behind)+len(ids))
	out := make([]int64, 0, len(behind)+len(ids))
	for _, n := range behind {
		if !seen[n.ID] {
			seen[n.ID] = true
			out = append(out, n.ID)
		}
	}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// deliverNode sends the node's events after its cursor; node 0 (and a
// node that is gone) stands for the recorded node deletions.
func (d *dispatcher) deliverNode(ctx context.Context, conn *connection, nodeID int64) error {
	// Read before the node: the recorder forgets a node's sent position
	// only after recording it, so one of the two is always current.
	if nodeID == 0 {
		return d.deliverDeletions(ctx, conn)
	}
	sent := conn.acks.sentFor(nodeID)
	n, err := d.store.NodeByID(ctx, nodeID)
	if errors.Is(err, hub.ErrNotFound) {
		// Deleted: its subscribers are owed a delete notification.
		return d.deliverDeletions(ctx, conn)
	}
	if err != nil {
		return err
	}
	subFilter := hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP, State: hub.SubActive}
	after := max(n.XMPPSeq, sent)
	for {
		events, err := d.store.EventsAfter(ctx, n.ID, after, eventBatch)
		if err != nil {
			return err
		}
		if len(events) == 0 {
			return nil
		}
		more := len(events) == eventBatch
		// The subscribers are read after the events: one who subscribes in
		// between has a cursor past all of them and is rightly skipped,
		// where reading them before would miss what it is owed.
		subs, err := d.store.Subscriptions(ctx, subFilter)
		if err != nil {
			return err
		}
		end := len(events)
		if k := max(1, messagesPerFlush/max(1, len(subs))); end > k {
			end = k // the rest in the next round
		}
		if slices.ContainsFunc(subs, isPlainReader) {
			// Readers of plain messages get each append's items together
			// (bursts): a round does not end inside one.
			end = roundEnd(events, end, more)
		}
		if end < len(events) {
			events, more = events[:end], true
		}
		if err := d.readyToWrite(ctx, conn); err != nil {
			return err
		}
		last := events[len(events)-1].Seq
		// The batch is recorded as written under the write's own lock, so
		// a shutdown's last marker, written next, covers it.
		written := func(largest, messages int) {
			conn.noteWrite(largest)
			conn.acks.written(n.ID, last, messages)
		}
		if d.shared {
			written = func(largest, _ int) {
				conn.noteWrite(largest)
				conn.acks.markSent(n.ID, last)
			}
		}
		if err := d.writeEvents(conn, n, events, subs, written); err != nil {
			return fmt.Errorf("%w: %w", errStream, err)
		}
		if d.shared {
			// ejabberd spreads what reaches the component's name over all
			// its connections: this batch's marker names its cursor, for
			// whichever process it reaches to record (acks.go).
			if err := d.writeCursorMarker(conn, n.ID, last); err != nil {
				return fmt.Errorf("%w: %w", errStream, err)
			}
		} else if err := d.writeBatchMarker(conn); err != nil {
			return fmt.Errorf("%w: %w", errStream, err)
		}
		after = last
		if !more {
			return nil
		}
	}
}

// isPlainReader reports whether a subscription gets plain messages.
func isPlainReader(s hub.Subscription) bool {
	return s.Options.Format == hub.FormatMessage && !s.Options.Digest
}

// roundEnd moves the end of a round of events (end, the events' count
// when the whole read is sent; more, the read was full so the log may go
// on) off the middle of an append: back to the append's start, or, when
// the append begins the round, forward to its end within the read. An
// append larger than a whole read is split anyway, into burst messages of
// their own.
func roundEnd(events []hub.Event, end int, more bool) int {
	if end == 0 || (end == len(events) && !more) {
		return end
	}
	last := events[end-1].Created
	if end < len(events) && !events[end].Created.Equal(last) {
		return end // the cut falls between two appends
	}
	start := end - 1
	for start > 0 && events[start-1].Created.Equal(last) {
		start--
	}
	if start > 0 {
		return start
	}
	for end < len(events) && events[end].Created.Equal(last) {
		end++
	}
	return end
}
