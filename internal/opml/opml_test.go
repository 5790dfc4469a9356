package opml

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const sample = `<?xml version="1.0" encoding="ISO-8859-1"?>
<opml version="2.0">
 <head><title>my subscriptions</title><outline text="not in the body" xmlUrl="http://head.example/"/></head>
 <body>
  <outline text="Scripting News" type="rss" xmlUrl="http://scripting.com/rss.xml" htmlUrl="http://scripting.com/"/>
  <outline text="Tech">
   <outline text="Go">
    <outline title="The Go Blog" type="rss" xmlurl=" https://go.dev/blog/feed.atom " HTMLURL="https://go.dev/blog"/>
   </outline>
   <outline text="caf&#233; &amp; news" type="rss" xmlUrl="http://xn--caf-dma.example/feed"/>
  </outline>
  <outline text="a note, no feed"/>
  <outline text="Empty folder"></outline>
  <outline text="Feed with children" xmlUrl="http://parent.example/feed"><outline text="child" xmlUrl="http://child.example/feed"/></outline>
  <outline text="Caf` + "\xe9" + `" xmlUrl="http://latin1.example/" other:xmlUrl="http://ignored.example/" xmlns:other="urn:x"/>
 </body>
</opml>`

func TestParse(t *testing.T) {
	got, err := Parse([]byte(sample), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	want := []Outline{
		{Index: 1, Text: "Scripting News", Type: "rss", XMLURL: "http://scripting.com/rss.xml", HTMLURL: "http://scripting.com/"},
		{Index: 4, Folders: []string{"Tech", "Go"}, Title: "The Go Blog", Type: "rss", XMLURL: "https://go.dev/blog/feed.atom", HTMLURL: "https://go.dev/blog"},
		{Index: 5, Folders: []string{"Tech"}, Text: "café & news", Type: "rss", XMLURL: "http://xn--caf-dma.example/feed"},
		{Index: 6, Text: "a note, no feed"},
		{Index: 7, Text: "Empty folder"},
		{Index: 8, Text: "Feed with children", XMLURL: "http://parent.example/feed"},
		{Index: 9, Folders: []string{"Feed with children"}, Text: "child", XMLURL: "http://child.example/feed"},
		{Index: 10, Text: "Café", XMLURL: "http://latin1.example/"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\n got %+v\nwant %+v", got, want)
	}
	if got[1].Name() != "The Go Blog" || (Outline{XMLURL: "u"}).Name() != "u" {
		t.Errorf("Name: %q", got[1].Name())
	}
}

func TestParseRefuses(t *testing.T) {
	nested := func(depth int) string {
		return `<opml version="2.0"><body>` + strings.Repeat(`<outline text="f">`, depth) + strings.Repeat(`</outline>`, depth) + `</body></opml>`
	}
	many := func(n int) string {
		// Indented as exports are: the text between outlines adds up.
		return `<opml version="2.0"><body>` + strings.Repeat("\n        "+`<outline text="x" xmlUrl="http://a.example/"/>`, n) + "\n</body></opml>"
	}
	for name, tc := range map[string]struct {
		doc  string
		want error
		text string
	}{
		"not XML":           {"this is not XML", ErrInvalid, "no <opml>"},
		"empty":             {"", ErrInvalid, "no <opml>"},
		"RSS":               {`<rss version="2.0"><channel/></rss>`, ErrInvalid, "root element is <rss>"},
		"truncated":         {`<opml version="2.0"><body><outline text="x">`, ErrInvalid, ""},
		"too deep":          {nested(DefaultLimits.Depth + 1), ErrTooLarge, "outlines at most 16"},
		"too many":          {many(DefaultLimits.Outlines + 1), ErrTooLarge, "more than 2000 outlines"},
		"huge start tag":    {`<opml><body><outline ` + strings.Repeat(`a="b" `, 20000) + `/></body></opml>`, ErrTooLarge, "start tag"},
		"undeclared entity": {`<opml><body><outline text="&bogus;" xmlUrl="http://a.example/"/></body></opml>`, nil, ""},
	} {
		_, err := Parse([]byte(tc.doc), DefaultLimits)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: error %v, want %v mentioning %q", name, err, tc.want, tc.text)
		}
	}
	if _, err := Parse([]byte(nested(DefaultLimits.Depth)), DefaultLimits); err != nil {
		t.Errorf("outlines %d deep: %v", DefaultLimits.Depth, err)
	}
	if got, err := Parse([]byte(many(DefaultLimits.Outlines)), DefaultLimits); err != nil || len(got) != DefaultLimits.Outlines {
		t.Errorf("%d outlines: %d, %v", DefaultLimits.Outlines, len(got), err)
	}
}

// TestWriteParsesBack: what Write renders is an OPML 2.0 subscription
// list Parse reads back, whatever the titles and URLs hold.
func TestWriteParsesBack(t *testing.T) {
	feeds := []Feed{
		{Text: `Gadget "news" <b>&</b> ]]>`, XMLURL: "http://pingd.example/atom/a%26b?x=1&y=<2>", HTMLURL: "https://site.example/?q='1'",
			Extra: map[string]string{"source": "https://site.example/feed?a=1&b=2", "node": "a&b"}},
		{Text: "no site", XMLURL: "http://pingd.example/atom/n"},
		{Text: "control \x01 char", XMLURL: "http://pingd.example/atom/c"},
	}
	var b bytes.Buffer
	if err := Write(&b, Head{Title: "pingd <nodes>", Docs: SpecURL}, feeds); err != nil {
		t.Fatal(err)
	}
	got, err := Parse(b.Bytes(), DefaultLimits)
	if err != nil {
		t.Fatalf("Parse(Write): %v\n%s", err, b.String())
	}
	if len(got) != len(feeds) {
		t.Fatalf("%d outlines back, want %d:\n%s", len(got), len(feeds), b.String())
	}
	for i, f := range feeds {
		text := strings.ReplaceAll(f.Text, "\x01", "\uFFFD")
		if g := got[i]; g.Text != text || g.Title != text || g.Type != "rss" || g.XMLURL != f.XMLURL || g.HTMLURL != f.HTMLURL {
			t.Errorf("outline %d back as %+v, want %+v", i, g, f)
		}
	}
	for _, want := range []string{`<opml version="2.0"`, `xmlns:pingd="` + NS + `"`, `pingd:source="https://site.example/feed?a=1&amp;b=2"`, "<docs>" + SpecURL + "</docs>"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("document lacks %s:\n%s", want, b.String())
		}
	}
}
