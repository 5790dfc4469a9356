package feed

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	"github.com/beevik/etree"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/nodeurl"
)

// FeedMeta describes a feed document pingd serves or sends.
type FeedMeta struct {
	// ID is the feed's Atom id; default SelfURL.
	ID       string
	Title    string
	Subtitle string
	// SelfURL is where the document is served (rel="self").
	SelfURL string
	// HubURL is pingd's WebSub hub (rel="hub").
	HubURL string
	// AlternateURL is the page the feed is about (rel="alternate"), such as
	// the followed source's site.
	AlternateURL string
	// Updated is the feed's last change; default the newest item's time.
	Updated time.Time
	// Author names the feed's author, required by Atom when entries have
	// none; default "pingd".
	Author string
	// DescriptorURL is the node's GetPingd descriptor
	// (rel="getpingd.updates.descriptor").
	DescriptorURL string
	// Polling are the owner's hints to readers: in RSS <ttl> (when
	// positive, else the ttl argument), <skipHours> and <skipDays>; in both
	// formats sy:updatePeriod and sy:updateFrequency.
	Polling hub.FeedPolling
}

// NodeFeedMeta describes a node's own Atom feed, /atom/{node}: the
// node's title (its name when it has none), the feed's URL as id and
// rel="self", pingd's WebSub hub, the followed source as rel="alternate",
// the GetPingd descriptor and the owner's polling hints, updated at
// updated. The node's RSS feed and the documents deliveries send start
// from it, so that every document of a node describes it the same way.
func NodeFeedMeta(n *hub.Node, links nodeurl.Links, updated time.Time) FeedMeta {
	title := n.Title
	if title == "" {
		title = n.Name
	}
	return FeedMeta{
		ID:            links.Atom,
		Title:         title,
		SelfURL:       links.Atom,
		HubURL:        links.Hub,
		AlternateURL:  n.SourceURL,
		Updated:       updated,
		DescriptorURL: links.Descriptor,
		Polling:       n.Polling,
	}
}

// SyndicationNS is the RSS 1.0 syndication module, whose updatePeriod and
// updateFrequency RSS 2.0 and Atom feeds carry as extensions.
const SyndicationNS = "http://purl.org/rss/1.0/modules/syndication/"

// syndication adds sy:updatePeriod and sy:updateFrequency to parent, and
// declares the prefix on root, when the hints give them.
func syndication(root, parent *etree.Element, p hub.FeedPolling) {
	if p.UpdatePeriod == "" {
		return
	}
	root.CreateAttr("xmlns:sy", SyndicationNS)
	parent.CreateElement("sy:updatePeriod").SetText(p.UpdatePeriod)
	if p.UpdateFrequency > 0 {
		parent.CreateElement("sy:updateFrequency").SetText(strconv.Itoa(p.UpdateFrequency))
	}
}

// Cloud is the RSS 2.0 <cloud> element: where rssCloud subscribers register.
type Cloud struct {
	Domain            string
	Port              int
	Path              string
	RegisterProcedure string
	Protocol          string
}

// atomPrefix binds the Atom namespace in RSS documents (self and hub links).
const (
	atomPrefix = "atom"
	generator  = "pingd"
)

var writeSettings = etree.WriteSettings{CanonicalText: true, CanonicalAttrVal: true}

