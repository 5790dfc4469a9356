package discovery

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/beevik/etree"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/nodeurl"
)

// hostileNodes are node names that would break naive rendering: markup
// characters, quotes, entities, URL syntax, non-ASCII and a 255-byte name.
var hostileNodes = []string{
	"demo",
	"feeds/TheUniversalGadget",
	`quote"d'and<tag>&amp;`,
	"]]></URI><x/>",
	"a&b=c?d#e%2F f",
	"ünïcødé/日本語/🙂",
	"..",
	".",
	"?method=subscribe",
	"spaces  and +plus+ and ;semi,colon:@",
	strings.Repeat("é", 127) + "x",
}

// xrdsDoc maps the XRDS tree with full namespace names, so that a wrong
// namespace or prefix binding makes a field come out empty.
type xrdsDoc struct {
	XMLName xml.Name `xml:"xri://$xrds XRDS"`
	Ref     string   `xml:"ref,attr"`
	XRDs    []struct {
		Services []xrdsService `xml:"xri://$xrd*($v*2.0) Service"`
	} `xml:"xri://$xrd*($v*2.0) XRD"`
}

type xrdsService struct {
	Types []string `xml:"xri://$xrd*($v*2.0) Type"`
	URIs  []struct {
		Method string `xml:"http://getpingd.com/core/getpingd-1.0 http-method,attr"`
		Value  string `xml:",chardata"`
	} `xml:"xri://$xrd*($v*2.0) URI"`
	Accepts []struct {
		Type  string `xml:"type,attr"`
		Diffs []struct {
			Type string `xml:"type,attr"`
		} `xml:"http://getpingd.com/core/getpingd-1.0 SupportsDiff"`
	} `xml:"http://getpingd.com/core/getpingd-1.0 Accept"`
	PubSubs []struct {
		JID      string `xml:"jid,attr"`
		Node     string `xml:"node,attr"`
		Security string `xml:"security,attr"`
	} `xml:"http://getpingd.com/extensions/xmpp/getpingd-1.0 PubSub"`
}

func descriptorFor(t *testing.T, node string, model hub.AccessModel, source string) Descriptor {
	t.Helper()
	d, err := NewDescriptor("https://pingd.example.org/base/", "pubsub.example.org",
		&hub.Node{Name: node, NodeConfig: hub.NodeConfig{AccessModel: model}, SourceURL: source})
	if err != nil {
		t.Fatalf("NewDescriptor(%q): %v", node, err)
	}
	return d
}

func TestXRDSParsesBackWithNamespaces(t *testing.T) {
	for _, node := range hostileNodes {
		for _, model := range []hub.AccessModel{hub.AccessOpen, hub.AccessWhitelist} {
			t.Run(string(model)+"/"+node, func(t *testing.T) {
				d := descriptorFor(t, node, model, "https://www.example.com/page?a=1&b=<2>")
				wantDescriptor := "https://pingd.example.org/base/feeds/" + nodeurl.PathSegment(node)
				if d.DescriptorURL != wantDescriptor {
					t.Fatalf("DescriptorURL = %q, want %q", d.DescriptorURL, wantDescriptor)
				}
				doc := XRDS(d)

				var got xrdsDoc
				if err := xml.Unmarshal(doc, &got); err != nil {
					t.Fatalf("unmarshal: %v\n%s", err, doc)
				}
				// The source is named for open nodes only: a whitelist
				// node's descriptor is public, its source is not.
				wantRef := map[hub.AccessModel]string{hub.AccessOpen: "https://www.example.com/page?a=1&b=<2>", hub.AccessWhitelist: ""}[model]
				if got.Ref != wantRef {
					t.Errorf("ref = %q, want %q", got.Ref, wantRef)
				}
				if len(got.XRDs) != 1 || len(got.XRDs[0].Services) != 1 {
					t.Fatalf("want one XRD with one Service, got %+v", got)
				}
				s := got.XRDs[0].Services[0]
				if !slices.Equal(s.Types, []string{getpingd.ServiceSubscribe}) {
					t.Errorf("Type = %q", s.Types)
				}
				if len(s.URIs) != 2 ||
					s.URIs[0].Method != "SUBSCRIBE" || s.URIs[0].Value != wantDescriptor ||
					s.URIs[1].Method != "POST" || s.URIs[1].Value != wantDescriptor+"?method=subscribe" {
					t.Errorf("URIs = %+v", s.URIs)
				}
				if len(s.Accepts) != 2 ||
					s.Accepts[0].Type != "application/getpingd+http+subscribe+xml" ||
					s.Accepts[1].Type != "application/getpingd+xmpp+subscribe+xml" {
					t.Errorf("Accepts = %+v", s.Accepts)
				}
				for _, a := range s.Accepts {
					if len(a.Diffs) != 1 || a.Diffs[0].Type != "application/patch-ops+xml" {
						t.Errorf("Accept %s SupportsDiff = %+v", a.Type, a.Diffs)
					}
				}
				wantSecurity := map[hub.AccessModel]string{hub.AccessOpen: "none", hub.AccessWhitelist: "whitelist"}[model]
				if len(s.PubSubs) != 1 || s.PubSubs[0].JID != "pubsub.example.org" ||
					s.PubSubs[0].Node != node || s.PubSubs[0].Security != wantSecurity {
					t.Errorf("PubSub = %+v, want node %q security %q", s.PubSubs, node, wantSecurity)
				}
			})
		}
	}
}

