package httpapi

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/xmlrpc"
	"github.com/pingd/pingd/store"
)

// FuzzServeRPC posts arbitrary bodies to /RPC2 on a real hub and store:
// every answer must be an XML-RPC document (a response or a fault) with
// HTTP 200, or 429 for a rate limit, or 413 for an oversized body.
func FuzzServeRPC(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "internal", "xmlrpc", "testdata", "spec", "*.xml"))
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	st, err := store.Open(context.Background(), filepath.Join(f.TempDir(), "pingd.db"), store.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = st.Close() })
	quiet := slog.New(slog.DiscardHandler)
	h, err := hub.New(hub.Config{Stores: store.HubStores(st), Logger: quiet})
	if err != nil {
		f.Fatal(err)
	}
	api, err := New(Config{Hub: h, Store: st, PublicURL: "http://localhost:8080", Logger: quiet, MaxBodyBytes: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/RPC2", bytes.NewReader(body))
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusRequestEntityTooLarge:
			if len(body) <= 64<<10 {
				t.Fatalf("413 for %d bytes", len(body))
			}
			return
		case http.StatusOK, http.StatusTooManyRequests:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "text/xml" {
			t.Fatalf("Content-Type %q", ct)
		}
		_, err := xmlrpc.DecodeResponse(rec.Body, xmlrpc.Limits{})
		var fault *xmlrpc.Fault
		if err != nil && !errors.As(err, &fault) {
			t.Fatalf("the answer is not an XML-RPC response: %v", err)
		}
		if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
	})
}

// FuzzDecodeSOAP feeds the SOAP 1.1 call parser: it never panics, and what
// it accepts has one method and bounded parameters.
func FuzzDecodeSOAP(f *testing.F) {
	f.Add([]byte(`<SOAP-ENV:Envelope xmlns:SOAP-ENV="http://schemas.xmlsoap.org/soap/envelope/"><SOAP-ENV:Body><m:pleaseNotify xmlns:m="urn:x"><a>x</a><port>80</port><p>/</p><q>soap</q><urlList><item>http://e/</item></urlList></m:pleaseNotify></SOAP-ENV:Body></SOAP-ENV:Envelope>`))
	f.Add([]byte(`<Envelope xmlns="http://schemas.xmlsoap.org/soap/envelope/"><Body><ping><url>http://e/</url></ping><ping/></Body></Envelope>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		call, err := decodeSOAP(body)
		if err != nil {
			return
		}
		if call.Method == "" && len(call.Params) > 0 {
			t.Fatalf("parameters without a method: %+v", call)
		}
		if len(call.Params) > soapMaxParams {
			t.Fatalf("%d parameters", len(call.Params))
		}
		for _, p := range call.Params {
			switch v := p.(type) {
			case string:
			case []any:
				if len(v) > soapMaxParams {
					t.Fatalf("%d list items", len(v))
				}
			default:
				t.Fatalf("parameter of type %T", p)
			}
		}
	})
}
