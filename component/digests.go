package component

import (
	"bufio"
	"context"
	"errors"
	"time"

	"github.com/pingd/pingd/hub"
)

// Digests (XEP-0060 §6.3 pubsub#digest; the model is in hub/digests.go).
// The dispatcher leaves digest subscriptions out of the fan-out; every
// digestCheckEvery it looks for due digests and sends each one message
// with the items since the subscription's cursor: a pubsub#event whose
// <items/> holds them all (with a readable list as the body when the
// subscription asks for one), or for readers of plain messages the list
// a burst gets. A subscription asking for diffs (diff.go) gets the patch
// of the digest's events beside its pubsub event, and a digest also when
// only retractions or a purge happened. The cursor is recorded once the
// XMPP server has taken the digest (the acknowledgement markers of
// acks.go); until then that subscription gets no other digest. With
// Config.Shared, where a marker may reach another process, it is recorded
// right after the write.

const (
	// digestCheckEvery is how often the dispatcher looks for due digests.
	digestCheckEvery = time.Second
	// digestBatch bounds the digests sent per look.
	digestBatch = 64
	// maxDigestEvents bounds the events one digest covers; a subscription
	// owed more gets the rest in the next digest, at once.
	maxDigestEvents = maxBurstEntries
)

// digestDone is a digest written and waiting to be recorded.
type digestDone struct {
	sub    hub.Subscription
	due    time.Time
	cursor int64
	sent   time.Time
	more   bool
}

// sendDueDigests sends the digests that are due, while connected and
// leading (on the dispatcher).
func (d *dispatcher) sendDueDigests(ctx context.Context) {
	conn := d.connection()
	if conn == nil || !d.leading.Load() {
		return
	}
	subs, err := d.hub.DueDigests(ctx, digestBatch)
	if err != nil {
		if ctx.Err() == nil {
			d.log.ErrorContext(ctx, "find due digests", "err", err)
		}
		return
	}
	for _, s := range subs {
		if conn.acks.isDigesting(s.ID, s.Cursor) {
			continue
		}
		if err := d.sendDigest(ctx, conn, s); err != nil {
			if ctx.Err() == nil {
				d.log.WarnContext(ctx, "send a digest", "node", s.NodeName, "jid", s.Address, "err", err)
			}
			return
		}
	}
}

// sendDigest sends one subscription's digest.
func (d *dispatcher) sendDigest(ctx context.Context, conn *connection, s hub.Subscription) error {
	n, err := d.store.NodeByID(ctx, s.NodeID)
	if errors.Is(err, hub.ErrNotFound) {
		return nil // deleted meanwhile, with its subscriptions
	}
	if err != nil {
		return err
	}
	events, err := d.store.EventsAfter(ctx, n.ID, s.Cursor, maxDigestEvents)
	if err != nil {
		return err
	}
	done := digestDone{sub: s, due: s.NextAttemptAt, cursor: s.Cursor, sent: d.hub.Now(), more: len(events) == maxDigestEvents}
	if len(events) > 0 {
		done.cursor = events[len(events)-1].Seq
	}
	items := digestItems(events)
	var retracted []string
	var purged bool
	if variantOf(n, &s).diff {
		// A patch must remove what it removes even when nothing is new.
		retracted, purged = digestRemovals(events)
	}
	if len(items) == 0 && len(retracted) == 0 && !purged {
		// Nothing to tell: the next digest is due one interval later.
		_, err := d.hub.DigestSent(ctx, s, done.due, done.cursor, done.sent, done.more)
		return err
	}
	msg := d.render.renderDigest(n, &s, items, retracted, purged, events)
	if len(msg) > d.limit.bytes() {
		msg, done = d.render.fitDigest(n, s, events, done)
	}
	err = conn.writeThen(func(w *bufio.Writer) error {
		_, err := w.Write(msg)
		return err
	}, func() {
		conn.noteWrite(len(msg))
		if !d.shared {
			conn.acks.writtenDigest(done)
		}
	})
	if err != nil {
		return err
	}
	d.sentUnicast.Add(1)
	d.log.DebugContext(ctx, "digest sent", "node", n.Name, "jid", s.Address, "items", len(items))
	if d.shared {
		d.recordDigest(ctx, conn, done)
		return nil
	}
	return d.writeMarker(conn)
}

// fitDigest renders a digest too large for the stanza budget as one of
// fewer events (the first half, and so on), whose cursor is the last of
// them; the rest is owed, so the next digest follows at once. A single
// event still too large (an item stored before the entry limit) goes
// without its payload.
func (rd *renderer) fitDigest(n *hub.Node, s hub.Subscription, events []hub.Event, done digestDone) ([]byte, digestDone) {
	limit := rd.limit.bytes()
	total := len(events)
	var msg []byte
	for k := len(events) / 2; ; k /= 2 {
		k = max(k, 1)
		events = events[:k]
		items := digestItems(events)
		var retracted []string
		var purged bool
		if variantOf(n, &s).diff {
			retracted, purged = digestRemovals(events)
		}
		if k == 1 && len(items) == 1 {
			if msg = rd.renderDigest(n, &s, items, retracted, purged, events); len(msg) > limit {
				items[0].Payload = nil
				msg = rd.renderDigest(n, &s, items, retracted, purged, events)
				rd.limit.shrunk.Add(1)
			}
		} else {
			msg = rd.renderDigest(n, &s, items, retracted, purged, events)
		}
		if len(msg) <= limit || k == 1 {
			break
		}
	}
	done.cursor, done.more = events[len(events)-1].Seq, true
	rd.log.Info("a digest is sent in parts: all of it would be over the stanza budget",
		"node", n.Name, "jid", s.Address, "events", len(events), "of", total, "budget_bytes", limit)
	return msg, done
}

