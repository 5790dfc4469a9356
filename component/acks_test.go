package component

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// newProxiedEnv is an env whose component reaches Prosody through a proxy
// the test controls, with alice subscribed to node "demo"; configure, if
// not nil, changes the component's Config.
func newProxiedEnv(t *testing.T, configure ...func(*Config)) (*env, *testenv.Proxy, *testenv.Client) {
	return newProxiedEnvOn(t, testenv.ProsodyOptions{}, configure...)
}

func newProxiedEnvOn(t *testing.T, opts testenv.ProsodyOptions, configure ...func(*Config)) (*env, *testenv.Proxy, *testenv.Client) {
	t.Helper()
	testenv.RequireProsody(t)
	p := testenv.StartProsody(t, opts)
	proxy := testenv.StartProxy(t, p.ComponentAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx, p: p, logs: &logBuffer{}, dbPath: filepath.Join(t.TempDir(), "pingd.db")}
	if len(configure) > 0 {
		e.configure = configure[0]
	}
	e.admin = p.Register("admin", password)
	p.Register("alice", password)
	st, err := store.Open(ctx, e.dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.store = st
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("component log:\n%s", e.logs.String())
		}
	})
	e.startComponent(envOptions{addr: proxy.Addr})
	e.createNode("demo", "", hub.AccessOpen)
	alice := e.dial("alice", "r")
	result(t, e.request(alice, "set", subscribePayload("demo", alice.JID.Bare().String())))
	return e, proxy, alice
}

// cursor returns the node's recorded XMPP cursor and its last sequence.
func (e *env) cursor(node string) (xmppSeq, lastSeq int64) {
	e.t.Helper()
	n, err := e.store.Node(e.ctx, node)
	if err != nil {
		e.t.Fatal(err)
	}
	return n.XMPPSeq, n.LastSeq
}

// publishAcknowledged publishes an item, waits until alice has it and the
// server has acknowledged it: the node's cursor is at its last event.
func (e *env) publishAcknowledged(alice *testenv.Client, node, id string) {
	e.t.Helper()
	e.publish(node, id)
	if got := collectItems(e.t, alice, node, 1); got[0].id != id {
		e.t.Fatalf("got %v", got)
	}
	testenv.WaitFor(e.t, 10*time.Second, "item "+id+" to be acknowledged", func() bool {
		x, last := e.cursor(node)
		return x == last
	})
}

// publishWritten publishes an item and waits until the component has
// written its notification.
func (e *env) publishWritten(node, id string) {
	e.t.Helper()
	written := e.comp.dispatcher.sentUnicast.Load()
	e.publish(node, id)
	testenv.WaitFor(e.t, 10*time.Second, "the component to write the notification", func() bool {
		return e.comp.dispatcher.sentUnicast.Load() > written
	})
}

// TestNotificationsSurviveTheServerDying: notifications the component
// wrote but the XMPP server never processed (it died with them unread)
// are written again after the next connection, because the cursor
// advances only when the server has acknowledged them.
func TestNotificationsSurviveTheServerDying(t *testing.T) {
	e, proxy, alice := newProxiedEnv(t)

	e.publishAcknowledged(alice, "demo", "first")
	acked, _ := e.cursor("demo")

	// From now on the server reads nothing the component writes.
	proxy.Swallow()
	e.publishWritten("demo", "in-flight")
	time.Sleep(300 * time.Millisecond) // time for a wrongly advanced cursor to be recorded
	if x, _ := e.cursor("demo"); x != acked {
		t.Fatalf("cursor advanced to %d for a notification the server never read (acknowledged: %d)", x, acked)
	}
	noEvents(t, alice, 200*time.Millisecond)

	// The server's end goes away; the component reconnects and writes it again.
	proxy.Block()
	testenv.WaitFor(t, 10*time.Second, "the component to notice", func() bool { return !e.comp.Connected() })
	proxy.Allow()
	testenv.WaitFor(t, 20*time.Second, "the component to reconnect", e.comp.Connected)
	if got := collectItems(t, alice, "demo", 1); got[0].id != "in-flight" {
		t.Fatalf("after reconnecting: %v", got)
	}
	testenv.WaitFor(t, 10*time.Second, "the item to be acknowledged", func() bool {
		x, last := e.cursor("demo")
		return x == last
	})
	noEvents(t, alice, 500*time.Millisecond)
	if strings.Contains(e.logs.String(), "did not route the component's own IQ back") {
		t.Error("Prosody's routing of the component's own IQs was not recognised")
	}
}

