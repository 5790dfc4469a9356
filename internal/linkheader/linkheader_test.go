package linkheader

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

var base, _ = url.Parse("https://blog.example/feed.xml")

func TestParse(t *testing.T) {
	cases := []struct {
		name   string
		values []string
		want   []Link
	}{
		{
			name:   "WebSub's hub and self",
			values: []string{`<https://hub.example/>; rel="hub", <https://blog.example/feed.xml>; rel="self"`},
			want: []Link{
				{Target: "https://hub.example/", Rels: []string{"hub"}, Context: base.String(), Params: map[string]string{}},
				{Target: "https://blog.example/feed.xml", Rels: []string{"self"}, Context: base.String(), Params: map[string]string{}},
			},
		},
		{
			name:   "several fields, relative targets, unquoted and mixed-case rel",
			values: []string{`</hub>; rel=Hub`, `<other.xml>;rel=self`},
			want: []Link{
				{Target: "https://blog.example/hub", Rels: []string{"hub"}, Context: base.String(), Params: map[string]string{}},
				{Target: "https://blog.example/other.xml", Rels: []string{"self"}, Context: base.String(), Params: map[string]string{}},
			},
		},
		{
			name:   "a rel list",
			values: []string{`<https://hub.example/>; rel="hub  self"`},
			want:   []Link{{Target: "https://hub.example/", Rels: []string{"hub", "self"}, Context: base.String(), Params: map[string]string{}}},
		},
		{
			name:   "quoted strings hold commas, semicolons, angle brackets and escaped quotes",
			values: []string{`<https://a.example/>; title="x, y; <z> \"q\""; rel="hub", <https://b.example/>; rel=self`},
			want: []Link{
				{Target: "https://a.example/", Rels: []string{"hub"}, Context: base.String(), Params: map[string]string{"title": `x, y; <z> "q"`}},
				{Target: "https://b.example/", Rels: []string{"self"}, Context: base.String(), Params: map[string]string{}},
			},
		},
		{
			name:   "the first rel counts; rev is ignored; names are case-insensitive",
			values: []string{`<https://a.example/>; REL="hub"; rel="self"; rev=made; Type="text/html"`},
			want:   []Link{{Target: "https://a.example/", Rels: []string{"hub"}, Context: base.String(), Params: map[string]string{"type": "text/html"}}},
		},
		{
			name:   "an anchor moves the context",
			values: []string{`<https://hub.example/>; rel="hub"; anchor="/other"`},
			want:   []Link{{Target: "https://hub.example/", Rels: []string{"hub"}, Context: "https://blog.example/other", Params: map[string]string{}}},
		},
		{
			name:   "an extended value is decoded",
			values: []string{`<https://a.example/>; rel=hub; title*=UTF-8'de'n%c3%a4chstes%20Kapitel`},
			want:   []Link{{Target: "https://a.example/", Rels: []string{"hub"}, Context: base.String(), Params: map[string]string{"title*": "nächstes Kapitel"}}},
		},
		{
			name:   "empty list elements and white space",
			values: []string{` , <https://a.example/> ;rel = "hub" ,, `},
			want:   []Link{{Target: "https://a.example/", Rels: []string{"hub"}, Context: base.String(), Params: map[string]string{}}},
		},
		{
			name:   "garbage after the parameters is skipped to the next link",
			values: []string{`<https://a.example/>; rel=hub garbage "with, a comma", <https://b.example/>; rel=self`},
			want: []Link{
				{Target: "https://a.example/", Rels: []string{"hub"}, Context: base.String(), Params: map[string]string{}},
				{Target: "https://b.example/", Rels: []string{"self"}, Context: base.String(), Params: map[string]string{}},
			},
		},
		{
			name:   "an element that is not a link ends the field value; the next field is read",
			values: []string{`<https://a.example/>; rel=hub, https://b.example/; rel=self, <https://c.example/>`, `<https://d.example/>; rel=hub`},
			want: []Link{
				{Target: "https://a.example/", Rels: []string{"hub"}, Context: base.String(), Params: map[string]string{}},
				{Target: "https://d.example/", Rels: []string{"hub"}, Context: base.String(), Params: map[string]string{}},
			},
		},
		{
			name:   "an unclosed target or an unparsable one",
			values: []string{`<https://a.example/; rel=hub`, `<http://[::1>; rel=hub, <https://b.example/>; rel=hub`},
			want:   []Link{{Target: "https://b.example/", Rels: []string{"hub"}, Context: base.String(), Params: map[string]string{}}},
		},
		{
			name:   "fragments are dropped",
			values: []string{`<https://a.example/x#frag>; rel=hub`},
			want:   []Link{{Target: "https://a.example/x", Rels: []string{"hub"}, Context: base.String(), Params: map[string]string{}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Parse(tc.values, base)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse(%q)\n got %+v\nwant %+v", tc.values, got, tc.want)
			}
		})
	}
}

func TestParseWithoutBase(t *testing.T) {
	got := Parse([]string{`</relative>; rel=hub, <https://hub.example/>; rel=hub`}, nil)
	if len(got) != 1 || got[0].Target != "https://hub.example/" || got[0].Context != "" {
		t.Errorf("%+v", got)
	}
}

func TestAboutBaseAndHasRel(t *testing.T) {
	links := Parse([]string{`<https://hub.example/>; rel="hub self", <https://hub.example/2>; rel=hub; anchor="https://else.example/"`}, base)
	if !links[0].AboutBase(base) || links[1].AboutBase(base) {
		t.Errorf("AboutBase: %+v", links)
	}
	if !links[0].HasRel("hub") || !links[0].HasRel("self") || links[0].HasRel("alternate") {
		t.Errorf("HasRel: %+v", links[0])
	}
}

func TestParseBoundsTheLinks(t *testing.T) {
	var b strings.Builder
	for i := range 2 * MaxLinks {
		fmt.Fprintf(&b, "<https://a.example/%d>; rel=hub, ", i)
	}
	if got := Parse([]string{b.String(), b.String()}, base); len(got) != MaxLinks {
		t.Errorf("%d links, want the cap of %d", len(got), MaxLinks)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`<https://hub.example/>; rel="hub", <http://example.org/feed>; rel=self`)
	f.Add(`<a>; title="x, y"; rel="hub self", <b`)
	f.Add(`<a>; title*=UTF-8''%e2%82%ac; anchor="#x"; rel=hub`)
	f.Fuzz(func(t *testing.T, v string) {
		links := Parse(strings.Split(v, "\n"), base)
		if len(links) > MaxLinks {
			t.Fatalf("%d links", len(links))
		}
		for _, l := range links {
			u, err := url.Parse(l.Target)
			if err != nil || !u.IsAbs() {
				t.Fatalf("target %q is not an absolute URL", l.Target)
			}
			for _, r := range l.Rels {
				if r == "" || r != strings.ToLower(r) || strings.ContainsAny(r, " \t") {
					t.Fatalf("relation %q", r)
				}
			}
		}
	})
}
