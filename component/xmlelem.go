package component

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Incoming stanzas are read into a small element tree: requests are tiny,
// and a tree lets every handler look at attributes and children without
// caring about token order, and lets a published payload be written back
// out exactly (with its namespaces) as a self-contained document.

// element is one parsed XML element.
type element struct {
	Name xml.Name
	// Attr holds the attributes without namespace declarations (namespaces
	// are resolved into the names).
	Attr []xml.Attr
	// Children are the child elements, in order.
	Children []*element
	// content is the mixed content in document order: *element or string.
	content []any
}

// Limits on what one incoming stanza may hold. The XMPP server enforces its
// own stanza size limit; these keep a hostile one from costing us more.
const (
	maxStanzaDepth    = 64
	maxStanzaElements = 10000
	maxStanzaBytes    = 1 << 20 // character data and attribute values
)

// errTooLarge reports a stanza beyond the limits above.
var errTooLarge = errors.New("stanza too large or too deeply nested")

// errBadName reports an element whose name is no XML name once its prefix
// is resolved ("p:0" with p bound to no namespace): written out again it
// would not parse. An XMPP server's parser refuses such a stanza before
// pingd sees it; the check keeps the tree sound whatever it is fed.
var errBadName = errors.New("an element name that is not an XML name")

// nameStart reports whether s starts like an XML name. encoding/xml checks
// a prefixed name as a whole, so the part after the prefix may begin with
// a character only allowed inside a name.
func nameStart(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return r == '_' || unicode.IsLetter(r) || unicode.Is(unicode.Nl, r)
}

const nsXML = "http://www.w3.org/XML/1998/namespace"

// attr returns the value of the un-namespaced attribute local.
func (e *element) attr(local string) string {
	v, _ := e.lookupAttr(local)
	return v
}

// lookupAttr reports whether the un-namespaced attribute exists too.
func (e *element) lookupAttr(local string) (string, bool) {
	if e == nil {
		return "", false
	}
	for _, a := range e.Attr {
		if a.Name.Local == local && a.Name.Space == "" {
			return a.Value, true
		}
	}
	return "", false
}

// child returns the first child with the given namespace and local name.
func (e *element) child(space, local string) *element {
	if e == nil {
		return nil
	}
	for _, c := range e.Children {
		if c.Name.Local == local && c.Name.Space == space {
			return c
		}
	}
	return nil
}

// childrenNamed returns every child with the given namespace and local name.
func (e *element) childrenNamed(space, local string) []*element {
	if e == nil {
		return nil
	}
	var out []*element
	for _, c := range e.Children {
		if c.Name.Local == local && c.Name.Space == space {
			out = append(out, c)
		}
	}
	return out
}

// text returns the character data directly inside e.
func (e *element) text() string {
	if e == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range e.content {
		if s, ok := c.(string); ok {
			b.WriteString(s)
		}
	}
	return b.String()
}

// treeBuilder counts what one stanza costs while it is read.
type treeBuilder struct {
	elements int
	bytes    int
}

// readElement reads the element whose start token was already consumed from
// r, up to and including its end token (or io.EOF). It returns errTooLarge
// when the limits are exceeded; the caller then discards the rest.
func readElement(r xml.TokenReader, start xml.StartElement) (*element, error) {
	b := &treeBuilder{}
	return b.read(r, start, 0)
}

func (b *treeBuilder) newElement(start xml.StartElement) (*element, error) {
	b.elements++
	if b.elements > maxStanzaElements {
		return nil, errTooLarge
	}
	if !nameStart(start.Name.Local) {
		return nil, errBadName
	}
	e := &element{Name: start.Name}
	for _, a := range start.Attr {
		if a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns") {
			continue // a namespace declaration, already resolved into names
		}
		if !nameStart(a.Name.Local) {
			continue // not an XML name (errBadName); nothing pingd reads
		}
		b.bytes += len(a.Value)
		e.Attr = append(e.Attr, xml.Attr{Name: a.Name, Value: a.Value})
	}
	if b.bytes > maxStanzaBytes {
		return nil, errTooLarge
	}
	return e, nil
}

func (b *treeBuilder) read(r xml.TokenReader, start xml.StartElement, depth int) (*element, error) {
	if depth > maxStanzaDepth {
		return nil, errTooLarge
	}
	e, err := b.newElement(start)
	if err != nil {
		return nil, err
	}
	for {
		tok, err := r.Token()
		if tok == nil && err != nil {
			if err == io.EOF && depth == 0 {
				return e, nil // the reader ends with the stanza
			}
			if err == io.EOF {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			c, err := b.read(r, t, depth+1)
			if err != nil {
				return nil, err
			}
			e.Children = append(e.Children, c)
			e.content = append(e.content, c)
		case xml.EndElement:
			return e, nil
		case xml.CharData:
			b.bytes += len(t)
			if b.bytes > maxStanzaBytes {
				return nil, errTooLarge
			}
			s := string(t)
			if n := len(e.content); n > 0 {
				if prev, ok := e.content[n-1].(string); ok {
					e.content[n-1] = prev + s
					continue
				}
			}
			e.content = append(e.content, s)
		}
		// Comments, processing instructions and directives carry nothing
		// pingd keeps.
		if err == io.EOF && depth == 0 {
			return e, nil
		}
	}
}

// parseDocument parses one element from raw XML (tests, fuzzing, stored
// payloads). Anything after the first element is ignored.
func parseDocument(data []byte) (*element, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := d.Token()
		if err != nil {
			if err == io.EOF {
				return nil, errors.New("no element")
			}
			return nil, err
		}
		if start, ok := tok.(xml.StartElement); ok {
			return readElement(d, start)
		}
	}
}

