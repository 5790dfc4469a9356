package component

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
)

// Acknowledged cursors. A notification written to the component stream
// has only reached a socket: if the XMPP server dies before it reads the
// bytes, they are gone, and a cursor advanced at the write would never
// send them again. So a node's cursor (Node.XMPPSeq) is recorded only once
// the server has processed what was written. The component marks the
// stream with an IQ addressed to itself; the server handles a component's
// stanzas in order and routes that one back, so when it comes back every
// notification written before it was routed to its recipients' sessions.
// (A component has no stream management; this is the acknowledgement the
// protocol allows.)
//
// A marker covers every batch written before it. Each node's batch (at
// most messagesPerFlush notifications) is followed by one, even while
// others are in flight, so a cursor advances as soon as the server has
// processed its batch: a leader that dies mid fan-out leaves only the
// batches the server had not acknowledged to be written again. Other
// markers (digests, a look at the window) wait for the one in flight. Until
// its marker returns, the connection remembers how far each node was
// written (sent), so nothing is written twice on it, and a bounded window
// of batches waits. A lost connection forgets both: the next one starts
// from the recorded cursors and writes the unacknowledged batches again
// (at-least-once, with the same item ids). A marker that does not return
// within ackTimeout means the server is not processing the stream; the
// connection is dropped and made again (Config.AckTimeout).
//
// That presumes the server routes a component's stanzas to the component
// itself, as Prosody and ejabberd do. So each connection first sends a
// probe; if neither it nor any marker comes back within the timeout, the
// server is taken not to route them: the connection records cursors when
// the write is flushed instead (what a dying server had not read is then
// lost, as before acknowledgements), and says so in the log, rather than
// dropping a sound connection again and again.
//
// With Config.Shared, ejabberd spreads what reaches the component's name
// over every process's connection, markers included, so a marker cannot
// report to the window of the process that wrote it. There each batch is
// followed by a marker that names its node and cursor
// (pingd-cursor-<node>-<seq>), and whichever process receives it records
// that cursor in the shared database (SetXMPPSeq never moves a cursor
// back, so markers recorded out of order do no harm).

// Nobody else may acknowledge: a forged marker would record a cursor for
// notifications the server never read, which are then lost. A marker's
// id carries the connection's random nonce (pingd-ack-<nonce>-<n>), so
// only a marker written on this connection acknowledges on it, and a
// stale one of an earlier connection does nothing. A shared connection's
// cursor markers, which any process may receive, carry an HMAC of node
// and cursor under the component secret, which only pingd's processes
// hold, and count only in shared mode. Error answers count only from the
// component's own domain or its server's (see isAckMarker). The store
// never records a cursor past a node's log.

const (
	// ackIDPrefix starts the id of every marker IQ; cursorIDPrefix that
	// of a shared connection's markers, which carry node and cursor.
	ackIDPrefix    = "pingd-ack-"
	cursorIDPrefix = "pingd-cursor-"
	// probeSuffix ends the id of a connection's first marker.
	probeSuffix = "probe"
	// cursorMACHex is how many hex digits of the HMAC a cursor marker
	// carries (64 bits).
	cursorMACHex = 16
	// maxUnacked bounds the batches written and not yet acknowledged on
	// one connection, maxUnackedMessages their messages (two node
	// batches: one is processed while the other's marker comes back); the
	// dispatcher waits when either is reached. What a dying leader leaves
	// to be sent again is at most what the server had not acknowledged,
	// so the bound on messages is also the bound on those duplicates
	// (but for one event to more subscribers than it, a batch alone).
	maxUnacked         = 4096
	maxUnackedMessages = 2 * messagesPerFlush
)

// errAckTimeout drops a connection whose server does not return markers.
var errAckTimeout = errors.New("the XMPP server did not route the component's acknowledgement marker back")

// cursorMarkerID is the id of a shared connection's marker for a node's
// cursor: node, cursor and their HMAC under the component secret.
func cursorMarkerID(secret []byte, node, cursor int64) string {
	body := strconv.FormatInt(node, 10) + "-" + strconv.FormatInt(cursor, 10)
	return cursorIDPrefix + body + "-" + cursorMAC(secret, body)
}

func cursorMAC(secret []byte, body string) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(body))
	return hex.EncodeToString(mac.Sum(nil))[:cursorMACHex]
}