// AtomFeed renders an Atom 1.0 feed document of items (newest first, as a
// node's items are read). Each entry is the item's Atom payload with its
// <id> set to AtomID(ItemID), so entries are identified by their item ids;
// an item whose payload is not an Atom entry gets one made from its plain
// fields, with the payload as XML content. Events other than items are
// skipped. The feed's <updated> is its last metadata element, which is
// where Patch adds new entries.
func AtomFeed(meta FeedMeta, items []hub.Event) []byte {
	doc := etree.NewDocument()
	doc.WriteSettings = writeSettings
	doc.CreateProcInst("xml", `version="1.0" encoding="utf-8"`)
	doc.CreateText("\n")
	f := doc.CreateElement("feed")
	f.CreateAttr("xmlns", AtomNS)
	id := meta.ID
	if id == "" {
		id = meta.SelfURL
	}
	f.CreateElement("id").SetText(id)
	t := f.CreateElement("title")
	t.CreateAttr("type", "text")
	t.SetText(meta.Title)
	if meta.Subtitle != "" {
		st := f.CreateElement("subtitle")
		st.CreateAttr("type", "text")
		st.SetText(meta.Subtitle)
	}
	if meta.AlternateURL != "" {
		atomLink(f, "", "alternate", meta.AlternateURL, "")
	}
	if meta.SelfURL != "" {
		atomLink(f, "", "self", meta.SelfURL, "application/atom+xml")
	}
	if meta.HubURL != "" {
		atomLink(f, "", "hub", meta.HubURL, "")
	}
	if meta.DescriptorURL != "" {
		atomLink(f, "", "getpingd.updates.descriptor", meta.DescriptorURL, "")
	}
	syndication(f, f, meta.Polling)
	author := meta.Author
	if author == "" {
		author = generator
	}
	f.CreateElement("author").CreateElement("name").SetText(author)
	f.CreateElement("generator").SetText(generator)
	f.CreateElement("updated").SetText(feedUpdated(meta.Updated, items).Format(time.RFC3339))
	for _, ev := range items {
		if ev.Kind != "" && ev.Kind != hub.EventItem {
			continue
		}
		e := atomEntry(ev)
		dropRedundantAtomNS(e)
		f.AddChild(e)
	}
	spaceChildren(f)
	return writeDoc(doc)
}

// RSSFeed renders an RSS 2.0 document of items (newest first) with the
// rssCloud <cloud> element (when cloud is set), <ttl> in minutes (when
// positive), and atom:link rel="self" and rel="hub". Items are converted
// from their Atom payloads: title, link, guid (isPermaLink="false", the
// item id), pubDate, description, categories and enclosures.
func RSSFeed(meta FeedMeta, cloud *Cloud, ttl int, items []hub.Event) []byte {
	doc := etree.NewDocument()
	doc.WriteSettings = writeSettings
	doc.CreateProcInst("xml", `version="1.0" encoding="utf-8"`)
	doc.CreateText("\n")
	rss := doc.CreateElement("rss")
	rss.CreateAttr("version", "2.0")
	rss.CreateAttr("xmlns:"+atomPrefix, AtomNS)
	ch := rss.CreateElement("channel")
	ch.CreateElement("title").SetText(meta.Title)
	link := meta.AlternateURL
	if link == "" {
		link = meta.SelfURL
	}
	ch.CreateElement("link").SetText(link)
	desc := meta.Subtitle
	if desc == "" {
		desc = meta.Title
	}
	ch.CreateElement("description").SetText(desc)
	if meta.SelfURL != "" {
		atomLink(ch, atomPrefix, "self", meta.SelfURL, "application/rss+xml")
	}
	if meta.HubURL != "" {
		atomLink(ch, atomPrefix, "hub", meta.HubURL, "")
	}
	if meta.DescriptorURL != "" {
		atomLink(ch, atomPrefix, "getpingd.updates.descriptor", meta.DescriptorURL, "")
	}
	if cloud != nil {
		c := ch.CreateElement("cloud")
		c.CreateAttr("domain", cloud.Domain)
		c.CreateAttr("port", strconv.Itoa(cloud.Port))
		c.CreateAttr("path", cloud.Path)
		c.CreateAttr("registerProcedure", cloud.RegisterProcedure)
		c.CreateAttr("protocol", cloud.Protocol)
	}
	if meta.Polling.TTLMinutes > 0 {
		ttl = meta.Polling.TTLMinutes
	}
	if ttl > 0 {
		ch.CreateElement("ttl").SetText(strconv.Itoa(ttl))
	}
	if len(meta.Polling.SkipHours) > 0 {
		sh := ch.CreateElement("skipHours")
		for _, h := range meta.Polling.SkipHours {
			sh.CreateElement("hour").SetText(strconv.Itoa(h))
		}
	}
	if len(meta.Polling.SkipDays) > 0 {
		sd := ch.CreateElement("skipDays")
		for _, d := range meta.Polling.SkipDays {
			sd.CreateElement("day").SetText(d)
		}
	}
	syndication(rss, ch, meta.Polling)
	ch.CreateElement("lastBuildDate").SetText(feedUpdated(meta.Updated, items).Format(time.RFC1123Z))
	ch.CreateElement("generator").SetText(generator)
	for _, ev := range items {
		if ev.Kind != "" && ev.Kind != hub.EventItem {
			continue
		}
		rssItem(ch, ev)
	}
	spaceChildren(ch)
	return writeDoc(doc)
}

