package component

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/pingd/pingd/hub"
)

// The stanza budget. An XMPP server ends the stream of a component that
// sends a stanza over its limit (Prosody: 512 KiB for components,
// component_stanza_size_limit, by default its s2s_stanza_size_limit;
// ejabberd: the listener's max_stanza_size, which operators set as they
// like), and what was not acknowledged would be written again on the next
// connection: one oversized notification would keep the XMPP side down.
// So no stanza the component writes is larger than the budget:
//
//   - an event notification over it goes without the item's payload (the
//     <item id="…"/> XEP-0060 allows; the item stays retrievable), without
//     its readable body and patch; a plain message without its link;
//   - a digest over it covers fewer events, and the rest comes in the next
//     digest at once; a burst is cut into messages by size as well as by
//     count;
//   - items retrieval returns fewer items with an XEP-0059 <set/> (first,
//     last, count), so the client asks for the rest; disco#items the same;
//   - any other answer over it is replaced by a resource-constraint error
//     saying why, and a chat answer is cut with a line saying so.
//
// Items are small where they enter (hub.MaxEntryPayloadBytes), so only
// what holds many of them, or items stored before that limit, reach it.

const (
	// stanzaBudget is the largest stanza the component writes: half of
	// Prosody's limit for components, ejabberd's default max_stanza_size
	// for clients, Prosody's c2s_stanza_size_limit, so a notification a
	// server relays to a client or another server is not refused there.
	stanzaBudget = 256 << 10
	// minStanzaBudget is the smallest budget a server's refusals can
	// bring the component to (connection.go: a learned limit): a
	// notification without its payload fits well within it.
	minStanzaBudget = 16 << 10
	// envelopeBytes is room for a message's start up to its "to" value
	// and the address itself (a JID is at most 3,071 bytes).
	envelopeBytes = 4 << 10
)

// stanzaLimit is the component's current budget: stanzaBudget, or lower
// once the server refused larger stanzas (limitLearned).
type stanzaLimit struct {
	learned atomic.Int64 // 0: nothing learned
	// shrunk counts the notifications and answers sent smaller than they
	// are to fit the budget, and the stanzas left out because a server
	// refused them (connection.go).
	shrunk atomic.Int64
}

// bytes is the budget for one stanza.
func (l *stanzaLimit) bytes() int {
	if n := l.learned.Load(); n > 0 && n < stanzaBudget {
		return int(n)
	}
	return stanzaBudget
}

// lower brings the budget below a stanza size the server refused, never
// under minStanzaBudget; it reports the new budget and whether it
// changed.
func (l *stanzaLimit) lower(refused int) (int, bool) {
	for {
		old := l.learned.Load()
		cur := stanzaBudget
		if old > 0 && old < stanzaBudget {
			cur = int(old)
		}
		next := max(minStanzaBudget, min(cur, refused)/2)
		if next >= cur {
			return cur, false
		}
		if l.learned.CompareAndSwap(old, int64(next)) {
			return next, true
		}
	}
}

// suffixBudget is the budget for what follows a message's "to" value.
func (rd *renderer) suffixBudget() int { return rd.limit.bytes() - envelopeBytes }

// escapedLen is the length of s once escaped as XML text or an attribute
// value.
func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&':
			n += 4
		case '<', '>':
			n += 3
		case '"', '\'':
			n += 5
		}
	}
	return n
}

// cutChatAnswer cuts a chat answer to fit within max bytes once escaped,
// at a line, saying how many lines were left out.
func cutChatAnswer(answer string, max int) string {
	if escapedLen(answer) <= max {
		return answer
	}
	lines := strings.SplitAfter(answer, "\n")
	size := 200 // the closing line
	kept := 0
	for kept < len(lines) && size+escapedLen(lines[kept]) <= max {
		size += escapedLen(lines[kept])
		kept++
	}
	head := strings.Join(lines[:kept], "")
	if kept == 0 {
		// One line too long: cut it, at a character.
		head = lines[0]
		for escapedLen(head) > max-200 {
			head = head[:len(head)/2]
		}
		for !utf8.ValidString(head) {
			head = head[:len(head)-1]
		}
		kept = 1
	}
	return strings.TrimRight(head, "\n") + fmt.Sprintf("\n… and %d more lines: too long for one message.", len(lines)-kept)
}

