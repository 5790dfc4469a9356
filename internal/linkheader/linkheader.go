package linkheader

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// MaxLinks bounds the links Parse returns for one answer: the links that
// matter come first, and an answer cannot make pingd hold more.
const MaxLinks = 64

// Link is one link of a Link header, for one relation type or several.
type Link struct {
	// Target is the link's target, resolved against the base.
	Target string
	// Rels are the relation types, lower-cased (rel="Hub self" gives
	// "hub" and "self"). A link without rel has none.
	Rels []string
	// Context is the resource the link is about: the base, or the
	// anchor parameter resolved against it.
	Context string
	// Params are the other parameters (lower-case names), the first of
	// each name; an extended value (title*) is decoded and stored under
	// its name with the star.
	Params map[string]string
}

// HasRel reports whether rel (lower case) is one of l's relation types.
func (l Link) HasRel(rel string) bool {
	for _, r := range l.Rels {
		if r == rel {
			return true
		}
	}
	return false
}

// AboutBase reports whether the link is about the base itself (it has no
// anchor naming another resource).
func (l Link) AboutBase(base *url.URL) bool {
	return base == nil || l.Context == base.String()
}

// Parse reads the Link header field values of one answer in order, with
// base the URL of the representation that carried them (nil: targets
// stay as written and must be absolute). A link whose target is not a
// URL, or not absolute without a base, is skipped; text after a link's
// parameters that is not one is skipped up to the next comma outside
// quotes; a list element that does not start with "<" ends the field
// value, as RFC 8288 Appendix B.2 says.
func Parse(values []string, base *url.URL) []Link {
	var out []Link
	for _, v := range values {
		p := parser{s: v}
		for len(out) < MaxLinks {
			l, ok, more := p.link(base)
			if ok {
				out = append(out, l)
			}
			if !more {
				break
			}
		}
	}
	return out
}

type parser struct{ s string }

func (p *parser) skipOWS() {
	p.s = strings.TrimLeft(p.s, " \t")
}

func (p *parser) peek() byte {
	if p.s == "" {
		return 0
	}
	return p.s[0]
}

// link reads one link-value and the comma after it (RFC 8288 Appendix
// B.2, one turn of its loop). ok says whether a usable link was read,
// more whether the field value goes on.
func (p *parser) link(base *url.URL) (l Link, ok, more bool) {
	// Empty list elements (",,") are allowed by the list rule.
	for {
		p.skipOWS()
		if p.peek() != ',' {
			break
		}
		p.s = p.s[1:]
	}
	if p.s == "" || p.peek() != '<' {
		return Link{}, false, false
	}
	end := strings.IndexByte(p.s, '>')
	if end < 0 {
		return Link{}, false, false
	}
	target := strings.TrimSpace(p.s[1:end])
	p.s = p.s[end+1:]
	params := p.params()
	p.skipOWS()
	more = p.peek() == ','
	if more {
		p.s = p.s[1:]
	}

	l = Link{Params: map[string]string{}}
	var anchor string
	haveRel, haveAnchor := false, false
	for _, kv := range params {
		switch kv.name {
		case "rel":
			if !haveRel {
				haveRel = true
				l.Rels = strings.Fields(strings.ToLower(kv.value))
			}
		case "anchor":
			if !haveAnchor {
				haveAnchor = true
				anchor = kv.value
			}
		case "rev":
			// Deprecated (RFC 8288 §3.3) and ignored.
		default:
			if _, seen := l.Params[kv.name]; !seen {
				l.Params[kv.name] = kv.value
			}
		}
	}
	t, ok := resolve(base, target)
	if !ok {
		return Link{}, false, more
	}
	l.Target = t
	if base != nil {
		l.Context = base.String()
	}
	if haveAnchor {
		c, ok := resolve(base, anchor)
		if !ok {
			return Link{}, false, more
		}
		l.Context = c
	}
	return l, true, more
}

type param struct{ name, value string }

// maxParams bounds the parameters read per link.
const maxParams = 32

// params reads the link-params after a target (RFC 8288 Appendix B.3),
// stopping before the comma that ends the link-value, or at what is not a
// parameter.
func (p *parser) params() []param {
	var out []param
	for {
		p.skipOWS()
		if p.peek() != ';' {
			// Not a parameter: skip to the end of this link-value so the
			// next one can still be read.
			p.skipToComma()
			return out
		}
		p.s = p.s[1:]
		p.skipOWS()
		i := strings.IndexAny(p.s, " \t=;,")
		if i < 0 {
			i = len(p.s)
		}
		name := strings.ToLower(p.s[:i])
		p.s = p.s[i:]
		p.skipOWS()
		value := ""
		if p.peek() == '=' {
			p.s = p.s[1:]
			p.skipOWS()
			if p.peek() == '"' {
				value = p.quoted()
			} else {
				// A token: it ends at white space too, so that what
				// follows it is judged on its own.
				j := strings.IndexAny(p.s, " \t;,")
				if j < 0 {
					j = len(p.s)
				}
				value = p.s[:j]
				p.s = p.s[j:]
			}
			if strings.HasSuffix(name, "*") {
				v, ok := decodeExtValue(value)
				if !ok {
					continue
				}
				value = v
			}
		}
		if name != "" && len(out) < maxParams {
			out = append(out, param{name, value})
		}
	}
}

// skipToComma moves past garbage up to the next comma outside quotes.
func (p *parser) skipToComma() {
	inQuote := false
	for i := 0; i < len(p.s); i++ {
		switch c := p.s[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case c == ',' && !inQuote:
			p.s = p.s[i:]
			return
		}
	}
	p.s = ""
}

// quoted reads a quoted-string (RFC 8288 Appendix B.4): backslash quotes
// the next character; an unterminated string runs to the end.
func (p *parser) quoted() string {
	var b strings.Builder
	s := p.s[1:]
	for len(s) > 0 {
		c := s[0]
		switch {
		case c == '\\':
			if len(s) == 1 {
				p.s = ""
				return b.String()
			}
			b.WriteByte(s[1])
			s = s[2:]
		case c == '"':
			p.s = s[1:]
			return b.String()
		default:
			b.WriteByte(c)
			s = s[1:]
		}
	}
	p.s = ""
	return b.String()
}

// decodeExtValue decodes an RFC 8187 ext-value: charset'language'pct-encoded
// octets. Only UTF-8 (and its subset US-ASCII) is read, as RFC 8187
// requires recipients to support.
func decodeExtValue(v string) (string, bool) {
	charset, rest, ok := strings.Cut(v, "'")
	if !ok {
		return "", false
	}
	_, enc, ok := strings.Cut(rest, "'")
	if !ok {
		return "", false
	}
	switch strings.ToLower(charset) {
	case "utf-8", "us-ascii":
	default:
		return "", false
	}
	s, err := url.PathUnescape(enc)
	if err != nil || !utf8.ValidString(s) {
		return "", false
	}
	return s, true
}

// resolve makes ref absolute against base (RFC 3986 §5.2) and drops its
// fragment; without a base ref must already be absolute.
func resolve(base *url.URL, ref string) (string, bool) {
	u, err := url.Parse(ref)
	if err != nil {
		return "", false
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if !u.IsAbs() {
		return "", false
	}
	u.Fragment, u.RawFragment = "", ""
	s := u.String()
	// Resolution can produce what does not parse again ("//::0" becomes
	// "https://::0"): only a URL that reads back is a target.
	if _, err := url.Parse(s); err != nil {
		return "", false
	}
	return s, true
}
