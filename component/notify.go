package component

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// locked write may hold, so answers to requests are not held up for long.
const (
	eventBatch        = 256
	messagesPerFlush  = 20000
	retryAfterFailure = time.Second
	cursorTimeout     = 10 * time.Second
)

// dispatchLoop serves the work queue, and sends the digests that are due,
// until ctx ends.
func (c *Component) dispatchLoop(ctx context.Context) {
	digests := time.NewTicker(digestCheckEvery)
	defer digests.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.work.signal:
			c.dispatch(ctx)
		case <-digests.C:
			c.sendDueDigests(ctx)
		}
	}
}

// errStream marks a failure of the stream (as opposed to the store).
var errStream = errors.New("XMPP stream")

// errNotLeading stops a dispatch when the lease was lost half-way.
var errNotLeading = errors.New("no longer the leader")

// dispatch delivers everything queued while a connection is up. Without
// one it leaves the work: the next connection queues every node anyway.
func (c *Component) dispatch(ctx context.Context) {
	for ctx.Err() == nil {
		conn := c.connection()
		if conn == nil || !c.leading.Load() {
			// A standby leaves the work: the lease, when it comes, queues
			// every node anyway.
			return
		}
		if err := c.writeMarker(conn); err != nil {
			return // the reader notices the lost stream and reconnects
		}
		all, ids := c.work.take()
		if !all && len(ids) == 0 {
			return
		}
		nodeIDs, err := c.nodesToServe(ctx, all, ids)
		if err != nil {
			if ctx.Err() == nil {
				c.log.ErrorContext(ctx, "find nodes with notifications to send", "err", err)
				c.requeueLater(0)
			}
			return
		}
		for i, id := range nodeIDs {
			err := c.deliverNode(ctx, conn, id)
			if err == nil {
				continue
			}
			if ctx.Err() != nil {
				return
			}
			c.work.requeue(nodeIDs[i:])
			if errors.Is(err, errNotLeading) {
				return // the new leader carries on from the cursors
			}
			if errors.Is(err, errStream) {
				// The reader notices the lost stream and reconnects; the
				// new connection queues every node.
				c.log.WarnContext(ctx, "notifications interrupted by the lost stream", "err", err)
				return
			}
			c.log.ErrorContext(ctx, "send notifications", "node_id", id, "err", err)
			c.requeueLater(id)
			return
		}
	}
}

// requeueLater retries a node (0: all) after a store failure.
func (c *Component) requeueLater(nodeID int64) {
	time.AfterFunc(retryAfterFailure, func() { c.work.add(nodeID) })
}

