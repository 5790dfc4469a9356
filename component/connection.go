package component

import (
	"bufio"
	"context"
	"encoding/xml"
	"errors"
	"log/slog"
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	mcomponent "mellium.im/xmpp/component"
	"mellium.im/xmpp/stanza"
	"mellium.im/xmpp/stream"
)

// connection is one XEP-0114 stream to the XMPP server.
type connection struct {
	sess *xmpp.Session
	raw  net.Conn
	bw   *bufio.Writer
	// broken is set once a write failed or the stream ended; nothing more
	// is written then.
	broken atomic.Bool
	// closing is set with the shutdown's last marker (writeLastMarker):
	// nothing is written after it, so that marker covers every write.
	closing atomic.Bool
	// queries are pingd's own IQs waiting for their answers.
	queries *pendingQueries
	// acks are the notifications written and not yet acknowledged by the
	// server (ackwindow.go; the mechanism is described in acks.go).
	acks *ackWindow
	// multicast is the XEP-0033 service notifications go through on this
	// stream, nil while none is known (multicast.go).
	multicast atomic.Pointer[multicastService]
	// large is the last stanza over minStanzaBudget written and not yet
	// known to be taken by the server (nil: none): if the stream ends
	// soon after, the server may have refused it (refusedStanza).
	// markersAfter maps the id of each marker written after it to it: the
	// marker's return shows the server took it.
	large        atomic.Pointer[largeWrite]
	markersAfter sync.Map // marker id → *largeWrite
	// served ends when the stream does: work whose only outcome is an
	// answer on this stream (a page look-up) is abandoned then, so the
	// next connection does not wait for it (streamWork).
	served context.Context
}

type streamKey struct{}

// streamWork is ctx, ended also when the stream of the request it serves
// ends; stop releases it.
func streamWork(ctx context.Context) (context.Context, context.CancelFunc) {
	served, _ := ctx.Value(streamKey{}).(context.Context)
	ctx, cancel := context.WithCancel(ctx)
	if served == nil {
		return ctx, cancel
	}
	if served.Err() != nil {
		// AfterFunc would cancel in a goroutine of its own, after the
		// caller may have started work for a stream that is gone.
		cancel()
		return ctx, cancel
	}
	unhook := context.AfterFunc(served, cancel)
	return ctx, func() { unhook(); cancel() }
}

// largeWrite is a stanza over minStanzaBudget written to the stream.
type largeWrite struct {
	bytes int
	at    time.Time
}

// noteWrite records the largest stanza of a write.
func (cn *connection) noteWrite(largest int) {
	if largest > minStanzaBudget {
		cn.large.Store(&largeWrite{bytes: largest, at: time.Now()})
	}
}

// markerWritten notes that the marker id follows the last large stanza.
func (cn *connection) markerWritten(id string) {
	if lw := cn.large.Load(); lw != nil {
		cn.markersAfter.Store(id, lw)
	}
}

// markerReturned takes a marker that came back: the server processed the
// large stanza written before it, so it was not refused.
func (cn *connection) markerReturned(id string) {
	if v, ok := cn.markersAfter.LoadAndDelete(id); ok {
		cn.large.CompareAndSwap(v.(*largeWrite), nil)
	}
}

var errConnectionLost = errors.New("the XMPP stream is closed")

// write runs fn with the stream's buffered writer while holding the
// session's output lock, so nothing else writes in between, and flushes.
// fn writes whole stanzas as bytes; it must not fail half-way through one.
func (cn *connection) write(fn func(w *bufio.Writer) error) error {
	return cn.writeThen(fn, nil)
}

// writeThen is write, and then, once the bytes are flushed and still under
// the output lock, runs flushed (if set): what it records about the write
// is in place before anything else is written, such as the last marker
// of a shutdown, which must cover this write.
func (cn *connection) writeThen(fn func(w *bufio.Writer) error, flushed func()) error {
	if cn.broken.Load() {
		return errConnectionLost
	}
	tw := cn.sess.TokenWriter() // takes the output lock
	defer tw.Close()
	if cn.closing.Load() {
		return errConnectionLost
	}
	// Whatever mellium buffered goes first.
	if err := tw.Flush(); err != nil {
		cn.fail()
		return err
	}
	if err := fn(cn.bw); err != nil {
		// Every fn only writes: its error is the socket's, which the
		// buffered writer keeps returning, so the connection is done.
		cn.fail()
		return err
	}
	if err := cn.bw.Flush(); err != nil {
		cn.fail()
		return err
	}
	if flushed != nil {
		flushed()
	}
	return nil
}

