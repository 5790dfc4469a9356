package xmlguard

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
)

// ErrLimit is what every *LimitError is.
var ErrLimit = errors.New("over a limit")

// LimitError says which limit a document passed and where.
type LimitError struct {
	// What names the limit ("nesting depth", "elements and attributes", …).
	What  string
	Limit int64
	// Offset is the decoder's input offset when the limit was passed.
	Offset int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s over the limit of %d (at byte %d)", e.What, e.Limit, e.Offset)
}

// Is makes errors.Is(err, ErrLimit) true for every *LimitError.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// Limits bounds what one document may hold; a zero field is no limit.
type Limits struct {
	// Depth bounds the elements open at once.
	Depth int
	// Nodes bounds the elements and attributes of the whole document.
	Nodes int
	// StartTagBytes bounds one start tag, its name and attributes: the
	// decoder collects a tag's attributes before it returns the tag, about
	// 25 bytes of memory for each byte of a tag of valueless attributes.
	StartTagBytes int
	// Namespaces bounds the namespace declarations in scope at once; a
	// reader that copies its namespace map for every element (goxpp does)
	// spends this much per element.
	Namespaces int
	// TextWork bounds, over the document, the sum of the text an element
	// had gathered each time another piece of its text (the text between
	// two of its children, comments or CDATA sections) arrived: what a
	// reader that appends each piece to a string (gofeed's extension
	// parser does) copies. An element whose text comes in k pieces costs
	// up to k times its text.
	TextWork int64
}

// Options configure a Decoder.
type Options struct {
	Limits Limits
	// CharsetReader converts a document whose XML declaration names an
	// encoding other than UTF-8, as in xml.Decoder (nil: such a document
	// is a decoding error).
	CharsetReader func(label string, input io.Reader) (io.Reader, error)
	// DropControlChars drops the C0 control bytes XML does not allow
	// (all but tab, line feed and carriage return) before decoding, as
	// gofeed does.
	DropControlChars bool
}

// Decoder is a non-strict xml.Decoder (the settings feed readers need)
// whose tokens are counted against Options.Limits. Once a limit is passed
// every call returns the same *LimitError. A decoding error is returned as
// encoding/xml gives it.
type Decoder struct {
	dec    *xml.Decoder
	src    *source
	limits Limits
	err    error

	open     []openElement
	nodes    int
	inScope  int
	textWork int64
}

// openElement is what the decoder keeps of an open element.
type openElement struct {
	namespaces int   // declarations it made
	text       int64 // bytes of its own text so far
}

// NewDecoder returns a Decoder reading body.
func NewDecoder(body []byte, opts Options) *Decoder {
	var r io.Reader = bytes.NewReader(body)
	if opts.DropControlChars {
		r = &controlCharFilter{r: r}
	}
	g := &Decoder{limits: opts.Limits, src: &source{br: bufio.NewReader(r)}}
	g.dec = xml.NewDecoder(g.src) // a ByteReader: the decoder reads it byte by byte
	g.dec.Strict = false
	if opts.CharsetReader != nil {
		g.dec.CharsetReader = func(label string, input io.Reader) (io.Reader, error) {
			conv, err := opts.CharsetReader(label, input)
			if err != nil {
				return nil, err
			}
			// The decoder reads the converted text from here on; its
			// offsets keep counting from where the switch happened.
			g.src = &source{br: bufio.NewReader(conv), base: g.dec.InputOffset()}
			return g.src, nil
		}
	}
	return g
}

// Depth is the number of elements open after the last token.
func (g *Decoder) Depth() int { return len(g.open) }

