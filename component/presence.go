package component

import (
	"context"

	"mellium.im/xmpp/jid"
)

// Presence (RFC 6121): pingd can sit in a roster. A subscription request
// is approved and followed by pingd's available presence; a probe gets
// that presence; an unsubscribe is acknowledged. pingd never asks for a
// user's presence in return: notifications do not depend on it, and a
// request would make the user's client ask them a question for nothing.
// Whether an offline subscriber's notifications wait on the server follows
// the notification's message type (docs/clients.md).
//
// Each presence pingd sends goes from its bare JID and from a full JID,
// the component's JID with the resource presenceResource. RFC 6121 §4.7.1
// has a contact's available presence come from a full JID (a server
// answering a probe sends one per available resource, §4.3.2), and some
// clients show a contact online only for one (Gajim); a component may
// send from any JID at its domain (XEP-0114), and RFC 6120 §8.1.2.1
// leaves a presence's from to the sending entity. The bare JID's presence
// stays for clients that took it so far. Chat to the full JID is the
// service's (isServiceAddress).
const presenceResource = "pingd"

// receivePresence takes one presence off the stream (on the reader) and
// queues the answers, in order with the sender's chat and commands.
func (svc *service) receivePresence(ctx context.Context, pool *requestPool, p *element) {
	switch p.attr("type") {
	case "subscribe", "unsubscribe", "probe":
	default:
		return // available, unavailable, subscribed, unsubscribed, error: nothing to say
	}
	from := p.attr("from")
	if from == "" || !svc.isServiceAddress(p.attr("to")) {
		return
	}
	j, err := jid.Parse(from)
	if err != nil {
		return
	}
	bare := j.Bare().String()
	if !svc.admitRequest(ctx, bare) {
		return // a presence is never answered with an error; the client asks again
	}
	if err := pool.submit(&job{key: "chat\x00" + from, sender: bare, bounds: svc.boundsOf(bare), presence: p}); err != nil {
		svc.log.DebugContext(ctx, "presence request dropped", "from", from, "reason", err.Error())
	}
}

// answerPresence sends the answers to one presence.
func (svc *service) answerPresence(ctx context.Context, cn *connection, p *element) {
	from, err := jid.Parse(p.attr("from"))
	if err != nil {
		return // checked by receivePresence already
	}
	to := from.Bare().String()
	self := svc.replyFrom(p)
	var b xmlBuf
	switch p.attr("type") {
	case "subscribe":
		b.empty("presence", "type", "subscribed", "from", self, "to", to)
		svc.availablePresence(&b, self, to)
		svc.log.InfoContext(ctx, "presence subscription approved", "jid", to)
	case "unsubscribe":
		b.empty("presence", "type", "unsubscribed", "from", self, "to", to)
		for _, f := range presenceSenders(self) {
			b.empty("presence", "type", "unavailable", "from", f, "to", to)
		}
	case "probe":
		svc.availablePresence(&b, self, from.String())
	}
	svc.send(ctx, cn, b.Bytes())
}

// availablePresence writes pingd's presence to one contact, from each of
// presenceSenders(from).
func (svc *service) availablePresence(b *xmlBuf, from, to string) {
	for _, f := range presenceSenders(from) {
		b.open("presence", "from", f, "to", to)
		b.element("status", `pingd: send "help" for commands`)
		b.close("presence")
	}
}

// presenceSenders are the JIDs pingd's presence goes from when answering
// as self: self, and, when self is a bare JID, self with presenceResource.
func presenceSenders(self string) []string {
	if j, err := jid.Parse(self); err == nil && j.Resourcepart() == "" {
		return []string{self, self + "/" + presenceResource}
	}
	return []string{self}
}
