package getpingd

import (
	"encoding/xml"
	"strings"
)

// GetPingd's proposal defines no answer documents; these are pingd's,
// small XML elements that name what was done.

// WebhookAnswer is the answer to a webhook request: <pending
// mode="subscribe" node="…" href="…"/> while the callback is being
// verified, or <unsubscribed mode="unsubscribe" node="…" href="…"/>.
func WebhookAnswer(state string, mode Action, node, href string) []byte {
	var b strings.Builder
	b.WriteString("<" + state + ` mode="` + string(mode) + `" node="`)
	escapeAttr(&b, node)
	b.WriteString(`" href="`)
	escapeAttr(&b, href)
	b.WriteString(`"/>`)
	return []byte(b.String())
}

// SubscribedDocument is the answer to an accepted consumer (whitelist)
// subscribe request.
func SubscribedDocument(bare, node string) []byte { return consumerAnswer("subscribed", bare, node) }

// UnsubscribedDocument is the answer to an accepted consumer (whitelist)
// unsubscribe request.
func UnsubscribedDocument(bare, node string) []byte {
	return consumerAnswer("unsubscribed", bare, node)
}

// consumerAnswer writes <name jid="…" node="…"/>.
func consumerAnswer(name, bare, node string) []byte {
	var b strings.Builder
	b.WriteString("<" + name + ` jid="`)
	escapeAttr(&b, bare)
	b.WriteString(`" node="`)
	escapeAttr(&b, node)
	b.WriteString(`"/>`)
	return []byte(b.String())
}

// escapeAttr writes s for a double-quoted attribute value: xml.EscapeText
// escapes quotes, markup, tabs and newlines and replaces characters XML
// cannot carry.
func escapeAttr(b *strings.Builder, s string) {
	_ = xml.EscapeText(b, []byte(s)) // a strings.Builder does not fail
}
