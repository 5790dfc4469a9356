package xmlrpc

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding/htmlindex"
)

// DecodeCall reads one <methodCall> document from r.
func DecodeCall(r io.Reader, lim Limits) (*Call, error) {
	lim = lim.withDefaults()
	data, err := readDocument(r, lim)
	if err != nil {
		return nil, err
	}
	if call, ok := decodeSimpleCall(data, lim.MaxValues); ok {
		return call, nil
	}
	p := newParserOf(data, lim)
	call, err := p.methodCall()
	if err != nil {
		return nil, err
	}
	return call, nil
}

// DecodeResponse reads one <methodResponse> document from r and returns
// its single value. A fault response is returned as a *Fault error.
func DecodeResponse(r io.Reader, lim Limits) (any, error) {
	lim = lim.withDefaults()
	data, err := readDocument(r, lim)
	if err != nil {
		return nil, err
	}
	return newParserOf(data, lim).methodResponse()
}

// DecodeBoolResponse decodes a response that must carry a boolean, as
// rssCloud notifications and registrations answer.
func DecodeBoolResponse(r io.Reader, lim Limits) (bool, error) {
	v, err := DecodeResponse(r, lim)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("%w: the response is %s, not a boolean", ErrMalformed, TypeName(v))
	}
	return b, nil
}

type parser struct {
	d      *xml.Decoder
	lim    Limits
	values int
}

// readDocument reads the whole (capped) document first: that separates
// "too large" from "malformed" and keeps the XML decoder off the network.
func readDocument(r io.Reader, lim Limits) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, lim.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read XML-RPC document: %w", err)
	}
	if int64(len(data)) > lim.MaxBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, lim.MaxBytes)
	}
	return data, nil
}

// newParserOf returns the general decoder of data; lim has its defaults.
func newParserOf(data []byte, lim Limits) *parser {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	d.CharsetReader = charsetReader
	return &parser{d: d, lim: lim}
}

