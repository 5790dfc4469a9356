package feed

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mmcdole/gofeed"

	"github.com/pingd/pingd/hub"
)

// sampleEvents are a node's items as the store gives them, newest first:
// two parsed from a feed, one an owner published with a foreign payload,
// one without any payload.
func sampleEvents(t *testing.T) []hub.Event {
	t.Helper()
	d := mustParse(t, []byte(atom10), "http://example.org/atom.xml", fetchTime)
	r := mustParse(t, []byte(rss2WithGUIDs), "http://example.org/rss.xml", fetchTime)
	evs := []hub.Event{
		{Seq: 5, Kind: hub.EventItem, ItemID: "own-1", Payload: []byte(`<note xmlns="urn:example:note">Owner &amp; note</note>`),
			Title: "Owner note", Summary: "a note", Link: "http://example.org/note", Updated: at("2024-03-09T08:00:00Z")},
		{Seq: 4, Kind: hub.EventItem, ItemID: "bare", Title: "Bare item", Created: at("2024-03-08T08:00:00Z")},
	}
	for i, e := range append(d.Entries, r.Entries...) {
		evs = append(evs, hub.Event{Seq: int64(3 - i), Kind: hub.EventItem, ItemID: e.ID, Payload: e.Payload,
			Title: e.Title, Summary: e.Summary, Link: e.Link, Updated: e.Updated})
	}
	return evs[:5]
}

var meta = FeedMeta{
	Title:        "Node <demo>",
	Subtitle:     "Demo & co",
	SelfURL:      "https://pingd.example/atom/demo",
	HubURL:       "https://pingd.example/websub",
	AlternateURL: "https://example.org/",
	Updated:      at("2024-03-10T12:00:00Z"),
}

type atomFeedXML struct {
	XMLName  xml.Name `xml:"http://www.w3.org/2005/Atom feed"`
	ID       string   `xml:"http://www.w3.org/2005/Atom id"`
	Title    string   `xml:"http://www.w3.org/2005/Atom title"`
	Subtitle string   `xml:"http://www.w3.org/2005/Atom subtitle"`
	Updated  string   `xml:"http://www.w3.org/2005/Atom updated"`
	Links    []struct {
		Rel  string `xml:"rel,attr"`
		Href string `xml:"href,attr"`
	} `xml:"http://www.w3.org/2005/Atom link"`
	Author  string         `xml:"http://www.w3.org/2005/Atom author>name"`
	Entries []atomEntryXML `xml:"http://www.w3.org/2005/Atom entry"`
}

func TestAtomFeed(t *testing.T) {
	evs := sampleEvents(t)
	out := AtomFeed(meta, append(evs, hub.Event{Kind: hub.EventRetract, ItemID: "x"}))

	var f atomFeedXML
	if err := xml.Unmarshal(out, &f); err != nil {
		t.Fatalf("not well-formed: %v\n%s", err, out)
	}
	links := map[string]string{}
	for _, l := range f.Links {
		links[l.Rel] = l.Href
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"id", f.ID, meta.SelfURL},
		{"title", f.Title, meta.Title},
		{"subtitle", f.Subtitle, meta.Subtitle},
		{"updated", f.Updated, "2024-03-10T12:00:00Z"},
		{"self", links["self"], meta.SelfURL},
		{"hub", links["hub"], meta.HubURL},
		{"alternate", links["alternate"], meta.AlternateURL},
		{"author", f.Author, "pingd"},
		{"entries", len(f.Entries), 5},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	for i, e := range f.Entries {
		if e.ID != AtomID(evs[i].ItemID) {
			t.Errorf("entry %d id %q, want AtomID(%q)", i, e.ID, evs[i].ItemID)
		}
		if e.Updated == "" {
			t.Errorf("entry %d has no updated", i)
		}
	}
	if f.Entries[0].Title.Text != "Owner note" || f.Entries[0].alternate() != "http://example.org/note" ||
		f.Entries[0].Content == nil || f.Entries[0].Content.Type != "application/xml" {
		t.Errorf("owner entry %+v", f.Entries[0])
	}
	if !bytes.Contains(out, []byte(`<note xmlns="urn:example:note">Owner &amp; note</note>`)) {
		t.Errorf("foreign payload not kept as XML content:\n%s", out)
	}
	if f.Entries[1].Title.Text != "Bare item" || f.Entries[1].Updated != "2024-03-08T08:00:00Z" {
		t.Errorf("bare entry %+v", f.Entries[1])
	}
	if f.Entries[2].Title.Text != "B two" || f.Entries[2].Content == nil || f.Entries[2].Content.Text != "<p>Body B</p>" {
		t.Errorf("feed entry %+v", f.Entries[2])
	}

	// gofeed reads the same.
	gf, err := gofeed.NewParser().Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if gf.Title != meta.Title || gf.FeedLink != meta.SelfURL || len(gf.Items) != 5 {
		t.Errorf("gofeed: title %q self %q items %d", gf.Title, gf.FeedLink, len(gf.Items))
	}
	for i, it := range gf.Items {
		if it.GUID != AtomID(evs[i].ItemID) {
			t.Errorf("gofeed item %d id %q", i, it.GUID)
		}
	}
	if gf.Items[2].Link != "http://example.org/b" || gf.Items[2].Authors[0].Name != "Ann" {
		t.Errorf("gofeed item 2: %+v", gf.Items[2])
	}
	// Metadata precede the entries, <updated> last: where Patch adds.
	if i, j := bytes.Index(out, []byte("<updated>2024-03-10T12:00:00Z</updated>")), bytes.Index(out, []byte("<entry")); i < 0 || j < i {
		t.Errorf("feed <updated> is not the last metadata element:\n%s", out)
	}
}

