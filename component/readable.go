package component

import (
	"strings"
	"unicode/utf8"

	"github.com/pingd/pingd/hub"
)

// Readable notifications: most Jabber clients show no pubsub events, so a
// subscription with pubsub#include_body gets a plain-text <body> beside
// the event: the node, the entry's title and link, and a short summary.
// The Atom payload stays as it is for clients that read it (XEP-0277).

// maxBodySummaryRunes caps the summary in a notification's body.
const maxBodySummaryRunes = 300

// readableBody is the plain text of an item notification.
func readableBody(n *hub.Node, ev hub.Event) string {
	var b strings.Builder
	name := n.Title
	if name == "" {
		name = n.Name
	}
	title := collapseSpace(ev.Title)
	if title == "" {
		title = "New item " + ev.ItemID
	}
	b.WriteString("[" + collapseSpace(name) + "] " + title)
	if link := hub.WebLink(ev.Link); link != "" { // clients make links clickable
		b.WriteString("\n" + link)
	}
	if s := truncateRunes(collapseSpace(ev.Summary), maxBodySummaryRunes); s != "" && s != title {
		b.WriteString("\n\n" + s)
	}
	return sanitizeText(b.String())
}

// truncateRunes cuts s to at most n runes, marking the cut with "…".
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

// sanitizeText drops what XML 1.0 cannot carry (control characters other
// than tab and newline, invalid UTF-8), which feeds sometimes contain.
func sanitizeText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n':
			return r
		case r < 0x20, r == 0xFFFE, r == 0xFFFF, r == utf8.RuneError, r >= 0xD800 && r <= 0xDFFF:
			return -1
		}
		return r
	}, s)
}