// parseCursorMarker returns the node and cursor of a cursor marker id
// written by a process holding secret; ok is false for anything else.
func parseCursorMarker(secret []byte, id string) (node, cursor int64, ok bool) {
	rest, found := strings.CutPrefix(id, cursorIDPrefix)
	if !found {
		return 0, 0, false
	}
	cut := strings.LastIndexByte(rest, '-')
	if cut < 0 {
		return 0, 0, false
	}
	body, mac := rest[:cut], rest[cut+1:]
	nodeStr, seqStr, found := strings.Cut(body, "-")
	node, err1 := strconv.ParseInt(nodeStr, 10, 64)
	cursor, err2 := strconv.ParseInt(seqStr, 10, 64)
	if !found || err1 != nil || err2 != nil || node <= 0 || cursor <= 0 ||
		!hmac.Equal([]byte(mac), []byte(cursorMAC(secret, body))) {
		return 0, 0, false
	}
	return node, cursor, true
}

// isAckMarker reports whether an incoming IQ is one of this component's
// markers: sent by its own domain to itself. Nobody else can send from
// that address; the server stamps every other sender. (mellium's stream
// reader empties a "from" equal to the stream's own address, so an empty
// one means this domain too.)
//
// A server that refuses to route it answers with an error from its own
// address instead; that answer, too, comes after everything written
// before the marker was handled, so it acknowledges as well. Only the
// component's own domain and its server's count there: never a user, nor
// another component or server, which could otherwise acknowledge what
// the server has not read.
func (d *dispatcher) isAckMarker(iq *element) bool {
	id := iq.attr("id")
	if !strings.HasPrefix(id, ackIDPrefix) && !strings.HasPrefix(id, cursorIDPrefix) || iq.attr("to") != d.domainStr {
		return false
	}
	from := iq.attr("from")
	switch iq.attr("type") {
	case "get":
		return from == "" || from == d.domainStr
	case "error":
		// multicastDomain is the server's domain (pubsub.example.org is
		// on example.org unless Config.MulticastDomain says otherwise).
		return from == "" || from == d.domainStr || from == d.multicastDomain
	}
	return false
}

// writeMarker writes the next marker if one is due. Markers are written
// by the dispatcher, never by the stream's reader, which must not block
// on a write.
func (d *dispatcher) writeMarker(conn *connection) error {
	id := conn.acks.nextMarker(false)
	if id == "" {
		return nil
	}
	return d.writeToSelf(conn, id)
}

// writeBatchMarker writes a marker right after a node's batch, even
// while an earlier one is in flight: each batch is then acknowledged,
// and its cursor recorded, as soon as the server has processed it, not
// with the batches written after it.
func (d *dispatcher) writeBatchMarker(conn *connection) error {
	id := conn.acks.nextMarker(true)
	if id == "" {
		return nil
	}
	return d.writeToSelf(conn, id)
}

// writeLastMarker writes, before the stream is closed, a marker covering
// what was written since the one in flight (the server answers it before
// it closes the stream), and in the same hold of the output lock closes
// the stream to further writes: a notification written after it would go
// unacknowledged and be sent again by the next process.
func (d *dispatcher) writeLastMarker(conn *connection) error {
	return conn.writeThen(func(w *bufio.Writer) error {
		if id := conn.acks.nextMarker(true); id != "" {
			_, err := w.Write(d.markerStanza(id))
			return err
		}
		return nil
	}, func() { conn.closing.Store(true) })
}

// writeToSelf writes a marker.
func (d *dispatcher) writeToSelf(conn *connection, id string) error {
	stanza := d.markerStanza(id)
	return conn.writeThen(func(w *bufio.Writer) error {
		_, err := w.Write(stanza)
		return err
	}, func() {
		if !strings.HasPrefix(id, cursorIDPrefix) {
			// Only this connection's markers come back to it (a shared
			// name's cursor markers reach any process).
			conn.markerWritten(id)
		}
	})
}

// markerStanza is a marker: an IQ with id from the component's domain to
// itself.
func (d *dispatcher) markerStanza(id string) []byte {
	var b xmlBuf
	b.open("iq", "type", "get", "id", id, "from", d.domainStr, "to", d.domainStr)
	b.WriteString(`<ping xmlns="urn:xmpp:ping"/>`)
	b.close("iq")
	return b.Bytes()
}