func TestAtomFeedEmpty(t *testing.T) {
	out := AtomFeed(FeedMeta{Title: "empty", SelfURL: "https://p.example/atom/e"}, nil)
	var f atomFeedXML
	if err := xml.Unmarshal(out, &f); err != nil {
		t.Fatal(err)
	}
	if f.Updated != "1970-01-01T00:00:00Z" || len(f.Entries) != 0 {
		t.Errorf("empty feed %+v", f)
	}
}

type rssXML struct {
	XMLName xml.Name `xml:"rss"`
	Version string   `xml:"version,attr"`
	Channel struct {
		// Namespaced fields first: encoding/xml gives an element to the
		// first field that matches, and "link" matches atom:link too.
		AtomLinks []struct {
			Rel  string `xml:"rel,attr"`
			Href string `xml:"href,attr"`
		} `xml:"http://www.w3.org/2005/Atom link"`
		Title       string `xml:"title"`
		Link        string `xml:"link"`
		Description string `xml:"description"`
		TTL         int    `xml:"ttl"`
		Cloud       struct {
			Domain            string `xml:"domain,attr"`
			Port              int    `xml:"port,attr"`
			Path              string `xml:"path,attr"`
			RegisterProcedure string `xml:"registerProcedure,attr"`
			Protocol          string `xml:"protocol,attr"`
		} `xml:"cloud"`
		Items []struct {
			Title string `xml:"title"`
			Link  string `xml:"link"`
			GUID  struct {
				IsPermaLink string `xml:"isPermaLink,attr"`
				Value       string `xml:",chardata"`
			} `xml:"guid"`
			PubDate     string   `xml:"pubDate"`
			Description string   `xml:"description"`
			Categories  []string `xml:"category"`
		} `xml:"item"`
	} `xml:"channel"`
}