// Token returns the next token, as xml.Decoder.Token does, or a
// *LimitError once the document passes a limit.
func (g *Decoder) Token() (xml.Token, error) {
	if g.err != nil {
		return nil, g.err
	}
	src := g.src
	if g.limits.StartTagBytes > 0 && g.startTagNext() {
		src.stop = src.n - g.held() + int64(g.limits.StartTagBytes)
	}
	tok, err := g.dec.Token()
	src.stop = 0
	if err != nil {
		if src.cut {
			return nil, g.fail("start tag bytes", int64(g.limits.StartTagBytes))
		}
		g.err = err
		return nil, err
	}
	switch t := tok.(type) {
	case xml.StartElement:
		g.nodes += 1 + len(t.Attr)
		ns := 0
		for _, a := range t.Attr {
			if a.Name.Space == "xmlns" || a.Name.Space == "" && a.Name.Local == "xmlns" {
				ns++
			}
		}
		g.open = append(g.open, openElement{namespaces: ns})
		g.inScope += ns
		switch {
		case g.limits.Depth > 0 && len(g.open) > g.limits.Depth:
			return nil, g.fail("nesting depth", int64(g.limits.Depth))
		case g.limits.Nodes > 0 && g.nodes > g.limits.Nodes:
			return nil, g.fail("elements and attributes", int64(g.limits.Nodes))
		case g.limits.Namespaces > 0 && g.inScope > g.limits.Namespaces:
			return nil, g.fail("namespace declarations in scope", int64(g.limits.Namespaces))
		}
	case xml.EndElement:
		if n := len(g.open); n > 0 {
			g.inScope -= g.open[n-1].namespaces
			g.open = g.open[:n-1]
		}
	case xml.CharData:
		if n := len(g.open); n > 0 {
			top := &g.open[n-1]
			top.text += int64(len(t))
			g.textWork += top.text
			if g.limits.TextWork > 0 && g.textWork > g.limits.TextWork {
				return nil, g.fail("text concatenation bytes", g.limits.TextWork)
			}
		}
	}
	return tok, nil
}

func (g *Decoder) fail(what string, limit int64) error {
	g.err = &LimitError{What: what, Limit: limit, Offset: g.dec.InputOffset()}
	return g.err
}

// held is 1 when the decoder has put back the last byte it read (it does
// after text, which ends at the '<' of the next token), else 0.
func (g *Decoder) held() int64 {
	return g.src.base + g.src.n - g.dec.InputOffset()
}

// startTagNext reports whether the next token the decoder reads begins
// with "<" and a name: a start tag.
func (g *Decoder) startTagNext() bool {
	var b0, b1 byte
	var ok bool
	if g.held() > 0 {
		b0 = g.src.last
		b1, ok = g.src.peek(0)
	} else {
		if b0, ok = g.src.peek(0); ok {
			b1, ok = g.src.peek(1)
		}
	}
	return ok && b0 == '<' && b1 != '/' && b1 != '!' && b1 != '?'
}

// Check reads body to its end, or to its first decoding error, and
// returns the *LimitError of the first limit it passes, or nil. A decoding
// error is not Check's business: the parser that reads body next stops at
// the same place.
func Check(body []byte, opts Options) error {
	g := NewDecoder(body, opts)
	for {
		if _, err := g.Token(); err != nil {
			if errors.Is(err, ErrLimit) {
				return err
			}
			return nil
		}
	}
}

// source is what the decoder reads: it counts the bytes handed out, so the
// guard knows where the next token starts, and stops a start tag that runs
// past its limit before the decoder has collected it.
type source struct {
	br   *bufio.Reader
	base int64 // the decoder's offset when it started reading this source
	n    int64 // bytes handed out
	last byte
	stop int64 // when > 0, the position at which no byte is handed out
	cut  bool  // a read was refused at stop
}

var errStartTagCut = errors.New("start tag cut at its limit")

func (s *source) ReadByte() (byte, error) {
	if s.stop > 0 && s.n >= s.stop {
		s.cut = true
		return 0, errStartTagCut
	}
	b, err := s.br.ReadByte()
	if err != nil {
		return 0, err
	}
	s.n++
	s.last = b
	return b, nil
}

// Read serves a charset reader that wraps this source; no tag is being
// read then (the switch happens in the XML declaration).
func (s *source) Read(p []byte) (int, error) {
	n, err := s.br.Read(p)
	s.n += int64(n)
	if n > 0 {
		s.last = p[n-1]
	}
	return n, err
}

func (s *source) peek(i int) (byte, bool) {
	b, err := s.br.Peek(i + 1)
	if err != nil || len(b) <= i {
		return 0, false
	}
	return b[i], true
}

// controlCharFilter drops the C0 control bytes XML does not allow. They
// are the same in UTF-8 and the single-byte encodings and never occur
// inside a UTF-8 sequence, so filtering the raw bytes is safe.
type controlCharFilter struct{ r io.Reader }

func (c *controlCharFilter) Read(p []byte) (int, error) {
	for {
		n, err := c.r.Read(p)
		w := 0
		for _, b := range p[:n] {
			if b < 0x20 && b != '\t' && b != '\n' && b != '\r' {
				continue
			}
			p[w] = b
			w++
		}
		if w > 0 || err != nil {
			return w, err
		}
	}
}
