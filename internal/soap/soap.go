package soap

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// EnvelopeNS is the SOAP 1.1 envelope namespace.
const EnvelopeNS = "http://schemas.xmlsoap.org/soap/envelope/"

// MaxParams bounds the parameters of a call and the items of a list.
const MaxParams = 1000

// maxFaultBytes bounds what is read of an answer looking for its fault.
const maxFaultBytes = 1 << 20

// ContentType is what pingd sends SOAP documents as.
const ContentType = "text/xml; charset=utf-8"

// IsCall reports whether an HTTP request is a SOAP call: SOAP 1.1 §6.1.1
// makes the SOAPAction header mandatory; a content type naming soap
// counts too.
func IsCall(h http.Header) bool {
	_, has := h["Soapaction"]
	return has || strings.Contains(strings.ToLower(h.Get("Content-Type")), "soap")
}

// Action is the SOAPAction header value pingd sends with a call of
// procedure, the form Radio UserLand's SOAP responders take.
func Action(procedure string) string { return `"/` + procedure + `"` }

// Call is a decoded call: the procedure's local name and its parameters,
// each a string or a []any of strings (a list).
type Call struct {
	Method string
	Params []any
}

// node is an element of a call, read generically.
type node struct {
	XMLName  xml.Name
	Text     string `xml:",chardata"`
	Children []node `xml:",any"`
}

type envelope struct {
	XMLName xml.Name `xml:"http://schemas.xmlsoap.org/soap/envelope/ Envelope"`
	Body    struct {
		Calls []node `xml:",any"`
	} `xml:"http://schemas.xmlsoap.org/soap/envelope/ Body"`
}

func newDecoder(body []byte) *xml.Decoder {
	d := xml.NewDecoder(bytes.NewReader(body))
	d.CharsetReader = func(label string, r io.Reader) (io.Reader, error) {
		if strings.EqualFold(label, "utf-8") || strings.EqualFold(label, "us-ascii") {
			return r, nil
		}
		return nil, fmt.Errorf("charset %q is not supported", label)
	}
	return d
}

// DecodeCall reads a SOAP 1.1 call: the Body's one element names the
// procedure (in any namespace), its child elements are the parameters in
// order, whatever they are called.
func DecodeCall(body []byte) (*Call, error) {
	var env envelope
	if err := newDecoder(body).Decode(&env); err != nil {
		return nil, fmt.Errorf("not a SOAP 1.1 envelope: %w", err)
	}
	if len(env.Body.Calls) != 1 {
		return nil, fmt.Errorf("the SOAP Body holds %d elements; want one call", len(env.Body.Calls))
	}
	call := env.Body.Calls[0]
	out := &Call{Method: call.XMLName.Local}
	if len(call.Children) > MaxParams {
		return nil, errors.New("too many parameters")
	}
	for _, p := range call.Children {
		if len(p.Children) == 0 {
			out.Params = append(out.Params, strings.TrimSpace(p.Text))
			continue
		}
		if len(p.Children) > MaxParams {
			return nil, errors.New("too many list items")
		}
		var list []any
		for _, item := range p.Children {
			list = append(list, strings.TrimSpace(item.Text))
		}
		out.Params = append(out.Params, list)
	}
	return out, nil
}