// xmlNode is one element of a parsed document, compared as a whole tree.
type xmlNode struct {
	Space, Local string
	Attrs        map[string]string // "{space}local" → value, namespace declarations left out
	Text         string
	Children     []*xmlNode
}

func parseTree(t *testing.T, doc []byte) *xmlNode {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var stack []*xmlNode
	var root *xmlNode
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("parse: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &xmlNode{Space: tok.Name.Space, Local: tok.Name.Local, Attrs: map[string]string{}}
			for _, a := range tok.Attr {
				if a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns") {
					continue
				}
				n.Attrs["{"+a.Name.Space+"}"+a.Name.Local] = a.Value
			}
			if len(stack) == 0 {
				if root != nil {
					t.Fatalf("second root element %s", tok.Name.Local)
				}
				root = n
			} else {
				parent := stack[len(stack)-1]
				parent.Children = append(parent.Children, n)
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].Text += strings.TrimSpace(string(tok))
			} else if strings.TrimSpace(string(tok)) != "" {
				t.Fatalf("text outside the root: %q", tok)
			}
		case xml.Directive:
			t.Fatalf("unexpected directive %q", tok)
		}
	}
	return root
}

func TestXRDSIsExactlyTheDesignTree(t *testing.T) {
	const (
		xrd  = NSXRD
		gp   = getpingd.NSGetPingd
		gpx  = getpingd.NSGetPingdXMPP
		desc = "https://pingd.example.org/base/feeds/feeds%2FTheUniversalGadget"
	)
	diff := func() *xmlNode {
		return &xmlNode{Space: gp, Local: "SupportsDiff", Attrs: map[string]string{"{}type": "application/patch-ops+xml"}}
	}
	want := &xmlNode{Space: NSXRDS, Local: "XRDS", Attrs: map[string]string{}, Children: []*xmlNode{
		{Space: xrd, Local: "XRD", Attrs: map[string]string{}, Children: []*xmlNode{
			{Space: xrd, Local: "Service", Attrs: map[string]string{}, Children: []*xmlNode{
				{Space: xrd, Local: "Type", Attrs: map[string]string{}, Text: "http://getpingd.com/services/subscribe"},
				{Space: xrd, Local: "URI", Attrs: map[string]string{"{" + gp + "}http-method": "SUBSCRIBE"}, Text: desc},
				{Space: xrd, Local: "URI", Attrs: map[string]string{"{" + gp + "}http-method": "POST"}, Text: desc + "?method=subscribe"},
				{Space: gp, Local: "Accept", Attrs: map[string]string{"{}type": "application/getpingd+http+subscribe+xml"}, Children: []*xmlNode{diff()}},
				{Space: gp, Local: "Accept", Attrs: map[string]string{"{}type": "application/getpingd+xmpp+subscribe+xml"}, Children: []*xmlNode{diff()}},
				{Space: gpx, Local: "PubSub", Attrs: map[string]string{"{}jid": "pubsub.example.org", "{}node": "feeds/TheUniversalGadget", "{}security": "whitelist"}},
			}},
		}},
	}}
	// A whitelist node's document names no source: no ref attribute, not
	// an empty one.
	d := descriptorFor(t, "feeds/TheUniversalGadget", hub.AccessWhitelist, "https://www.example.com/page")
	got := parseTree(t, XRDS(d))
	compareTree(t, "/", got, want)

	// An open node's names its source in the root's ref.
	d = descriptorFor(t, "feeds/TheUniversalGadget", hub.AccessOpen, "https://www.example.com/page")
	if root := parseTree(t, XRDS(d)); len(root.Attrs) != 1 || root.Attrs["{}ref"] != "https://www.example.com/page" {
		t.Errorf("root attributes of an open node = %v", root.Attrs)
	}
}