func TestRSSFeed(t *testing.T) {
	evs := sampleEvents(t)
	cloud := &Cloud{Domain: "pingd.example", Port: 443, Path: "/RPC2", RegisterProcedure: "rssCloud.pleaseNotify", Protocol: "xml-rpc"}
	out := RSSFeed(FeedMeta{Title: "Node", SelfURL: "https://pingd.example/rss/demo", HubURL: "https://pingd.example/websub"}, cloud, 60, evs)
	var r rssXML
	if err := xml.Unmarshal(out, &r); err != nil {
		t.Fatalf("not well-formed: %v\n%s", err, out)
	}
	ch := r.Channel
	links := map[string]string{}
	for _, l := range ch.AtomLinks {
		links[l.Rel] = l.Href
	}
	if r.Version != "2.0" || ch.Title != "Node" || ch.Link != "https://pingd.example/rss/demo" || ch.TTL != 60 {
		t.Errorf("channel %+v", ch)
	}
	if ch.Cloud.Domain != "pingd.example" || ch.Cloud.Port != 443 || ch.Cloud.Path != "/RPC2" ||
		ch.Cloud.RegisterProcedure != "rssCloud.pleaseNotify" || ch.Cloud.Protocol != "xml-rpc" {
		t.Errorf("cloud %+v", ch.Cloud)
	}
	if links["self"] != "https://pingd.example/rss/demo" || links["hub"] != "https://pingd.example/websub" {
		t.Errorf("atom links %v", links)
	}
	if len(ch.Items) != 5 {
		t.Fatalf("%d items", len(ch.Items))
	}
	for i, it := range ch.Items {
		if it.GUID.Value != evs[i].ItemID || it.GUID.IsPermaLink != "false" {
			t.Errorf("item %d guid %+v, want %q isPermaLink=false", i, it.GUID, evs[i].ItemID)
		}
		if _, err := time.Parse(time.RFC1123Z, it.PubDate); err != nil {
			t.Errorf("item %d pubDate %q: %v", i, it.PubDate, err)
		}
	}
	b := ch.Items[2]
	if b.Title != "B two" || b.Link != "http://example.org/b" || b.Description != "Summary B" || b.PubDate != "Fri, 01 Mar 2024 10:00:00 +0000" {
		t.Errorf("item from Atom: %+v", b)
	}
	if ch.Items[0].Title != "Owner note" || ch.Items[0].Description != "a note" || ch.Items[0].Link != "http://example.org/note" {
		t.Errorf("owner item %+v", ch.Items[0])
	}
	if ch.Items[4].Description != "two" {
		t.Errorf("item from RSS: %+v", ch.Items[4])
	}

	gf, err := gofeed.NewParser().Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if gf.FeedType != "rss" || len(gf.Items) != 5 || gf.Items[2].GUID != evs[2].ItemID || gf.Items[2].PublishedParsed == nil {
		t.Errorf("gofeed reads %+v", gf)
	}
	// Parsing pingd's own RSS gives the same item ids back.
	d := mustParse(t, out, "https://pingd.example/rss/demo", fetchTime)
	want := []string{}
	for _, ev := range evs {
		want = append(want, ev.ItemID)
	}
	if got := ids(d); !slices.Equal(got, want) {
		t.Errorf("ids %q, want %q", got, want)
	}

	bare := RSSFeed(FeedMeta{Title: "x", SelfURL: "https://p/rss"}, nil, 0, nil)
	if bytes.Contains(bare, []byte("<cloud")) || bytes.Contains(bare, []byte("<ttl")) {
		t.Errorf("cloud or ttl without being asked:\n%s", bare)
	}
}

func atomEntryIDs(t *testing.T, doc []byte) []string {
	t.Helper()
	var f atomFeedXML
	if err := xml.Unmarshal(doc, &f); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	var out []string
	for _, e := range f.Entries {
		out = append(out, e.ID)
	}
	return out
}

func TestPatchRoundTrip(t *testing.T) {
	evs := sampleEvents(t) // newest first
	quoted := hub.Event{Seq: 6, Kind: hub.EventItem, ItemID: `it's "quoted"`, Title: "Quotes", Updated: at("2024-03-10T09:00:00Z")}
	tests := []struct {
		name     string
		previous []hub.Event // newest first
		added    []hub.Event // log order
		removed  []string
		next     []hub.Event // newest first
	}{
		{"into an empty feed", nil, []hub.Event{evs[4], evs[3]}, nil, []hub.Event{evs[3], evs[4]}},
		{"on top of entries", []hub.Event{evs[3], evs[4]}, []hub.Event{evs[2], evs[1], evs[0]}, nil, evs},
		{"remove only", evs, nil, []string{evs[1].ItemID, evs[3].ItemID}, []hub.Event{evs[0], evs[2], evs[4]}},
		{"remove the last entry", []hub.Event{evs[0]}, nil, []string{evs[0].ItemID}, nil},
		{"add and remove", []hub.Event{quoted, evs[3], evs[4]}, []hub.Event{evs[2]}, []string{quoted.ItemID, evs[4].ItemID}, []hub.Event{evs[2], evs[3]}},
		{"replace by id", []hub.Event{evs[3], evs[4]}, []hub.Event{{Seq: 9, Kind: hub.EventItem, ItemID: evs[3].ItemID, Title: "Edited", Updated: at("2024-03-11T00:00:00Z")}},
			[]string{evs[3].ItemID}, []hub.Event{{Seq: 9, Kind: hub.EventItem, ItemID: evs[3].ItemID, Title: "Edited", Updated: at("2024-03-11T00:00:00Z")}, evs[4]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := AtomFeed(meta, tt.previous)
			p := Patch(tt.added, tt.removed)
			got, err := ApplyPatch(prev, p)
			if err != nil {
				t.Fatalf("%v\npatch:\n%s", err, p)
			}
			want := AtomFeed(meta, tt.next)
			if g, w := atomEntryIDs(t, got), atomEntryIDs(t, want); !slices.Equal(g, w) {
				t.Fatalf("entries %q, want %q\n%s", g, w, got)
			}
			// Entry by entry, the patched document equals the fresh one.
			var gf, wf atomFeedXML
			xml.Unmarshal(got, &gf)
			xml.Unmarshal(want, &wf)
			if !reflect.DeepEqual(gf.Entries, wf.Entries) {
				t.Errorf("entries differ:\n got %+v\nwant %+v", gf.Entries, wf.Entries)
			}
			// And it is still a feed gofeed reads, in the same order.
			pf, err := gofeed.NewParser().Parse(bytes.NewReader(got))
			if err != nil || len(pf.Items) != len(tt.next) {
				t.Fatalf("gofeed: %v, %d items", err, len(pf.Items))
			}
		})
	}
}

