package httpapi

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/pingd/pingd/internal/soap"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// rssCloud over SOAP 1.1 (seed 001: "the rssCloud interface … can be
// implemented in either XML-RPC or SOAP"; <cloud protocol="soap">). A POST
// to /RPC2 with a SOAPAction header (which SOAP 1.1 §6.1.1 requires of
// every SOAP request over HTTP) is a SOAP call: the Body's first element
// names the procedure — pleaseNotify (or rssPleaseNotify) and ping — and its
// child elements are the parameters in the order of the XML-RPC ones, as
// rssCloud's SOAP clients send them; a parameter with child elements is a
// list (urlList). The calls run exactly as their XML-RPC twins. The answer
// is a SOAP envelope whose <Result> is the boolean; a bad call is a SOAP
// Fault: faultcode Client with HTTP 400 for the caller's mistakes, Server
// with HTTP 500 for pingd's own. SOAP 1.1 §6.2 sends every fault with 500;
// pingd answers the caller's mistakes as SOAP 1.2's HTTP binding does
// (Sender: 400) because a 500 for what any stranger can send would count
// as pingd failing: a proxy's health checks and the operator's error
// alerts would react to bad envelopes. The fault body is the same.
//
// Hand-written like the XML-RPC codec: no maintained SOAP 1.1 library for
// Go exists among the modules this project may use, and this subset (one
// envelope, positional parameters, a boolean answer) is small.

const (
	soapEnvNS = soap.EnvelopeNS
	// soapMaxParams bounds the parameters and list items read.
	soapMaxParams = soap.MaxParams
)

// isSOAP reports whether a POST to /RPC2 is a SOAP call.
func isSOAP(r *http.Request) bool { return soap.IsCall(r.Header) }

// decodeSOAP reads a SOAP 1.1 call with the codec pingd's SOAP peers
// share (internal/soap).
func decodeSOAP(body []byte) (*soap.Call, error) { return soap.DecodeCall(body) }

// soapMethods maps SOAP procedure names to the XML-RPC methods they run.
var soapMethods = map[string]string{
	"pleaseNotify":    "rssCloud.pleaseNotify",
	"rssPleaseNotify": "rssCloud.pleaseNotify",
	"ping":            "rssCloud.ping",
}

// serveSOAP answers one SOAP call on /RPC2.
func (a *RPC) serveSOAP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body) // capped by limitBody in serveRPC
	if err != nil {
		if isTooLarge(err) {
			writeText(w, http.StatusRequestEntityTooLarge, a.tooLargeMessage())
			return
		}
		writeSOAPFault(w, soapClient, "could not read the request")
		return
	}
	call, err := decodeSOAP(body)
	if err != nil {
		writeSOAPFault(w, soapClient, err.Error())
		return
	}
	name, ok := soapMethods[call.Method]
	fn := a.method(name)
	if !ok || fn == nil {
		writeSOAPFault(w, soapClient, fmt.Sprintf("unknown procedure %q: this cloud answers pleaseNotify and ping", call.Method))
		return
	}
	// The port travels as text in SOAP; the XML-RPC method takes both.
	req := &RPCRequest{Method: name, Params: call.Params, Remote: clientIP(r), HTTP: r}
	result, err := fn(r.Context(), req)
	var fault *xmlrpc.Fault
	var limited *RateLimitError
	switch {
	case errors.As(err, &limited):
		setRetryAfter(w, limited.RetryAfter)
		writeText(w, limited.status(), limited.Error())
		return
	case errors.As(err, &fault):
		writeSOAPFault(w, faultParty(fault), fault.Message)
		return
	case err != nil:
		a.log.ErrorContext(r.Context(), "SOAP call failed", "method", call.Method, "err", err)
		writeSOAPFault(w, soapServer, "pingd could not complete the call; try again later")
		return
	}
	ok, _ = result.(bool)
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString(`<SOAP-ENV:Envelope xmlns:SOAP-ENV="` + soapEnvNS + `" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema">`)
	fmt.Fprintf(&b, `<SOAP-ENV:Body><%sResponse><Result xsi:type="xsd:boolean">%t</Result></%sResponse></SOAP-ENV:Body></SOAP-ENV:Envelope>`,
		call.Method, ok, call.Method)
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
}

// soapParty is who a fault blames: its faultcode and HTTP status.
type soapParty struct {
	code   string
	status int
}

var (
	soapClient = soapParty{"Client", http.StatusBadRequest}
	soapServer = soapParty{"Server", http.StatusInternalServerError}
)

// faultParty tells the caller's mistakes (bad parameters, unknown
// methods) from pingd's own failures among the XML-RPC faults the calls
// return.
func faultParty(f *xmlrpc.Fault) soapParty {
	switch f.Code {
	case xmlrpc.FaultInternal, xmlrpc.FaultApplication:
		return soapServer
	}
	return soapClient
}

// writeSOAPFault answers with a SOAP 1.1 Fault.
func writeSOAPFault(w http.ResponseWriter, party soapParty, msg string) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString(`<SOAP-ENV:Envelope xmlns:SOAP-ENV="` + soapEnvNS + `"><SOAP-ENV:Body><SOAP-ENV:Fault>`)
	b.WriteString(`<faultcode>SOAP-ENV:` + party.code + `</faultcode><faultstring>`)
	_ = xml.EscapeText(&b, []byte(msg))
	b.WriteString(`</faultstring></SOAP-ENV:Fault></SOAP-ENV:Body></SOAP-ENV:Envelope>`)
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(party.status)
	_, _ = w.Write(b.Bytes())
}
