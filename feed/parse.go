package feed

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/beevik/etree"
	"github.com/mmcdole/gofeed"
	"github.com/mmcdole/gofeed/atom"
	"github.com/mmcdole/gofeed/rss"
	"golang.org/x/net/html"

	"github.com/pingd/pingd/hub"
)

// AtomNS is the Atom 1.0 namespace.
const AtomNS = "http://www.w3.org/2005/Atom"

// MaxSummaryRunes caps Entry.Summary, the plain-text copy carried by
// protocols without payloads (CNWS, chat).
const MaxSummaryRunes = 500

// Bounds on one entry, so that its Atom payload stays within
// hub.MaxEntryPayloadBytes whatever the feed holds: every XMPP
// notification carries the payload, and a stanza over the XMPP server's
// limit ends the component's stream. An entry whose payload would be
// larger keeps its id, title, links, dates, authors, categories and
// enclosures and a plain-text summary of at most MaxSummaryRunes, and
// loses its content, which becomes <content src="LINK"/> pointing at the
// entry's page (no content when it has no link); with too many authors,
// categories or enclosures it keeps only id, title, link, dates and that
// summary. The caps below make that smallest form fit.
const (
	// MaxTitleRunes caps an entry's title, plain and in the payload: a
	// title is a line, not a document.
	MaxTitleRunes = 1000
	// MaxLinkBytes bounds a link pingd takes from a feed; a longer one is
	// dropped, since a cut URL is a wrong one.
	MaxLinkBytes = 4 << 10
	// MaxGUIDBytes bounds a guid or Atom id used as an item id as it is;
	// a longer one is replaced by its hex SHA-256. Item ids travel in
	// XMPP attributes and result set UIDs, which requests carry up to
	// 1,024 bytes.
	MaxGUIDBytes = 1024
)

// Document is what a fetched body says: a feed with entries, or a resource
// that is not a feed (then one entry stands for the whole body).
type Document struct {
	IsFeed      bool
	Title       string
	Description string
	SiteURL     string
	// Entries are in document order, each id once (the first occurrence of
	// a duplicated id wins).
	Entries []hub.Entry
	// Hints holds the document's polling hints (ttl, skipHours, skipDays,
	// sy:*); header hints are the fetcher's.
	Hints hub.PollHints
}

// Parse reads body, the representation of sourceURL fetched at fetchedAt,
// as RSS (0.91, 0.92, 1.0, 2.0) or Atom (0.3, 1.0). A body that is neither
// is not an error: it gives a Document with IsFeed false and one entry
// whose id is the hex SHA-256 of the body and whose payload links to
// sourceURL. The only error is ErrDocumentRefused, for a document past one
// of the limits (limits.go), which no parser has read then. Parse never
// panics.
func Parse(body []byte, sourceURL string, fetchedAt time.Time) (*Document, error) {
	fetchedAt = fetchedAt.UTC()
	isFeed, err := checkFeed(body)
	if err != nil {
		return nil, err
	}
	if isFeed {
		if doc := parseFeed(body, sourceURL, fetchedAt); doc != nil {
			return doc, nil
		}
	}
	return changedResource(body, sourceURL, fetchedAt), nil
}

// parseFeed returns nil when body, which checkFeed let through as an RSS
// or Atom document, does not parse as one.
func parseFeed(body []byte, sourceURL string, fetchedAt time.Time) *Document {
	p := gofeed.NewParser()
	p.KeepOriginalFeed = true
	f, err := p.Parse(bytes.NewReader(body))
	if err != nil || f == nil {
		return nil
	}
	doc := &Document{
		IsFeed:      true,
		Title:       plainText(f.Title, 0),
		Description: plainText(f.Description, MaxSummaryRunes),
		SiteURL:     absURL(sourceURL, strings.TrimSpace(f.Link)),
	}
	var atomEntries []*atom.Entry
	switch orig := f.OriginalFeed().(type) {
	case *rss.Feed:
		doc.Hints = rssHints(orig)
	case *atom.Feed:
		atomEntries = orig.Entries
	}
	syHints(&doc.Hints, f)

	base := doc.SiteURL
	if base == "" {
		base = sourceURL
	}
	seen := make(map[string]bool, len(f.Items))
	for i, it := range f.Items {
		if it == nil {
			continue
		}
		var ae *atom.Entry
		if i < len(atomEntries) {
			ae = atomEntries[i]
		}
		e := buildEntry(it, ae, base, sourceURL, fetchedAt)
		if seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		doc.Entries = append(doc.Entries, e)
	}
	return doc
}

// EntryID is the stable id of an entry with neither an Atom id nor an RSS
// guid: the hex SHA-256 of its link and title.
func EntryID(link, title string) string {
	sum := sha256.Sum256([]byte(link + "\n" + title))
	return hex.EncodeToString(sum[:])
}

