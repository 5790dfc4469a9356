package component

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ackWindow is one connection's batches awaiting acknowledgement.
type ackWindow struct {
	mu sync.Mutex
	// sent is the newest event written per node on this connection.
	sent map[int64]int64
	// pending are the written batches in write order; marker is the marker
	// that covers one, 0 while none was written after it.
	pending []pendingBatch
	// lastMarker numbers the markers; inFlight is the one awaited (0:
	// none), since when.
	lastMarker    uint64
	inFlight      uint64
	inFlightSince time.Time
	// acked are acknowledged batches for the recorder.
	acked []pendingBatch
	// unacked counts the messages of the pending batches.
	unacked int
	// recorderWake and roomWake wake the recorder and a dispatcher that
	// waits for room.
	recorderWake, roomWake chan struct{}
	closed                 bool
	// timeout is how long a marker may be in flight.
	timeout time.Duration
	// routed is set once a marker or the probe came back; bypass once
	// the probe timed out without one (cursors recorded at the write).
	routed, bypass bool
	// markerPrefix is ackIDPrefix and the connection's nonce: every
	// marker id of this connection starts with it.
	markerPrefix string
	// digesting are the subscriptions whose digest was written and is
	// not recorded yet: they are not sent another meanwhile. digested are
	// the cursors recorded for subscriptions on this connection: a due
	// subscription read before its cursor was recorded is stale, and is
	// not sent the same digest again.
	digesting map[int64]bool
	digested  map[int64]int64
	// deletions are the node deletions (hub.NodeDeletion ids) written on
	// this connection: not written again, whether their acknowledgement
	// is awaited or their row was forgotten after a list read before.
	deletions map[int64]bool
}

type pendingBatch struct {
	marker uint64
	node   int64
	cursor int64
	// messages are the stanzas of a node's batch.
	messages int
	// digest, when set, is a digest written (digests.go) instead of a
	// node's batch: acknowledged, its subscription's cursor is recorded.
	digest *digestDone
	// deletion, when set, is a node deletion's notifications written
	// (deletions.go): acknowledged, the deletion is forgotten.
	deletion int64
}

func newAckWindow(timeout time.Duration) *ackWindow {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read does not fail
	return &ackWindow{sent: map[int64]int64{}, recorderWake: make(chan struct{}, 1), roomWake: make(chan struct{}, 1), timeout: timeout,
		markerPrefix: ackIDPrefix + hex.EncodeToString(nonce[:]) + "-", digesting: map[int64]bool{}, digested: map[int64]int64{},
		deletions: map[int64]bool{}}
}

// probeID is the id of the connection's probe.
func (w *ackWindow) probeID() string { return w.markerPrefix + probeSuffix }

func (w *ackWindow) wake() {
	for _, ch := range []chan struct{}{w.recorderWake, w.roomWake} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// sentFor is how far the node was written on this connection, 0 if not
// since its cursor was last recorded.
func (w *ackWindow) sentFor(node int64) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent[node]
}

// markSent records how far a node was written without waiting for an
// acknowledgement (shared connections: see writeCursorMarker).
func (w *ackWindow) markSent(node, cursor int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent[node] = cursor
}

// ackCursor takes a shared connection's marker: its node and cursor are
// acknowledged, whichever process wrote it.
func (w *ackWindow) ackCursor(node, seq int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.acked = append(w.acked, pendingBatch{node: node, cursor: seq})
	w.wake()
}

// written records a batch of messages written to the stream (after the
// write).
func (w *ackWindow) written(node, cursor int64, messages int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.sent[node] = cursor
	if w.bypass {
		w.acked = append(w.acked, pendingBatch{node: node, cursor: cursor})
		w.wake()
		return
	}
	w.pending = append(w.pending, pendingBatch{node: node, cursor: cursor, messages: messages})
	w.unacked += messages
}

// writtenDigest records a digest written to the stream (after the
// write); it is recorded once acknowledged, like a batch.
func (w *ackWindow) writtenDigest(d digestDone) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.digesting[d.sub.ID] = true
	if w.bypass {
		w.acked = append(w.acked, pendingBatch{digest: &d})
		w.wake()
		return
	}
	w.pending = append(w.pending, pendingBatch{digest: &d})
}

// writtenDeletion records a node deletion's notifications written to the
// stream (after the write); it is forgotten once acknowledged, like a
// batch.
func (w *ackWindow) writtenDeletion(id int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.deletions[id] = true
	if w.bypass {
		w.acked = append(w.acked, pendingBatch{deletion: id})
		w.wake()
		return
	}
	w.pending = append(w.pending, pendingBatch{deletion: id})
}

// deletionWritten reports whether the node deletion's notifications were
// written on this connection.
func (w *ackWindow) deletionWritten(id int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deletions[id]
}