// fail marks the connection broken and closes it, which ends Serve so the
// component reconnects.
func (cn *connection) fail() {
	if cn.broken.CompareAndSwap(false, true) {
		_ = cn.raw.Close()
	}
}

// shutdown ends the stream cleanly: our </stream:stream>, then up to
// closeTimeout for the server's, after which the read fails and Serve
// returns.
func (cn *connection) shutdown() {
	_ = cn.sess.Close()
	_ = cn.raw.SetReadDeadline(time.Now().Add(closeTimeout))
}

// traceConn bounds every write with a deadline and, at debug level, logs
// the XML of both directions.
type traceConn struct {
	net.Conn
	log *slog.Logger // nil: no trace
	// quickAck, when set, asks the kernel to acknowledge what was read at
	// once (quickack_linux.go).
	quickAck func()
}

func (t *traceConn) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	if n > 0 && t.quickAck != nil {
		t.quickAck()
	}
	if n > 0 && t.log != nil {
		t.log.Debug("XMPP in", "xml", string(p[:n]))
	}
	return n, err
}

func (t *traceConn) Write(p []byte) (int, error) {
	if err := t.Conn.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return 0, err
	}
	if t.log != nil {
		t.log.Debug("XMPP out", "xml", handshakeRe.ReplaceAllString(string(p), "<handshake>…</handshake>"))
	}
	return t.Conn.Write(p)
}

// handshakeRe finds the XEP-0114 handshake digest, kept out of the trace.
var handshakeRe = regexp.MustCompile(`<handshake>[^<]*</handshake>`)

// isNotAuthorized reports whether the server refused the secret.
func isNotAuthorized(err error) bool { return isStreamError(err, stream.NotAuthorized.Err) }

// isStreamError reports whether err is the stream error condition cond.
func isStreamError(err error, cond string) bool {
	var se stream.Error
	return errors.As(err, &se) && se.Err == cond
}

// connectAndServe makes one connection: dial, handshake, serve until the
// stream ends. It reports how far it got and why it ended.
func (c *Component) connectAndServe(ctx context.Context) (stage, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: 15 * time.Second}
	raw, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return stageDial, err
	}
	tc := &traceConn{Conn: raw, quickAck: quickAcker(raw)}
	if c.log.Enabled(ctx, slog.LevelDebug) {
		tc.log = c.log
	}
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	sess, err := mcomponent.NewSession(hctx, c.domain, c.secret, tc)
	cancel()
	if err != nil {
		_ = raw.Close()
		return stageHandshake, err
	}
	// The handshake's deadlines are cleared; from now on reads wait for
	// the server as long as it takes.
	_ = raw.SetDeadline(time.Time{})
	served, endServed := context.WithCancel(ctx)
	defer endServed()
	cn := &connection{sess: sess, raw: raw, bw: bufio.NewWriterSize(tc, 64<<10), queries: newPendingQueries(), acks: newAckWindow(c.dispatcher.ackTimeout), served: served}
	recorded := make(chan struct{})
	go func() {
		defer close(recorded)
		c.dispatcher.recordAcks(ctx, cn)
	}()
	c.setConnection(cn)
	c.connections.Add(1)
	c.log.Info("connected to XMPP server", "addr", c.addr)
	// Everything published while disconnected goes out now.
	c.dispatcher.work.add(0)
	pool := newRequestPool(context.WithValue(ctx, streamKey{}, served), c.service.limits.perSender, func(ctx context.Context, j *job) { c.runJob(ctx, cn, j) })
	// Notifications go one by one until a multicast service is found.
	discovered := make(chan struct{})
	go func() {
		defer close(discovered)
		c.dispatcher.discoverMulticast(ctx, cn)
	}()
	// Does the server route our own markers back (acks.go)? A shared
	// name's markers reach any process, so there it is taken on trust.
	probeCtx, endProbe := context.WithCancel(ctx)
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		if !c.shared {
			c.dispatcher.probeRouting(probeCtx, cn)
		}
	}()

	stop := context.AfterFunc(ctx, func() {
		_ = c.dispatcher.writeLastMarker(cn)
		cn.shutdown()
	})
	err = sess.Serve(xmpp.HandlerFunc(func(t xmlstream.TokenReadEncoder, start *xml.StartElement) error {
		return c.handleStanza(ctx, cn, pool, t, start)
	}))
	stop()
	if ctx.Err() == nil {
		c.refusedStanza(cn, err)
	}
	c.setConnection(nil)
	cn.broken.Store(true)
	endServed()
	_ = raw.Close()
	cn.queries.closeAll()
	if unacked := cn.acks.close(); unacked > 0 {
		c.log.Info("notifications not acknowledged by the XMPP server are sent again after the next connection", "batches", unacked)
	}
	endProbe()
	<-probed
	<-recorded
	<-discovered
	pool.close()
	if ctx.Err() != nil {
		c.log.Info("disconnected from XMPP server", "addr", c.addr)
		return stageServed, nil
	}
	if err == nil {
		err = errors.New("the server closed the stream")
	}
	return stageServed, err
}

