package opml

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"golang.org/x/net/html/charset"

	"github.com/pingd/pingd/internal/xmlguard"
)

// Limits bound what Parse reads of one document.
type Limits struct {
	// Outlines bounds the outline elements, folders included.
	Outlines int
	// Depth bounds how deeply outlines nest (an outline directly in the
	// body is at depth 1).
	Depth int
}

// DefaultLimits: 2,000 outlines, more than the feeds of the heaviest
// readers' exports, each of which becomes a node that pingd polls; 16
// levels of folders, where readers' exports use one or two.
var DefaultLimits = Limits{Outlines: 2000, Depth: 16}

// Guard limits of the XML beneath the outlines. The body is capped by the
// caller (1 MiB for the admin API): these keep a hostile document from
// costing more than its size in memory or time.
const (
	// startTagBytes bounds one start tag: an outline's attributes are a
	// few URLs and titles.
	startTagBytes = 64 << 10
	// guardNodes bounds elements and attributes in all (an outline has
	// about six of them).
	guardNodes = 100_000
	// guardNamespaces bounds the namespace declarations in scope.
	guardNamespaces = 32
)

// ErrTooLarge: the document passes Limits (or the guard's limits on
// elements and attributes). ErrInvalid: it is not an OPML document.
var (
	ErrTooLarge = errors.New("OPML document too large")
	ErrInvalid  = errors.New("not an OPML document")
)

// Outline is one outline of a document: a feed subscription when it has
// an XMLURL.
type Outline struct {
	// Index numbers the outlines in document order from 1, folders
	// included, so a report can point at each.
	Index int
	// Folders are the texts of the outlines it is nested in, outermost
	// first.
	Folders []string
	Text    string
	Title   string
	Type    string
	XMLURL  string
	HTMLURL string
}

// Name is what a person calls the outline: its text, else its title,
// else its feed's URL.
func (o Outline) Name() string {
	switch {
	case o.Text != "":
		return o.Text
	case o.Title != "":
		return o.Title
	}
	return o.XMLURL
}

// Parse reads an OPML document and returns its subscriptions (outlines
// with an xmlUrl) and the leaf outlines without one, in document order;
// folders (outlines holding others, without an xmlUrl) are returned only
// as the Folders of what they hold. Attribute names are matched without
// regard to case (exports write xmlUrl, xmlurl and XMLURL). Outlines
// outside <body> are ignored. Errors wrap ErrTooLarge or ErrInvalid.
func Parse(body []byte, lim Limits) ([]Outline, error) {
	if lim.Outlines <= 0 {
		lim.Outlines = DefaultLimits.Outlines
	}
	if lim.Depth <= 0 {
		lim.Depth = DefaultLimits.Depth
	}
	dec := xmlguard.NewDecoder(body, xmlguard.Options{
		Limits: xmlguard.Limits{
			// opml, body, then the outlines.
			Depth:         lim.Depth + 2,
			Nodes:         guardNodes,
			StartTagBytes: startTagBytes,
			Namespaces:    guardNamespaces,
			// No TextWork limit: Parse gathers no text (OPML keeps its
			// content in attributes), and the indentation between many
			// outlines would pass any limit that counts it.
		},
		CharsetReader: charset.NewReaderLabel,
	})
	var (
		out   []Outline
		count int
		stack []string // the local names of the elements open
		// open are the outlines open, outermost first; holds says which
		// of them hold another outline (are folders).
		open    []*Outline
		holds   []bool
		sawRoot bool
		inBody  bool
	)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			var le *xmlguard.LimitError
			if errors.As(err, &le) {
				if le.What == "nesting depth" {
					return nil, fmt.Errorf("%w: elements nest more than %d deep (outlines at most %d)", ErrTooLarge, lim.Depth+2, lim.Depth)
				}
				return nil, fmt.Errorf("%w: %v", ErrTooLarge, err)
			}
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := strings.ToLower(t.Name.Local)
			if len(stack) == 0 {
				if name != "opml" {
					return nil, fmt.Errorf("%w: the root element is <%s>, not <opml>", ErrInvalid, t.Name.Local)
				}
				sawRoot = true
			}
			if len(stack) == 1 && name == "body" {
				inBody = true
			}
			stack = append(stack, name)
			if !inBody || name != "outline" {
				continue
			}
			count++
			if count > lim.Outlines {
				return nil, fmt.Errorf("%w: more than %d outlines", ErrTooLarge, lim.Outlines)
			}
			o := &Outline{Index: count}
			for i, p := range open {
				o.Folders = append(o.Folders, p.Name())
				holds[i] = true
			}
			for _, a := range t.Attr {
				if a.Name.Space != "" {
					continue // another namespace's attribute, or a declaration
				}
				v := strings.TrimSpace(a.Value)
				switch strings.ToLower(a.Name.Local) {
				case "text":
					o.Text = v
				case "title":
					o.Title = v
				case "type":
					o.Type = v
				case "xmlurl":
					o.XMLURL = v
				case "htmlurl":
					o.HTMLURL = v
				}
			}
			open = append(open, o)
			holds = append(holds, false)
		case xml.EndElement:
			if len(stack) == 0 {
				continue
			}
			name := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if len(stack) == 1 && name == "body" {
				inBody = false
			}
			if !inBody || name != "outline" || len(open) == 0 {
				continue
			}
			o, folder := open[len(open)-1], holds[len(holds)-1]
			open, holds = open[:len(open)-1], holds[:len(holds)-1]
			if o.XMLURL != "" || !folder {
				out = append(out, *o)
			}
		}
	}
	if !sawRoot {
		return nil, fmt.Errorf("%w: no <opml> element", ErrInvalid)
	}
	// Outlines come out as they close, children before their parents:
	// put them back in document order.
	slices.SortFunc(out, func(a, b Outline) int { return cmp.Compare(a.Index, b.Index) })
	return out, nil
}

