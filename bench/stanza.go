package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// splitter cuts an XMPP stream into its top-level elements (stanzas and
// stream-level elements such as features) without decoding them: it only
// tracks tag nesting, quotes in tags, CDATA and comments. Measuring
// thousands of notifications a second needs a reader far cheaper than a
// full XML decoder per stanza, and the same reader serves every target, so
// no side is favoured.
type splitter struct {
	r     *bufio.Reader
	depth int // 0 before the stream header, 1 inside the stream, >1 inside a stanza
	cur   []byte
	max   int
}

// Element kinds Next returns.
const (
	elemStanza = iota
	elemStreamHeader
)

var (
	errStreamClosed = errors.New("the server closed the stream")
	errTooLarge     = errors.New("stanza larger than the limit")
)

func newSplitter(r *bufio.Reader, max int) *splitter {
	return &splitter{r: r, max: max}
}

// Next returns the next top-level element: the stream header (a start tag
// only) or a complete stanza. The bytes are valid until the next call.
// At the stream's end tag it returns errStreamClosed.
func (s *splitter) Next() (kind int, elem []byte, err error) {
	s.cur = s.cur[:0]
	for {
		// Text up to the next tag: kept inside a stanza, dropped between
		// stanzas (whitespace keepalives).
		if err := s.readUntil('<', s.depth > 1); err != nil {
			return 0, nil, err
		}
		tagStart := len(s.cur)
		if s.depth <= 1 {
			tagStart = 0
			s.cur = s.cur[:0]
		}
		s.cur = append(s.cur, '<')
		if err := s.readTag(); err != nil {
			return 0, nil, err
		}
		tag := s.cur[tagStart:]
		switch {
		case len(tag) >= 2 && tag[1] == '/':
			s.depth--
			switch {
			case s.depth == 1:
				return elemStanza, s.cur, nil
			case s.depth <= 0:
				return 0, nil, errStreamClosed
			}
		case len(tag) >= 2 && (tag[1] == '?' || tag[1] == '!'):
			if s.depth <= 1 {
				s.cur = s.cur[:0] // XML declaration, comment between stanzas
			}
		default:
			selfClosing := tag[len(tag)-2] == '/'
			switch {
			case s.depth == 0:
				if selfClosing {
					return 0, nil, fmt.Errorf("the stream header %q closes itself", tag)
				}
				s.depth = 1
				return elemStreamHeader, s.cur, nil
			case selfClosing && s.depth == 1:
				return elemStanza, s.cur, nil
			case !selfClosing:
				s.depth++
			}
		}
		if len(s.cur) > s.max {
			return 0, nil, errTooLarge
		}
	}
}

// readUntil consumes bytes up to and including delim, appending them
// (without delim) to cur when keep is set.
func (s *splitter) readUntil(delim byte, keep bool) error {
	for {
		chunk, err := s.r.ReadSlice(delim)
		if err == nil {
			if keep {
				s.cur = append(s.cur, chunk[:len(chunk)-1]...)
			}
			return nil
		}
		if keep {
			s.cur = append(s.cur, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return unexpectedEOF(err)
		}
		if len(s.cur) > s.max {
			return errTooLarge
		}
	}
}

// readTag reads the rest of a tag whose '<' is already in cur: up to the
// '>' that is outside quotes, or the end of a CDATA section or comment.
func (s *splitter) readTag() error {
	start := len(s.cur) - 1
	for {
		chunk, err := s.r.ReadSlice('>')
		s.cur = append(s.cur, chunk...)
		if err != nil {
			if !errors.Is(err, bufio.ErrBufferFull) {
				return unexpectedEOF(err)
			}
		} else if tagComplete(s.cur[start:]) {
			return nil
		}
		if len(s.cur) > s.max {
			return errTooLarge
		}
	}
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// tagComplete reports whether tag, which starts with '<' and ends with
// '>', is a whole tag, CDATA section or comment.
func tagComplete(tag []byte) bool {
	switch {
	case bytes.HasPrefix(tag, []byte("<![CDATA[")):
		return len(tag) >= len("<![CDATA[]]>") && bytes.HasSuffix(tag, []byte("]]>"))
	case bytes.HasPrefix(tag, []byte("<!--")):
		return len(tag) >= len("<!---->") && bytes.HasSuffix(tag, []byte("-->"))
	}
	// Neither marker contains '>', so a tag read up to a '>' holds the
	// whole marker if it is one.
	var quote byte
	for _, c := range tag[1 : len(tag)-1] {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		}
	}
	return quote == 0
}

// stanzaName returns the local name of the element's start tag.
func stanzaName(elem []byte) string {
	if len(elem) < 2 || elem[0] != '<' {
		return ""
	}
	end := bytes.IndexAny(elem[1:], " \t\r\n/>")
	if end < 0 {
		return ""
	}
	name := string(elem[1 : 1+end])
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// startTag returns the element's start tag, up to its '>' outside quotes.
func startTag(elem []byte) []byte {
	var quote byte
	for i, c := range elem {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '>':
			return elem[:i+1]
		}
	}
	return elem
}

// attr returns the unescaped value of the named attribute of the
// element's start tag, and whether it is there.
func attr(elem []byte, name string) (string, bool) {
	tag := startTag(elem)
	// Skip "<name".
	i := bytes.IndexAny(tag, " \t\r\n")
	if i < 0 {
		return "", false
	}
	for i < len(tag) {
		for i < len(tag) && isSpace(tag[i]) {
			i++
		}
		nameStart := i
		for i < len(tag) && tag[i] != '=' && !isSpace(tag[i]) && tag[i] != '>' && tag[i] != '/' {
			i++
		}
		key := tag[nameStart:i]
		for i < len(tag) && isSpace(tag[i]) {
			i++
		}
		if i >= len(tag) || tag[i] != '=' {
			return "", false
		}
		i++
		for i < len(tag) && isSpace(tag[i]) {
			i++
		}
		if i >= len(tag) || (tag[i] != '"' && tag[i] != '\'') {
			return "", false
		}
		q := tag[i]
		end := bytes.IndexByte(tag[i+1:], q)
		if end < 0 {
			return "", false
		}
		val := tag[i+1 : i+1+end]
		i += end + 2
		if string(key) == name {
			return unescape(val), true
		}
	}
	return "", false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

var entities = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&quot;", `"`, "&apos;", "'", "&amp;", "&")

func unescape(b []byte) string {
	if bytes.IndexByte(b, '&') < 0 {
		return string(b)
	}
	return entities.Replace(string(b))
}

// child returns the first descendant element named local (prefix-free
// match on the tag name) from its start tag on, or nil.
func child(elem []byte, local string) []byte {
	pat := []byte("<" + local)
	off := 1 // skip the element's own start tag
	for {
		i := bytes.Index(elem[off:], pat)
		if i < 0 {
			return nil
		}
		j := off + i + len(pat)
		if j < len(elem) && (isSpace(elem[j]) || elem[j] == '>' || elem[j] == '/') {
			return elem[off+i:]
		}
		off = j
	}
}

// innerText returns the text of the element, given from its start tag on,
// up to the next tag.
func innerText(elem []byte) string {
	tag := startTag(elem)
	rest := elem[len(tag):]
	if i := bytes.IndexByte(rest, '<'); i >= 0 {
		rest = rest[:i]
	}
	return unescape(rest)
}

// xmlEscape escapes text for an attribute value or character data.
func xmlEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&apos;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