// acknowledge takes a marker that came back (on the stream's reader).
func (d *dispatcher) acknowledge(cn *connection, iq *element) {
	id := iq.attr("id")
	cn.markerReturned(id)
	if id == cn.acks.probeID() {
		cn.acks.probed()
		return
	}
	if strings.HasPrefix(id, cursorIDPrefix) {
		if !d.shared {
			return // only shared connections write cursor markers
		}
		if node, cursor, ok := parseCursorMarker(d.secret, id); ok {
			cn.acks.ackCursor(node, cursor)
		}
		return
	}
	if more := cn.acks.ack(id); more {
		d.work.notify() // the dispatcher writes the next one
	}
}

// writeCursorMarker writes the marker of one batch on a shared
// connection: it names the node and the cursor to record.
func (d *dispatcher) writeCursorMarker(conn *connection, node, cursor int64) error {
	return d.writeToSelf(conn, cursorMarkerID(d.secret, node, cursor))
}

// probeRouting sends a new connection's probe and, when neither it nor a
// marker has come back within the timeout, makes the connection record
// cursors at the write (see the top of this file).
func (d *dispatcher) probeRouting(ctx context.Context, conn *connection) {
	if err := d.writeToSelf(conn, conn.acks.probeID()); err != nil {
		return
	}
	t := time.NewTimer(d.ackTimeout)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return
	}
	if conn.acks.giveUpUnrouted() {
		d.log.Warn("the XMPP server did not route the component's own IQ back: notifications are recorded as sent when written, and those in flight when the server dies are lost",
			"waited", d.ackTimeout)
	}
}

// readyToWrite waits for room in the connection's window and checks that
// this process still leads: what every write of notifications (a node's
// batch, a deletion's) must hold before it starts. A broken stream comes
// back as errStream, the end of ctx as itself.
func (d *dispatcher) readyToWrite(ctx context.Context, conn *connection) error {
	if err := d.waitForRoom(ctx, conn); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("%w: %w", errStream, err)
	}
	if !d.leading.Load() {
		return errNotLeading
	}
	return nil
}

// waitForRoom blocks while the connection's window is full.
func (d *dispatcher) waitForRoom(ctx context.Context, conn *connection) error {
	for conn.acks.full() {
		if err := d.writeMarker(conn); err != nil {
			return err
		}
		if d.dropIfOverdue(conn) {
			return errAckTimeout
		}
		if conn.broken.Load() {
			return errConnectionLost
		}
		t := time.NewTimer(time.Second)
		select {
		case <-conn.acks.roomWake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
	return nil
}

// dropIfOverdue drops the connection when its marker is overdue.
func (d *dispatcher) dropIfOverdue(conn *connection) bool {
	if !conn.acks.overdue(time.Now()) {
		return false
	}
	d.log.Warn("reconnecting: notifications written are not acknowledged", "err", errAckTimeout, "waited", d.ackTimeout)
	conn.fail()
	return true
}

// recordAcks records the acknowledged cursors of one connection until the
// connection is gone and nothing acknowledged is left; it also drops the
// connection when a marker does not come back.
func (d *dispatcher) recordAcks(ctx context.Context, conn *connection) {
	check := time.NewTicker(max(d.ackTimeout/4, time.Millisecond))
	defer check.Stop()
	for {
		got, closed := conn.acks.take()
		for _, done := range got.digests {
			d.recordDigest(ctx, conn, done)
		}
		d.forgetDeletions(ctx, conn, got.deletions)
		for node, cursor := range got.cursors {
			// Acknowledged means routed by the server: record it even when
			// pingd is stopping, or it would be sent again.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cursorTimeout)
			err := d.store.SetXMPPSeq(sctx, node, cursor)
			cancel()
			if err != nil && !errors.Is(err, hub.ErrNotFound) {
				// Left behind, the node's events are written again after the
				// next connection: duplicates, nothing lost.
				d.log.ErrorContext(ctx, "record XMPP cursor", "node_id", node, "cursor", cursor, "err", err)
				continue
			}
			conn.acks.recorded(node, cursor)
		}
		if closed && got.none() {
			return
		}
		if got.none() {
			select {
			case <-conn.acks.recorderWake:
			case <-check.C:
				d.dropIfOverdue(conn)
			}
		}
	}
}
