package xmlrpc

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// value reads the <value> element just opened: bare text is a string,
// otherwise it holds exactly one typed element.
func (p *parser) value(el xml.StartElement, depth int) (any, error) {
	p.values++
	if p.values > p.lim.MaxValues {
		return nil, fmt.Errorf("%w: more than %d values", ErrLimit, p.lim.MaxValues)
	}
	var (
		text   strings.Builder
		result any
		typed  bool
	)
	for {
		tok, err := p.next()
		if err == io.EOF {
			return nil, malformed("<value> is not closed")
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.CharData:
			text.Write(t)
		case xml.StartElement:
			if typed {
				return nil, malformed("<value> holds more than one typed element")
			}
			typed = true
			if result, err = p.typed(t, depth); err != nil {
				return nil, err
			}
		case xml.EndElement:
			if !typed {
				return text.String(), nil
			}
			if strings.TrimSpace(text.String()) != "" {
				return nil, malformed("<value> mixes text and a typed element")
			}
			return result, nil
		}
	}
}

func (p *parser) typed(el xml.StartElement, depth int) (any, error) {
	switch el.Name.Local {
	case "struct":
		return p.structValue(el, depth)
	case "array":
		return p.arrayValue(el, depth)
	case "nil":
		if err := p.children(el, func(c xml.StartElement) error {
			return malformed("<nil> may not contain <%s>", c.Name.Local)
		}); err != nil {
			return nil, err
		}
		return nil, nil
	}
	s, err := p.text(el)
	if err != nil {
		return nil, err
	}
	switch el.Name.Local {
	case "string":
		return s, nil
	case "int", "i4":
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil {
			return nil, malformed("<%s>%s</%s> is not a 32-bit integer", el.Name.Local, clip(s), el.Name.Local)
		}
		return int(n), nil
	case "boolean":
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "1", "true":
			return true, nil
		case "0", "false":
			return false, nil
		}
		return nil, malformed("<boolean>%s</boolean> is neither 0 nor 1", clip(s))
	case "double":
		return parseDouble(s)
	case "dateTime.iso8601":
		return parseDateTime(s)
	case "base64":
		return parseBase64(s)
	}
	return nil, malformed("unknown value type <%s>", el.Name.Local)
}

func (p *parser) structValue(el xml.StartElement, depth int) (any, error) {
	if depth+1 > p.lim.MaxDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d", ErrLimit, p.lim.MaxDepth)
	}
	m := map[string]any{}
	err := p.children(el, func(member xml.StartElement) error {
		if member.Name.Local != "member" {
			return malformed("unexpected <%s> in <struct>", member.Name.Local)
		}
		var (
			name                string
			v                   any
			haveName, haveValue bool
		)
		err := p.children(member, func(c xml.StartElement) error {
			switch c.Name.Local {
			case "name":
				if haveName {
					return malformed("a <member> has more than one <name>")
				}
				haveName = true
				var err error
				name, err = p.text(c)
				return err
			case "value":
				if haveValue {
					return malformed("a <member> has more than one <value>")
				}
				haveValue = true
				var err error
				v, err = p.value(c, depth+1)
				return err
			}
			return malformed("unexpected <%s> in <member>", c.Name.Local)
		})
		if err != nil {
			return err
		}
		if !haveName || !haveValue {
			return malformed("a <member> needs a <name> and a <value>")
		}
		if _, dup := m[name]; dup {
			return malformed("the struct member %q appears twice", clip(name))
		}
		m[name] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (p *parser) arrayValue(el xml.StartElement, depth int) (any, error) {
	if depth+1 > p.lim.MaxDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d", ErrLimit, p.lim.MaxDepth)
	}
	var (
		items    = []any{}
		haveData bool
	)
	err := p.children(el, func(data xml.StartElement) error {
		if data.Name.Local != "data" {
			return malformed("unexpected <%s> in <array>", data.Name.Local)
		}
		if haveData {
			return malformed("an <array> has more than one <data>")
		}
		haveData = true
		return p.children(data, func(c xml.StartElement) error {
			if c.Name.Local != "value" {
				return malformed("unexpected <%s> in <data>", c.Name.Local)
			}
			v, err := p.value(c, depth+1)
			if err != nil {
				return err
			}
			items = append(items, v)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if !haveData {
		return nil, malformed("an <array> needs a <data>")
	}
	return items, nil
}

func parseDouble(s string) (float64, error) {
	t := strings.TrimSpace(s)
	// The specification allows only decimal digits, sign and point;
	// exponents are tolerated, but not hexadecimal floats, Inf or NaN.
	ok := t != ""
	for _, r := range t {
		if !(r >= '0' && r <= '9' || r == '.' || r == '-' || r == '+' || r == 'e' || r == 'E') {
			ok = false
			break
		}
	}
	var f float64
	if ok {
		var err error
		f, err = strconv.ParseFloat(t, 64)
		ok = err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
	}
	if !ok {
		return 0, malformed("<double>%s</double> is not a finite number", clip(s))
	}
	return f, nil
}

// dateTimeLayouts are the forms of dateTime.iso8601 seen in the wild: the
// specification's compact form first.
var dateTimeLayouts = []string{
	"20060102T15:04:05",
	"20060102T150405",
	"2006-01-02T15:04:05",
	"20060102T15:04:05Z07:00",
	"20060102T150405Z07:00",
	"2006-01-02T15:04:05Z07:00",
	"20060102T15:04:05Z0700",
	"20060102T150405Z0700",
	"2006-01-02T15:04:05Z0700",
	"2006-01-02T15:04:05.999999999Z07:00",
}

func parseDateTime(s string) (time.Time, error) {
	t := strings.TrimSpace(s)
	for _, layout := range dateTimeLayouts {
		if v, err := time.Parse(layout, t); err == nil {
			return v, nil
		}
	}
	return time.Time{}, malformed("<dateTime.iso8601>%s</dateTime.iso8601> is not an ISO 8601 date and time", clip(s))
}

func parseBase64(s string) ([]byte, error) {
	compact := strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
	b, err := base64.StdEncoding.DecodeString(compact)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(compact)
	}
	if err != nil {
		return nil, malformed("<base64> is not valid base64: %v", err)
	}
	return b, nil
}