// TestUnacknowledgedConnectionIsDropped: a server that reads nothing more
// (a hung process, a half-dead connection) never routes the marker back;
// after AckTimeout the component drops the connection itself, and what it
// wrote reaches the subscriber over the next one.
func TestUnacknowledgedConnectionIsDropped(t *testing.T) {
	e, proxy, alice := newProxiedEnv(t, func(c *Config) { c.AckTimeout = time.Second })
	// Received is not yet acknowledged: swallowing before the marker is
	// back would rightly send "first" again after the reconnection.
	e.publishAcknowledged(alice, "demo", "first")

	proxy.Swallow()
	e.publish("demo", "unheard")
	testenv.WaitFor(t, 10*time.Second, "the component to drop the connection", func() bool {
		return !e.comp.Connected() && strings.Contains(e.logs.String(), "notifications written are not acknowledged")
	})
	proxy.Block() // ends the swallowing and whatever attempt hangs in it
	proxy.Allow()
	testenv.WaitFor(t, 20*time.Second, "the component to reconnect", e.comp.Connected)
	if got := collectItems(t, alice, "demo", 1); got[0].id != "unheard" {
		t.Fatalf("after reconnecting: %v", got)
	}
}

// TestStopRightAfterWritingSendsNothingTwice: a clean stop just after
// notifications were written still records their cursor (the last marker
// comes back before the stream closes), so the next start sends nothing
// again.
func TestStopRightAfterWritingSendsNothingTwice(t *testing.T) {
	e, proxy, alice := newProxiedEnv(t)
	for round := range 3 {
		id := "item-" + string(rune('a'+round))
		e.publishWritten("demo", id)
		e.stop()
		if x, last := e.cursor("demo"); x != last {
			t.Fatalf("round %d: stopped with cursor %d of %d: the last write was not acknowledged", round, x, last)
		}
		if got := collectItems(t, alice, "demo", 1); got[0].id != id {
			t.Fatalf("round %d: got %v", round, got)
		}
		e.startComponent(envOptions{addr: proxy.Addr})
		noEvents(t, alice, 700*time.Millisecond)
	}
}

// TestAckWindow checks the window's bookkeeping: one marker in flight
// covers every batch written before it, batches written after wait for
// the next, and an acknowledgement hands over the newest cursor per node.
func TestAckWindow(t *testing.T) {
	w := newAckWindow(time.Minute)
	if id := w.nextMarker(false); id != "" {
		t.Fatalf("marker %q with nothing written", id)
	}
	w.written(1, 5, 1)
	w.written(2, 3, 1)
	w.written(1, 7, 1)
	m1 := w.nextMarker(false)
	if m1 == "" {
		t.Fatal("no marker for three batches")
	}
	w.written(2, 4, 1)
	if id := w.nextMarker(false); id != "" {
		t.Fatalf("second marker %q while %q is in flight", id, m1)
	}
	if got := w.sentFor(1); got != 7 {
		t.Errorf("sentFor(1) = %d, want 7", got)
	}
	// Neither a marker number never written, nor one of another
	// connection (a stale one, or a forgery without the nonce).
	other := newAckWindow(time.Minute)
	other.written(1, 9, 1)
	for _, id := range []string{w.markerPrefix + "99", "pingd-ack-1", other.nextMarker(false), w.probeID()} {
		if more := w.ack(id); more {
			t.Errorf("%q acknowledged something", id)
		}
	}
	if got, _ := w.take(); got.cursors != nil {
		t.Fatalf("unknown marker acknowledged %v", got.cursors)
	}
	if more := w.ack(m1); !more {
		t.Error("the batch written after the marker is not reported as waiting")
	}
	got, closed := w.take()
	cursors := got.cursors
	if closed || len(cursors) != 2 || cursors[1] != 7 || cursors[2] != 3 {
		t.Fatalf("acknowledged %v (closed %v), want node 1 at 7 and node 2 at 3", cursors, closed)
	}
	w.recorded(1, 7)
	w.recorded(2, 3)
	if w.sentFor(1) != 0 || w.sentFor(2) != 4 {
		t.Errorf("after recording: sent %d and %d, want 0 (recorded) and 4 (still waiting)", w.sentFor(1), w.sentFor(2))
	}
	m2 := w.nextMarker(false)
	if m2 == "" || m2 == m1 {
		t.Fatalf("next marker %q", m2)
	}
	if unacked := w.close(); unacked != 1 {
		t.Errorf("close: %d unacknowledged, want 1", unacked)
	}
	if more := w.ack(m2); more {
		t.Error("acknowledged after close")
	}
	if got, closed := w.take(); got.cursors != nil || !closed {
		t.Errorf("after close: %v, closed %v", got.cursors, closed)
	}
}