// fitRendered keeps each variant of an event's notification within the
// budget: a pubsub event sheds its patch, then its body, then its
// payload; a plain message its link, then a burst its links. The events
// stay what they are (their item ids, their count): a subscriber reads a
// payload left out by items retrieval.
func (rd *renderer) fitRendered(n *hub.Node, ev hub.Event, id string, role burstRole, r *rendered) {
	limit := rd.suffixBudget()
	var bare []byte
	smallest := func() []byte {
		if bare == nil {
			bare = rd.renderEventWithoutPayload(n, ev, id)
			rd.limit.shrunk.Add(1)
			rd.log.Warn("a notification goes without its item's payload: it would be over the stanza budget",
				"node", n.Name, "item", ev.ItemID, "bytes", len(r.suffix), "budget_bytes", limit)
		}
		return bare
	}
	first := func(cands ...[]byte) []byte {
		for _, b := range cands {
			if len(b) <= limit {
				return b
			}
		}
		return smallest()
	}
	// The larger variants first, so each can fall back to a smaller one
	// already fitted.
	if len(r.suffix) > limit {
		r.suffix = smallest()
	}
	r.withBody = first(r.withBody, r.suffix)
	r.withDiff = first(r.withDiff, r.suffix)
	r.withBodyDiff = first(r.withBodyDiff, r.withBody, r.withDiff, r.suffix)
	if r.plain != nil && len(r.plain) > limit {
		// Titles are cut and bursts split by size (burstRoles): only a
		// link of an item stored before the entry limits gets here.
		rd.limit.shrunk.Add(1)
		rd.log.Warn("a plain notification goes without its links: it would be over the stanza budget",
			"node", n.Name, "item", ev.ItemID, "bytes", len(r.plain), "budget_bytes", limit)
		if role.entries != nil {
			short := role
			short.entries = make([]hub.Event, len(role.entries))
			for i, e := range role.entries {
				short.entries[i] = withoutLink(e)
			}
			r.plain = rd.renderBurst(n, short, id)
		} else {
			r.plain = rd.renderPlain(n, withoutLink(ev), id, time.Time{})
		}
	}
}

// renderEventWithoutPayload is an event's notification with the item's
// id only (XEP-0060 §7.1.2.1 allows notifications without payloads).
func (rd *renderer) renderEventWithoutPayload(n *hub.Node, ev hub.Event, id string) []byte {
	ev.Payload = nil
	return rd.renderEvent(n, ev, id, "", nil)
}

// withoutLink is an event without its link, for a plain message that
// would be too large with it.
func withoutLink(ev hub.Event) hub.Event {
	ev.Link = ""
	return ev
}

// addressesThatFit is how many of a multicast batch's first k addresses
// fit in room bytes of <address/> elements (at least one).
func addressesThatFit(batch [][]byte, k, room int) int {
	size := len(`<addresses xmlns="` + nsAddress + `"></addresses>`)
	for i := 0; i < k; i++ {
		size += len(`<address type="bcc" jid=""/>`) + len(batch[i])
		if size > room {
			return max(1, i)
		}
	}
	return k
}

// StanzaBudget reports the stanza budget in bytes (lower than
// stanzaBudget once the XMPP server refused larger stanzas), and how many
// notifications and answers were sent smaller than they are, or left
// out, to keep within it.
func (c *Component) StanzaBudget() (budgetBytes int, shrunk int64) {
	return c.limit.bytes(), c.limit.shrunk.Load()
}
