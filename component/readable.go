package component

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"mellium.im/xmpp/oob"

	"github.com/pingd/pingd/hub"
)

// Readable notifications: most Jabber clients show no pubsub events, and
// some (Profanity, and clients that use PEP themselves) drop a message
// that carries one, whatever else it holds. A subscription of the message
// format (hub.FormatMessage; chat and ad-hoc subscriptions) therefore
// gets plain messages: the readable text below as the <body> and the
// entry's link as an XEP-0066 out-of-band URL, no pubsub#event. A
// pubsub-format subscription with pubsub#include_body gets the same text
// as a <body> beside the event, whose Atom payload stays as it is for
// clients that read it (XEP-0277).
//
// Bursts: when one append to a node's log (one fetch of its feed, or the
// publishes carried out together) brings more than burstThreshold items,
// readers of plain messages get one message listing their titles and
// links instead of one message each, at most maxBurstEntries entries to a
// message. A feed that adds 30 entries at once is one message, not 30.

const (
	// maxBodySummaryRunes caps the summary in a notification's body.
	maxBodySummaryRunes = 300
	// burstThreshold is the most items of one append sent as messages of
	// their own; more become one message listing them.
	burstThreshold = 3
	// maxBurstEntries caps the entries one burst message lists (titles
	// and links, about 200 bytes each); a larger burst is several.
	maxBurstEntries = 50
	nsOOB           = oob.NS
	nsDelay         = "urn:xmpp:delay"
)

// nodeName is how messages name a node: its title, else its name.
func nodeName(n *hub.Node) string {
	if n.Title != "" {
		return collapseSpace(n.Title)
	}
	return collapseSpace(n.Name)
}

// renderPlain renders the rest of an item's plain message, after the "to"
// value: the id, the readable body and the XEP-0066 link to the entry.
// published, when set, is the time of an item sent again later (the
// newest one, to a new subscriber): the body says it in words, and the
// message carries no XEP-0203 delay. The message answers the reader's
// subscribe command, and a client that sorts a conversation by such a
// stamp (Dino) would put the entry above the command, where the reader
// never looks; XEP-0060 §6.1.7's delay is for the pubsub event, which
// keeps it (renderEvent).
func (rd *renderer) renderPlain(n *hub.Node, ev hub.Event, id string, published time.Time) []byte {
	var b xmlBuf
	b.WriteString(`" id="`)
	escapeAttr(&b.Buffer, id)
	b.WriteString(`">`)
	body := readableBody(n, ev)
	if !published.IsZero() {
		body += "\n\n(Published " + published.UTC().Format("2 January 2006, 15:04 UTC") + ".)"
	}
	b.element("body", body)
	if link := hub.WebLink(ev.Link); link != "" {
		b.open("x", "xmlns", nsOOB).element("url", sanitizeText(link))
		if t := collapseSpace(ev.Title); t != "" {
			b.element("desc", sanitizeText(truncateRunes(t, maxBodySummaryRunes)))
		}
		b.close("x")
	}
	b.close("message")
	return b.Bytes()
}

// writeDelay writes an XEP-0203 delay element when at is set.
func writeDelay(b *xmlBuf, at time.Time, from string) {
	if !at.IsZero() {
		b.empty("delay", "xmlns", nsDelay, "from", from, "stamp", at.UTC().Format("2006-01-02T15:04:05Z"))
	}
}

// burstRole is what an event of a batch is to the readers of plain
// messages.
type burstRole struct {
	// in is set for every item of a burst: it is not sent on its own.
	in bool
	// entries is set on the first item of each chunk of a burst: the
	// chunk's items, listed in one message sent in that item's place.
	entries []hub.Event
	// from is the position of the chunk's first item in the burst (0 for
	// the first chunk), total the number of items of the whole burst.
	from, total int
}

// burstRoles finds the bursts of a batch: runs of more than
// burstThreshold item events appended together (the same Created time:
// one transaction), cut into chunks of maxBurstEntries, and of at most
// budget bytes once rendered (titles and links of items stored before the
// entry limits can be long).
func burstRoles(events []hub.Event, budget int) []burstRole {
	roles := make([]burstRole, len(events))
	for i := 0; i < len(events); {
		j := i
		for j < len(events) && events[j].Kind == hub.EventItem && events[j].Created.Equal(events[i].Created) {
			j++
		}
		if j == i {
			i++
			continue
		}
		if j-i > burstThreshold {
			for k := i; k < j; k++ {
				roles[k].in = true
			}
			for k := i; k < j; {
				end, size := k, burstHeadBytes
				for end < j && end-k < maxBurstEntries {
					line := burstLineBytes(events[end])
					if end > k && size+line > budget {
						break
					}
					size += line
					end++
				}
				roles[k].entries, roles[k].from, roles[k].total = events[k:end], k-i, j-i
				k = end
			}
		}
		i = j
	}
	return roles
}

// burstHeadBytes is room for a burst message's id, its first line and
// its closing tags.
const burstHeadBytes = 1 << 10

// burstLineBytes is the most bytes an entry's lines take in a burst's
// body, escaped.
func burstLineBytes(ev hub.Event) int {
	return 32 + escapedLen(truncateRunes(collapseSpace(ev.Title), maxBodySummaryRunes)) + len(ev.ItemID) + escapedLen(hub.WebLink(ev.Link))
}

// renderBurst renders the plain message of one chunk of a burst, after
// the "to" value.
func (rd *renderer) renderBurst(n *hub.Node, role burstRole, id string) []byte {
	var b xmlBuf
	b.WriteString(`" id="`)
	escapeAttr(&b.Buffer, id)
	b.WriteString(`">`)
	b.element("body", burstText(n, role))
	b.close("message")
	return b.Bytes()
}

// burstText is the readable list of one chunk of a burst.
func burstText(n *hub.Node, role burstRole) string {
	var t strings.Builder
	fmt.Fprintf(&t, "[%s] %d new entries", nodeName(n), role.total)
	if len(role.entries) < role.total {
		fmt.Fprintf(&t, " (%d to %d)", role.from+1, role.from+len(role.entries))
	}
	t.WriteString(":")
	for i, ev := range role.entries {
		title := collapseSpace(ev.Title)
		if title == "" {
			title = "New item " + ev.ItemID
		}
		fmt.Fprintf(&t, "\n%d. %s", role.from+i+1, truncateRunes(title, maxBodySummaryRunes))
		if link := hub.WebLink(ev.Link); link != "" {
			t.WriteString("\n   " + link)
		}
	}
	return sanitizeText(t.String())
}

// readableBody is the plain text of an item notification.
func readableBody(n *hub.Node, ev hub.Event) string {
	var b strings.Builder
	title := collapseSpace(ev.Title)
	if title == "" {
		title = "New item " + ev.ItemID
	}
	b.WriteString("[" + nodeName(n) + "] " + truncateRunes(title, maxBodySummaryRunes))
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