// TestIsAckMarker: only the component's own marker, or an error answer
// to it from the component's domain or its server's, acknowledges;
// nothing a user, another component or another server sends does.
func TestIsAckMarker(t *testing.T) {
	d := &dispatcher{sharedState: &sharedState{domainStr: "pubsub.localhost"}, multicastDomain: "localhost"}
	for _, tc := range []struct {
		iq   string
		want bool
	}{
		{`<iq type="get" id="pingd-ack-3" from="pubsub.localhost" to="pubsub.localhost"/>`, true},
		{`<iq type="get" id="pingd-ack-3" to="pubsub.localhost"/>`, true}, // "from" emptied by the reader
		{`<iq type="error" id="pingd-ack-3" from="localhost" to="pubsub.localhost"/>`, true},
		{`<iq type="get" id="pingd-ack-3" from="alice@localhost/r" to="pubsub.localhost"/>`, false},
		{`<iq type="error" id="pingd-ack-3" from="alice@localhost/r" to="pubsub.localhost"/>`, false},
		{`<iq type="result" id="pingd-ack-3" from="localhost" to="pubsub.localhost"/>`, false},
		{`<iq type="get" id="pingd-7" from="pubsub.localhost" to="pubsub.localhost"/>`, false},
		{`<iq type="get" id="pingd-ack-3" from="pubsub.localhost" to="other.localhost"/>`, false},
		{`<iq type="get" id="pingd-cursor-4-17" to="pubsub.localhost"/>`, true},
		{`<iq type="get" id="pingd-cursor-4-17" from="bob@localhost/x" to="pubsub.localhost"/>`, false},
		{`<iq type="error" id="pingd-ack-3" from="pubsub.localhost" to="pubsub.localhost"/>`, true},
		{`<iq type="error" id="pingd-ack-3" from="evil.localhost" to="pubsub.localhost"/>`, false},
		{`<iq type="error" id="pingd-cursor-4-17" from="example.net" to="pubsub.localhost"/>`, false},
		{`<iq type="get" id="pingd-ack-3" from="evil.localhost" to="pubsub.localhost"/>`, false},
	} {
		if got := d.isAckMarker(mustParse(t, tc.iq)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.iq, got, tc.want)
		}
	}
}

// TestCursorMarkers: a shared connection's marker names node and cursor
// under an HMAC of the component secret; only such ids parse, malformed
// or forged ones (another secret, an edited cursor) do not.
func TestCursorMarkers(t *testing.T) {
	secret := []byte("s3cret")
	id := cursorMarkerID(secret, 4, 17)
	if node, cursor, ok := parseCursorMarker(secret, id); !ok || node != 4 || cursor != 17 {
		t.Fatalf("parse %q = %d, %d, %v", id, node, cursor, ok)
	}
	edited := strings.Replace(id, "-17-", "-1000000-", 1)
	for _, bad := range []string{"pingd-cursor-4", "pingd-cursor-x-3", "pingd-cursor-4-0", "pingd-cursor--4-3", "pingd-cursor-4-3-9",
		"pingd-cursor-4-17", cursorMarkerID([]byte("other"), 4, 17), edited, id + "0", cursorMarkerID(secret, 4, 0)} {
		if node, cursor, ok := parseCursorMarker(secret, bad); ok {
			t.Errorf("%q parsed as node %d cursor %d", bad, node, cursor)
		}
	}
}

// TestAckCursor: a shared connection's marker acknowledges the node and
// cursor it names, whoever wrote it.
func TestAckCursor(t *testing.T) {
	w := newAckWindow(time.Minute)
	w.markSent(4, 17)
	w.ackCursor(4, 12)
	w.ackCursor(4, 17)
	w.ackCursor(9, 2) // written by another process
	got, _ := w.take()
	cursors := got.cursors
	if len(cursors) != 2 || cursors[4] != 17 || cursors[9] != 2 {
		t.Fatalf("acknowledged %v, want node 4 at 17 and node 9 at 2", cursors)
	}
	w.recorded(4, 17)
	if got := w.sentFor(4); got != 0 {
		t.Errorf("sentFor(4) = %d after recording it", got)
	}
}