// deletionsNotForgotten lets node deletions be written again: those
// being forgotten (their ids may be reused) or whose rows could not be.
func (w *ackWindow) deletionsNotForgotten(ids []int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		delete(w.deletions, id)
	}
}

// isDigesting reports whether a digest of the subscription is written
// and not recorded yet, or was recorded past cursor, the subscription's
// cursor as read.
func (w *ackWindow) isDigesting(subID, cursor int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.digesting[subID] || cursor < w.digested[subID]
}

// digestRecorded forgets a digest once its subscription's cursor is
// recorded (recorded: cursor, its new cursor; else the digest is sent
// again).
func (w *ackWindow) digestRecorded(subID int64, recorded bool, cursor int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.digesting, subID)
	if recorded {
		w.digested[subID] = cursor
	}
}

// probed records that the probe came back: the server routes markers.
func (w *ackWindow) probed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.routed = true
}

// giveUpUnrouted switches the window to recording cursors at the write
// when nothing came back since the probe; it reports whether it did.
func (w *ackWindow) giveUpUnrouted() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.routed || w.closed {
		return false
	}
	w.bypass = true
	w.acked = append(w.acked, w.pending...)
	w.pending, w.unacked = nil, 0
	w.inFlight = 0
	w.wake()
	return true
}

// full reports whether the window has no room for another batch: too
// many batches, or too many messages, wait for their acknowledgement.
func (w *ackWindow) full() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending) >= maxUnacked || w.unacked >= maxUnackedMessages
}

// nextMarker claims the batches written since the last marker for a new
// one and returns its id; "" when there is nothing to mark or, unless
// force, a marker is still in flight (the next one is written when it
// returns).
func (w *ackWindow) nextMarker(force bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.bypass || (w.inFlight != 0 && !force) || len(w.pending) == 0 || w.pending[len(w.pending)-1].marker != 0 {
		return ""
	}
	w.lastMarker++
	for i := len(w.pending) - 1; i >= 0 && w.pending[i].marker == 0; i-- {
		w.pending[i].marker = w.lastMarker
	}
	if w.inFlight == 0 {
		w.inFlightSince = time.Now()
	}
	w.inFlight = w.lastMarker
	return w.markerPrefix + strconv.FormatUint(w.lastMarker, 10)
}

// overdue reports whether the marker in flight is older than the timeout.
func (w *ackWindow) overdue(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Before anything came back, the probe decides (probeRouting).
	return !w.closed && w.routed && w.inFlight != 0 && now.Sub(w.inFlightSince) > w.timeout
}

// ack takes a marker that came back: every batch it covers is
// acknowledged. It reports whether batches wait for the next marker.
func (w *ackWindow) ack(id string) (more bool) {
	num, ours := strings.CutPrefix(id, w.markerPrefix)
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || !ours {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || n == 0 || n > w.lastMarker {
		return false
	}
	w.routed = true
	i := 0
	for i < len(w.pending) && w.pending[i].marker != 0 && w.pending[i].marker <= n {
		w.unacked -= w.pending[i].messages
		i++
	}
	w.acked = append(w.acked, w.pending[:i]...)
	w.pending = append(w.pending[:0], w.pending[i:]...)
	if w.inFlight <= n {
		w.inFlight = 0
	} else {
		w.inFlightSince = time.Now() // a forced marker is still out
	}
	w.wake()
	return len(w.pending) > 0
}

// acknowledged is what the recorder takes from the window at once: the
// newest acknowledged cursor per node, the acknowledged digests and node
// deletions.
type acknowledged struct {
	cursors   map[int64]int64
	digests   []digestDone
	deletions []int64
}

// none reports whether nothing was acknowledged.
func (a acknowledged) none() bool {
	return a.cursors == nil && a.digests == nil && a.deletions == nil
}

// take returns what was acknowledged since the last take, and whether the
// window is closed.
func (w *ackWindow) take() (got acknowledged, closed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.acked) > 0 {
		for _, b := range w.acked {
			switch {
			case b.deletion != 0:
				got.deletions = append(got.deletions, b.deletion)
			case b.digest != nil:
				got.digests = append(got.digests, *b.digest)
			default:
				if got.cursors == nil {
					got.cursors = make(map[int64]int64, len(w.acked))
				}
				got.cursors[b.node] = max(got.cursors[b.node], b.cursor)
			}
		}
		w.acked = w.acked[:0]
	}
	return got, w.closed
}

// recorded forgets what a node was sent once its cursor is recorded at
// least that far: the store has it now.
func (w *ackWindow) recorded(node, cursor int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent[node] <= cursor {
		delete(w.sent, node)
	}
}

// close ends the window with its connection: what was not acknowledged is
// written again by the next connection.
func (w *ackWindow) close() (unacked int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	unacked = len(w.pending)
	w.pending, w.unacked = nil, 0
	w.wake()
	return unacked
}
