package feed

import (
	"bytes"
	"strings"
	"testing"

	"github.com/beevik/etree"

	"github.com/pingd/pingd/hub"
)

// payloadElement reads an entry's payload back.
func payloadElement(t *testing.T, e hub.Entry) *etree.Element {
	t.Helper()
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(e.Payload); err != nil {
		t.Fatalf("payload of %q is not XML: %v", e.ID, err)
	}
	return doc.Root()
}

// An entry whose content is several MiB keeps everything but its content,
// which points at the entry's page; the entry beside it is untouched.
func TestHugeEntryLosesItsContent(t *testing.T) {
	huge := strings.Repeat("<p>All work and no play makes Jack a dull boy.</p>\n", 100_000) // ~5 MiB
	body := `<?xml version="1.0"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>T</title><id>urn:x:feed</id><updated>2024-01-02T03:04:05Z</updated>
<entry><id>urn:x:big</id><title>The big one</title><link href="http://e.org/big"/>
<updated>2024-01-02T03:04:05Z</updated><published>2024-01-01T03:04:05Z</published>
<author><name>Ann</name></author><category term="long"/>
<summary type="html">` + xmlEscape(huge) + `</summary>
<content type="html">` + xmlEscape(huge) + `</content></entry>
<entry><id>urn:x:small</id><title>Small</title><link href="http://e.org/small"/><updated>2024-01-02T03:04:05Z</updated>
<content type="html">&lt;p&gt;short&lt;/p&gt;</content></entry>
</feed>`
	d := mustParse(t, []byte(body), "http://e.org/feed", fetchTime)
	if len(d.Entries) != 2 {
		t.Fatalf("%d entries, want 2", len(d.Entries))
	}
	big, small := d.Entries[0], d.Entries[1]
	if n := len(big.Payload); n > hub.MaxEntryPayloadBytes {
		t.Fatalf("the big entry's payload is %d bytes, over the %d limit", n, hub.MaxEntryPayloadBytes)
	}
	el := payloadElement(t, big)
	for _, path := range []string{"id", "title", "link", "updated", "published", "author/name", "category", "summary", "content"} {
		if el.FindElement(path) == nil {
			t.Errorf("the big entry lost its <%s>: %s", path, big.Payload)
		}
	}
	c := el.FindElement("content")
	if c != nil && (c.SelectAttrValue("src", "") != "http://e.org/big" || c.Text() != "") {
		t.Errorf("the big entry's content should point at its page, got %s", big.Payload)
	}
	if s := el.FindElement("summary"); s != nil && len([]rune(s.Text())) > MaxSummaryRunes {
		t.Errorf("the big entry's summary has %d runes, cap %d", len([]rune(s.Text())), MaxSummaryRunes)
	}
	if big.ID != "urn:x:big" || big.Title != "The big one" || big.Link != "http://e.org/big" {
		t.Errorf("the big entry's id, title or link changed: %+v", big)
	}
	if !bytes.Contains(small.Payload, []byte("&lt;p&gt;short&lt;/p&gt;")) {
		t.Errorf("the small entry lost its content: %s", small.Payload)
	}
}

// Whatever makes an entry large (thousands of categories, a huge title,
// link or guid), its payload stays within the limit.
func TestEntryPayloadIsAlwaysBounded(t *testing.T) {
	amp := strings.Repeat("&amp;", 30_000)
	tests := map[string]string{
		"categories": `<title>c</title><guid>g</guid>` + strings.Repeat(`<category>tag &amp; more</category>`, 20_000),
		"title":      `<title>` + amp + `</title><guid>g</guid>`,
		"link":       `<title>l</title><guid>g</guid><link>http://e.org/?q=` + amp + `</link>`,
		"guid":       `<title>g</title><guid>` + amp + `</guid>`,
		"enclosures": `<title>e</title><guid>g</guid>` + strings.Repeat(`<enclosure url="http://e.org/a.mp3?x&amp;y" type="audio/mpeg" length="1"/>`, 20_000),
		"everything": `<title>` + amp + `</title><guid>` + amp + `</guid><link>http://e.org/?q=` + strings.Repeat("&amp;", 700) + `</link><description>` + amp + `</description>`,
	}
	for name, item := range tests {
		t.Run(name, func(t *testing.T) {
			body := `<rss version="2.0"><channel><title>T</title><link>http://e.org/</link><description/><item>` + item + `</item></channel></rss>`
			d := mustParse(t, []byte(body), "http://e.org/f", fetchTime)
			if len(d.Entries) != 1 {
				t.Fatalf("%d entries, want 1", len(d.Entries))
			}
			e := d.Entries[0]
			if n := len(e.Payload); n > hub.MaxEntryPayloadBytes {
				t.Errorf("payload is %d bytes, over the %d limit", n, hub.MaxEntryPayloadBytes)
			}
			if len(e.ID) > MaxGUIDBytes || len([]rune(e.Title)) > MaxTitleRunes || len(e.Link) > MaxLinkBytes {
				t.Errorf("id %d bytes, title %d runes, link %d bytes: over their caps", len(e.ID), len([]rune(e.Title)), len(e.Link))
			}
			el := payloadElement(t, e)
			if el.FindElement("id") == nil || el.FindElement("title") == nil || el.FindElement("updated") == nil {
				t.Errorf("payload lost its id, title or updated: %.300s", e.Payload)
			}
		})
	}
}