// writeTo serialises e. parentNS is the default namespace in scope; the
// element declares its own when it differs. Prefixed attributes get
// generated prefixes declared on the element itself.
func (e *element) writeTo(b *bytes.Buffer, parentNS string, forceNS bool) {
	b.WriteByte('<')
	b.WriteString(e.Name.Local)
	if forceNS || e.Name.Space != parentNS {
		b.WriteString(` xmlns="`)
		escapeAttr(b, e.Name.Space)
		b.WriteByte('"')
	}
	prefixes := 0
	for _, a := range e.Attr {
		b.WriteByte(' ')
		switch a.Name.Space {
		case "":
		case nsXML, "xml":
			b.WriteString("xml:")
		default:
			prefixes++
			p := fmt.Sprintf("a%d", prefixes)
			b.WriteString(`xmlns:` + p + `="`)
			escapeAttr(b, a.Name.Space)
			b.WriteString(`" ` + p + ":")
		}
		b.WriteString(a.Name.Local)
		b.WriteString(`="`)
		escapeAttr(b, a.Value)
		b.WriteByte('"')
	}
	if len(e.content) == 0 {
		b.WriteString("/>")
		return
	}
	b.WriteByte('>')
	for _, c := range e.content {
		switch c := c.(type) {
		case string:
			escapeText(b, c)
		case *element:
			c.writeTo(b, e.Name.Space, false)
		}
	}
	b.WriteString("</")
	b.WriteString(e.Name.Local)
	b.WriteByte('>')
}

// standalone serialises e as a self-contained document fragment: its
// namespace is always declared (xmlns="" when it has none), so the bytes
// keep their meaning wherever they are embedded.
func (e *element) standalone() []byte {
	var b bytes.Buffer
	e.writeTo(&b, "", true)
	return b.Bytes()
}

// escapeText writes s as character data. Characters XML cannot carry are
// replaced by U+FFFD, so text from anywhere (a feed title, a database row)
// never breaks the stream.
func escapeText(b *bytes.Buffer, s string) {
	_ = xml.EscapeText(b, []byte(s))
}

// escapeAttr writes s for use inside a double-quoted attribute value.
func escapeAttr(b *bytes.Buffer, s string) {
	_ = xml.EscapeText(b, []byte(s))
}

// xmlBuf builds outgoing XML. Attributes are name/value pairs; pairs with
// an empty value are left out.
type xmlBuf struct {
	bytes.Buffer
}

func (b *xmlBuf) open(name string, attrs ...string) *xmlBuf {
	b.startTag(name, attrs)
	b.WriteByte('>')
	return b
}

func (b *xmlBuf) empty(name string, attrs ...string) *xmlBuf {
	b.startTag(name, attrs)
	b.WriteString("/>")
	return b
}

func (b *xmlBuf) close(name string) *xmlBuf {
	b.WriteString("</")
	b.WriteString(name)
	b.WriteByte('>')
	return b
}

func (b *xmlBuf) text(s string) *xmlBuf {
	escapeText(&b.Buffer, s)
	return b
}

// element writes <name attrs>text</name>, or an empty element when text is
// empty.
func (b *xmlBuf) element(name, text string, attrs ...string) *xmlBuf {
	if text == "" {
		return b.empty(name, attrs...)
	}
	return b.open(name, attrs...).text(text).close(name)
}

func (b *xmlBuf) startTag(name string, attrs []string) {
	b.WriteByte('<')
	b.WriteString(name)
	for i := 0; i+1 < len(attrs); i += 2 {
		if attrs[i+1] == "" {
			continue
		}
		b.WriteByte(' ')
		b.WriteString(attrs[i])
		b.WriteString(`="`)
		escapeAttr(&b.Buffer, attrs[i+1])
		b.WriteByte('"')
	}
}

// payloadSet remembers recent payloads (exact bytes) up to a byte budget,
// oldest out first. The zero value is ready.
type payloadSet struct {
	mu    sync.Mutex
	m     map[string]struct{}
	order []string
	bytes int
}

// payloadSetBudget bounds the bytes a payloadSet keeps.
const payloadSetBudget = 8 << 20

func (s *payloadSet) add(p []byte) {
	if len(p) == 0 || len(p) > payloadSetBudget/16 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]struct{}{}
	}
	if _, ok := s.m[string(p)]; ok {
		return
	}
	k := string(p)
	s.m[k] = struct{}{}
	s.order = append(s.order, k)
	s.bytes += len(k)
	for s.bytes > payloadSetBudget {
		old := s.order[0]
		s.order[0] = ""
		s.order = s.order[1:]
		delete(s.m, old)
		s.bytes -= len(old)
	}
}

func (s *payloadSet) has(p []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[string(p)]
	return ok
}
