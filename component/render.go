package component

import (
	"fmt"
	"time"

	"github.com/pingd/pingd/hub"
)

// nodeMessageType is the node's notification message type.
func nodeMessageType(n *hub.Node) string {
	if n.NotificationType == hub.NotifyNormal {
		return hub.NotifyNormal
	}
	return hub.NotifyHeadline
}

// lastStamp is the time an item sent again is stamped with (XEP-0203):
// its entry's; none without one.
func lastStamp(ev hub.Event) time.Time { return ev.Updated }

// messagePrefix is the start of every notification of the node, up to the
// value of the "to" attribute.
func (d *dispatcher) messagePrefix(n *hub.Node) []byte {
	return d.messagePrefixOfType(nodeMessageType(n))
}

// messagePrefixOfType is the start of a notification of message type typ.
func (d *dispatcher) messagePrefixOfType(typ string) []byte {
	var b xmlBuf
	b.WriteString(`<message type="` + typ + `" from="`)
	escapeAttr(&b.Buffer, d.domainStr)
	b.WriteString(`" to="`)
	return b.Bytes()
}

// renderEvent renders the rest of an event's notification, after the "to"
// value: the stanza id, and what follows the start tag. It is nil for
// events XMPP subscribers are not told. body, when not empty, is a
// readable text for clients that show no pubsub events; diff, when not
// nil, the change's <Diff/> element (diff.go), written after the event.
func (d *dispatcher) renderEvent(n *hub.Node, ev hub.Event, id, body string, diff []byte) []byte {
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
		writeItem(&b, ev.ItemID, d.payload(ev), n.DeliverPayloads)
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
		writeDelay(&b, lastStamp(ev), d.domainStr)
	}
	b.close("message")
	return b.Bytes()
}

// renderDelete is the delete notification (XEP-0060 §8.4) for one
// subscriber; the copies of one deletion share their id.
func (d *dispatcher) renderDelete(n hub.Node, to, id string) []byte {
	var b xmlBuf
	b.Write(d.messagePrefix(&n))
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
func (d *dispatcher) renderDeletePlain(n hub.Node, s hub.Subscription, id string) []byte {
	var b xmlBuf
	b.Write(d.messagePrefixOfType(hub.MessageTypeOf(&n, s.Options)))
	escapeAttr(&b.Buffer, s.Address)
	b.WriteString(`" id="`)
	escapeAttr(&b.Buffer, id)
	b.WriteString(`">`)
	b.element("body", sanitizeText(fmt.Sprintf("[%s] This node was deleted: nothing more will come from it.", nodeName(&n))))
	b.close("message")
	return b.Bytes()
}

// renderRevokePlain is the rest of the plain message, after the "to"
// value, that tells a reader of plain messages its subscription was ended
// (hub.EventRevoke with a PlainType): its client shows no pubsub event, so
// the XEP-0060 one alone would leave it waiting for entries that never
// come. The words name no one: an owner, the node's access model or the
// subscriber's own GetPingd unsubscribe request may have ended it.
func (d *dispatcher) renderRevokePlain(n *hub.Node, id string) []byte {
	var b xmlBuf
	b.WriteString(`" id="`)
	escapeAttr(&b.Buffer, id)
	b.WriteString(`">`)
	b.element("body", sanitizeText(fmt.Sprintf("[%s] Your subscription to this node has ended: nothing more will come from it.", nodeName(n))))
	b.close("message")
	return b.Bytes()
}

// payload returns an event's payload as a self-contained element, or nil
// when the stored bytes are not one well-formed element (it is then left
// out rather than allowed to break the stream).
func (d *dispatcher) payload(ev hub.Event) []byte {
	if len(ev.Payload) == 0 {
		return nil
	}
	if d.published.has(ev.Payload) {
		return ev.Payload // written by standalone when it was published here
	}
	el, err := parseDocument(ev.Payload)
	if err != nil {
		d.log.Warn("stored payload is not well-formed XML; sending the item without it",
			"node_id", ev.NodeID, "item", ev.ItemID, "err", err)
		return nil
	}
	return el.standalone()
}
