package feed

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/beevik/etree"
)

// selectOne evaluates a selector (see ApplyPatch) against doc, resolving
// prefixes at op, and requires exactly one element.
func selectOne(doc *etree.Document, op *etree.Element, sel string) (*etree.Element, error) {
	steps, err := parseSelector(sel)
	if err != nil {
		return nil, fmt.Errorf("selector %q: %w", sel, err)
	}
	// The document node: its only element child is the root.
	cur := []*etree.Element{&doc.Element}
	for _, st := range steps {
		ns, err := st.namespace(op)
		if err != nil {
			return nil, fmt.Errorf("selector %q: %w", sel, err)
		}
		var next []*etree.Element
		for _, parent := range cur {
			var matched []*etree.Element
			for _, c := range parent.ChildElements() {
				if st.local == "*" || (c.Tag == st.local && elementNS(c) == ns) {
					matched = append(matched, c)
				}
			}
			for _, pr := range st.preds {
				matched, err = pr.filter(matched, op)
				if err != nil {
					return nil, fmt.Errorf("selector %q: %w", sel, err)
				}
			}
			next = append(next, matched...)
		}
		cur = next
	}
	switch len(cur) {
	case 0:
		return nil, fmt.Errorf("selector %q matches nothing", sel)
	case 1:
		if cur[0] == &doc.Element {
			return nil, fmt.Errorf("selector %q selects the document", sel)
		}
		return cur[0], nil
	}
	return nil, fmt.Errorf("selector %q matches %d elements, want one", sel, len(cur))
}

type selStep struct {
	prefix, local string
	preds         []selPred
}

func (s selStep) namespace(op *etree.Element) (string, error) {
	if s.local == "*" {
		return "", nil
	}
	uri, ok := namespaceURI(op, s.prefix)
	if !ok {
		return "", fmt.Errorf("prefix %q is not declared", s.prefix)
	}
	return uri, nil
}

// selPred is one predicate: a position, or a comparison of a child
// element's, an attribute's or the text's string value with a literal.
type selPred struct {
	pos           int
	kind          byte // 'p' position, 'e' child element, 'a' attribute, 't' text()
	prefix, local string
	value         string
}

func (p selPred) filter(in []*etree.Element, op *etree.Element) ([]*etree.Element, error) {
	if p.kind == 'p' {
		if p.pos >= 1 && p.pos <= len(in) {
			return in[p.pos-1 : p.pos], nil
		}
		return nil, nil
	}
	var ns string
	if p.kind == 'e' {
		var ok bool
		if ns, ok = namespaceURI(op, p.prefix); !ok {
			return nil, fmt.Errorf("prefix %q is not declared", p.prefix)
		}
	}
	if p.kind == 'a' && p.prefix != "" {
		var ok bool
		if ns, ok = namespaceURI(op, p.prefix); !ok {
			return nil, fmt.Errorf("prefix %q is not declared", p.prefix)
		}
	}
	var out []*etree.Element
	for _, e := range in {
		if p.matches(e, ns) {
			out = append(out, e)
		}
	}
	return out, nil
}

func (p selPred) matches(e *etree.Element, ns string) bool {
	switch p.kind {
	case 't':
		var b strings.Builder
		for _, t := range e.Child {
			if cd, ok := t.(*etree.CharData); ok {
				b.WriteString(cd.Data)
			}
		}
		return b.String() == p.value
	case 'a':
		for i := range e.Attr {
			a := &e.Attr[i]
			if a.Key != p.local || a.Space == "xmlns" || (a.Space == "" && a.Key == "xmlns") {
				continue
			}
			// Unprefixed attributes are in no namespace.
			if p.prefix == "" && a.Space == "" || p.prefix != "" && a.Space != "" && a.NamespaceURI() == ns {
				if a.Value == p.value {
					return true
				}
			}
		}
	case 'e':
		for _, c := range e.ChildElements() {
			if c.Tag == p.local && elementNS(c) == ns && elementText(c) == p.value {
				return true
			}
		}
	}
	return false
}

// maxSelectorBytes bounds a selector.
const maxSelectorBytes = 8 << 10

// parseSelector parses the location path subset ApplyPatch supports.
func parseSelector(s string) ([]selStep, error) {
	if len(s) > maxSelectorBytes {
		return nil, errors.New("selector too long")
	}
	sc := &selScanner{s: s}
	var steps []selStep
	for !sc.done() {
		if !sc.eat('/') {
			return nil, fmt.Errorf("want / at offset %d", sc.i)
		}
		prefix, local, err := sc.qname(true)
		if err != nil {
			return nil, err
		}
		st := selStep{prefix: prefix, local: local}
		for sc.eat('[') {
			pr, err := sc.predicate()
			if err != nil {
				return nil, err
			}
			if !sc.eat(']') {
				return nil, fmt.Errorf("want ] at offset %d", sc.i)
			}
			st.preds = append(st.preds, pr)
		}
		steps = append(steps, st)
	}
	if len(steps) == 0 {
		return nil, errors.New("empty selector")
	}
	return steps, nil
}

