package feed

import (
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
)

// hostileLinks are hrefs a source may give that must never reach a
// reader.
var hostileLinks = []string{"javascript:alert(1)", " JavaScript:alert(2)", "data:text/html,<b>x</b>", "vbscript:msgbox(3)"}

// noHostileLink fails when doc carries any scheme of hostileLinks.
func noHostileLink(t *testing.T, what string, doc []byte) {
	t.Helper()
	low := strings.ToLower(string(doc))
	for _, scheme := range []string{"javascript:", "data:", "vbscript:"} {
		if strings.Contains(low, scheme) {
			t.Errorf("%s carries a %s link:\n%s", what, scheme, doc)
		}
	}
}

// TestParseDropsNonWebLinks: links of entries, enclosures, Atom content
// sources and the feed's site that are not http(s) are dropped where
// entries enter; http(s) links, relative ones resolved, stay.
func TestParseDropsNonWebLinks(t *testing.T) {
	for _, bad := range hostileLinks {
		rss := `<?xml version="1.0"?><rss version="2.0"><channel><title>T</title><link>` + xmlEscape(bad) + `</link>
<item><title>Bad link</title><link>` + xmlEscape(bad) + `</link><guid>g1</guid>
<enclosure url="` + xmlEscape(bad) + `" length="1" type="audio/mpeg"/>
<enclosure url="/ok.mp3" length="2" type="audio/mpeg"/></item>
<item><title>Good link</title><link>/posts/2</link><guid>g2</guid></item>
</channel></rss>`
		d := mustParse(t, []byte(rss), "https://example.org/feed.xml", fetchTime)
		if !d.IsFeed || len(d.Entries) != 2 {
			t.Fatalf("%q: parsed %+v", bad, d)
		}
		if d.SiteURL != "" {
			t.Errorf("%q: SiteURL = %q", bad, d.SiteURL)
		}
		if d.Entries[0].Link != "" {
			t.Errorf("%q: Link = %q, want none", bad, d.Entries[0].Link)
		}
		noHostileLink(t, "RSS payload", d.Entries[0].Payload)
		if e := decodeEntry(t, d.Entries[0].Payload); e.alternate() != "https://example.org/feed.xml" {
			t.Errorf("%q: alternate link %q, want the source", bad, e.alternate())
		}
		if !strings.Contains(string(d.Entries[0].Payload), `href="https://example.org/ok.mp3"`) {
			t.Errorf("%q: the http enclosure is gone: %s", bad, d.Entries[0].Payload)
		}
		if d.Entries[1].Link != "https://example.org/posts/2" {
			t.Errorf("%q: the relative link became %q", bad, d.Entries[1].Link)
		}

		atom := `<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>T</title><id>urn:x</id>
<updated>2024-03-10T12:00:00Z</updated><link href="` + xmlEscape(bad) + `"/>
<entry><id>urn:e1</id><title>E</title><updated>2024-03-10T12:00:00Z</updated>
<link rel="alternate" href="` + xmlEscape(bad) + `"/><content src="` + xmlEscape(bad) + `" type="text/html"/></entry>
</feed>`
		d = mustParse(t, []byte(atom), "https://example.org/atom.xml", fetchTime)
		if len(d.Entries) != 1 || d.Entries[0].Link != "" || d.SiteURL != "" {
			t.Fatalf("%q: Atom parsed %+v", bad, d)
		}
		noHostileLink(t, "Atom payload", d.Entries[0].Payload)
	}
}

// TestRenderingDropsNonWebLinks: items stored with such links (before
// parsing dropped them, or published by an owner) are rendered without
// them in every document pingd serves or sends: Atom and RSS feeds,
// patches and completed entries.
func TestRenderingDropsNonWebLinks(t *testing.T) {
	for _, bad := range hostileLinks {
		payload := `<entry xmlns="http://www.w3.org/2005/Atom"><id>urn:e1</id><title>Stored</title>` +
			`<link rel="alternate" href="` + xmlEscape(bad) + `"/>` +
			`<link rel="enclosure" href="` + xmlEscape(bad) + `" type="audio/mpeg"/>` +
			`<link rel="related" href="https://example.org/ok"/>` +
			`<content src="` + xmlEscape(bad) + `" type="text/html"/>` +
			`<updated>2024-03-10T12:00:00Z</updated></entry>`
		evs := []hub.Event{
			{Seq: 2, Kind: hub.EventItem, ItemID: "urn:e1", Payload: []byte(payload), Title: "Stored", Link: bad, Updated: at("2024-03-10T12:00:00Z")},
			{Seq: 1, Kind: hub.EventItem, ItemID: "plain", Title: "Plain", Link: bad, Updated: at("2024-03-09T12:00:00Z")},
		}
		atom := AtomFeed(meta, evs)
		noHostileLink(t, "Atom feed", atom)
		if !strings.Contains(string(atom), `href="https://example.org/ok"`) {
			t.Errorf("%q: the http link is gone from the Atom feed", bad)
		}
		noHostileLink(t, "RSS feed", RSSFeed(meta, nil, 0, evs))
		noHostileLink(t, "patch", Patch(evs, nil))
		done := CompleteEntry(hub.Entry{ID: "urn:e1", Payload: []byte(payload), Title: "Stored", Link: bad})
		noHostileLink(t, "completed entry", done.Payload)
	}
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", `"`, "&quot;").Replace(s)
}
