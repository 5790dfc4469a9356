package feed

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

var fetchTime = time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC)

const rss2WithGUIDs = `<?xml version="1.0"?>
<rss version="2.0"><channel><title>Blog</title><link>http://example.org/</link><description>A blog</description>
<item><title>Second</title><link>http://example.org/2</link><guid>http://example.org/2</guid><pubDate>Tue, 05 Mar 2024 10:00:00 GMT</pubDate><description>two</description></item>
<item><title>First</title><link>http://example.org/1</link><guid isPermaLink="false">post-1</guid><pubDate>Mon, 04 Mar 2024 10:00:00 GMT</pubDate></item>
</channel></rss>`

const rss2NoGUIDs = `<rss version="2.0"><channel><title>Blog</title><link>http://example.org/</link><description/>
<item><title>Second</title><link>http://example.org/2</link></item>
<item><title>First</title><link>http://example.org/1</link></item>
</channel></rss>`

const rss2Reordered = `<rss version="2.0"><channel><title>Blog</title><link>http://example.org/</link><description/>
<item><title>First</title><link>http://example.org/1</link></item>
<item><title>Second</title><link>http://example.org/2</link></item>
</channel></rss>`

const rss2Duplicates = `<rss version="2.0"><channel><title>Blog</title><link>http://example.org/</link><description/>
<item><title>New version</title><link>http://example.org/a</link><guid>dup</guid></item>
<item><title>Other</title><link>http://example.org/b</link><guid>other</guid></item>
<item><title>Old version</title><link>http://example.org/a</link><guid>dup</guid></item>
<item><title>Same</title><link>http://example.org/c</link></item>
<item><title>Same</title><link>http://example.org/c</link></item>
</channel></rss>`

const atom10 = `<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Atom feed</title><link href="http://example.org/"/><id>urn:uuid:feed</id><updated>2024-03-05T10:00:00Z</updated>
<entry><title type="html">B &lt;em&gt;two&lt;/em&gt;</title><link href="http://example.org/b"/><id>tag:example.org,2024:b</id><updated>2024-03-05T10:00:00Z</updated><published>2024-03-01T10:00:00Z</published><summary>Summary B</summary><author><name>Ann</name><email>ann@example.org</email></author><content type="html">&lt;p&gt;Body B&lt;/p&gt;</content></entry>
<entry><title>A</title><link rel="alternate" href="/a"/><id>42</id><updated>2024-03-04T10:00:00Z</updated></entry>
</feed>`

const atom03 = `<?xml version="1.0" encoding="utf-8"?>
<feed version="0.3" xmlns="http://purl.org/atom/ns#"><title>Old Atom</title><link rel="alternate" type="text/html" href="http://example.org/"/><modified>2024-03-05T10:00:00Z</modified>
<entry><title>Zero three</title><link rel="alternate" type="text/html" href="http://example.org/03"/><id>tag:example.org,2004:03</id><issued>2024-03-05T10:00:00Z</issued><modified>2024-03-05T10:00:00Z</modified></entry>
</feed>`

const rss10 = `<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/" xmlns:sy="http://purl.org/rss/1.0/modules/syndication/">
<channel rdf:about="http://example.org/"><title>RDF</title><link>http://example.org/</link><description>rdf feed</description>
<sy:updatePeriod>hourly</sy:updatePeriod><sy:updateFrequency>2</sy:updateFrequency><sy:updateBase>2000-01-01T12:00+00:00</sy:updateBase>
<items><rdf:Seq><rdf:li resource="http://example.org/r1"/></rdf:Seq></items></channel>
<item rdf:about="http://example.org/r1"><title>R1</title><link>http://example.org/r1</link><description>one</description></item>
</rdf:RDF>`

const rss091 = `<?xml version="1.0"?>
<!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN" "http://my.netscape.com/publish/formats/rss-0.91.dtd">
<rss version="0.91"><channel><title>Old</title><link>http://example.org/</link><description>d</description><language>en</language>
<skipHours><hour>24</hour><hour>1</hour><hour>1</hour><hour>99</hour></skipHours><skipDays><day>saturday</day><day>Sun</day><day>Funday</day></skipDays><ttl>90</ttl>
<item><title>Ninety-one</title><link>http://example.org/91</link></item>
</channel></rss>`