// charsetReader transcodes documents that declare an encoding other than
// UTF-8 (old clients send ISO-8859-1) into UTF-8.
func charsetReader(label string, input io.Reader) (io.Reader, error) {
	enc, err := htmlindex.Get(label)
	if err != nil {
		return nil, fmt.Errorf("unsupported encoding %q", label)
	}
	return enc.NewDecoder().Reader(input), nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// next returns the next token that matters: a start or end element or
// character data. Comments and processing instructions are skipped;
// declarations (DOCTYPE and the like) are refused.
func (p *parser) next() (xml.Token, error) {
	for {
		tok, err := p.d.Token()
		if err == io.EOF {
			return nil, io.EOF
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		switch t := tok.(type) {
		case xml.Directive:
			return nil, malformed("declarations such as DOCTYPE are not accepted")
		case xml.Comment:
			if !utf8.Valid(t) {
				return nil, malformed("invalid UTF-8 in a comment")
			}
		case xml.ProcInst:
			if !utf8.Valid(t.Inst) {
				return nil, malformed("invalid UTF-8 in a processing instruction")
			}
		case xml.CharData:
			if !utf8.Valid(t) {
				return nil, malformed("invalid UTF-8 in text")
			}
			return t, nil
		case xml.StartElement:
			for _, a := range t.Attr {
				if !utf8.ValidString(a.Value) {
					return nil, malformed("invalid UTF-8 in an attribute of <%s>", t.Name.Local)
				}
			}
			return t, nil
		case xml.EndElement:
			return t, nil
		}
	}
}

// root returns the document element, which must be named want.
func (p *parser) root(want string) (xml.StartElement, error) {
	for {
		tok, err := p.next()
		if err == io.EOF {
			return xml.StartElement{}, malformed("empty document")
		}
		if err != nil {
			return xml.StartElement{}, err
		}
		switch t := tok.(type) {
		case xml.CharData:
			if !isSpace(t) {
				return xml.StartElement{}, malformed("text before the document element")
			}
		case xml.StartElement:
			if t.Name.Local != want {
				return xml.StartElement{}, malformed("the document element is <%s>, not <%s>", t.Name.Local, want)
			}
			return t, nil
		default:
			return xml.StartElement{}, malformed("unexpected %T before the document element", tok)
		}
	}
}

// end checks that nothing but white space follows the document element.
func (p *parser) end() error {
	for {
		tok, err := p.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if t, ok := tok.(xml.CharData); ok && isSpace(t) {
			continue
		}
		return malformed("content after the document element")
	}
}

// children calls fn for each child element of the element just opened,
// refusing text between them, until its end tag. fn must consume the
// child up to and including the child's end tag.
func (p *parser) children(parent xml.StartElement, fn func(xml.StartElement) error) error {
	for {
		tok, err := p.next()
		if err == io.EOF {
			return malformed("<%s> is not closed", parent.Name.Local)
		}
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.CharData:
			if !isSpace(t) {
				return malformed("unexpected text in <%s>", parent.Name.Local)
			}
		case xml.StartElement:
			if err := fn(t); err != nil {
				return err
			}
		case xml.EndElement:
			return nil
		}
	}
}

// text returns the character data of the element just opened, refusing
// child elements.
func (p *parser) text(el xml.StartElement) (string, error) {
	var b strings.Builder
	for {
		tok, err := p.next()
		if err == io.EOF {
			return "", malformed("<%s> is not closed", el.Name.Local)
		}
		if err != nil {
			return "", err
		}
		switch t := tok.(type) {
		case xml.CharData:
			b.Write(t)
		case xml.StartElement:
			return "", malformed("<%s> may not contain <%s>", el.Name.Local, t.Name.Local)
		case xml.EndElement:
			return b.String(), nil
		}
	}
}

func (p *parser) methodCall() (*Call, error) {
	root, err := p.root("methodCall")
	if err != nil {
		return nil, err
	}
	call := &Call{}
	var haveName, haveParams bool
	err = p.children(root, func(el xml.StartElement) error {
		switch el.Name.Local {
		case "methodName":
			if haveName {
				return malformed("more than one <methodName>")
			}
			haveName = true
			name, err := p.text(el)
			if err != nil {
				return err
			}
			call.Method = strings.TrimSpace(name)
			if !ValidMethodName(call.Method) {
				return malformed("invalid method name %q", call.Method)
			}
			return nil
		case "params":
			if haveParams {
				return malformed("more than one <params>")
			}
			haveParams = true
			params, err := p.params(el)
			call.Params = params
			return err
		default:
			return malformed("unexpected <%s> in <methodCall>", el.Name.Local)
		}
	})
	if err != nil {
		return nil, err
	}
	if !haveName {
		return nil, malformed("<methodCall> has no <methodName>")
	}
	if call.Params == nil {
		call.Params = []any{}
	}
	return call, p.end()
}

func (p *parser) params(el xml.StartElement) ([]any, error) {
	params := []any{}
	err := p.children(el, func(param xml.StartElement) error {
		if param.Name.Local != "param" {
			return malformed("unexpected <%s> in <params>", param.Name.Local)
		}
		v, err := p.singleValue(param, 1)
		if err != nil {
			return err
		}
		params = append(params, v)
		return nil
	})
	return params, err
}

// singleValue reads an element holding exactly one <value> (param, member
// values are handled by struct parsing).
func (p *parser) singleValue(el xml.StartElement, depth int) (any, error) {
	var v any
	seen := false
	err := p.children(el, func(child xml.StartElement) error {
		if child.Name.Local != "value" {
			return malformed("unexpected <%s> in <%s>", child.Name.Local, el.Name.Local)
		}
		if seen {
			return malformed("more than one <value> in <%s>", el.Name.Local)
		}
		seen = true
		var err error
		v, err = p.value(child, depth)
		return err
	})
	if err != nil {
		return nil, err
	}
	if !seen {
		return nil, malformed("<%s> has no <value>", el.Name.Local)
	}
	return v, nil
}

func (p *parser) methodResponse() (any, error) {
	root, err := p.root("methodResponse")
	if err != nil {
		return nil, err
	}
	var (
		result any
		fault  *Fault
		seen   bool
	)
	err = p.children(root, func(el xml.StartElement) error {
		if seen {
			return malformed("<methodResponse> holds more than one <params> or <fault>")
		}
		seen = true
		switch el.Name.Local {
		case "params":
			params, err := p.params(el)
			if err != nil {
				return err
			}
			if len(params) != 1 {
				return malformed("a response carries exactly one parameter, not %d", len(params))
			}
			result = params[0]
			return nil
		case "fault":
			v, err := p.singleValue(el, 1)
			if err != nil {
				return err
			}
			fault, err = faultFrom(v)
			return err
		default:
			return malformed("unexpected <%s> in <methodResponse>", el.Name.Local)
		}
	})
	if err != nil {
		return nil, err
	}
	if !seen {
		return nil, malformed("<methodResponse> has neither <params> nor <fault>")
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	if fault != nil {
		return nil, fault
	}
	return result, nil
}

func faultFrom(v any) (*Fault, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, malformed("the fault value is %s, not a struct", TypeName(v))
	}
	code, ok := m["faultCode"].(int)
	if !ok {
		return nil, malformed("the fault has no int faultCode")
	}
	msg, ok := m["faultString"].(string)
	if !ok {
		return nil, malformed("the fault has no string faultString")
	}
	return &Fault{Code: code, Message: msg}, nil
}

func isSpace(b []byte) bool {
	return len(bytes.TrimLeft(b, " \t\r\n")) == 0
}

// clip shortens input quoted in error messages.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// TypeName names the XML-RPC type of a decoded value, for error messages.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case string:
		return "string"
	case int:
		return "int"
	case bool:
		return "boolean"
	case float64:
		return "double"
	case time.Time:
		return "dateTime.iso8601"
	case []byte:
		return "base64"
	case map[string]any:
		return "struct"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

// IsDecodeError reports whether err says the document was bad (as opposed
// to a failure reading it).
func IsDecodeError(err error) bool {
	return errors.Is(err, ErrMalformed) || errors.Is(err, ErrLimit) || errors.Is(err, ErrTooLarge)
}
