package discovery

import (
	"strings"
)

// The ways a person subscribes with any Jabber client, as the descriptor
// page shows them: an XEP-0060 subscribe URI for clients that speak
// pubsub, a chat message URI (with its QR code) for every other client,
// and the chat command to type by hand.

// ChatCommand is what a person sends the component to subscribe to the
// node by chat.
func (d Descriptor) ChatCommand() string { return "subscribe " + d.Node }

// SubscribeURI is the XEP-0060 subscribe action of the node as an xmpp:
// URI (RFC 5122, XEP-0147 query action "pubsub"):
// xmpp:pubsub.example.org?pubsub;action=subscribe;node=NAME.
func (d Descriptor) SubscribeURI() string {
	return "xmpp:" + escapeXMPPURI(d.ComponentJID, false) + "?pubsub;action=subscribe;node=" + escapeXMPPURI(d.Node, true)
}

// MessageURI opens a chat with the component holding the chat command
// (XEP-0147 query action "message"):
// xmpp:pubsub.example.org?message;body=subscribe%20NAME.
func (d Descriptor) MessageURI() string {
	return "xmpp:" + escapeXMPPURI(d.ComponentJID, false) + "?message;body=" + escapeXMPPURI(d.ChatCommand(), true)
}

// RosterURI adds the component to the reader's contacts (XEP-0147 query
// action "roster"): xmpp:pubsub.example.org?roster. Some clients open a
// message URI only for a JID they already know (Gajim offers an empty
// "Start chat" for an unknown one and drops the body), so the page offers
// this first.
func (d Descriptor) RosterURI() string {
	return "xmpp:" + escapeXMPPURI(d.ComponentJID, false) + "?roster"
}

// escapeXMPPURI percent-encodes s for an xmpp: URI. A query value
// (RFC 5122 §2.2, ivalue) keeps only unreserved characters, so that none
// of ';', '=', '#', '&', '/' or a space in a node name ends or splits the
// value; every other byte of its UTF-8 form is percent-encoded. A JID's
// domain part (query false) keeps what a host name holds besides:
// sub-delimiters and ':' (an IPv6 literal), as RFC 3986 reg-name and
// IP-literal allow.
func escapeXMPPURI(s string, query bool) string {
	var b strings.Builder
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isUnreserved(c) || !query && (strings.IndexByte("!$&'()*+,;=:[]", c) >= 0) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// isUnreserved reports whether c is an RFC 3986 unreserved character.
func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}