// nodesToServe lists the ids of the nodes to look at.
func (c *Component) nodesToServe(ctx context.Context, all bool, ids []int64) ([]int64, error) {
	if !all {
		return ids, nil
	}
	behind, err := c.store.NodesBehindXMPP(ctx)
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

// deliverNode sends the node's events after its cursor.
func (c *Component) deliverNode(ctx context.Context, conn *connection, nodeID int64) error {
	// Read before the node: the recorder forgets a node's sent position
	// only after recording it, so one of the two is always current.
	sent := conn.acks.sentFor(nodeID)
	n, err := c.store.NodeByID(ctx, nodeID)
	if errors.Is(err, hub.ErrNotFound) {
		return nil // deleted meanwhile; its subscribers got a delete notification
	}
	if err != nil {
		return err
	}
	subFilter := hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP, State: hub.SubActive}
	after := max(n.XMPPSeq, sent)
	for {
		events, err := c.store.EventsAfter(ctx, n.ID, after, eventBatch)
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
		subs, err := c.store.Subscriptions(ctx, subFilter)
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
		if err := c.waitForRoom(ctx, conn); err != nil {
			if ctx.Err() != nil {
				return err
			}
			return fmt.Errorf("%w: %w", errStream, err)
		}
		if !c.leading.Load() {
			return errNotLeading
		}
		last := events[len(events)-1].Seq
		// The batch is recorded as written under the write's own lock, so
		// a shutdown's last marker, written next, covers it.
		written := func(largest int) {
			conn.noteWrite(largest)
			conn.acks.written(n.ID, last)
		}
		if c.shared {
			written = func(largest int) {
				conn.noteWrite(largest)
				conn.acks.markSent(n.ID, last)
			}
		}
		if err := c.writeEvents(conn, n, events, subs, written); err != nil {
			return fmt.Errorf("%w: %w", errStream, err)
		}
		if c.shared {
			// ejabberd spreads what reaches the component's name over all
			// its connections: this batch's marker names its cursor, for
			// whichever process it reaches to record (acks.go).
			if err := c.writeCursorMarker(conn, n.ID, last); err != nil {
				return fmt.Errorf("%w: %w", errStream, err)
			}
		} else if err := c.writeMarker(conn); err != nil {
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

// recipient is a subscriber with its address escaped once per batch.
type recipient struct {
	to     []byte
	cursor int64
}

// variant is what a subscription's options change in its notifications:
// the format (pubsub#event or plain message), the message type, whether a
// readable <body> is added to the event and whether the change's patch
// is (diff.go). Subscribers of one variant share every rendered byte but
// the "to".
type variant struct {
	format string
	typ    string
	body   bool
	diff   bool
}

// audience is the subscribers of one variant: those written one stanza
// each (rcpts) and those the multicast service reaches (grouped).
type audience struct {
	variant
	prefix, mcHead []byte
	rcpts, grouped []recipient
}

// nodeMessageType is the node's notification message type.
func nodeMessageType(n *hub.Node) string {
	if n.NotificationType == hub.NotifyNormal {
		return hub.NotifyNormal
	}
	return hub.NotifyHeadline
}

// variantOf is the variant a subscription's options ask for.
func variantOf(n *hub.Node, s *hub.Subscription) variant {
	if s.Options.Format == hub.FormatMessage {
		return variant{format: hub.FormatMessage, typ: hub.MessageTypeOf(n, s.Options)}
	}
	return variant{format: hub.FormatPubsub, typ: hub.MessageTypeOf(n, s.Options), body: s.Options.IncludeBody,
		diff: s.Options.Diff != ""}
}

// rendered is one event's notification, rendered once for every variant
// that shows it: the bytes after the "to" value.
type rendered struct {
	seq int64
	// suffix is the pubsub#event, withBody the same with a readable body,
	// withDiff and withBodyDiff the two with the change's patch, plain the
	// plain message (nil: readers of plain messages are not told of this
	// event, or it is part of a burst sent with an earlier one). Only the
	// variants some subscriber has are rendered; the others stay suffix.
	suffix, withBody, withDiff, withBodyDiff, plain []byte
	// head is the length of the suffixes' start, up to the end of the
	// message's start tag (the id); the multicast addresses go there.
	head int
	// only is a single recipient (revoke, subscribed, last), else nil;
	// onlyPrefix its message start when it is not the node's.
	only, onlyPrefix []byte
}

// writeEvents renders each event once per variant and writes it to every
// subscriber that subscribed before it, in one locked, buffered write: one
// stanza per subscriber, or, for the subscribers a multicast service
// reaches, one stanza per batch of them addressed to the service
// (XEP-0033).
func (c *Component) writeEvents(conn *connection, n *hub.Node, events []hub.Event, subs []hub.Subscription, written func(largest int)) error {
	mc := conn.multicast.Load()
	if mc != nil && mc.disabled.Load() {
		mc = nil
	}
	var auds []*audience
	byVariant := map[variant]*audience{}
	for i := range subs {
		s := &subs[i]
		if s.Options.Digest {
			continue // served by its digests (digests.go)
		}
		v := variantOf(n, s)
		a := byVariant[v]
		if a == nil {
			a = &audience{variant: v, prefix: c.messagePrefixOfType(v.typ)}
			byVariant[v] = a
			auds = append(auds, a)
		}
		var b bytes.Buffer
		escapeAttr(&b, s.Address)
		r := recipient{to: b.Bytes(), cursor: s.Cursor}
		if mc != nil && strings.EqualFold(domainOf(s.Address), mc.domain) {
			a.grouped = append(a.grouped, r)
		} else {
			a.rcpts = append(a.rcpts, r)
		}
	}
	needBody, needDiff, needBodyDiff, needPlain := false, false, false, false
	for _, a := range auds {
		// The share of the service's subscribers written one by one
		// (Config.MulticastShare).
		k := len(a.grouped) * (100 - c.multicastShare) / 100
		a.rcpts, a.grouped = append(a.rcpts, a.grouped[:k]...), a.grouped[k:]
		if len(a.grouped) < 2 {
			a.rcpts, a.grouped = append(a.rcpts, a.grouped...), nil // one stanza each is as cheap
		}
		if len(a.grouped) > 0 {
			var b bytes.Buffer
			b.Write(a.prefix)
			escapeAttr(&b, mc.jid)
			a.mcHead = b.Bytes()
		}
		needBody = needBody || a.body && !a.diff
		needDiff = needDiff || a.diff && !a.body
		needBodyDiff = needBodyDiff || a.body && a.diff
		needPlain = needPlain || a.format == hub.FormatMessage
	}
	var roles []burstRole
	if needPlain {
		roles = burstRoles(events, c.suffixBudget())
	}
	prefix := c.messagePrefix(n)
	var out []rendered
	for i, ev := range events {
		// One id per event, shared by all its copies: only "to" varies.
		id := c.stanzaIDs.forNode(n.ID)
		if ev.Kind == hub.EventLast {
			if r, ok := c.renderLast(n, ev, id, subs); ok {
				out = append(out, r)
			}
			continue
		}
		suffix := c.renderEvent(n, ev, id, "", nil)
		if suffix == nil {
			continue
		}
		r := rendered{seq: ev.Seq, suffix: suffix, withBody: suffix, withDiff: suffix, withBodyDiff: suffix,
			head: bytes.IndexByte(suffix, '>') + 1}
		var body string
		if ev.Kind == hub.EventItem && (needBody || needBodyDiff) {
			body = readableBody(n, ev)
		}
		var diff []byte
		if (needDiff || needBodyDiff) && ev.Kind != hub.EventRevoke && ev.Kind != hub.EventSubscribed {
			// One patch per event, rendered once for every subscriber
			// that asks for it, and fit for the larger notification.
			if diff = c.renderDiff(n, events[i:i+1], len(suffix)+len(body)+len("<body></body>")); diff != nil {
				r.withDiff = c.renderEvent(n, ev, id, "", diff)
				r.withBodyDiff = r.withDiff
			}
		}
		if ev.Kind == hub.EventRevoke || ev.Kind == hub.EventSubscribed {
			var b bytes.Buffer
			escapeAttr(&b, ev.Address)
			r.only = b.Bytes()
		} else if ev.Kind == hub.EventItem {
			if needBody {
				r.withBody = c.renderEvent(n, ev, id, body, nil)
			}
			if needBodyDiff {
				r.withBodyDiff = c.renderEvent(n, ev, id, body, diff)
			}
			switch {
			case !needPlain:
			case roles[i].entries != nil:
				r.plain = c.renderBurst(n, roles[i], id)
			case !roles[i].in:
				r.plain = c.renderPlain(n, ev, id, time.Time{})
			}
		}
		var role burstRole
		if needPlain {
			role = roles[i]
		}
		c.fitRendered(n, ev, id, role, &r)
		out = append(out, r)
	}
	if len(out) == 0 {
		written(0) // nothing for XMPP subscribers: the batch is done
		return nil
	}
	unicast, multicast, largest := 0, 0, 0
	err := conn.writeThen(func(w *bufio.Writer) error {
		var batch [][]byte
		for _, r := range out {
			if r.only != nil {
				if r.onlyPrefix != nil {
					w.Write(r.onlyPrefix)
				} else {
					w.Write(prefix)
				}
				w.Write(r.only)
				w.Write(r.suffix)
				largest = max(largest, len(r.suffix))
				unicast++
				continue
			}
			for _, a := range auds {
				suffix := r.suffix
				switch {
				case a.format == hub.FormatMessage:
					suffix = r.plain
				case a.body && a.diff:
					suffix = r.withBodyDiff
				case a.body:
					suffix = r.withBody
				case a.diff:
					suffix = r.withDiff
				}
				if suffix == nil {
					continue
				}
				largest = max(largest, len(suffix)+envelopeBytes/2)
				// The multicast stanzas first: the server's multicast
				// service fans them out while its end of the connection
				// parses the single stanzas after them.
				batch = batch[:0]
				for _, rc := range a.grouped {
					if r.seq > rc.cursor {
						batch = append(batch, rc.to)
					}
				}
				for len(batch) > 0 {
					k := addressesThatFit(batch, min(len(batch), mc.maxAddrs), c.limit.bytes()-len(a.mcHead)-len(suffix))
					if k == 1 {
						w.Write(a.prefix)
						w.Write(batch[0])
						w.Write(suffix)
						unicast++
					} else {
						w.Write(a.mcHead)
						w.Write(suffix[:r.head])
						w.WriteString(`<addresses xmlns="` + nsAddress + `">`)
						for _, to := range batch[:k] {
							w.WriteString(`<address type="bcc" jid="`)
							w.Write(to)
							w.WriteString(`"/>`)
						}
						w.WriteString(`</addresses>`)
						w.Write(suffix[r.head:])
						multicast++
					}
					batch = batch[k:]
				}
				for _, rc := range a.rcpts {
					if r.seq <= rc.cursor {
						continue // subscribed after this event
					}
					w.Write(a.prefix)
					w.Write(rc.to)
					w.Write(suffix)
					unicast++
				}
			}
		}
		return nil
	}, func() { written(largest) })
	if err == nil && unicast+multicast > 0 {
		c.sentUnicast.Add(int64(unicast))
		c.sentMulticast.Add(int64(multicast))
		c.log.Debug("notifications sent", "node", n.Name, "events", len(out), "messages", unicast, "multicast_messages", multicast)
	}
	return err
}

// renderLast renders the newest item sent to a new subscription
// (hub.EventLast) as that subscription's options ask, with a delay that
// says it is not new; false when the subscription is gone meanwhile.
func (c *Component) renderLast(n *hub.Node, ev hub.Event, id string, subs []hub.Subscription) (rendered, bool) {
	i := slices.IndexFunc(subs, func(s hub.Subscription) bool { return s.Address == ev.Address })
	if i < 0 {
		return rendered{}, false
	}
	v := variantOf(n, &subs[i])
	var to bytes.Buffer
	escapeAttr(&to, ev.Address)
	r := rendered{seq: ev.Seq, only: to.Bytes(), onlyPrefix: c.messagePrefixOfType(v.typ)}
	switch {
	case v.format == hub.FormatMessage:
		r.suffix = c.renderPlain(n, ev, id, lastStamp(ev))
		if len(r.suffix) > c.suffixBudget() {
			r.suffix = c.renderPlain(n, withoutLink(ev), id, lastStamp(ev))
		}
	case v.body:
		r.suffix = c.renderEvent(n, ev, id, readableBody(n, ev), nil)
	default:
		r.suffix = c.renderEvent(n, ev, id, "", nil)
	}
	if v.format != hub.FormatMessage && len(r.suffix) > c.suffixBudget() {
		r.suffix = c.renderEventWithoutPayload(n, ev, id)
	}
	return r, true
}

// lastStamp is the time an item sent again is stamped with (XEP-0203):
// its entry's; none without one.
func lastStamp(ev hub.Event) time.Time { return ev.Updated }

// messagePrefix is the start of every notification of the node, up to the
// value of the "to" attribute.
func (c *Component) messagePrefix(n *hub.Node) []byte {
	return c.messagePrefixOfType(nodeMessageType(n))
}

// messagePrefixOfType is the start of a notification of message type typ.
func (c *Component) messagePrefixOfType(typ string) []byte {
	var b xmlBuf
	b.WriteString(`<message type="` + typ + `" from="`)
	escapeAttr(&b.Buffer, c.domainStr)
	b.WriteString(`" to="`)
	return b.Bytes()
}

// renderEvent renders the rest of an event's notification, after the "to"
// value: the stanza id, and what follows the start tag. It is nil for
// events XMPP subscribers are not told. body, when not empty, is a
// readable text for clients that show no pubsub events; diff, when not
// nil, the change's <Diff/> element (diff.go), written after the event.
func (c *Component) renderEvent(n *hub.Node, ev hub.Event, id, body string, diff []byte) []byte {
	var b xmlBuf
	b.WriteString(`" id="`)
	escapeAttr(&b.Buffer, id)
	b.WriteString(`">`)
	if body != "" {
		b.element("body", body)
	}
	b.open("event", "xmlns", nsPubsubEvent)
	switch ev.Kind {
	case hub.EventItem, hub.EventLast:
		b.open("items", "node", n.Name)
		writeItem(&b, ev.ItemID, c.payload(ev), n.DeliverPayloads)
		b.close("items")
	case hub.EventRetract:
		b.open("items", "node", n.Name).empty("retract", "id", ev.ItemID).close("items")
	case hub.EventPurge:
		b.empty("purge", "node", n.Name)
	case hub.EventRevoke:
		b.empty("subscription", "node", n.Name, "jid", ev.Address, "subscription", "none")
	case hub.EventSubscribed:
		b.empty("subscription", "node", n.Name, "jid", ev.Address, "subscription", "subscribed")
	default:
		return nil // changes without items are for URL-level subscribers
	}
	b.close("event")
	b.Write(diff)
	if ev.Kind == hub.EventLast {
		writeDelay(&b, lastStamp(ev), c.domainStr)
	}
	b.close("message")
	return b.Bytes()
}

// renderDelete is the delete notification (XEP-0060 §8.4) for one
// subscriber; the copies of one deletion share their id.
func (c *Component) renderDelete(n hub.Node, to, id string) []byte {
	var b xmlBuf
	b.Write(c.messagePrefix(&n))
	escapeAttr(&b.Buffer, to)
	b.WriteString(`" id="`)
	escapeAttr(&b.Buffer, id)
	b.WriteString(`">`)
	b.open("event", "xmlns", nsPubsubEvent).empty("delete", "node", n.Name).close("event")
	b.close("message")
	return b.Bytes()
}

// renderDeletePlain tells a reader of plain messages that the node is
// gone, in words.
func (c *Component) renderDeletePlain(n hub.Node, s hub.Subscription, id string) []byte {
	var b xmlBuf
	b.Write(c.messagePrefixOfType(hub.MessageTypeOf(&n, s.Options)))
	escapeAttr(&b.Buffer, s.Address)
	b.WriteString(`" id="`)
	escapeAttr(&b.Buffer, id)
	b.WriteString(`">`)
	b.element("body", sanitizeText(fmt.Sprintf("[%s] This node was deleted: nothing more will come from it.", nodeName(&n))))
	b.close("message")
	return b.Bytes()
}

// stanzaIDs gives the messages the component sends on its own
// (notifications, chat answers) their ids, which RFC 6120 §8.1.3
// recommends and clients use to match errors and receipts. A random
// prefix per process and a counter keep them unique for the price of an
// increment. The prefix is hex, so an id never starts like the "pingd-…"
// ids of the acknowledgement markers and pingd's own queries (acks.go,
// multicast.go).
type stanzaIDs struct {
	prefix string
	n      atomic.Uint64
}

func newStanzaIDs() *stanzaIDs {
	var r [6]byte
	_, _ = rand.Read(r[:]) // crypto/rand does not fail (Go 1.24+)
	return &stanzaIDs{prefix: hex.EncodeToString(r[:]) + "-"}
}

// next is a new id: one allocation, the string.
func (s *stanzaIDs) next() string {
	var buf [32]byte
	b := append(buf[:0], s.prefix...)
	return string(strconv.AppendUint(b, s.n.Add(1), 36))
}

// forNode is a new id of a notification about a node: the node's id goes
// into it ("n<node>."), so that an error answering the notification
// (XEP-0060 §12.3) names the node whose subscription bounced, whatever
// process sent it and however long ago.
func (s *stanzaIDs) forNode(nodeID int64) string {
	var buf [48]byte
	b := append(buf[:0], s.prefix...)
	b = append(b, 'n')
	b = strconv.AppendInt(b, nodeID, 36)
	b = append(b, '.')
	return string(strconv.AppendUint(b, s.n.Add(1), 36))
}

// nodeOfStanzaID returns the node a notification id of forNode names.
func nodeOfStanzaID(id string) (int64, bool) {
	_, rest, ok := strings.Cut(id, "-n")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, ".")
	n, err := strconv.ParseInt(num, 36, 64)
	if !ok || err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