func itemID(it *gofeed.Item) string {
	if id := strings.TrimSpace(it.GUID); id != "" {
		if len(id) > MaxGUIDBytes {
			sum := sha256.Sum256([]byte(id))
			return hex.EncodeToString(sum[:])
		}
		return id
	}
	return EntryID(strings.TrimSpace(it.Link), strings.TrimSpace(it.Title))
}

var (
	// An IRI as Atom needs it: a scheme, and none of the characters RFC 3987
	// leaves out (white space, controls, <>"{}|\^`).
	uriScheme = regexp.MustCompile("^[A-Za-z][A-Za-z0-9+.-]*:[^\\s\\x00-\\x1f\\x7f<>\"{}|\\\\^`]+$")
	hexID     = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// AtomID is the Atom <id> (an IRI) of the item with the stable id itemID:
// itemID itself when it is already an absolute URI, else a urn:sha256: name
// (the hash ids pingd makes are used as they are; other strings are
// hashed). Rendered feeds and patches use it so that an item's Atom id
// follows from its item id alone.
func AtomID(itemID string) string {
	if len(itemID) <= hub.MaxURLBytes && uriScheme.MatchString(itemID) && validXMLText(itemID) {
		if u, err := url.Parse(itemID); err == nil && u.Scheme != "" &&
			((u.Scheme != "http" && u.Scheme != "https") || u.Host != "") {
			return itemID
		}
	}
	if hexID.MatchString(itemID) {
		return "urn:sha256:" + itemID
	}
	sum := sha256.Sum256([]byte(itemID))
	return "urn:sha256:" + hex.EncodeToString(sum[:])
}

// validXMLText reports whether s is UTF-8 made only of characters XML 1.0
// allows.
func validXMLText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD,
			r >= 0x20 && r <= 0xD7FF,
			r >= 0xE000 && r <= 0xFFFD,
			r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

func buildEntry(it *gofeed.Item, ae *atom.Entry, base, sourceURL string, fetchedAt time.Time) hub.Entry {
	id := itemID(it)
	link := absURL(base, strings.TrimSpace(it.Link))
	updated := fetchedAt
	var published time.Time
	if it.PublishedParsed != nil && validTime(*it.PublishedParsed) {
		published = it.PublishedParsed.UTC()
		updated = published
	}
	if it.UpdatedParsed != nil && validTime(*it.UpdatedParsed) {
		updated = it.UpdatedParsed.UTC()
	}
	title := plainText(it.Title, MaxTitleRunes)
	summarySrc := it.Description
	if strings.TrimSpace(summarySrc) == "" {
		summarySrc = it.Content
	}
	e := hub.Entry{
		ID:      id,
		Title:   title,
		Summary: plainText(summarySrc, MaxSummaryRunes),
		Link:    link,
		Updated: updated,
	}
	alt := link
	if alt == "" {
		alt = sourceURL
	}
	for _, form := range []entryForm{entryFull, entryWithoutContent, entryMinimal} {
		el := newAtomEntry(AtomID(id), title, alt, updated)
		if !published.IsZero() && !published.Equal(updated) {
			el.CreateElement("published").SetText(published.Format(time.RFC3339))
		}
		if form != entryMinimal {
			addEntryMetadata(el, it, base)
		}
		if form == entryFull {
			addEntryText(el, it, ae, base)
		} else {
			addBoundedText(el, e.Summary, link)
		}
		if e.Payload = serializeElement(el); len(e.Payload) <= hub.MaxEntryPayloadBytes {
			break
		}
	}
	return e
}

// entryForm is how much of an entry its payload carries: all of it, all
// but its content and full summary, or only the elements every entry has
// (see MaxTitleRunes).
type entryForm int

const (
	entryFull entryForm = iota
	entryWithoutContent
	entryMinimal
)

// addEntryMetadata adds the entry's authors, categories and enclosures.
func addEntryMetadata(el *etree.Element, it *gofeed.Item, base string) {
	for _, p := range it.Authors {
		if p == nil || (p.Name == "" && p.Email == "") {
			continue
		}
		a := el.CreateElement("author")
		name := strings.TrimSpace(p.Name)
		if name == "" {
			name = strings.TrimSpace(p.Email)
		}
		a.CreateElement("name").SetText(name)
		if p.Email != "" {
			a.CreateElement("email").SetText(strings.TrimSpace(p.Email))
		}
	}
	for _, c := range it.Categories {
		if c = strings.TrimSpace(c); c != "" {
			el.CreateElement("category").CreateAttr("term", c)
		}
	}
	for _, enc := range it.Enclosures {
		if enc == nil {
			continue
		}
		href := absURL(base, strings.TrimSpace(enc.URL))
		if href == "" {
			continue
		}
		l := el.CreateElement("link")
		l.CreateAttr("rel", "enclosure")
		l.CreateAttr("href", href)
		if enc.Type != "" {
			l.CreateAttr("type", enc.Type)
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(enc.Length), 10, 64); err == nil && n > 0 {
			l.CreateAttr("length", strconv.FormatInt(n, 10))
		}
	}
}

// addEntryText adds the entry's summary and content as the feed has them.
func addEntryText(el *etree.Element, it *gofeed.Item, ae *atom.Entry, base string) {
	if s := strings.TrimSpace(it.Description); s != "" {
		sum := el.CreateElement("summary")
		sum.CreateAttr("type", "html")
		sum.SetText(s)
	}
	var src string
	if ae != nil && ae.Content != nil {
		src = absURL(base, ae.Content.Src)
	}
	switch {
	case src != "":
		c := el.CreateElement("content")
		c.CreateAttr("src", src)
		if ae.Content.Type != "" {
			c.CreateAttr("type", ae.Content.Type)
		}
	case strings.TrimSpace(it.Content) != "":
		c := el.CreateElement("content")
		if ae != nil && ae.Content != nil && ae.Content.Type == "text" {
			c.CreateAttr("type", "text")
		} else {
			c.CreateAttr("type", "html")
		}
		c.SetText(it.Content)
	}
}

// addBoundedText adds, in place of a summary and content too large to
// carry, the plain-text summary and a content that points at the entry's
// page (RFC 4287 §4.1.3.2: out-of-line content), when it has one.
func addBoundedText(el *etree.Element, summary, link string) {
	if summary != "" {
		sum := el.CreateElement("summary")
		sum.CreateAttr("type", "text")
		sum.SetText(summary)
	}
	if link != "" {
		c := el.CreateElement("content")
		c.CreateAttr("type", "text/html")
		c.CreateAttr("src", link)
	}
}

// changedResource is the single entry that stands for a non-feed body.
func changedResource(body []byte, sourceURL string, fetchedAt time.Time) *Document {
	sum := sha256.Sum256(body)
	id := hex.EncodeToString(sum[:])
	title := sourceURL + " changed"
	el := newAtomEntry(AtomID(id), title, sourceURL, fetchedAt)
	return &Document{
		Entries: []hub.Entry{{
			ID:      id,
			Title:   title,
			Link:    sourceURL,
			Updated: fetchedAt,
			Payload: serializeElement(el),
		}},
	}
}

// newAtomEntry starts a self-contained Atom entry with the elements every
// payload carries.
func newAtomEntry(id, title, link string, updated time.Time) *etree.Element {
	el := etree.NewElement("entry")
	el.CreateAttr("xmlns", AtomNS)
	el.CreateElement("id").SetText(id)
	t := el.CreateElement("title")
	t.CreateAttr("type", "text")
	t.SetText(title)
	if link != "" {
		l := el.CreateElement("link")
		l.CreateAttr("rel", "alternate")
		l.CreateAttr("href", link)
	}
	el.CreateElement("updated").SetText(updated.UTC().Format(time.RFC3339))
	return el
}

func serializeElement(el *etree.Element) []byte {
	doc := etree.NewDocument()
	doc.WriteSettings = etree.WriteSettings{CanonicalText: true, CanonicalAttrVal: true}
	doc.SetRoot(el)
	b, err := doc.WriteToBytes()
	if err != nil {
		return nil // a bytes.Buffer does not fail
	}
	return b
}

func validTime(t time.Time) bool {
	return !t.IsZero() && t.Year() >= 1970 && t.Year() < 10000
}

// absURL resolves ref against base and returns it when it is a web link
// (hub.WebLink), else "": every link of an entry and its payload is made
// here, so a javascript: or data: link from a source never reaches a
// reader.
func absURL(base, ref string) string {
	r, err := url.Parse(strings.TrimSpace(ref))
	if err != nil || ref == "" {
		return ""
	}
	if !r.IsAbs() {
		b, err := url.Parse(base)
		if err != nil || !b.IsAbs() {
			return ""
		}
		r = b.ResolveReference(r)
	}
	out := r.String()
	if len(out) > MaxLinkBytes {
		return ""
	}
	return hub.WebLink(out)
}

// plainText strips markup from s (HTML or text), collapses white space and
// caps the result at max runes (0: no cap).
func plainText(s string, max int) string {
	if s == "" {
		return ""
	}
	var b strings.Builder
	if strings.ContainsAny(s, "<&") {
		z := html.NewTokenizer(strings.NewReader(s))
		skip := 0
		for {
			tt := z.Next()
			if tt == html.ErrorToken {
				break
			}
			switch tt {
			case html.StartTagToken, html.EndTagToken:
				name, _ := z.TagName()
				if string(name) == "script" || string(name) == "style" {
					if tt == html.StartTagToken {
						skip++
					} else if skip > 0 {
						skip--
					}
				}
				b.WriteByte(' ')
			case html.TextToken:
				if skip == 0 {
					b.Write(z.Text())
				}
			}
		}
	} else {
		b.WriteString(s)
	}
	out := strings.Join(strings.Fields(b.String()), " ")
	out = strings.ToValidUTF8(out, "\uFFFD")
	if max > 0 && utf8.RuneCountInString(out) > max {
		r := []rune(out)
		out = strings.TrimRight(string(r[:max-1]), " ") + "…"
	}
	return out
}