// TestAckWindowUnrouted: before anything came back no marker is overdue;
// when the probe gives up, what waits is recorded as written and so is
// everything after; once a marker came back, the probe changes nothing
// and a late marker is overdue.
func TestAckWindowUnrouted(t *testing.T) {
	// In a bubble the sleeps below pass at once and exactly: the fake
	// clock moves past the marker's timeout, and nothing else can.
	synctest.Test(t, testAckWindowUnrouted)
}

func testAckWindowUnrouted(t *testing.T) {
	w := newAckWindow(time.Millisecond)
	w.written(1, 5, 1)
	if w.nextMarker(false) == "" {
		t.Fatal("no marker")
	}
	time.Sleep(5 * time.Millisecond)
	if w.overdue(time.Now()) {
		t.Error("overdue before the server was seen routing markers")
	}
	if !w.giveUpUnrouted() {
		t.Fatal("did not give up with nothing routed")
	}
	if got, _ := w.take(); len(got.cursors) != 1 || got.cursors[1] != 5 {
		t.Fatalf("after giving up: %v, want node 1 at 5", got.cursors)
	}
	w.written(2, 3, 1)
	if got, _ := w.take(); len(got.cursors) != 1 || got.cursors[2] != 3 {
		t.Fatalf("written after giving up: %v, want node 2 at 3", got.cursors)
	}
	if id := w.nextMarker(false); id != "" || w.overdue(time.Now()) {
		t.Errorf("marker %q or overdue after giving up", id)
	}

	r := newAckWindow(time.Millisecond)
	r.written(1, 5, 1)
	m := r.nextMarker(false)
	r.ack(m)
	if r.giveUpUnrouted() {
		t.Error("gave up although a marker came back")
	}
	r.written(1, 6, 1)
	r.nextMarker(false)
	time.Sleep(5 * time.Millisecond)
	if !r.overdue(time.Now()) {
		t.Error("a late marker is not overdue once markers are known to come back")
	}
}

// dialOtherComponent connects as another external component of the same
// server (a gateway, a bridge; with s2s, any server can address pingd
// from a bare domain too) and returns the stream after the XEP-0114
// handshake; what the server sends it is read and dropped.
func dialOtherComponent(t *testing.T, addr, name, secret string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, `<?xml version="1.0"?><stream:stream xmlns="jabber:component:accept" xmlns:stream="http://etherx.jabber.org/streams" to="%s">`, name)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got []byte
	streamID := regexp.MustCompile(`<stream:stream[^>]*\sid=['"]([^'"]+)['"]`)
	for !streamID.Match(got) {
		b := make([]byte, 1024)
		n, err := conn.Read(b)
		if err != nil {
			t.Fatalf("%s: stream header: %v (%q)", name, err, got)
		}
		got = append(got, b[:n]...)
	}
	sum := sha1.Sum([]byte(string(streamID.FindSubmatch(got)[1]) + secret))
	fmt.Fprintf(conn, `<handshake>%s</handshake>`, hex.EncodeToString(sum[:]))
	got = got[:0]
	for !regexp.MustCompile(`<handshake\s*/>|<handshake></handshake>`).Match(got) {
		b := make([]byte, 1024)
		n, err := conn.Read(b)
		if err != nil {
			t.Fatalf("%s: handshake: %v (%q)", name, err, got)
		}
		got = append(got, b[:n]...)
	}
	_ = conn.SetReadDeadline(time.Time{})
	go func() { _, _ = io.Copy(io.Discard, conn) }()
	return conn
}

// forgeryEnv is a proxied env with another component, evil.localhost, on
// the same Prosody: "first" was delivered and acknowledged, then the
// server stopped reading what pingd writes (it is dying) and "in-flight"
// was written to it, unread.
type forgeryEnv struct {
	*env
	proxy  *testenv.Proxy
	alice  *testenv.Client
	evil   net.Conn
	acked  int64 // the cursor recorded before "in-flight"
	nodeID int64
}