func compareTree(t *testing.T, path string, got, want *xmlNode) {
	t.Helper()
	path += want.Local
	if got.Space != want.Space || got.Local != want.Local {
		t.Errorf("%s: element {%s}%s, want {%s}%s", path, got.Space, got.Local, want.Space, want.Local)
		return
	}
	if len(got.Attrs) != len(want.Attrs) {
		t.Errorf("%s: attributes %v, want %v", path, got.Attrs, want.Attrs)
	}
	for k, v := range want.Attrs {
		if got.Attrs[k] != v {
			t.Errorf("%s: attribute %s = %q, want %q", path, k, got.Attrs[k], v)
		}
	}
	if got.Text != want.Text {
		t.Errorf("%s: text %q, want %q", path, got.Text, want.Text)
	}
	if len(got.Children) != len(want.Children) {
		t.Errorf("%s: %d children, want %d", path, len(got.Children), len(want.Children))
		return
	}
	for i := range want.Children {
		compareTree(t, path+"/", got.Children[i], want.Children[i])
	}
}

// TestXRDSPrefixesWithEtree checks the literal prefixes and their bindings,
// which namespace-resolving parsers hide: Yadis clients look for the
// xrds:XRDS root and the default XRD namespace.
func TestXRDSPrefixesWithEtree(t *testing.T) {
	for _, node := range hostileNodes {
		t.Run(node, func(t *testing.T) {
			d := descriptorFor(t, node, hub.AccessOpen, "")
			doc := etree.NewDocument()
			if err := doc.ReadFromBytes(XRDS(d)); err != nil {
				t.Fatalf("etree: %v", err)
			}
			root := doc.Root()
			if root == nil || root.FullTag() != "xrds:XRDS" || root.NamespaceURI() != NSXRDS {
				t.Fatalf("root = %v", root)
			}
			for key, want := range map[string]string{
				"xmlns:xrds":          "xri://$xrds",
				"xmlns":               "xri://$xrd*($v*2.0)",
				"xmlns:getpingd":      "http://getpingd.com/core/getpingd-1.0",
				"xmlns:getpingd-xmpp": "http://getpingd.com/extensions/xmpp/getpingd-1.0",
			} {
				if got := root.SelectAttrValue(key, "<missing>"); got != want {
					t.Errorf("%s = %q, want %q", key, got, want)
				}
			}
			if a := root.SelectAttr("ref"); a != nil {
				t.Errorf("ref written without a Ref: %q", a.Value)
			}
			svc := root.FindElement("./XRD/Service")
			if svc == nil || svc.NamespaceURI() != NSXRD {
				t.Fatalf("no XRD/Service in the XRD namespace")
			}
			var tags []string
			for _, c := range svc.ChildElements() {
				tags = append(tags, c.FullTag())
			}
			wantTags := []string{"Type", "URI", "URI", "getpingd:Accept", "getpingd:Accept", "getpingd-xmpp:PubSub"}
			if !slices.Equal(tags, wantTags) {
				t.Errorf("Service children = %q, want %q", tags, wantTags)
			}
			uris := svc.SelectElements("URI")
			if len(uris) != 2 {
				t.Fatalf("%d URI elements", len(uris))
			}
			for i, method := range []string{"SUBSCRIBE", "POST"} {
				a := uris[i].SelectAttr("getpingd:http-method")
				if a == nil || a.Value != method || a.NamespaceURI() != getpingd.NSGetPingd {
					t.Errorf("URI %d http-method = %+v", i, a)
				}
			}
			if uris[0].Text() != d.DescriptorURL || uris[1].Text() != d.DescriptorURL+"?method=subscribe" {
				t.Errorf("URIs = %q, %q", uris[0].Text(), uris[1].Text())
			}
			for _, acc := range svc.SelectElements("getpingd:Accept") {
				if acc.NamespaceURI() != getpingd.NSGetPingd {
					t.Errorf("Accept namespace %q", acc.NamespaceURI())
				}
				diffs := acc.SelectElements("getpingd:SupportsDiff")
				if len(diffs) != 1 || diffs[0].SelectAttrValue("type", "") != getpingd.DiffPatchOps || diffs[0].NamespaceURI() != getpingd.NSGetPingd {
					t.Errorf("Accept %s: SupportsDiff %v", acc.SelectAttrValue("type", ""), diffs)
				}
			}
			ps := svc.SelectElement("getpingd-xmpp:PubSub")
			if ps == nil || ps.NamespaceURI() != getpingd.NSGetPingdXMPP {
				t.Fatalf("PubSub = %v", ps)
			}
			if ps.SelectAttrValue("node", "") != node || ps.SelectAttrValue("jid", "") != "pubsub.example.org" ||
				ps.SelectAttrValue("security", "") != "none" {
				t.Errorf("PubSub attributes = %v", ps.Attr)
			}
		})
	}
}