// Head is what Write puts in a document's <head>.
type Head struct {
	Title string
	// Docs is the URL of the format's specification, for whoever finds
	// the file.
	Docs string
}

// Feed is one subscription Write lists.
type Feed struct {
	Text, XMLURL, HTMLURL string
	// Extra are more attributes in pingd's namespace (NS), such as the
	// source a node follows.
	Extra map[string]string
}

// NS is the namespace of pingd's own outline attributes.
const NS = "https://github.com/pingd/pingd/opml"

// SpecURL is OPML 2.0's specification.
const SpecURL = "http://opml.org/spec2.opml"

// Write renders an OPML 2.0 subscription list: each feed one outline of
// type "rss" with text and title (the same, as the specification asks),
// xmlUrl and htmlUrl. Every value is escaped.
func Write(w io.Writer, head Head, feeds []Feed) error {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	fmt.Fprintf(&b, `<opml version="2.0" xmlns:pingd="%s">`+"\n<head>\n", NS)
	if head.Title != "" {
		b.WriteString("<title>")
		escape(&b, head.Title)
		b.WriteString("</title>\n")
	}
	if head.Docs != "" {
		b.WriteString("<docs>")
		escape(&b, head.Docs)
		b.WriteString("</docs>\n")
	}
	b.WriteString("</head>\n<body>\n")
	for _, f := range feeds {
		b.WriteString(`<outline type="rss" text="`)
		escape(&b, f.Text)
		b.WriteString(`" title="`)
		escape(&b, f.Text)
		b.WriteString(`" xmlUrl="`)
		escape(&b, f.XMLURL)
		b.WriteString(`"`)
		if f.HTMLURL != "" {
			b.WriteString(` htmlUrl="`)
			escape(&b, f.HTMLURL)
			b.WriteString(`"`)
		}
		for _, k := range slices.Sorted(maps.Keys(f.Extra)) {
			b.WriteString(` pingd:` + k + `="`)
			escape(&b, f.Extra[k])
			b.WriteString(`"`)
		}
		b.WriteString("/>\n")
	}
	b.WriteString("</body>\n</opml>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// escape writes s for text or a double-quoted attribute value; characters
// XML cannot carry become U+FFFD.
func escape(b *bytes.Buffer, s string) {
	_ = xml.EscapeText(b, []byte(s))
}
