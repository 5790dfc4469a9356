package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/pingd/pingd/hub"
)

// TestDescriptorPageHeaders: the /feeds/{node} page is served with a
// Content-Security-Policy that allows nothing (it needs nothing), nosniff
// and no referrer.
func TestDescriptorPageHeaders(t *testing.T) {
	e := newEnv(t)
	e.createNode("n", hub.AccessOpen)
	resp := e.do(http.MethodGet, "/feeds/n", "", nil, "Accept", "text/html")
	wantStatus(t, resp, http.StatusOK)
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %s", csp, want)
		}
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("headers %v", resp.Header)
	}
}

// TestDescriptorPageInChromium loads the page in headless Chromium under
// its policy: the browser builds the whole page and reports no violation.
func TestDescriptorPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a headless Chromium")
	}
	e := newEnv(t)
	e.createNode("feeds/demo", hub.AccessWhitelist)
	var log requestLog
	srv := httptest.NewServer(log.wrap(e.api))
	t.Cleanup(srv.Close)
	dom, stderr := chromium(t, "--dump-dom", srv.URL+"/feeds/feeds%2Fdemo")
	doc, err := html.Parse(bytes.NewReader(dom))
	if err != nil {
		t.Fatalf("parse the dumped DOM: %v", err)
	}
	if h1 := docFind(doc, docByTag("h1")); len(h1) != 1 || docText(h1[0]) != "Title of feeds/demo" {
		t.Errorf("the browser's page has no heading with the node's title:\n%s", dom)
	}
	if links := docFind(doc, docByTag("a")); len(links) == 0 {
		t.Errorf("the browser's page has no links:\n%s", dom)
	}
	for line := range strings.Lines(string(stderr)) {
		if strings.Contains(line, "Content Security Policy") {
			t.Errorf("Chromium reports a Content-Security-Policy violation: %s", line)
		}
	}
	for _, path := range log.list() {
		if path != "/feeds/feeds%2Fdemo" && path != "/favicon.ico" {
			t.Errorf("the browser asked the server for %s", path)
		}
	}
}

// TestXMLAnswersCarryNosniff: XML-RPC answers (results and faults) and
// SOAP answers are not to be sniffed into HTML either.
func TestXMLAnswersCarryNosniff(t *testing.T) {
	e := newEnv(t)
	for name, resp := range map[string]*http.Response{
		"XML-RPC fault": e.do(http.MethodPost, "/RPC2", "", strings.NewReader(`<methodCall><methodName>no.such</methodName></methodCall>`),
			"Content-Type", "text/xml"),
		"XML-RPC result": e.do(http.MethodPost, "/RPC2", "", strings.NewReader(`<methodCall><methodName>rssCloud.ping</methodName>`+
			`<params><param><value>http://a.example/feed</value></param></params></methodCall>`), "Content-Type", "text/xml"),
		"SOAP result": e.do(http.MethodPost, "/RPC2", "", strings.NewReader(`<SOAP-ENV:Envelope xmlns:SOAP-ENV="http://schemas.xmlsoap.org/soap/envelope/">`+
			`<SOAP-ENV:Body><ping><url>http://b.example/feed</url></ping></SOAP-ENV:Body></SOAP-ENV:Envelope>`),
			"Content-Type", "text/xml", "SOAPAction", `"/ping"`),
	} {
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: HTTP %d, headers %v", name, resp.StatusCode, resp.Header)
		}
	}
}