func rssItem(ch *etree.Element, ev hub.Event) {
	e := atomEntry(ev)
	it := ch.CreateElement("item")
	title := ev.Title
	if te := atomChild(e, "title"); te != nil {
		title = plainText(elementText(te), 0)
	}
	if title != "" {
		it.CreateElement("title").SetText(title)
	}
	link := hub.WebLink(ev.Link)
	for _, l := range atomChildren(e, "link") {
		if l.SelectAttrValue("rel", "alternate") == "alternate" && l.SelectAttrValue("href", "") != "" {
			link = l.SelectAttrValue("href", "")
			break
		}
	}
	if link != "" {
		it.CreateElement("link").SetText(link)
	}
	g := it.CreateElement("guid")
	g.CreateAttr("isPermaLink", "false")
	g.SetText(ev.ItemID)
	date := entryTime(e, "published")
	if date.IsZero() {
		date = entryTime(e, "updated")
	}
	if date.IsZero() {
		date = eventTime(ev)
	}
	it.CreateElement("pubDate").SetText(date.UTC().Format(time.RFC1123Z))
	var description string
	for _, name := range []string{"summary", "content"} {
		if c := atomChild(e, name); c != nil && c.SelectAttrValue("src", "") == "" {
			switch c.SelectAttrValue("type", "text") {
			case "html":
				description = elementText(c)
			case "text":
				description = escapeHTML(elementText(c))
			case "xhtml":
				description = innerXML(c)
			}
			if strings.TrimSpace(description) != "" {
				break
			}
		}
	}
	if strings.TrimSpace(description) == "" {
		description = escapeHTML(ev.Summary)
	}
	if description != "" {
		it.CreateElement("description").SetText(description)
	}
	for _, c := range atomChildren(e, "category") {
		if term := c.SelectAttrValue("term", ""); term != "" {
			it.CreateElement("category").SetText(term)
		}
	}
	for _, l := range atomChildren(e, "link") {
		if l.SelectAttrValue("rel", "") != "enclosure" {
			continue
		}
		enc := it.CreateElement("enclosure")
		enc.CreateAttr("url", l.SelectAttrValue("href", ""))
		enc.CreateAttr("length", l.SelectAttrValue("length", "0"))
		enc.CreateAttr("type", l.SelectAttrValue("type", "application/octet-stream"))
	}
}

// dropRedundantAtomNS removes an entry's own default-namespace declaration
// when it repeats the feed's.
func dropRedundantAtomNS(e *etree.Element) {
	if e.Space == "" && e.SelectAttrValue("xmlns", "") == AtomNS {
		e.RemoveAttr("xmlns")
	}
}

// elementText is the string value of e: all its descendant text.
func elementText(e *etree.Element) string {
	var b strings.Builder
	var walk func(*etree.Element)
	walk = func(e *etree.Element) {
		for _, t := range e.Child {
			switch t := t.(type) {
			case *etree.CharData:
				b.WriteString(t.Data)
			case *etree.Element:
				walk(t)
			}
		}
	}
	walk(e)
	return b.String()
}

// innerXML serializes e's children.
func innerXML(e *etree.Element) string {
	var b bytes.Buffer
	for _, t := range e.Child {
		t.WriteTo(&b, &writeSettings)
	}
	return b.String()
}

func escapeHTML(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// spaceChildren puts each child element of e on its own line.
func spaceChildren(e *etree.Element) {
	for i := len(e.Child) - 1; i >= 0; i-- {
		if _, ok := e.Child[i].(*etree.Element); ok {
			e.InsertChildAt(i, etree.NewText("\n"))
		}
	}
	e.AddChild(etree.NewText("\n"))
}

func writeDoc(doc *etree.Document) []byte {
	b, err := doc.WriteToBytes()
	if err != nil {
		return nil // writing to memory does not fail
	}
	return append(b, '\n')
}
