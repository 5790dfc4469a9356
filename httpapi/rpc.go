package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/internal/xmlrpc"
)

// RPCRequest is one XML-RPC call as a method sees it.
type RPCRequest struct {
	Method string
	Params []any
	// Remote is the caller's IP address.
	Remote string
	// HTTP is the request that carried the call.
	HTTP *http.Request
}

// RPCMethod implements one XML-RPC method. It returns the value of the
// response, or an error: a *xmlrpc.Fault is answered as that fault, a
// *RateLimitError as HTTP 429 with Retry-After, and any other error as an
// internal-error fault (logged, its text not shown).
type RPCMethod func(ctx context.Context, req *RPCRequest) (any, error)

// RateLimitError says the caller must wait before trying again.
type RateLimitError struct {
	RetryAfter time.Duration
	What       string
	// Status is the HTTP status of the answer: 0 means 429 Too Many
	// Requests (the client asked too much); a bound of the whole server
	// says 503 Service Unavailable.
	Status int
}

// status is the HTTP status the error is answered with.
func (e *RateLimitError) status() int {
	if e.Status == 0 {
		return http.StatusTooManyRequests
	}
	return e.Status
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("rate limited: %s; retry in %s", e.What, e.RetryAfter.Round(time.Second))
}

// RPCConfig configures the XML-RPC endpoint.
type RPCConfig struct {
	Site
}

// RPC is POST /RPC2: the XML-RPC method table, which the areas fill
// (the ping methods, rssCloud's registration), and rssCloud's SOAP
// interface on the same path (soap.go).
type RPC struct {
	site
	mu      sync.RWMutex
	methods map[string]RPCMethod
}

// NewRPC returns the endpoint with an empty method table.
func NewRPC(cfg RPCConfig) (*RPC, error) {
	s, err := newSite("XML-RPC", cfg.Site)
	if err != nil {
		return nil, err
	}
	return &RPC{site: s, methods: map[string]RPCMethod{}}, nil
}

// Handle makes fn the implementation of the XML-RPC method name on
// POST /RPC2, replacing any earlier one. The ping methods (Pings) and the
// rssCloud registration methods (RSSCloud) are added this way, and so is
// any later method.
func (a *RPC) Handle(name string, fn RPCMethod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.methods[name] = fn
}

func (a *RPC) method(name string) RPCMethod {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.methods[name]
}

// Routes installs POST /RPC2.
func (a *RPC) Routes(r *mux.Router) {
	r.HandleFunc("/RPC2", a.serveRPC).Methods(http.MethodPost)
}

// serveRPC decodes a <methodCall>, runs the method and answers with a
// <methodResponse>. Every failure the caller can act on is a fault with
// HTTP 200, as XML-RPC clients expect; only an oversized body (413) and a
// rate limit (429) use HTTP statuses.
func (a *RPC) serveRPC(w http.ResponseWriter, r *http.Request) {
	if !a.limitBody(w, r, func(msg string) { writeText(w, http.StatusRequestEntityTooLarge, msg) }) {
		return
	}
	if isSOAP(r) {
		a.serveSOAP(w, r) // rssCloud's SOAP interface (soap.go)
		return
	}
	call, err := xmlrpc.DecodeCall(r.Body, xmlrpc.Limits{MaxBytes: a.maxBody})
	switch {
	case err == nil:
	case isTooLarge(err) || errors.Is(err, xmlrpc.ErrTooLarge):
		writeText(w, http.StatusRequestEntityTooLarge, a.tooLargeMessage())
		return
	case xmlrpc.IsDecodeError(err):
		writeFault(w, http.StatusOK, xmlrpc.Errorf(xmlrpc.FaultParse, "%v", err))
		return
	default:
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			a.log.DebugContext(r.Context(), "XML-RPC: reading the call failed", "err", err)
		}
		writeText(w, http.StatusBadRequest, "could not read the request body")
		return
	}
	fn := a.method(call.Method)
	if fn == nil {
		writeFault(w, http.StatusOK, xmlrpc.Errorf(xmlrpc.FaultMethodNotFound, "unknown method %s", call.Method))
		return
	}
	result, err := fn(r.Context(), &RPCRequest{Method: call.Method, Params: call.Params, Remote: clientIP(r), HTTP: r})
	var (
		fault   *xmlrpc.Fault
		limited *RateLimitError
	)
	switch {
	case err == nil:
	case errors.As(err, &limited):
		setRetryAfter(w, limited.RetryAfter)
		writeFault(w, limited.status(), xmlrpc.Errorf(xmlrpc.FaultApplication, "%s", limited.Error()))
		return
	case errors.As(err, &fault):
		writeFault(w, http.StatusOK, fault)
		return
	default:
		a.log.ErrorContext(r.Context(), "XML-RPC method failed", "method", call.Method, "err", err)
		writeFault(w, http.StatusOK, xmlrpc.Errorf(xmlrpc.FaultInternal, "%s failed: internal error", call.Method))
		return
	}
	if enc, ok := result.(rpcEncoded); ok {
		writeXML(w, http.StatusOK, enc)
		return
	}
	body, err := xmlrpc.MarshalResponse(result)
	if err != nil {
		a.log.ErrorContext(r.Context(), "XML-RPC: cannot encode the result", "method", call.Method, "err", err)
		writeFault(w, http.StatusOK, xmlrpc.Errorf(xmlrpc.FaultInternal, "%s: cannot encode the result", call.Method))
		return
	}
	writeXML(w, http.StatusOK, body)
}

// rpcEncoded is a method's result already encoded as a whole
// <methodResponse>: an answer many calls share, encoded once.
type rpcEncoded []byte

func writeFault(w http.ResponseWriter, code int, f *xmlrpc.Fault) {
	writeXML(w, code, xmlrpc.MarshalFault(f))
}

// writeXML answers with an XML-RPC document. The content type is the
// specification's, without parameters: the document declares its encoding.
func writeXML(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// Parameter helpers for RPC methods: each answers a wrong count or type
// with an invalid-params fault naming the parameter.

// wantParams checks that the call has between min and max parameters.
func wantParams(req *RPCRequest, min, max int, signature string) error {
	if n := len(req.Params); n < min || n > max {
		return xmlrpc.Errorf(xmlrpc.FaultInvalidParams, "%s takes %s; got %d parameters", req.Method, signature, n)
	}
	return nil
}

// stringParam returns parameter i (from 0), which must be a string.
func stringParam(req *RPCRequest, i int, name string) (string, error) {
	s, ok := req.Params[i].(string)
	if !ok {
		return "", xmlrpc.Errorf(xmlrpc.FaultInvalidParams, "%s: parameter %d (%s) must be a string, not %s",
			req.Method, i+1, name, xmlrpc.TypeName(req.Params[i]))
	}
	return s, nil
}
