package opml

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParse: any document is parsed or refused with ErrInvalid or
// ErrTooLarge, never a panic; what is parsed keeps the limits and comes
// back whole through Write. Seeds are in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte(`<opml version="2.0"><body><outline text="a"><outline text="b" xmlUrl="http://b.example/"/></outline></body></opml>`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		lim := Limits{Outlines: 50, Depth: 4}
		outlines, err := Parse(doc, lim)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v is neither ErrInvalid nor ErrTooLarge", err)
			}
			return
		}
		if len(outlines) > lim.Outlines {
			t.Fatalf("%d outlines past the limit of %d", len(outlines), lim.Outlines)
		}
		var feeds []Feed
		last := 0
		for _, o := range outlines {
			if o.Index <= last || o.Index > lim.Outlines || len(o.Folders) >= lim.Depth {
				t.Fatalf("outline %+v after index %d", o, last)
			}
			last = o.Index
			if o.XMLURL != "" {
				feeds = append(feeds, Feed{Text: o.Name(), XMLURL: o.XMLURL, HTMLURL: o.HTMLURL})
			}
		}
		var b bytes.Buffer
		if err := Write(&b, Head{Title: "t"}, feeds); err != nil {
			t.Fatal(err)
		}
		back, err := Parse(b.Bytes(), Limits{Outlines: lim.Outlines, Depth: 1})
		if err != nil || len(back) != len(feeds) {
			t.Fatalf("Write of %d feeds parses back as %d, %v:\n%s", len(feeds), len(back), err, b.String())
		}
	})
}
