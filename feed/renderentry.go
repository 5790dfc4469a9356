package feed

import (
	"bytes"
	"strings"
	"time"

	"github.com/beevik/etree"

	"github.com/pingd/pingd/hub"
)

// CompleteEntry returns e with the payload every transport shows for the
// item, so an entry an owner publishes reads the same in XMPP
// notifications and items, the node's feeds and webhook deliveries: the
// entry AtomFeed puts in a feed for it. An Atom entry gets its <id> from
// the item id (AtomID), and a <title>, an alternate <link> and an
// <updated> from e's Title (else its id), Link and Updated where it has
// none; any other payload becomes the content of such an entry.
func CompleteEntry(e hub.Entry) hub.Entry {
	el := atomEntry(hub.Event{Kind: hub.EventItem, ItemID: e.ID, Payload: e.Payload,
		Title: e.Title, Summary: e.Summary, Link: e.Link, Updated: e.Updated})
	e.Payload = serializeElement(el)
	return e
}

// atomEntry is the Atom entry element for an item event (see AtomFeed).
// Links that are not web links (hub.WebLink) are left out: feed parsing
// drops them, but items stored before it did, and entries owners publish,
// are rendered here too.
func atomEntry(ev hub.Event) *etree.Element {
	updated := eventTime(ev)
	title := ev.Title
	if title == "" {
		title = ev.ItemID
	}
	link := hub.WebLink(ev.Link)
	if e := parseAtomEntry(ev.Payload); e != nil {
		if ev.ItemID != "" {
			setAtomChild(e, "id", AtomID(ev.ItemID), 0)
		}
		if atomChild(e, "title") == nil {
			setAtomChild(e, "title", title, 1)
		}
		dropNonWebLinks(e)
		if link != "" && len(atomChildren(e, "link")) == 0 {
			l := etree.NewElement("link")
			l.Space = e.Space
			l.CreateAttr("rel", "alternate")
			l.CreateAttr("href", link)
			e.InsertChildAt(2, l)
		}
		if atomChild(e, "updated") == nil {
			setAtomChild(e, "updated", updated.Format(time.RFC3339), -1)
		}
		return e
	}
	e := newAtomEntry(AtomID(ev.ItemID), title, link, updated)
	if ev.Summary != "" {
		s := e.CreateElement("summary")
		s.CreateAttr("type", "text")
		s.SetText(ev.Summary)
	}
	if p := bytes.TrimSpace(ev.Payload); len(p) > 0 {
		c := e.CreateElement("content")
		if x, err := readXML(p); err == nil {
			c.CreateAttr("type", "application/xml")
			importElement(x.Root(), c, -1)
		} else {
			c.CreateAttr("type", "text")
			c.SetText(string(p))
		}
	}
	return e
}

// dropNonWebLinks removes the entry's <link>s whose href is not a web link
// and a <content> whose src is not one.
func dropNonWebLinks(e *etree.Element) {
	for _, l := range atomChildren(e, "link") {
		if hub.WebLink(l.SelectAttrValue("href", "")) == "" {
			e.RemoveChild(l)
		}
	}
	if c := atomChild(e, "content"); c != nil && c.SelectAttr("src") != nil && hub.WebLink(c.SelectAttrValue("src", "")) == "" {
		e.RemoveChild(c)
	}
}

// parseAtomEntry returns the payload's root when it is an Atom entry.
func parseAtomEntry(payload []byte) *etree.Element {
	if len(bytes.TrimSpace(payload)) == 0 {
		return nil
	}
	doc, err := readXML(payload)
	if err != nil {
		return nil
	}
	root := doc.Root()
	if root.Tag != "entry" || elementNS(root) != AtomNS {
		return nil
	}
	// Detach into a fresh tree so namespace lookups stay inside it.
	e := etree.NewElement("x")
	return importElement(root, e, -1)
}

// setAtomChild sets the text of e's Atom child name, creating it (at index
// among the children, -1 for last) when missing.
func setAtomChild(e *etree.Element, name, text string, index int) {
	if c := atomChild(e, name); c != nil {
		for len(c.Child) > 0 {
			c.RemoveChildAt(0)
		}
		c.SetText(text)
		return
	}
	c := etree.NewElement(name)
	if e.Space != "" {
		c.Space = e.Space
	}
	c.SetText(text)
	if index < 0 || index > len(e.Child) {
		e.AddChild(c)
	} else {
		e.InsertChildAt(index, c)
	}
}

func atomChild(e *etree.Element, name string) *etree.Element {
	for _, c := range e.ChildElements() {
		if c.Tag == name && elementNS(c) == AtomNS {
			return c
		}
	}
	return nil
}

func atomChildren(e *etree.Element, name string) []*etree.Element {
	var out []*etree.Element
	for _, c := range e.ChildElements() {
		if c.Tag == name && elementNS(c) == AtomNS {
			out = append(out, c)
		}
	}
	return out
}

func entryTime(e *etree.Element, name string) time.Time {
	c := atomChild(e, name)
	if c == nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(c.Text()))
	if err != nil {
		return time.Time{}
	}
	return t
}

func eventTime(ev hub.Event) time.Time {
	switch {
	case !ev.Updated.IsZero():
		return ev.Updated.UTC()
	case !ev.Created.IsZero():
		return ev.Created.UTC()
	}
	return time.Unix(0, 0).UTC()
}

func feedUpdated(t time.Time, items []hub.Event) time.Time {
	if !t.IsZero() {
		return t.UTC()
	}
	newest := time.Unix(0, 0).UTC()
	for _, ev := range items {
		if et := eventTime(ev); et.After(newest) {
			newest = et
		}
	}
	return newest
}

func atomLink(parent *etree.Element, prefix, rel, href, typ string) {
	name := "link"
	if prefix != "" {
		name = prefix + ":link"
	}
	l := parent.CreateElement(name)
	l.CreateAttr("rel", rel)
	if typ != "" {
		l.CreateAttr("type", typ)
	}
	l.CreateAttr("href", href)
}