// ValidProcedure reports whether name can be the element name of a call:
// an XML name without a prefix.
func ValidProcedure(name string) bool {
	if name == "" || len(name) > 256 {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_':
		case i > 0 && (r >= '0' && r <= '9' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}

// Param is one named parameter of a call: its Value is a string, an int
// or a []string (a list, written as <item> children).
type Param struct {
	Name  string
	Value any
}

// MarshalCall encodes a SOAP 1.1 RPC call of procedure with params, in
// section-5 encoding with xsi types, as rssCloud's SOAP peers send them.
func MarshalCall(procedure string, params ...Param) ([]byte, error) {
	if !ValidProcedure(procedure) {
		return nil, fmt.Errorf("invalid SOAP procedure name %q", procedure)
	}
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<SOAP-ENV:Envelope SOAP-ENV:encodingStyle="http://schemas.xmlsoap.org/soap/encoding/"`)
	b.WriteString(` xmlns:SOAP-ENV="` + EnvelopeNS + `"`)
	b.WriteString(` xmlns:SOAP-ENC="http://schemas.xmlsoap.org/soap/encoding/"`)
	b.WriteString(` xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">`)
	b.WriteString(`<SOAP-ENV:Body><` + procedure + `>`)
	for _, p := range params {
		if !ValidProcedure(p.Name) {
			return nil, fmt.Errorf("invalid SOAP parameter name %q", p.Name)
		}
		switch v := p.Value.(type) {
		case string:
			b.WriteString(`<` + p.Name + ` xsi:type="xsd:string">`)
			_ = xml.EscapeText(&b, []byte(v))
		case int:
			b.WriteString(`<` + p.Name + ` xsi:type="xsd:int">` + strconv.Itoa(v))
		case []string:
			fmt.Fprintf(&b, `<%s xsi:type="SOAP-ENC:Array" SOAP-ENC:arrayType="xsd:string[%d]">`, p.Name, len(v))
			for _, item := range v {
				b.WriteString(`<item xsi:type="xsd:string">`)
				_ = xml.EscapeText(&b, []byte(item))
				b.WriteString(`</item>`)
			}
		default:
			return nil, fmt.Errorf("SOAP parameter %s: a %T has no encoding here", p.Name, p.Value)
		}
		b.WriteString(`</` + p.Name + `>`)
	}
	b.WriteString(`</` + procedure + `></SOAP-ENV:Body></SOAP-ENV:Envelope>` + "\n")
	return b.Bytes(), nil
}

// MarshalResponse encodes the answer to a call of method: a
// <methodResponse> element holding the boolean <Result>.
func MarshalResponse(method string, result bool) []byte {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString(`<SOAP-ENV:Envelope xmlns:SOAP-ENV="` + EnvelopeNS + `" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema">`)
	fmt.Fprintf(&b, `<SOAP-ENV:Body><%sResponse><Result xsi:type="xsd:boolean">%t</Result></%sResponse></SOAP-ENV:Body></SOAP-ENV:Envelope>`,
		method, result, method)
	return b.Bytes()
}

// Fault codes of SOAP 1.1 §4.4.1 pingd uses.
const (
	FaultClient = "Client"
	FaultServer = "Server"
)

// MarshalFault encodes a Fault with faultcode SOAP-ENV:code and the
// message as faultstring.
func MarshalFault(code, msg string) []byte {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString(`<SOAP-ENV:Envelope xmlns:SOAP-ENV="` + EnvelopeNS + `"><SOAP-ENV:Body><SOAP-ENV:Fault>`)
	b.WriteString(`<faultcode>SOAP-ENV:` + code + `</faultcode><faultstring>`)
	_ = xml.EscapeText(&b, []byte(msg))
	b.WriteString(`</faultstring></SOAP-ENV:Fault></SOAP-ENV:Body></SOAP-ENV:Envelope>`)
	return b.Bytes()
}

// FaultString returns the faultstring (or "unspecified") of an envelope
// that carries a Fault in its Body, and "" otherwise, including for a body
// that is not XML: only an explicit fault counts as one.
func FaultString(body []byte) string {
	d := xml.NewDecoder(io.LimitReader(bytes.NewReader(body), maxFaultBytes))
	d.Strict = true
	inFault := false
	var text strings.Builder
	var inString bool
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch {
			case t.Name.Local == "Fault" && t.Name.Space == EnvelopeNS:
				inFault = true
			case inFault && t.Name.Local == "faultstring":
				inString = true
			}
		case xml.EndElement:
			if inString && t.Name.Local == "faultstring" {
				inString = false
			}
			if t.Name.Local == "Fault" && t.Name.Space == EnvelopeNS {
				return faultText(text.String())
			}
		case xml.CharData:
			if inString && text.Len() < 1024 {
				text.Write(t)
			}
		}
	}
	if inFault {
		return faultText(text.String())
	}
	return ""
}

func faultText(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return "unspecified"
	}
	return s
}

// FaultError is a Fault answered to a call.
type FaultError struct{ Message string }

func (e *FaultError) Error() string { return "SOAP fault: " + e.Message }

// DecodeBoolResponse reads the answer to a call that returns a boolean: a
// Fault is a *FaultError; otherwise the first element inside the Body's
// response element (rssCloud's <Result>) must be a boolean (true, false,
// 1 or 0).
func DecodeBoolResponse(body []byte) (bool, error) {
	if f := FaultString(body); f != "" {
		return false, &FaultError{Message: f}
	}
	var env envelope
	if err := newDecoder(body).Decode(&env); err != nil {
		return false, fmt.Errorf("not a SOAP 1.1 envelope: %w", err)
	}
	if len(env.Body.Calls) != 1 || len(env.Body.Calls[0].Children) == 0 {
		return false, errors.New("the SOAP answer holds no result")
	}
	result := env.Body.Calls[0].Children[0]
	switch strings.ToLower(strings.TrimSpace(result.Text)) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("the SOAP result <%s> is %q, not a boolean", result.XMLName.Local, strings.TrimSpace(result.Text))
}