type selScanner struct {
	s string
	i int
}

func (sc *selScanner) done() bool { return sc.i >= len(sc.s) }

func (sc *selScanner) space() {
	for sc.i < len(sc.s) && strings.IndexByte(" \t\r\n", sc.s[sc.i]) >= 0 {
		sc.i++
	}
}

func (sc *selScanner) eat(c byte) bool {
	sc.space()
	if sc.i < len(sc.s) && sc.s[sc.i] == c {
		sc.i++
		return true
	}
	return false
}

func isNameByte(c byte, first bool) bool {
	switch {
	case c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= 0x80:
		return true
	case first:
		return false
	}
	return c == '-' || c == '.' || c >= '0' && c <= '9'
}

func (sc *selScanner) ncname() (string, error) {
	sc.space()
	start := sc.i
	for sc.i < len(sc.s) && isNameByte(sc.s[sc.i], sc.i == start) {
		sc.i++
	}
	if sc.i == start {
		return "", fmt.Errorf("want a name at offset %d", start)
	}
	return sc.s[start:sc.i], nil
}

// qname reads prefix:local, local or (when star) *.
func (sc *selScanner) qname(star bool) (string, string, error) {
	if star && sc.eat('*') {
		return "", "*", nil
	}
	a, err := sc.ncname()
	if err != nil {
		return "", "", err
	}
	if sc.i < len(sc.s) && sc.s[sc.i] == ':' {
		sc.i++
		b, err := sc.ncname()
		if err != nil {
			return "", "", err
		}
		return a, b, nil
	}
	return "", a, nil
}

func (sc *selScanner) predicate() (selPred, error) {
	sc.space()
	if sc.i < len(sc.s) && sc.s[sc.i] >= '0' && sc.s[sc.i] <= '9' {
		start := sc.i
		for sc.i < len(sc.s) && sc.s[sc.i] >= '0' && sc.s[sc.i] <= '9' {
			sc.i++
		}
		n, err := strconv.Atoi(sc.s[start:sc.i])
		if err != nil || n < 1 {
			return selPred{}, fmt.Errorf("bad position %q", sc.s[start:sc.i])
		}
		return selPred{kind: 'p', pos: n}, nil
	}
	pr := selPred{kind: 'e'}
	if sc.eat('@') {
		pr.kind = 'a'
	}
	prefix, local, err := sc.qname(false)
	if err != nil {
		return selPred{}, err
	}
	pr.prefix, pr.local = prefix, local
	if pr.kind == 'e' && prefix == "" && local == "text" && sc.eat('(') {
		if !sc.eat(')') {
			return selPred{}, errors.New("want text()")
		}
		pr.kind = 't'
	}
	if !sc.eat('=') {
		return selPred{}, fmt.Errorf("want = at offset %d", sc.i)
	}
	v, err := sc.literal()
	if err != nil {
		return selPred{}, err
	}
	pr.value = v
	return pr, nil
}

// literal reads a quoted string or concat(literal, literal, …).
func (sc *selScanner) literal() (string, error) {
	sc.space()
	if strings.HasPrefix(sc.s[sc.i:], "concat") {
		sc.i += len("concat")
		if !sc.eat('(') {
			return "", errors.New("want concat(")
		}
		var b strings.Builder
		for {
			v, err := sc.quoted()
			if err != nil {
				return "", err
			}
			b.WriteString(v)
			if sc.eat(')') {
				return b.String(), nil
			}
			if !sc.eat(',') {
				return "", fmt.Errorf("want , or ) at offset %d", sc.i)
			}
		}
	}
	return sc.quoted()
}

func (sc *selScanner) quoted() (string, error) {
	sc.space()
	if sc.i >= len(sc.s) || (sc.s[sc.i] != '\'' && sc.s[sc.i] != '"') {
		return "", fmt.Errorf("want a quoted string at offset %d", sc.i)
	}
	q := sc.s[sc.i]
	end := strings.IndexByte(sc.s[sc.i+1:], q)
	if end < 0 {
		return "", errors.New("unterminated string")
	}
	v := sc.s[sc.i+1 : sc.i+1+end]
	sc.i += end + 2
	return v, nil
}
