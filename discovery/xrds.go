package discovery

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/pingd/pingd/internal/getpingd"
)

// Content types and header names of XRDS discovery (Yadis). GetPingd's
// own names (link relations, its namespaces, the service description
// values) are internal/getpingd's.
const (
	// ContentTypeXRDS is sent without parameters: Yadis clients compare it
	// literally.
	ContentTypeXRDS = "application/xrds+xml"
	// XRDSLocationHeader points from a page at its XRDS document.
	XRDSLocationHeader = "X-XRDS-Location"
	// RelHub is the WebSub hub link relation.
	RelHub = "hub"
)

// Namespaces of the XRDS document besides GetPingd's, and Atom's.
const (
	NSXRDS = "xri://$xrds"
	NSXRD  = "xri://$xrd*($v*2.0)"
	NSAtom = "http://www.w3.org/2005/Atom"
)

// Descriptor is what an XRDS document says about one node.
type Descriptor struct {
	// DescriptorURL is where subscription requests go (SUBSCRIBE, or POST
	// with ?method=subscribe).
	DescriptorURL string
	// ComponentJID and Node name the XEP-0060 node.
	ComponentJID string
	Node         string
	// Security is getpingd.SecurityNone or getpingd.SecurityWhitelist.
	Security string
	// Ref, optional, is the resource the document describes (the xrds:XRDS
	// ref attribute).
	Ref string
}

// PostURL is the descriptor URL with ?method=subscribe, the subscribe URI
// for clients that cannot send a SUBSCRIBE request.
func (d Descriptor) PostURL() string {
	sep := "?"
	if strings.Contains(d.DescriptorURL, "?") {
		sep = "&"
	}
	return d.DescriptorURL + sep + "method=subscribe"
}

// XRDS renders the node's GetPingd XRDS document. Every value is escaped;
// characters XML cannot carry are replaced by U+FFFD.
func XRDS(d Descriptor) []byte {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	enc.Indent("", "  ")
	w := tokenWriter{enc: enc}

	// Prefixed names are written as local names holding the prefix: the
	// encoder would otherwise invent its own prefixes (_xmlns, getpingd1…).
	rootAttrs := []xml.Attr{
		attr("xmlns:xrds", NSXRDS),
		attr("xmlns", NSXRD),
		attr("xmlns:getpingd", getpingd.NSGetPingd),
		attr("xmlns:getpingd-xmpp", getpingd.NSGetPingdXMPP),
	}
	if d.Ref != "" {
		rootAttrs = append(rootAttrs, attr("ref", d.Ref))
	}
	w.start("xrds:XRDS", rootAttrs...)
	w.start("XRD")
	w.start("Service")
	w.text("Type", getpingd.ServiceSubscribe)
	w.text("URI", d.DescriptorURL, attr("getpingd:http-method", getpingd.MethodSubscribe))
	w.text("URI", d.PostURL(), attr("getpingd:http-method", getpingd.MethodPost))
	for _, typ := range []string{getpingd.ContentTypeHTTPSubscribe, getpingd.ContentTypeXMPPSubscribe} {
		w.start("getpingd:Accept", attr("type", typ))
		w.empty("getpingd:SupportsDiff", attr("type", getpingd.DiffPatchOps))
		w.end("getpingd:Accept")
	}
	w.empty("getpingd-xmpp:PubSub",
		attr("jid", d.ComponentJID),
		attr("node", d.Node),
		attr("security", d.Security))
	w.end("Service")
	w.end("XRD")
	w.end("xrds:XRDS")
	w.flush()
	buf.WriteByte('\n')
	return asciiOnly(buf.Bytes())
}

// asciiOnly writes every non-ASCII character as a character reference.
// The document is served as application/xrds+xml without a charset
// parameter (Yadis clients compare the type literally), and some of them
// then decode it as ISO-8859-1: in pure ASCII a node name survives that.
func asciiOnly(doc []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(doc))
	for _, r := range string(doc) {
		if r < utf8.RuneSelf {
			out.WriteByte(byte(r))
			continue
		}
		fmt.Fprintf(&out, "&#x%X;", r)
	}
	return out.Bytes()
}

func attr(name, value string) xml.Attr {
	return xml.Attr{Name: xml.Name{Local: name}, Value: value}
}

// tokenWriter writes tokens and keeps the first error. Writing to a
// bytes.Buffer fails only on a programming error (unbalanced elements),
// which the tests would catch; the rendering functions therefore return
// no error.
type tokenWriter struct {
	enc *xml.Encoder
	err error
}

func (w *tokenWriter) token(t xml.Token) {
	if w.err == nil {
		w.err = w.enc.EncodeToken(t)
	}
}

func (w *tokenWriter) start(name string, attrs ...xml.Attr) {
	w.token(xml.StartElement{Name: xml.Name{Local: name}, Attr: attrs})
}

func (w *tokenWriter) end(name string) {
	w.token(xml.EndElement{Name: xml.Name{Local: name}})
}

func (w *tokenWriter) text(name, value string, attrs ...xml.Attr) {
	w.start(name, attrs...)
	w.token(xml.CharData(value))
	w.end(name)
}

// empty writes an element without content. The encoder writes it as a
// start and an end tag, which is the same element.
func (w *tokenWriter) empty(name string, attrs ...xml.Attr) {
	w.start(name, attrs...)
	w.end(name)
}

func (w *tokenWriter) flush() {
	if w.err == nil {
		w.err = w.enc.Flush()
	}
}