func TestXRDSReplacesCharactersXMLCannotCarry(t *testing.T) {
	d := Descriptor{DescriptorURL: "https://p.example/feeds/x", ComponentJID: "c\x01.example",
		Node: "bad\x00\xffname\uFFFE", Security: getpingd.SecurityNone}
	var got xrdsDoc
	if err := xml.Unmarshal(XRDS(d), &got); err != nil {
		t.Fatalf("not well-formed: %v", err)
	}
	ps := got.XRDs[0].Services[0].PubSubs[0]
	if ps.Node != "bad\uFFFD\uFFFDname\uFFFD" || ps.JID != "c\uFFFD.example" {
		t.Errorf("PubSub = %+v", ps)
	}
}

func TestPostURLKeepsAQuery(t *testing.T) {
	for in, want := range map[string]string{
		"https://p.example/feeds/a":     "https://p.example/feeds/a?method=subscribe",
		"https://p.example/feeds/a?x=1": "https://p.example/feeds/a?x=1&method=subscribe",
	} {
		if got := (Descriptor{DescriptorURL: in}).PostURL(); got != want {
			t.Errorf("PostURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzXRDS checks that any valid node name and any source URL survive the
// round trip through the XRDS document and the descriptor page.
func FuzzXRDS(f *testing.F) {
	for _, n := range hostileNodes {
		f.Add(n, "https://www.example.com/page?a=1&b=2")
	}
	f.Fuzz(func(t *testing.T, node, ref string) {
		if hub.ValidNodeName(node) != nil || hub.ValidURL(ref) != nil {
			t.Skip()
		}
		d := descriptorFor(t, node, hub.AccessOpen, ref)
		var got xrdsDoc
		if err := xml.Unmarshal(XRDS(d), &got); err != nil {
			t.Fatalf("XRDS not well-formed: %v", err)
		}
		if xmlClean(ref) && got.Ref != ref {
			t.Errorf("ref %q came back as %q", ref, got.Ref)
		}
		ps := got.XRDs[0].Services[0].PubSubs[0]
		if ps.Node != node {
			t.Errorf("node %q came back as %q", node, ps.Node)
		}
		if got.XRDs[0].Services[0].URIs[0].Value != d.DescriptorURL {
			t.Errorf("descriptor URL changed")
		}
		tags, _, _ := parsePage(t, DescriptorPage(d, Page{Title: node, XRDSURL: d.DescriptorURL}))
		if l := findTag(tags, "link", "rel", getpingd.RelDescriptor); l == nil || l.attrs["href"] != d.DescriptorURL {
			t.Errorf("page link = %+v", l)
		}
	})
}

// xmlClean reports whether s holds only characters XML carries unchanged
// (others are replaced by U+FFFD).
func xmlClean(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0xFFFE || r == 0xFFFF {
			return false
		}
	}
	return true
}

func TestXRDSIsASCII(t *testing.T) {
	// Yadis clients decode a charset-less document as they please; an
	// ASCII document with character references reads the same in all.
	doc := XRDS(Descriptor{DescriptorURL: "https://p.example/feeds/caf%C3%A9", ComponentJID: "pubsub.example", Node: "Café ☕ 𝄞", Security: "none"})
	for i, b := range doc {
		if b >= 0x80 {
			t.Fatalf("byte %d of the XRDS document is not ASCII: %q", i, doc[max(0, i-20):min(len(doc), i+20)])
		}
	}
	var x struct {
		PubSub struct {
			Node string `xml:"node,attr"`
		} `xml:"XRD>Service>PubSub"`
	}
	if err := xml.Unmarshal(doc, &x); err != nil {
		t.Fatal(err)
	}
	if x.PubSub.Node != "Café ☕ 𝄞" {
		t.Fatalf("node read back as %q", x.PubSub.Node)
	}
}
