package component

import (
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
)

// isAtomEntry reports whether a payload is an Atom entry, the only payload
// pingd's nodes carry (their pubsub#type).
func isAtomEntry(payload *element) bool {
	return payload.Name.Space == nsAtom && payload.Name.Local == "entry"
}

// entryFromPayload turns a published payload into a hub entry. An Atom
// entry is kept as it is and gives the plain-text title, summary, link and
// update time chat answers and URL-level protocols use, and, when the
// publish named no item, its Atom id as the item id (so the entry keeps
// it); any other payload is stored as given, with nothing extracted.
func entryFromPayload(id string, payload *element) hub.Entry {
	e := hub.Entry{ID: id, Payload: payload.standalone()}
	if !isAtomEntry(payload) {
		return e
	}
	if e.ID == "" {
		if atomID := strings.TrimSpace(payload.child(nsAtom, "id").text()); len(atomID) <= maxItemIDBytes {
			e.ID = atomID
		}
	}
	e.Title = collapseSpace(payload.child(nsAtom, "title").deepText())
	e.Summary = collapseSpace(payload.child(nsAtom, "summary").deepText())
	e.Link = atomLink(payload)
	for _, name := range []string{"updated", "published"} {
		if t, err := time.Parse(time.RFC3339, strings.TrimSpace(payload.child(nsAtom, name).text())); err == nil {
			e.Updated = t.UTC()
			break
		}
	}
	return e
}

// atomLink picks the entry's alternate link (the default relation), else
// its first link; only web links (hub.WebLink) count.
func atomLink(entry *element) string {
	first := ""
	for _, l := range entry.childrenNamed(nsAtom, "link") {
		href := hub.WebLink(l.attr("href"))
		if href == "" {
			continue
		}
		if rel := l.attr("rel"); rel == "" || rel == "alternate" {
			return href
		}
		if first == "" {
			first = href
		}
	}
	return first
}

// deepText is the character data of e and its descendants (an Atom title
// may be XHTML).
func (e *element) deepText() string {
	if e == nil {
		return ""
	}
	var b strings.Builder
	var walk func(*element)
	walk = func(e *element) {
		for _, c := range e.content {
			switch c := c.(type) {
			case string:
				b.WriteString(c)
			case *element:
				walk(c)
			}
		}
	}
	walk(e)
	return b.String()
}

func collapseSpace(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