// handleStanza reads one incoming stanza and answers it. It returns an
// error only when the stream itself is unreadable; whatever a client sent
// is answered with a stanza error instead.
func (c *Component) handleStanza(ctx context.Context, cn *connection, pool *requestPool, t xml.TokenReader, start *xml.StartElement) error {
	el, err := readElement(t, *start)
	if errors.Is(err, errTooLarge) || errors.Is(err, errBadName) {
		// Answer from the start element alone; Serve discards the rest.
		el = &element{Name: start.Name, Attr: start.Attr}
		if el.Name.Local == "iq" {
			cond := "policy-violation"
			if errors.Is(err, errBadName) {
				cond = "bad-request"
			}
			c.service.replyError(cn, el, &stanzaError{Type: "modify", Condition: stanza.Condition(cond), Text: err.Error()})
		}
		return nil
	}
	if err != nil {
		return err
	}
	switch el.Name.Local {
	case "iq":
		c.service.receiveIQ(ctx, cn, pool, el)
	case "message":
		c.service.receiveMessage(ctx, cn, pool, el)
	case "presence":
		c.service.receivePresence(ctx, pool, el)
	}
	return nil
}

// runJob carries out one job of the request pool (on a worker).
func (c *Component) runJob(ctx context.Context, cn *connection, j *job) {
	switch {
	case len(j.batch) > 0:
		reqs := make([]*request, len(j.batch))
		for i, b := range j.batch {
			reqs[i] = b.req
		}
		payloads, errs := c.service.publish(ctx, j.from, j.req.Node, reqs)
		// The answers go out together, in one write.
		var out []byte
		for i, b := range j.batch {
			out = append(out, c.service.answerBytes(ctx, b.iq, b.req, b.from, payloads[i], errs[i])...)
		}
		if len(out) > 0 {
			c.service.send(ctx, cn, out)
		}
	case j.iq != nil:
		c.service.answerIQ(ctx, cn, j.iq, j.req, j.from)
	case j.presence != nil:
		c.service.answerPresence(ctx, cn, j.presence)
	case j.bounced:
		c.dispatcher.resendBounced(ctx, cn, j.msg)
	case j.notificationError:
		c.service.notificationBounced(ctx, j.msg)
	case j.msg != nil:
		c.service.handleMessage(ctx, cn, j.msg)
	}
}

// A server whose limit is lower than the stanza budget (an operator's
// ejabberd max_stanza_size, say) ends the stream when a stanza over it
// arrives, and the notification, not acknowledged, would be written again
// on every connection. So when a stream ends with a refusal
// (policy-violation, not-well-formed, stanza-too-big: what servers say
// then) after a stanza over minStanzaBudget that no returned marker shows
// taken, or without any stream error within refusalWindow of writing
// one, the budget comes down to half that
// stanza (never under minStanzaBudget): on the next connection the same
// notification goes smaller (budget.go), and the rest flows. The budget
// stays down until pingd restarts.

// refusalWindow is how soon after a large stanza a stream that ends
// without a stream error is taken to have refused it.
const refusalWindow = 5 * time.Second

// refusedStanza lowers the budget when the stream's end looks like a
// refusal of the last large stanza written.
func (c *Component) refusedStanza(cn *connection, err error) {
	lw := cn.large.Load()
	if lw == nil {
		return // none, or the server took it
	}
	size := lw.bytes
	var se stream.Error
	switch {
	case errors.As(err, &se):
		if se.Err != stream.PolicyViolation.Err && se.Err != stream.NotWellFormed.Err && se.Err != "stanza-too-big" {
			return // the server said something else (system-shutdown, conflict…)
		}
	case time.Since(lw.at) > refusalWindow:
		return
	}
	budget, lowered := c.limit.lower(size)
	if !lowered {
		c.log.Error("the XMPP server ended the stream after a stanza the size of the smallest budget; notifications cannot be made smaller",
			"stanza_bytes", size, "budget_bytes", budget, "err", err)
		return
	}
	c.log.Warn("the XMPP server ended the stream after a large stanza: its limit is taken to be lower, and larger stanzas go smaller from now on",
		"stanza_bytes", size, "budget_bytes", budget, "err", err)
}