// recordDigest records a digest the server took.
func (d *dispatcher) recordDigest(ctx context.Context, conn *connection, done digestDone) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cursorTimeout)
	defer cancel()
	_, err := d.hub.DigestSent(sctx, done.sub, done.due, done.cursor, done.sent, done.more)
	conn.acks.digestRecorded(done.sub.ID, err == nil, done.cursor)
	if err != nil {
		// Not recorded, the digest is sent again: a duplicate, nothing lost.
		d.log.ErrorContext(ctx, "record a digest", "node", done.sub.NodeName, "jid", done.sub.Address, "err", err)
	}
}

// digestItems are the items a digest carries: each item event of the
// batch, but not those retracted or purged later in it, newest version
// of an item id only.
func digestItems(events []hub.Event) []hub.Event {
	gone := map[string]bool{}
	purgedAt := -1
	for i, ev := range events {
		switch ev.Kind {
		case hub.EventRetract:
			gone[ev.ItemID] = true
		case hub.EventPurge:
			purgedAt = i
		}
	}
	var out []hub.Event
	seen := map[string]bool{}
	for i := len(events) - 1; i > purgedAt; i-- {
		ev := events[i]
		switch {
		case ev.Kind == hub.EventRetract:
			gone[ev.ItemID] = true
		case ev.Kind != hub.EventItem, gone[ev.ItemID], seen[ev.ItemID]:
		default:
			seen[ev.ItemID] = true
			out = append(out, ev)
		}
	}
	// Oldest first, as they were published.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// digestRemovals are, for a subscription asking for diffs, what its
// digest of events removes, as its patch does: whether events hold a
// purge, and the items retracted after the last one that the previous
// document held (their first event is the retraction) and that were not
// published again.
func digestRemovals(events []hub.Event) (retracted []string, purged bool) {
	lastPurge := -1
	for i, ev := range events {
		if ev.Kind == hub.EventPurge {
			lastPurge = i
		}
	}
	first, last := map[string]hub.EventKind{}, map[string]hub.EventKind{}
	var ids []string
	for _, ev := range events[lastPurge+1:] {
		if ev.Kind != hub.EventItem && ev.Kind != hub.EventRetract {
			continue
		}
		if _, seen := first[ev.ItemID]; !seen {
			first[ev.ItemID] = ev.Kind
			ids = append(ids, ev.ItemID)
		}
		last[ev.ItemID] = ev.Kind
	}
	for _, id := range ids {
		if first[id] == hub.EventRetract && last[id] == hub.EventRetract {
			retracted = append(retracted, id)
		}
	}
	return retracted, lastPurge >= 0
}

// renderDigest renders one subscription's digest message of items, the
// digest of events. A subscription asking for diffs gets the patch of all
// of events beside the pubsub event; when nothing is new the event tells
// the purge, else the retractions (retracted).
func (rd *renderer) renderDigest(n *hub.Node, s *hub.Subscription, items []hub.Event, retracted []string, purged bool, events []hub.Event) []byte {
	v := variantOf(n, s)
	id := rd.stanzaIDs.forNode(n.ID)
	var b xmlBuf
	b.Write(rd.messagePrefixOfType(v.typ))
	escapeAttr(&b.Buffer, s.Address)
	role := burstRole{entries: items, total: len(items)}
	if v.format == hub.FormatMessage {
		b.Write(rd.renderBurst(n, role, id))
		return b.Bytes()
	}
	b.WriteString(`" id="`)
	escapeAttr(&b.Buffer, id)
	b.WriteString(`">`)
	if v.body && len(items) > 0 {
		b.element("body", burstText(n, role))
	}
	b.open("event", "xmlns", nsPubsubEvent)
	switch {
	case len(items) > 0:
		b.open("items", "node", n.Name)
		for _, ev := range items {
			writeItem(&b, ev.ItemID, rd.payload(ev), n.DeliverPayloads)
		}
		b.close("items")
	case purged:
		b.empty("purge", "node", n.Name)
	default:
		b.open("items", "node", n.Name)
		for _, id := range retracted {
			b.empty("retract", "id", id)
		}
		b.close("items")
	}
	b.close("event")
	if v.diff {
		b.Write(rd.renderDiff(n, events, b.Len()+len("</message>")))
	}
	b.close("message")
	return b.Bytes()
}