func TestPatchDocument(t *testing.T) {
	evs := sampleEvents(t)
	p := Patch([]hub.Event{evs[1], evs[0]}, []string{`a'b"c`})
	type op struct {
		XMLName xml.Name
		Sel     string `xml:"sel,attr"`
		Pos     string `xml:"pos,attr"`
		Entries []struct {
			ID string `xml:"http://www.w3.org/2005/Atom id"`
		} `xml:"http://www.w3.org/2005/Atom entry"`
	}
	var doc struct {
		XMLName xml.Name
		Ops     []op `xml:",any"`
	}
	if err := xml.Unmarshal(p, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.XMLName != (xml.Name{Space: PatchNS, Local: "patch"}) || len(doc.Ops) != 2 {
		t.Fatalf("patch %+v", doc)
	}
	rm, add := doc.Ops[0], doc.Ops[1]
	if rm.XMLName.Local != "remove" || rm.Sel != `/a:feed/a:entry[a:id='`+AtomID(`a'b"c`)+`']` {
		t.Errorf("remove %+v", rm)
	}
	if add.XMLName.Local != "add" || add.Sel != "/a:feed/a:updated" || add.Pos != "after" || len(add.Entries) != 2 ||
		add.Entries[0].ID != AtomID(evs[0].ItemID) || add.Entries[1].ID != AtomID(evs[1].ItemID) {
		t.Errorf("add %+v (want newest first)", add)
	}
	if !bytes.Contains(p, []byte(`xmlns:a="http://www.w3.org/2005/Atom"`)) {
		t.Error("Atom namespace not bound on the patch")
	}
}

func TestXPathLiteral(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "'plain'"},
		{"it's", `"it's"`},
		{`say "hi"`, `'say "hi"'`},
		{`a'b"c`, `concat('a', "'", 'b"c')`},
		{`'"'`, `concat("'", '"', "'")`},
		{"", "''"},
	}
	for _, tt := range tests {
		got := XPathLiteral(tt.in)
		if got != tt.want {
			t.Errorf("XPathLiteral(%q) = %s, want %s", tt.in, got, tt.want)
		}
		sc := &selScanner{s: got}
		if v, err := sc.literal(); err != nil || v != tt.in || !sc.done() {
			t.Errorf("literal %s reads back as %q, %v", got, v, err)
		}
	}
}

