package feed

import (
	"errors"
	"fmt"

	"github.com/beevik/etree"
)

// ErrBadDelta is returned when an RFC 3229 "226 IM Used" answer cannot be
// merged with the previous document.
var ErrBadDelta = errors.New("cannot merge feed delta")

// MaxMergedEntries bounds the entries a merged delta keeps (more only when
// the delta alone has more).
const MaxMergedEntries = 200

// mergeDelta merges an RFC 3229 "feed" delta (a feed document holding only
// the entries new since the previous version) with the previous document:
// the delta's document with its entries first, then the previous entries it
// did not replace (by id). The result is a full document again, holding
// every entry both had, up to MaxMergedEntries (the oldest previous entries
// go first), so that repeated merges do not grow without bound.
func mergeDelta(previous, delta []byte) ([]byte, error) {
	prev, err := readXML(previous)
	if err != nil {
		return nil, fmt.Errorf("%w: previous document: %v", ErrBadDelta, err)
	}
	cur, err := readXML(delta)
	if err != nil {
		return nil, fmt.Errorf("%w: delta: %v", ErrBadDelta, err)
	}
	prevBox, prevEntries, err := entryContainer(prev)
	if err != nil {
		return nil, fmt.Errorf("%w: previous document: %v", ErrBadDelta, err)
	}
	curBox, curEntries, err := entryContainer(cur)
	if err != nil {
		return nil, fmt.Errorf("%w: delta: %v", ErrBadDelta, err)
	}
	if prev.Root().Tag != cur.Root().Tag || prevBox.Tag != curBox.Tag {
		return nil, fmt.Errorf("%w: delta is a <%s>, previous document a <%s>", ErrBadDelta, cur.Root().Tag, prev.Root().Tag)
	}
	have := make(map[string]bool, len(curEntries))
	for _, e := range curEntries {
		have[xmlEntryID(e)] = true
	}
	at := len(curBox.Child)
	if n := len(curEntries); n > 0 {
		at = curEntries[n-1].Index() + 1
	}
	room := MaxMergedEntries - len(curEntries)
	for _, e := range prevEntries {
		if room <= 0 {
			break
		}
		id := xmlEntryID(e)
		if have[id] {
			continue
		}
		have[id] = true
		importElement(e, curBox, at)
		at++
		room--
	}
	out, err := cur.WriteToBytes()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadDelta, err)
	}
	return out, nil
}

func readXML(b []byte) (*etree.Document, error) {
	if err := checkXML(b); err != nil {
		return nil, err
	}
	doc := etree.NewDocument()
	doc.ReadSettings.MaxDepth = MaxDepth
	if err := doc.ReadFromBytes(b); err != nil {
		return nil, err
	}
	if doc.Root() == nil {
		return nil, errors.New("no root element")
	}
	return doc, nil
}

// entryContainer finds the element holding a feed's entries and the
// entries: <feed>'s <entry>s (Atom), <channel>'s <item>s (RSS 0.9x/2.0),
// <rdf:RDF>'s <item>s (RSS 1.0).
func entryContainer(doc *etree.Document) (*etree.Element, []*etree.Element, error) {
	root := doc.Root()
	var box *etree.Element
	tag := "item"
	switch root.Tag {
	case "feed":
		box, tag = root, "entry"
	case "RDF":
		box = root
	case "rss":
		for _, c := range root.ChildElements() {
			if c.Tag == "channel" {
				box = c
				break
			}
		}
	}
	if box == nil {
		return nil, nil, fmt.Errorf("not a feed (root <%s>)", root.FullTag())
	}
	var entries []*etree.Element
	for _, c := range box.ChildElements() {
		if c.Tag == tag && c.Space != "xmlns" {
			entries = append(entries, c)
		}
	}
	return box, entries, nil
}

// xmlEntryID is the stable id of an <entry> or <item> element by the rules
// Parse uses: Atom id, else RSS guid, else a hash of link and title.
func xmlEntryID(e *etree.Element) string {
	if id := childText(e, "id"); id != "" && e.Tag == "entry" {
		return id
	}
	if id := childText(e, "guid"); id != "" {
		return id
	}
	link := childText(e, "link")
	if e.Tag == "entry" {
		link = ""
		for _, c := range e.ChildElements() {
			if c.Tag == "link" {
				if rel := c.SelectAttrValue("rel", "alternate"); rel == "alternate" {
					link = c.SelectAttrValue("href", "")
					break
				}
			}
		}
	}
	return EntryID(link, childText(e, "title"))
}
