package httpapi

import (
	"encoding/xml"
	"net/http"
	"strings"
	"testing"
)

// TestSOAPFaultStatuses: a SOAP fault the caller caused is answered 400
// (never 500, which would count as pingd failing), one pingd caused 500;
// both carry the Fault envelope with the matching faultcode.
func TestSOAPFaultStatuses(t *testing.T) {
	e := newEnv(t)
	soap := func(body string) (*http.Response, string) {
		t.Helper()
		resp := e.do(http.MethodPost, "/RPC2", "", strings.NewReader(body),
			"Content-Type", "text/xml; charset=utf-8", "SOAPAction", `"/ping"`)
		var env struct {
			Code string `xml:"Body>Fault>faultcode"`
		}
		b := readBody(t, resp)
		if err := xml.Unmarshal(b, &env); err != nil {
			t.Fatalf("answer is no envelope: %v\n%s", err, b)
		}
		return resp, env.Code
	}
	envelope := func(call string) string {
		return `<?xml version="1.0"?><SOAP-ENV:Envelope xmlns:SOAP-ENV="http://schemas.xmlsoap.org/soap/envelope/"><SOAP-ENV:Body>` +
			call + `</SOAP-ENV:Body></SOAP-ENV:Envelope>`
	}
	for name, body := range map[string]string{
		"not an envelope":   `<methodCall/>`,
		"truncated":         `<SOAP-ENV:Envelope xmlns:SOAP-ENV="http://schemas.xmlsoap.org/soap/envelope/"><SOAP-ENV:Body>`,
		"two calls":         envelope(`<ping><url>http://a.example/</url></ping><ping/>`),
		"unknown procedure": envelope(`<frobnicate/>`),
		"missing parameter": envelope(`<ping/>`),
		"bad URL":           envelope(`<ping><url>javascript:alert(1)</url></ping>`),
	} {
		resp, code := soap(body)
		if resp.StatusCode != http.StatusBadRequest || code != "SOAP-ENV:Client" {
			t.Errorf("%s: HTTP %d, faultcode %q; want 400 and SOAP-ENV:Client", name, resp.StatusCode, code)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", name)
		}
	}
	// pingd's own failure: the database is gone.
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	resp, code := soap(envelope(`<ping><url>http://a.example/feed</url></ping>`))
	if resp.StatusCode != http.StatusInternalServerError || code != "SOAP-ENV:Server" {
		t.Errorf("with the database closed: HTTP %d, faultcode %q; want 500 and SOAP-ENV:Server", resp.StatusCode, code)
	}
}