func TestApplyPatch(t *testing.T) {
	doc := `<?xml version="1.0"?>
<root xmlns="urn:r" xmlns:x="urn:x"><a id="1">one</a><a id="2">two</a><b><c>deep</c></b><x:d>ns</x:d><e>it's "q"</e></root>`
	ns := `xmlns:p="urn:ietf:rfc:7351" xmlns:r="urn:r" xmlns:y="urn:x"`
	tests := []struct {
		name    string
		patch   string
		want    string // substring of the result
		wantErr string
	}{
		{"append", `<p:patch ` + ns + `><p:add sel="/r:root/r:b"><r:n>new</r:n></p:add></p:patch>`, `<c>deep</c><r:n xmlns:r="urn:r">new</r:n></b>`, ""},
		{"prepend", `<p:patch ` + ns + `><p:add sel="/r:root" pos="prepend"><n xmlns="urn:r"/></p:add></p:patch>`, `<root xmlns="urn:r" xmlns:x="urn:x"><n/><a id="1">`, ""},
		{"before", `<p:patch ` + ns + `><p:add sel="/r:root/r:a[@id='2']" pos="before"><n xmlns="urn:r"/></p:add></p:patch>`, `<a id="1">one</a><n/><a id="2">`, ""},
		{"after with text", `<p:patch ` + ns + `><p:add sel="/r:root/r:a[2]" pos="after">T<!--c--></p:add></p:patch>`, `<a id="2">two</a>T<!--c--><b>`, ""},
		{"remove by child text", `<p:patch ` + ns + `><p:remove sel="/r:root/r:b[r:c='deep']"/></p:patch>`, `<a id="2">two</a><x:d>`, ""},
		{"remove by text()", `<p:patch ` + ns + `><p:remove sel="/r:root/r:a[text()='one']"/></p:patch>`, `<root xmlns="urn:r" xmlns:x="urn:x"><a id="2">`, ""},
		{"other prefix, same namespace", `<p:patch ` + ns + `><p:remove sel="/r:root/y:d"/></p:patch>`, `</b><e>`, ""},
		{"concat literal", `<p:patch ` + ns + `><p:remove sel="/r:root/r:e[text()=concat('it', &quot;'&quot;, 's &quot;q&quot;')]"/></p:patch>`, `ns</x:d></root>`, ""},
		{"default namespace of the patch", `<p:patch xmlns:p="urn:ietf:rfc:7351" xmlns="urn:r"><p:remove sel="/root/b"/></p:patch>`, `<a id="2">two</a><x:d>`, ""},
		{"star", `<p:patch ` + ns + `><p:remove sel="/*/*[3]"/></p:patch>`, `<a id="2">two</a><x:d>`, ""},
		{"replace", `<p:patch ` + ns + `><p:replace sel="/r:root/r:a[1]"><r:z/></p:replace></p:patch>`, `<root xmlns="urn:r" xmlns:x="urn:x"><r:z xmlns:r="urn:r"/><a id="2">`, ""},
		{"no match", `<p:patch ` + ns + `><p:remove sel="/r:root/r:nope"/></p:patch>`, "", "matches nothing"},
		{"several matches", `<p:patch ` + ns + `><p:remove sel="/r:root/r:a"/></p:patch>`, "", "matches 2 elements"},
		{"undeclared prefix", `<p:patch ` + ns + `><p:remove sel="/q:root"/></p:patch>`, "", "not declared"},
		{"no-namespace name does not match", `<p:patch xmlns:p="urn:ietf:rfc:7351"><p:remove sel="/root/a[1]"/></p:patch>`, "", "matches nothing"},
		{"remove the root", `<p:patch ` + ns + `><p:remove sel="/r:root"/></p:patch>`, "", "root"},
		{"sibling of the root", `<p:patch ` + ns + `><p:add sel="/r:root" pos="after"><x/></p:add></p:patch>`, "", "root"},
		{"bad pos", `<p:patch ` + ns + `><p:add sel="/r:root" pos="inside"><x/></p:add></p:patch>`, "", "unknown pos"},
		{"attribute add", `<p:patch ` + ns + `><p:add sel="/r:root" type="@x">v</p:add></p:patch>`, "", "not supported"},
		{"unknown op", `<p:patch ` + ns + `><p:frob sel="/r:root"/></p:patch>`, "", "unknown operation"},
		{"no sel", `<p:patch ` + ns + `><p:remove/></p:patch>`, "", "no sel"},
		{"bad selector", `<p:patch ` + ns + `><p:remove sel="r:root"/></p:patch>`, "", "want /"},
		{"unterminated literal", `<p:patch ` + ns + `><p:remove sel="/r:root/r:a[@id='1]"/></p:patch>`, "", "unterminated"},
		{"wrong root", `<patch xmlns="urn:other"/>`, "", "want <patch"},
		{"not XML", `<<<`, "", "patch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := ApplyPatch([]byte(doc), []byte(tt.patch))
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrPatch) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("result lacks %q:\n%s", tt.want, out)
			}
			var v any
			if err := xml.Unmarshal(out, &v); err != nil && !strings.Contains(err.Error(), "unknown type") {
				t.Errorf("result not well-formed: %v", err)
			}
		})
	}
	if _, err := ApplyPatch([]byte("not xml"), []byte(`<p:patch xmlns:p="urn:ietf:rfc:7351"/>`)); !errors.Is(err, ErrPatch) {
		t.Errorf("bad document: %v", err)
	}
}