// mustParse is Parse for documents within the limits.
func mustParse(t testing.TB, body []byte, sourceURL string, fetchedAt time.Time) *Document {
	t.Helper()
	d, err := Parse(body, sourceURL, fetchedAt)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return d
}

func ids(d *Document) []string {
	var out []string
	for _, e := range d.Entries {
		out = append(out, e.ID)
	}
	return out
}

func TestParseIDs(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string
	}{
		{"rss2 guids", rss2WithGUIDs, []string{"http://example.org/2", "post-1"}},
		{"rss2 no guids", rss2NoGUIDs, []string{
			EntryID("http://example.org/2", "Second"), EntryID("http://example.org/1", "First")}},
		{"rss2 reordered", rss2Reordered, []string{
			EntryID("http://example.org/1", "First"), EntryID("http://example.org/2", "Second")}},
		{"rss2 duplicated ids keep the first", rss2Duplicates, []string{
			"dup", "other", EntryID("http://example.org/c", "Same")}},
		{"atom 1.0", atom10, []string{"tag:example.org,2024:b", "42"}},
		{"atom 0.3", atom03, []string{"tag:example.org,2004:03"}},
		{"rss 1.0", rss10, []string{EntryID("http://example.org/r1", "R1")}},
		{"rss 0.91", rss091, []string{EntryID("http://example.org/91", "Ninety-one")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustParse(t, []byte(tt.body), "http://example.org/feed", fetchTime)
			if !d.IsFeed {
				t.Fatal("IsFeed = false")
			}
			if got := ids(d); !slices.Equal(got, tt.want) {
				t.Errorf("ids = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEntryIDIsSHA256OfLinkAndTitle(t *testing.T) {
	sum := sha256.Sum256([]byte("http://example.org/1\nFirst"))
	if got, want := EntryID("http://example.org/1", "First"), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("EntryID = %s, want %s", got, want)
	}
}

func TestReorderedItemsKeepTheirIDs(t *testing.T) {
	a := ids(mustParse(t, []byte(rss2NoGUIDs), "http://example.org/feed", fetchTime))
	b := ids(mustParse(t, []byte(rss2Reordered), "http://example.org/feed", fetchTime))
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		t.Errorf("ids differ after reordering: %q vs %q", a, b)
	}
}

func TestParseDuplicatesKeepFirstEntry(t *testing.T) {
	d := mustParse(t, []byte(rss2Duplicates), "http://example.org/feed", fetchTime)
	if d.Entries[0].Title != "New version" {
		t.Errorf("first entry title %q, want the first occurrence", d.Entries[0].Title)
	}
}

// atomEntryXML is an Atom entry as encoding/xml reads it back.
type atomEntryXML struct {
	XMLName xml.Name `xml:"http://www.w3.org/2005/Atom entry"`
	ID      string   `xml:"http://www.w3.org/2005/Atom id"`
	Title   struct {
		Type string `xml:"type,attr"`
		Text string `xml:",chardata"`
	} `xml:"http://www.w3.org/2005/Atom title"`
	Links []struct {
		Rel    string `xml:"rel,attr"`
		Href   string `xml:"href,attr"`
		Type   string `xml:"type,attr"`
		Length string `xml:"length,attr"`
	} `xml:"http://www.w3.org/2005/Atom link"`
	Updated   string `xml:"http://www.w3.org/2005/Atom updated"`
	Published string `xml:"http://www.w3.org/2005/Atom published"`
	Summary   *struct {
		Type string `xml:"type,attr"`
		Text string `xml:",chardata"`
	} `xml:"http://www.w3.org/2005/Atom summary"`
	Content *struct {
		Type string `xml:"type,attr"`
		Text string `xml:",chardata"`
	} `xml:"http://www.w3.org/2005/Atom content"`
	Authors []struct {
		Name  string `xml:"http://www.w3.org/2005/Atom name"`
		Email string `xml:"http://www.w3.org/2005/Atom email"`
	} `xml:"http://www.w3.org/2005/Atom author"`
	Categories []struct {
		Term string `xml:"term,attr"`
	} `xml:"http://www.w3.org/2005/Atom category"`
}

func decodeEntry(t *testing.T, payload []byte) atomEntryXML {
	t.Helper()
	var e atomEntryXML
	d := xml.NewDecoder(strings.NewReader(string(payload)))
	if err := d.Decode(&e); err != nil {
		t.Fatalf("payload does not parse back: %v\n%s", err, payload)
	}
	// One self-contained element: nothing but white space after it.
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		if cd, ok := tok.(xml.CharData); ok && strings.TrimSpace(string(cd)) == "" {
			continue
		}
		t.Fatalf("payload has more than one element: %#v", tok)
	}
	return e
}

func (e atomEntryXML) alternate() string {
	for _, l := range e.Links {
		if l.Rel == "alternate" {
			return l.Href
		}
	}
	return ""
}

func TestPayloadsRSS(t *testing.T) {
	body := `<?xml version="1.0"?>
<rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/"><channel><title>T</title><link>http://example.org/</link><description/>
<item><title>One &lt;b&gt;bold&lt;/b&gt; &amp; "quoted"</title><link>/one</link>
<description>&lt;p&gt;Hello &amp;amp; &lt;a href="x"&gt;world&lt;/a&gt;&lt;/p&gt;</description>
<pubDate>Mon, 04 Mar 2024 10:00:00 GMT</pubDate><author>ann@example.org (Ann)</author><category>news</category>
<enclosure url="http://example.org/a.mp3" length="1234" type="audio/mpeg"/>
<content:encoded><![CDATA[<p>Full <i>text</i></p>]]></content:encoded></item>
<item><title>No date</title><link>http://example.org/two</link><guid>two</guid></item>
</channel></rss>`
	d := mustParse(t, []byte(body), "http://example.org/feed.xml", fetchTime)
	if len(d.Entries) != 2 {
		t.Fatalf("%d entries", len(d.Entries))
	}
	one := d.Entries[0]
	if one.Title != `One bold & "quoted"` {
		t.Errorf("Title = %q", one.Title)
	}
	if one.Summary != "Hello & world" {
		t.Errorf("Summary = %q", one.Summary)
	}
	if one.Link != "http://example.org/one" {
		t.Errorf("Link = %q (relative links resolve against the site)", one.Link)
	}
	if want := time.Date(2024, 3, 4, 10, 0, 0, 0, time.UTC); !one.Updated.Equal(want) {
		t.Errorf("Updated = %v, want %v", one.Updated, want)
	}
	e := decodeEntry(t, one.Payload)
	if e.ID != "urn:sha256:"+one.ID {
		t.Errorf("payload id %q, want urn:sha256:%s", e.ID, one.ID)
	}
	if e.Title.Text != one.Title || e.Title.Type != "text" {
		t.Errorf("payload title %+v", e.Title)
	}
	if e.alternate() != "http://example.org/one" {
		t.Errorf("payload alternate link %q", e.alternate())
	}
	if e.Updated != "2024-03-04T10:00:00Z" {
		t.Errorf("payload updated %q", e.Updated)
	}
	if e.Summary == nil || e.Summary.Type != "html" || e.Summary.Text != `<p>Hello &amp; <a href="x">world</a></p>` {
		t.Errorf("payload summary %+v", e.Summary)
	}
	if e.Content == nil || e.Content.Type != "html" || e.Content.Text != "<p>Full <i>text</i></p>" {
		t.Errorf("payload content %+v", e.Content)
	}
	if len(e.Authors) != 1 || e.Authors[0].Name != "Ann" || e.Authors[0].Email != "ann@example.org" {
		t.Errorf("payload authors %+v", e.Authors)
	}
	if len(e.Categories) != 1 || e.Categories[0].Term != "news" {
		t.Errorf("payload categories %+v", e.Categories)
	}
	var enc bool
	for _, l := range e.Links {
		if l.Rel == "enclosure" && l.Href == "http://example.org/a.mp3" && l.Type == "audio/mpeg" && l.Length == "1234" {
			enc = true
		}
	}
	if !enc {
		t.Errorf("payload has no enclosure link: %+v", e.Links)
	}

	two := d.Entries[1]
	if two.ID != "two" {
		t.Errorf("ID = %q", two.ID)
	}
	if !two.Updated.Equal(fetchTime) {
		t.Errorf("undated entry Updated = %v, want the fetch time", two.Updated)
	}
	e2 := decodeEntry(t, two.Payload)
	if e2.ID != AtomID("two") || !strings.HasPrefix(e2.ID, "urn:sha256:") {
		t.Errorf("payload id %q", e2.ID)
	}
	if e2.Updated != fetchTime.Format(time.RFC3339) {
		t.Errorf("undated payload updated %q", e2.Updated)
	}
}

func TestPayloadsAtom(t *testing.T) {
	d := mustParse(t, []byte(atom10), "http://example.org/atom.xml", fetchTime)
	if d.Title != "Atom feed" || d.SiteURL != "http://example.org/" {
		t.Errorf("feed title %q site %q", d.Title, d.SiteURL)
	}
	b := decodeEntry(t, d.Entries[0].Payload)
	if b.ID != "tag:example.org,2024:b" {
		t.Errorf("id %q: a URI id is kept", b.ID)
	}
	if b.Title.Text != "B two" || d.Entries[0].Title != "B two" {
		t.Errorf("title %q / %q: markup is stripped", b.Title.Text, d.Entries[0].Title)
	}
	if b.Updated != "2024-03-05T10:00:00Z" || b.Published != "2024-03-01T10:00:00Z" {
		t.Errorf("updated %q published %q", b.Updated, b.Published)
	}
	if b.Content == nil || b.Content.Text != "<p>Body B</p>" {
		t.Errorf("content %+v", b.Content)
	}
	if b.Summary == nil || b.Summary.Text != "Summary B" {
		t.Errorf("summary %+v", b.Summary)
	}
	if len(b.Authors) != 1 || b.Authors[0].Name != "Ann" {
		t.Errorf("authors %+v", b.Authors)
	}
	a := decodeEntry(t, d.Entries[1].Payload)
	if a.ID != AtomID("42") || d.Entries[1].ID != "42" {
		t.Errorf("non-URI Atom id: payload %q, ID %q", a.ID, d.Entries[1].ID)
	}
	if a.alternate() != "http://example.org/a" {
		t.Errorf("relative Atom link resolved to %q", a.alternate())
	}
}

func TestParseNotAFeed(t *testing.T) {
	for _, body := range []string{
		"<!doctype html><html><head><title>x</title></head><body>hello</body></html>",
		`{"version":"https://jsonfeed.org/version/1.1","items":[]}`,
		"plain text",
		"",
		"<rss><channel><item>",
	} {
		d := mustParse(t, []byte(body), "http://example.org/page", fetchTime)
		if d.IsFeed {
			t.Errorf("%q: IsFeed = true", body)
			continue
		}
		sum := sha256.Sum256([]byte(body))
		if len(d.Entries) != 1 || d.Entries[0].ID != hex.EncodeToString(sum[:]) {
			t.Fatalf("%q: entries %+v, want one with the body hash", body, d.Entries)
		}
		e := decodeEntry(t, d.Entries[0].Payload)
		if e.Title.Text != "http://example.org/page changed" || e.alternate() != "http://example.org/page" {
			t.Errorf("%q: payload title %q link %q", body, e.Title.Text, e.alternate())
		}
		if e.ID != "urn:sha256:"+d.Entries[0].ID {
			t.Errorf("payload id %q", e.ID)
		}
	}
}

func TestParseHints(t *testing.T) {
	d := mustParse(t, []byte(rss091), "http://example.org/feed", fetchTime)
	want := hub.PollHints{
		TTL:       90 * time.Minute,
		SkipHours: []int{0, 1},
		SkipDays:  []time.Weekday{time.Sunday, time.Saturday},
	}
	if d.Hints.TTL != want.TTL || !slices.Equal(d.Hints.SkipHours, want.SkipHours) || !slices.Equal(d.Hints.SkipDays, want.SkipDays) {
		t.Errorf("hints %+v, want %+v", d.Hints, want)
	}
	r := mustParse(t, []byte(rss10), "http://example.org/feed", fetchTime)
	if r.Hints.UpdatePeriod != "hourly" || r.Hints.UpdateFrequency != 2 ||
		!r.Hints.UpdateBase.Equal(time.Date(2000, 1, 1, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("sy hints %+v", r.Hints)
	}
	if got := SyInterval(r.Hints); got != 30*time.Minute {
		t.Errorf("SyInterval = %v, want 30m", got)
	}
}

func TestAtomID(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	tests := []struct{ in, want string }{
		{"http://example.org/1", "http://example.org/1"},
		{"tag:example.org,2024:1", "tag:example.org,2024:1"},
		{"urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a", "urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a"},
		{hash, "urn:sha256:" + hash},
		{"42", "urn:sha256:" + sha256hex("42")},
		{"http:/no-host", "urn:sha256:" + sha256hex("http:/no-host")},
		{"has space:x y", "urn:sha256:" + sha256hex("has space:x y")},
		{`C:\path`, "urn:sha256:" + sha256hex(`C:\path`)},
		{"x:a<b", "urn:sha256:" + sha256hex("x:a<b")},
		{"x:a\x01b", "urn:sha256:" + sha256hex("x:a\x01b")},
		{"x:{}", "urn:sha256:" + sha256hex("x:{}")},
		{"x:a\uFFFE", "urn:sha256:" + sha256hex("x:a\uFFFE")},
		{"x:é", "x:é"},
		{"", "urn:sha256:" + sha256hex("")},
	}
	for _, tt := range tests {
		if got := AtomID(tt.in); got != tt.want {
			t.Errorf("AtomID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestPlainText(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 0, "plain"},
		{"  a \n\t b  ", 0, "a b"},
		{"<p>Hello <b>you</b></p><script>x()</script>", 0, "Hello you"},
		{"AT&amp;T &lt;3", 0, "AT&T <3"},
		{"abcdefghij", 5, "abcd…"},
		{"héllo wörld", 7, "héllo…"},
	}
	for _, tt := range tests {
		if got := plainText(tt.in, tt.max); got != tt.want {
			t.Errorf("plainText(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

func TestSummaryIsCapped(t *testing.T) {
	long := strings.Repeat("word ", 400)
	body := `<rss version="2.0"><channel><title>T</title><link>http://e.org/</link><description/><item><title>x</title><guid>g</guid><description>` + long + `</description></item></channel></rss>`
	d := mustParse(t, []byte(body), "http://e.org/f", fetchTime)
	if n := len([]rune(d.Entries[0].Summary)); n > MaxSummaryRunes {
		t.Errorf("summary has %d runes, cap %d", n, MaxSummaryRunes)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{rss2WithGUIDs, rss2NoGUIDs, rss2Duplicates, atom10, atom03, rss10, rss091, "<html/>", "",
		// Past the nesting and namespace limits.
		channelHead + `<a xmlns="urn:x">` + strings.Repeat("<a>", MaxDepth),
		string(withNamespaces(MaxNamespacesInScope + 1)),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 1<<16 {
			return
		}
		d, err := Parse(body, "http://example.org/feed", fetchTime)
		if err != nil {
			if !errors.Is(err, ErrDocumentRefused) {
				t.Fatalf("error %v is not ErrDocumentRefused", err)
			}
			return
		}
		if len(d.Entries) == 0 && !d.IsFeed {
			t.Fatal("a non-feed has one entry")
		}
		seen := map[string]bool{}
		for _, e := range d.Entries {
			if e.ID == "" || seen[e.ID] {
				t.Fatalf("empty or duplicate id %q", e.ID)
			}
			seen[e.ID] = true
			var x atomEntryXML
			if err := xml.Unmarshal(e.Payload, &x); err != nil {
				t.Fatalf("payload is not well-formed: %v\n%s", err, e.Payload)
			}
			if x.ID != AtomID(e.ID) {
				t.Fatalf("payload id %q, want %q", x.ID, AtomID(e.ID))
			}
		}
	})
}

func FuzzAtomID(f *testing.F) {
	for _, s := range []string{"http://e.org/1", "tag:e.org,2024:x", "42", "a:b\x01", strings.Repeat("ab", 32), ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		got := AtomID(id)
		if got != id && !strings.HasPrefix(got, "urn:sha256:") {
			t.Fatalf("AtomID(%q) = %q", id, got)
		}
		// It survives a trip through an XML document unchanged.
		e := newAtomEntry(got, "t", "", fetchTime)
		var x atomEntryXML
		if err := xml.Unmarshal(serializeElement(e), &x); err != nil || x.ID != got {
			t.Fatalf("AtomID(%q) = %q reads back as %q (%v)", id, got, x.ID, err)
		}
	})
}