func newForgeryEnv(t *testing.T) *forgeryEnv {
	e, proxy, alice := newProxiedEnvOn(t, testenv.ProsodyOptions{ExtraComponents: []string{"evil.localhost"}})
	e.publishAcknowledged(alice, "demo", "first")
	f := &forgeryEnv{env: e, proxy: proxy, alice: alice, evil: dialOtherComponent(t, e.p.ComponentAddr, "evil.localhost", e.p.Secret)}
	f.acked, _ = e.cursor("demo")
	n, err := e.store.Node(e.ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	f.nodeID = n.ID

	proxy.Swallow()
	e.publishWritten("demo", "in-flight")
	return f
}

// forgeIQ sends, as evil.localhost, an IQ of type typ with the id.
func (f *forgeryEnv) forgeIQ(typ, id string) {
	fmt.Fprintf(f.evil, `<iq type="%s" from="evil.localhost" to="pubsub.localhost" id="%s"><error type="cancel"><service-unavailable xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/></error></iq>`, typ, id)
}

// checkNothingAcknowledged: the forged markers recorded nothing, and
// "in-flight" arrives after the server goes away and pingd reconnects.
func (f *forgeryEnv) checkNothingAcknowledged(t *testing.T) {
	t.Helper()
	time.Sleep(300 * time.Millisecond) // time for a wrongly taken marker to be recorded
	if x, _ := f.cursor("demo"); x != f.acked {
		t.Fatalf("cursor moved from %d to %d on forged markers of a notification the server never read", f.acked, x)
	}
	f.proxy.Block()
	testenv.WaitFor(t, 10*time.Second, "the component to notice", func() bool { return !f.comp.Connected() })
	f.proxy.Allow()
	testenv.WaitFor(t, 20*time.Second, "the component to reconnect", f.comp.Connected)
	if got := collectItems(t, f.alice, "demo", 1); got[0].id != "in-flight" {
		t.Fatalf("after reconnecting: %v", got)
	}
}

// TestForgedCursorMarkerIsIgnored: while the server reads nothing (it is
// dying with a notification unread), another component of the server
// sends markers naming the node and the cursor of that notification, in
// the form shared connections use, as errors and as IQs. They must not
// be recorded (before cursor markers carried an HMAC under the component
// secret and counted only in shared mode, they were, and the notification
// was lost); nor may one naming a cursor far past the log move it there.
func TestForgedCursorMarkerIsIgnored(t *testing.T) {
	f := newForgeryEnv(t)
	_, last := f.cursor("demo")
	for _, cursor := range []int64{last, 1_000_000} {
		for _, id := range []string{
			fmt.Sprintf("pingd-cursor-%d-%d", f.nodeID, cursor),
			cursorMarkerID([]byte("a guessed secret"), f.nodeID, cursor),
		} {
			f.forgeIQ("error", id)
			f.forgeIQ("get", id)
		}
	}
	f.checkNothingAcknowledged(t)
}

// TestForgedAckMarkersAreIgnored: while the server reads nothing, another
// component sends error answers with every marker id a connection
// counting from 1 would use. They must not acknowledge (before marker ids
// carried the connection's nonce, they did, and the notification was
// lost).
func TestForgedAckMarkersAreIgnored(t *testing.T) {
	f := newForgeryEnv(t)
	for i := 1; i <= 10; i++ {
		f.forgeIQ("error", fmt.Sprintf("pingd-ack-%d", i))
	}
	f.checkNothingAcknowledged(t)
}

// TestAckWindowPerBatch: each node's batch gets a marker of its own even
// while another is in flight, so the server's acknowledgement of the
// first records its cursor without waiting for the later ones; and the
// window holds at most maxUnackedMessages unacknowledged messages, the
// most a leader that dies can leave to be sent again.
func TestAckWindowPerBatch(t *testing.T) {
	w := newAckWindow(time.Minute)
	w.written(1, 10, messagesPerFlush)
	m1 := w.nextMarker(true)
	if w.full() {
		t.Fatal("full after one batch")
	}
	w.written(1, 20, messagesPerFlush)
	m2 := w.nextMarker(true)
	if m1 == "" || m2 == "" || m1 == m2 {
		t.Fatalf("markers %q and %q: want one per batch", m1, m2)
	}
	if !w.full() {
		t.Fatalf("not full with %d messages unacknowledged", 2*messagesPerFlush)
	}
	w.ack(m1)
	if got, _ := w.take(); got.cursors[1] != 10 {
		t.Fatalf("after the first batch's marker: %v, want node 1 at 10", got.cursors)
	}
	if w.full() {
		t.Fatal("still full after the first batch was acknowledged")
	}
	w.ack(m2)
	if got, _ := w.take(); got.cursors[1] != 20 {
		t.Fatalf("after the second batch's marker: %v, want node 1 at 20", got.cursors)
	}
}