func FuzzApplyPatch(f *testing.F) {
	evs := []hub.Event{
		{Seq: 1, Kind: hub.EventItem, ItemID: "a", Title: "A"},
		{Seq: 2, Kind: hub.EventItem, ItemID: "b'\"", Title: "B"},
	}
	prev := AtomFeed(FeedMeta{Title: "f", SelfURL: "https://p/atom/f"}, evs[:1])
	f.Add(prev, Patch(evs[1:], []string{"a"}))
	f.Add(prev, []byte(`<p:patch xmlns:p="urn:ietf:rfc:7351" xmlns:a="http://www.w3.org/2005/Atom"><p:add sel="/a:feed/a:entry[1]" pos="before"><x/></p:add></p:patch>`))
	f.Add([]byte(`<r><a/></r>`), []byte(`<p:patch xmlns:p="urn:ietf:rfc:7351"><p:replace sel="/r/a[1]"><b/></p:replace></p:patch>`))
	f.Fuzz(func(t *testing.T, doc, patch []byte) {
		if len(doc)+len(patch) > 1<<16 {
			return
		}
		out, err := ApplyPatch(doc, patch)
		if err != nil {
			return
		}
		// A result is always a document ApplyPatch can read again.
		if _, err := readXML(out); err != nil {
			t.Fatalf("result does not parse: %v\n%s", err, out)
		}
	})
}

// TestCompleteEntry: an entry an owner publishes with only some of the
// elements pingd promises gets the rest, exactly as the node's Atom feed
// shows it.
func TestCompleteEntry(t *testing.T) {
	updated := at("2024-03-09T08:00:00Z")
	cases := []struct {
		name      string
		e         hub.Entry
		wantTitle string
		wantLink  string
		wantUpd   string
	}{
		{"title only", hub.Entry{ID: "i1", Link: "http://pingd.example/feeds/n", Updated: updated,
			Payload: []byte(`<entry xmlns="http://www.w3.org/2005/Atom"><title>Only a title</title></entry>`)},
			"Only a title", "http://pingd.example/feeds/n", "2024-03-09T08:00:00Z"},
		{"nothing", hub.Entry{ID: "i2", Link: "http://pingd.example/feeds/n", Updated: updated,
			Payload: []byte(`<entry xmlns="http://www.w3.org/2005/Atom"/>`)},
			"i2", "http://pingd.example/feeds/n", "2024-03-09T08:00:00Z"},
		{"a prefix, its own id, link and time", hub.Entry{ID: "tag:example.org,2024:3", Link: "http://pingd.example/feeds/n", Updated: updated,
			Payload: []byte(`<a:entry xmlns:a="http://www.w3.org/2005/Atom"><a:id>urn:other</a:id><a:title>T</a:title>` +
				`<a:link rel="enclosure" href="http://example.org/x.mp3"/><a:updated>2020-01-01T00:00:00Z</a:updated></a:entry>`)},
			"T", "", "2020-01-01T00:00:00Z"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done := CompleteEntry(tc.e)
			var got atomEntryXML
			if err := xml.Unmarshal(done.Payload, &got); err != nil {
				t.Fatalf("not an Atom entry: %v\n%s", err, done.Payload)
			}
			alternate := ""
			for _, l := range got.Links {
				if l.Rel == "alternate" {
					alternate = l.Href
				}
			}
			if got.ID != AtomID(tc.e.ID) || got.Title.Text != tc.wantTitle || alternate != tc.wantLink || got.Updated != tc.wantUpd {
				t.Errorf("completed entry %+v, want id %s, title %q, alternate link %q, updated %s\n%s",
					got, AtomID(tc.e.ID), tc.wantTitle, tc.wantLink, tc.wantUpd, done.Payload)
			}
			if len(got.Links) == 0 {
				t.Errorf("no link at all: %s", done.Payload)
			}
			// Completing again changes nothing, and the node's feed shows
			// the same entry.
			if again := CompleteEntry(done); !bytes.Equal(again.Payload, done.Payload) {
				t.Errorf("completing twice changed the entry:\n%s\n%s", done.Payload, again.Payload)
			}
			var f atomFeedXML
			if err := xml.Unmarshal(AtomFeed(meta, []hub.Event{{Kind: hub.EventItem, ItemID: done.ID, Payload: done.Payload}}), &f); err != nil {
				t.Fatal(err)
			}
			if len(f.Entries) != 1 || !reflect.DeepEqual(f.Entries[0], got) {
				t.Errorf("the feed shows %+v, XMPP %+v", f.Entries, got)
			}
		})
	}
}
