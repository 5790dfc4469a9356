package component

import (
	"bufio"
	"bytes"
	"slices"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
)

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
	// note, when set, is a plain message to the single recipient written
	// after the event, notePrefix its start: a revoke told in words to a
	// reader of plain messages.
	note, notePrefix []byte
}

// writeEvents renders each event once per variant and writes it to every
// subscriber that subscribed before it, in one locked, buffered write: one
// stanza per subscriber, or, for the subscribers a multicast service
// reaches, one stanza per batch of them addressed to the service
// (XEP-0033).
func (d *dispatcher) writeEvents(conn *connection, n *hub.Node, events []hub.Event, subs []hub.Subscription, written func(largest, messages int)) error {
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
			a = &audience{variant: v, prefix: d.render.messagePrefixOfType(v.typ)}
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
		k := len(a.grouped) * (100 - d.multicastShare) / 100
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
		roles = burstRoles(events, d.render.suffixBudget())
	}
	prefix := d.render.messagePrefix(n)
	var out []rendered
	for i, ev := range events {
		// One id per event, shared by all its copies: only "to" varies.
		id := d.stanzaIDs.forNode(n.ID)
		if ev.Kind == hub.EventLast {
			if r, ok := d.render.renderLast(n, ev, id, subs); ok {
				out = append(out, r)
			}
			continue
		}
		suffix := d.render.renderEvent(n, ev, id, "", nil)
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
			if diff = d.render.renderDiff(n, events[i:i+1], len(suffix)+len(body)+len("<body></body>")); diff != nil {
				r.withDiff = d.render.renderEvent(n, ev, id, "", diff)
				r.withBodyDiff = r.withDiff
			}
		}
		if ev.Kind == hub.EventRevoke || ev.Kind == hub.EventSubscribed {
			var b bytes.Buffer
			escapeAttr(&b, ev.Address)
			r.only = b.Bytes()
			if ev.Kind == hub.EventRevoke && ev.PlainType != "" {
				typ := ev.PlainType
				if !hub.ValidMessageType(typ) {
					typ = hub.NotifyChat // the type is written unescaped: only one of the known ones
				}
				r.note, r.notePrefix = d.render.renderRevokePlain(n, id), d.render.messagePrefixOfType(typ)
			}
		} else if ev.Kind == hub.EventItem {
			if needBody {
				r.withBody = d.render.renderEvent(n, ev, id, body, nil)
			}
			if needBodyDiff {
				r.withBodyDiff = d.render.renderEvent(n, ev, id, body, diff)
			}
			switch {
			case !needPlain:
			case roles[i].entries != nil:
				r.plain = d.render.renderBurst(n, roles[i], id)
			case !roles[i].in:
				r.plain = d.render.renderPlain(n, ev, id, time.Time{})
			}
		}
		var role burstRole
		if needPlain {
			role = roles[i]
		}
		d.render.fitRendered(n, ev, id, role, &r)
		out = append(out, r)
	}
	if len(out) == 0 {
		written(0, 0) // nothing for XMPP subscribers: the batch is done
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
				if r.note != nil {
					w.Write(r.notePrefix)
					w.Write(r.only)
					w.Write(r.note)
					largest = max(largest, len(r.note))
					unicast++
				}
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
					k := addressesThatFit(batch, min(len(batch), mc.maxAddrs), d.limit.bytes()-len(a.mcHead)-len(suffix))
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
	}, func() { written(largest, unicast+multicast) })
	if err == nil && unicast+multicast > 0 {
		d.sentUnicast.Add(int64(unicast))
		d.sentMulticast.Add(int64(multicast))
		d.log.Debug("notifications sent", "node", n.Name, "events", len(out), "messages", unicast, "multicast_messages", multicast)
	}
	return err
}

// renderLast renders the newest item sent to a new subscription
// (hub.EventLast) as that subscription's options ask, with a delay that
// says it is not new; false when the subscription is gone meanwhile.
func (rd *renderer) renderLast(n *hub.Node, ev hub.Event, id string, subs []hub.Subscription) (rendered, bool) {
	i := slices.IndexFunc(subs, func(s hub.Subscription) bool { return s.Address == ev.Address })
	if i < 0 {
		return rendered{}, false
	}
	v := variantOf(n, &subs[i])
	var to bytes.Buffer
	escapeAttr(&to, ev.Address)
	r := rendered{seq: ev.Seq, only: to.Bytes(), onlyPrefix: rd.messagePrefixOfType(v.typ)}
	switch {
	case v.format == hub.FormatMessage:
		r.suffix = rd.renderPlain(n, ev, id, lastStamp(ev))
		if len(r.suffix) > rd.suffixBudget() {
			r.suffix = rd.renderPlain(n, withoutLink(ev), id, lastStamp(ev))
		}
	case v.body:
		r.suffix = rd.renderEvent(n, ev, id, readableBody(n, ev), nil)
	default:
		r.suffix = rd.renderEvent(n, ev, id, "", nil)
	}
	if v.format != hub.FormatMessage && len(r.suffix) > rd.suffixBudget() {
		r.suffix = rd.renderEventWithoutPayload(n, ev, id)
	}
	return r, true
}
