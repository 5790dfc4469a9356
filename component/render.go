package component

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/pingd/pingd/hub"
)

// renderer renders the notification stanzas: events, digests, deletions,
// plain messages and bursts, each fitted to the stanza budget
// (budget.go). It holds no connection and reads no store: the dispatcher
// hands it what to render and writes what it returns.
type renderer struct {
	log       *slog.Logger
	domainStr string
	stanzaIDs *stanzaIDs
	limit     *stanzaLimit
	// patch: see Config.Patch.
	patch func(*hub.Node, []hub.Event) ([]byte, error)
	// published remembers payloads this process wrote with standalone, so
	// they need not be parsed again to know they are sound.
	published payloadSet
}

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
func (rd *renderer) messagePrefix(n *hub.Node) []byte {
	return rd.messagePrefixOfType(nodeMessageType(n))
}

// messagePrefixOfType is the start of a notification of message type typ.
func (rd *renderer) messagePrefixOfType(typ string) []byte {
	var b xmlBuf
	b.WriteString(`<message type="` + typ + `" from="`)
	escapeAttr(&b.Buffer, rd.domainStr)
	b.WriteString(`" to="`)
	return b.Bytes()
}

// renderEvent renders the rest of an event's notification, after the "to"
// value: the stanza id, and what follows the start tag. It is nil for
// events XMPP subscribers are not told. body, when not empty, is a
// readable text for clients that show no pubsub events; diff, when not
// nil, the change's <Diff/> element (diff.go), written after the event.
func (rd *renderer) renderEvent(n *hub.Node, ev hub.Event, id, body string, diff []byte) []byte {
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
		writeItem(&b, ev.ItemID, rd.payload(ev), n.DeliverPayloads)
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
		writeDelay(&b, lastStamp(ev), rd.domainStr)
	}
	b.close("message")
	return b.Bytes()
}

// renderDelete is the delete notification (XEP-0060 §8.4) for one
// subscriber; the copies of one deletion share their id.
func (rd *renderer) renderDelete(n hub.Node, to, id string) []byte {
	var b xmlBuf
	b.Write(rd.messagePrefix(&n))
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
func (rd *renderer) renderDeletePlain(n hub.Node, s hub.Subscription, id string) []byte {
	var b xmlBuf
	b.Write(rd.messagePrefixOfType(hub.MessageTypeOf(&n, s.Options)))
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
func (rd *renderer) renderRevokePlain(n *hub.Node, id string) []byte {
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
func (rd *renderer) payload(ev hub.Event) []byte {
	if len(ev.Payload) == 0 {
		return nil
	}
	if rd.published.has(ev.Payload) {
		return ev.Payload // written by standalone when it was published here
	}
	el, err := parseDocument(ev.Payload)
	if err != nil {
		rd.log.Warn("stored payload is not well-formed XML; sending the item without it",
			"node_id", ev.NodeID, "item", ev.ItemID, "err", err)
		return nil
	}
	return el.standalone()
}
