package feed

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestMergeDelta(t *testing.T) {
	tests := []struct {
		name      string
		previous  string
		delta     string
		wantIDs   []string
		wantTitle string
		contains  []string
	}{
		{
			name:      "rss 2.0: new entries on top",
			previous:  rssDoc("b", "a"),
			delta:     strings.Replace(rssDoc("d", "c"), "Test feed", "Renamed", 1),
			wantIDs:   []string{"d", "c", "b", "a"},
			wantTitle: "Renamed",
		},
		{
			name:     "rss 2.0, delta replaces an entry by id",
			previous: rssDoc("b", "a"),
			delta:    strings.Replace(rssDoc("c", "b"), "Item b", "Item b edited", 1),
			wantIDs:  []string{"c", "b", "a"},
			contains: []string{"Item b edited"},
		},
		{
			name:     "at most MaxMergedEntries",
			previous: rssDoc(numbered(0, MaxMergedEntries)...),
			delta:    rssDoc("new"),
			wantIDs:  append([]string{"new"}, numbered(0, MaxMergedEntries-1)...),
		},
		{
			name:     "rss 2.0, empty delta",
			previous: rssDoc("b", "a"),
			delta:    rssDoc(),
			wantIDs:  []string{"b", "a"},
		},
		{
			name: "rss 2.0 without guids, namespaces from the previous root",
			previous: `<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/"><channel><title>T</title><link>http://e.org/</link><description/>
<item><title>Old</title><link>http://e.org/old</link><dc:creator>Ann</dc:creator></item>
<item><title>Older</title><link>http://e.org/older</link></item></channel></rss>`,
			delta: `<rss version="2.0"><channel><title>T</title><link>http://e.org/</link><description/>
<item><title>New</title><link>http://e.org/new</link></item></channel></rss>`,
			wantIDs:  []string{EntryID("http://e.org/new", "New"), EntryID("http://e.org/old", "Old"), EntryID("http://e.org/older", "Older")},
			contains: []string{`<item xmlns:dc="http://purl.org/dc/elements/1.1/"><title>Old</title>`},
		},
		{
			name: "atom",
			previous: `<feed xmlns="http://www.w3.org/2005/Atom"><title>A</title><id>urn:f</id><updated>2024-01-01T00:00:00Z</updated>
<entry><id>urn:1</id><title>One</title><updated>2024-01-01T00:00:00Z</updated></entry>
<entry><id>urn:0</id><title>Zero</title><updated>2023-01-01T00:00:00Z</updated></entry></feed>`,
			delta: `<feed xmlns="http://www.w3.org/2005/Atom"><title>A</title><id>urn:f</id><updated>2024-01-02T00:00:00Z</updated>
<entry><id>urn:2</id><title>Two</title><updated>2024-01-02T00:00:00Z</updated></entry></feed>`,
			wantIDs: []string{"urn:2", "urn:1", "urn:0"},
		},
		{
			name: "atom with a prefix in the previous document",
			previous: `<a:feed xmlns:a="http://www.w3.org/2005/Atom"><a:title>A</a:title><a:id>urn:f</a:id><a:updated>2024-01-01T00:00:00Z</a:updated>
<a:entry><a:id>urn:1</a:id><a:title>One</a:title><a:updated>2024-01-01T00:00:00Z</a:updated></a:entry>
<a:entry><a:id>urn:0</a:id><a:title>Zero</a:title><a:updated>2023-01-01T00:00:00Z</a:updated></a:entry></a:feed>`,
			delta: `<feed xmlns="http://www.w3.org/2005/Atom"><title>A</title><id>urn:f</id><updated>2024-01-02T00:00:00Z</updated>
<entry><id>urn:2</id><title>Two</title><updated>2024-01-02T00:00:00Z</updated></entry></feed>`,
			wantIDs:  []string{"urn:2", "urn:1", "urn:0"},
			contains: []string{`<a:entry xmlns:a="http://www.w3.org/2005/Atom">`},
		},
		{
			name:     "rss 1.0",
			previous: strings.Replace(rss10, "</rdf:RDF>", `<item rdf:about="http://example.org/r0"><title>R0</title><link>http://example.org/r0</link></item></rdf:RDF>`, 1),
			delta:    strings.Replace(strings.Replace(rss10, "r1", "r2", -1), "R1", "R2", -1),
			wantIDs:  []string{EntryID("http://example.org/r2", "R2"), EntryID("http://example.org/r1", "R1"), EntryID("http://example.org/r0", "R0")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			merged, err := mergeDelta([]byte(tt.previous), []byte(tt.delta))
			if err != nil {
				t.Fatal(err)
			}
			d := mustParse(t, merged, "http://e.org/feed", fetchTime)
			if !d.IsFeed {
				t.Fatalf("merged document is not a feed:\n%s", merged)
			}
			if got := ids(d); !slices.Equal(got, tt.wantIDs) {
				t.Errorf("ids %q, want %q\n%s", got, tt.wantIDs, merged)
			}
			if tt.wantTitle != "" && d.Title != tt.wantTitle {
				t.Errorf("title %q, want the delta's %q", d.Title, tt.wantTitle)
			}
			for _, s := range tt.contains {
				if !strings.Contains(string(merged), s) {
					t.Errorf("merged document lacks %q:\n%s", s, merged)
				}
			}
		})
	}
}

func TestMergeDeltaErrors(t *testing.T) {
	atom := `<feed xmlns="http://www.w3.org/2005/Atom"><id>x</id></feed>`
	for _, tt := range []struct{ name, prev, delta string }{
		{"garbage delta", rssDoc("a"), "garbage"},
		{"garbage previous", "garbage", rssDoc("a")},
		{"different formats", rssDoc("a"), atom},
		{"not a feed", "<html/>", "<html/>"},
	} {
		if _, err := mergeDelta([]byte(tt.prev), []byte(tt.delta)); !errors.Is(err, ErrBadDelta) {
			t.Errorf("%s: err = %v, want ErrBadDelta", tt.name, err)
		}
	}
}

func FuzzMergeDelta(f *testing.F) {
	f.Add([]byte(rssDoc("b", "a")), []byte(rssDoc("c")))
	f.Add([]byte(rss10), []byte(rss10))
	f.Add([]byte(atom10), []byte(atom03))
	f.Fuzz(func(t *testing.T, previous, delta []byte) {
		if len(previous)+len(delta) > 1<<16 {
			return
		}
		out, err := mergeDelta(previous, delta)
		if err != nil {
			if !errors.Is(err, ErrBadDelta) {
				t.Fatalf("error %v is not ErrBadDelta", err)
			}
			return
		}
		if _, err := readXML(out); err != nil {
			t.Fatalf("merged document does not parse: %v", err)
		}
	})
}

func numbered(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprint("e", i))
	}
	return out
}
