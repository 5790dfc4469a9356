package xmlrpc

import (
	"bytes"
	"unicode/utf8"
)

// decodeSimpleCall reads, without encoding/xml, the shape nearly every
// ping has: an optional UTF-8 XML declaration, then <methodCall> with
// <methodName> first and <params> of string values (<value><string>…
// </string></value> or bare text), no attributes, comments, entity or
// character references, CDATA or carriage returns. It reports false for
// anything else, and the general decoder then reads the document and
// finds its errors: so this path accepts only documents the general
// decoder accepts, with the same call (FuzzSimpleCallAgrees checks it),
// under the same limits, at a tenth of the cost and a handful of
// allocations (a ping through encoding/xml made about a hundred).
func decodeSimpleCall(data []byte, maxValues int) (*Call, bool) {
	s := simpleScanner{b: data}
	if !s.declaration() {
		return nil, false
	}
	s.space()
	if !s.tag("<methodCall>") {
		return nil, false
	}
	s.space()
	if !s.tag("<methodName>") {
		return nil, false
	}
	name, ok := s.text()
	if !ok || !s.tag("</methodName>") {
		return nil, false
	}
	name = bytes.TrimSpace(name)
	if !ValidMethodName(string(name)) {
		return nil, false
	}
	call := &Call{Method: string(name)}
	s.space()
	if s.tag("<params>") {
		var err bool
		if call.Params, err = s.params(maxValues); err {
			return nil, false
		}
		s.space()
	}
	if !s.tag("</methodCall>") {
		return nil, false
	}
	s.space()
	if s.i != len(s.b) {
		return nil, false
	}
	if call.Params == nil {
		call.Params = []any{}
	}
	return call, true
}

type simpleScanner struct {
	b []byte
	i int
}

// declaration skips an XML declaration that names version 1.0 and, if
// any, the UTF-8 encoding; any other declaration is the general
// decoder's.
func (s *simpleScanner) declaration() bool {
	if !bytes.HasPrefix(s.b, []byte("<?xml")) {
		return true
	}
	end := bytes.Index(s.b, []byte("?>"))
	if end < 0 {
		return false
	}
	decl := s.b[len("<?xml"):end]
	s.i = end + len("?>")
	d := simpleScanner{b: decl}
	if !d.someSpace() || !d.attr("version", "1.0") {
		return false
	}
	if d.someSpace() && d.i < len(d.b) && !d.attr("encoding", "utf-8") {
		return false
	}
	d.space()
	return d.i == len(d.b)
}

// attr reads name="value" (either quote; value compared ignoring case).
func (s *simpleScanner) attr(name, value string) bool {
	rest := s.b[s.i:]
	if !bytes.HasPrefix(rest, []byte(name+"=")) || len(rest) < len(name)+len(value)+3 {
		return false
	}
	q := rest[len(name)+1]
	v := rest[len(name)+2 : len(name)+2+len(value)]
	if (q != '"' && q != '\'') || rest[len(name)+2+len(value)] != q || !bytes.EqualFold(v, []byte(value)) {
		return false
	}
	s.i += len(name) + len(value) + 3
	return true
}

func isSimpleSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (s *simpleScanner) space() {
	for s.i < len(s.b) && isSimpleSpace(s.b[s.i]) {
		s.i++
	}
}

func (s *simpleScanner) someSpace() bool {
	start := s.i
	s.space()
	return s.i > start
}

// tag consumes t if the input continues with it.
func (s *simpleScanner) tag(t string) bool {
	if len(s.b)-s.i < len(t) || string(s.b[s.i:s.i+len(t)]) != t {
		return false
	}
	s.i += len(t)
	return true
}

// text reads character data up to the next '<', which must be there. It
// refuses what the general decoder would transform or check on its own:
// references ('&'), carriage returns (normalised), '>' (part of "]]>"),
// and any character outside XML's Char production or not UTF-8.
func (s *simpleScanner) text() ([]byte, bool) {
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '<':
			return s.b[start:s.i], true
		case c < utf8.RuneSelf:
			if c == '&' || c == '>' || (c < 0x20 && c != '\t' && c != '\n') {
				return nil, false
			}
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if size == 1 || r == 0xFFFE || r == 0xFFFF {
				return nil, false
			}
			s.i += size
		}
	}
	return nil, false
}

// params reads the parameters after <params> up to </params>; bad is true
// when the shape is not the simple one or there are more than maxValues.
func (s *simpleScanner) params(maxValues int) (params []any, bad bool) {
	params = []any{}
	for {
		s.space()
		if s.tag("</params>") {
			return params, false
		}
		if !s.tag("<param>") {
			return nil, true
		}
		s.space()
		if !s.tag("<value>") || len(params) >= maxValues {
			return nil, true
		}
		v, ok := s.stringValue()
		if !ok {
			return nil, true
		}
		s.space()
		if !s.tag("</param>") {
			return nil, true
		}
		params = append(params, v)
	}
}

// stringValue reads what follows <value> up to and including </value>:
// <string>text</string> between white space, or bare text.
func (s *simpleScanner) stringValue() (string, bool) {
	bare, ok := s.text()
	if !ok {
		return "", false
	}
	if s.tag("</value>") {
		return string(bare), true
	}
	for _, c := range bare {
		if !isSimpleSpace(c) {
			return "", false
		}
	}
	if !s.tag("<string>") {
		return "", false
	}
	text, ok := s.text()
	if !ok || !s.tag("</string>") {
		return "", false
	}
	s.space()
	if !s.tag("</value>") {
		return "", false
	}
	return string(text), true
}
