package httpapi_test

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/beevik/etree"

	"github.com/pingd/pingd/httpapi"
	"github.com/pingd/pingd/hub"
)

// soapAnswer is a SOAP 1.1 response or fault as a SOAP client reads it.
type soapAnswer struct {
	XMLName xml.Name `xml:"http://schemas.xmlsoap.org/soap/envelope/ Envelope"`
	Body    struct {
		Inner []byte `xml:",innerxml"`
		Fault *struct {
			Code   string `xml:"faultcode"`
			String string `xml:"faultstring"`
		} `xml:"http://schemas.xmlsoap.org/soap/envelope/ Fault"`
	} `xml:"http://schemas.xmlsoap.org/soap/envelope/ Body"`
}

func soapEnvelope(call string) string {
	return `<?xml version="1.0"?><SOAP-ENV:Envelope xmlns:SOAP-ENV="http://schemas.xmlsoap.org/soap/envelope/" SOAP-ENV:encodingStyle="http://schemas.xmlsoap.org/soap/encoding/"><SOAP-ENV:Body>` +
		call + `</SOAP-ENV:Body></SOAP-ENV:Envelope>`
}

func (e *dialectEnv) soap(t *testing.T, action, call string) (*http.Response, soapAnswer) {
	t.Helper()
	resp := e.do(http.MethodPost, "/RPC2", "text/xml; charset=utf-8", soapEnvelope(call), "SOAPAction", `"`+action+`"`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var a soapAnswer
	if err := xml.Unmarshal(body, &a); err != nil {
		t.Fatalf("SOAP answer does not parse: %v\n%s", err, body)
	}
	return resp, a
}

// TestRSSCloudOverSOAP: pleaseNotify and ping as SOAP 1.1 calls, answered
// with envelopes and faults; a registration with protocol soap is then
// notified with SOAP calls; node feeds advertise protocol="soap".
func TestRSSCloudOverSOAP(t *testing.T) {
	e := newDialectEnv(t, func(c *httpapi.Config) { c.CloudProtocol = "soap" })
	feedURL := e.origin.set("/feed.xml", "application/rss+xml", rssDoc("News", "a"))
	e.createNode("news", feedURL, hub.AccessOpen)
	e.waitBaselined("news")
	// The subscriber answers SOAP notifications with a SOAP response.
	rec := newReceiver(t, func(w http.ResponseWriter, h hit) {
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprint(w, soapEnvelope(`<notifyResponse><Result>true</Result></notifyResponse>`))
	})
	port := mustPort(rec.URL)

	resp, a := e.soap(t, "/pleaseNotify", fmt.Sprintf(`<m:pleaseNotify xmlns:m="http://www.soapware.org/">`+
		`<notifyProcedure>rssChanged</notifyProcedure><port>%s</port><path>/notify</path><protocol>soap</protocol>`+
		`<urlList><item>%s</item></urlList></m:pleaseNotify>`, port, feedURL))
	if resp.StatusCode != 200 || a.Body.Fault != nil || !strings.Contains(string(a.Body.Inner), ">true</Result>") {
		t.Fatalf("SOAP pleaseNotify: HTTP %d %s", resp.StatusCode, a.Body.Inner)
	}
	test := rec.matching(isPost)
	if len(test) != 1 || test[0].Header.Get("SOAPAction") == "" || !strings.Contains(test[0].Body, "rssChanged") || !strings.Contains(test[0].Body, feedURL) {
		t.Fatalf("test notification: %+v", test)
	}

	// rssCloud's ping over SOAP: the change reaches the registration as a SOAP call.
	e.origin.set("/feed.xml", "application/rss+xml", rssDoc("News", "a", "b"))
	resp, a = e.soap(t, "/ping", fmt.Sprintf(`<ping><url>%s</url></ping>`, feedURL))
	if resp.StatusCode != 200 || !strings.Contains(string(a.Body.Inner), ">true</Result>") {
		t.Fatalf("SOAP ping: HTTP %d %s", resp.StatusCode, a.Body.Inner)
	}
	rec.waitMatching(t, 2, "the change notification", isPost)

	// The caller's mistakes: HTTP 400 with faultcode Client and a faultstring.
	for name, call := range map[string]string{
		"unknown procedure": `<frobnicate/>`,
		"bad parameters":    `<pleaseNotify><notifyProcedure>x</notifyProcedure></pleaseNotify>`,
		"bad url":           `<ping><url>ftp://x/</url></ping>`,
	} {
		resp, a := e.soap(t, "x", call)
		if resp.StatusCode != http.StatusBadRequest || a.Body.Fault == nil || a.Body.Fault.Code != "SOAP-ENV:Client" || a.Body.Fault.String == "" {
			t.Errorf("%s: HTTP %d, fault %+v", name, resp.StatusCode, a.Body.Fault)
		}
	}
	resp = e.do(http.MethodPost, "/RPC2", "text/xml", "<not-soap/>", "SOAPAction", `""`)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Fault") {
		t.Errorf("a body that is no envelope: HTTP %d %s", resp.StatusCode, body)
	}

	// The node's RSS feed offers SOAP registration on /RPC2.
	resp = e.do(http.MethodGet, "/rss/news", "", "")
	doc := etree.NewDocument()
	if _, err := doc.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c := doc.FindElement("/rss/channel/cloud")
	u, _ := url.Parse(e.srv.URL)
	if c == nil || c.SelectAttrValue("protocol", "") != "soap" || c.SelectAttrValue("path", "") != "/RPC2" ||
		c.SelectAttrValue("registerProcedure", "") != "pleaseNotify" || c.SelectAttrValue("port", "") != u.Port() {
		t.Errorf("cloud element %v", c)
	}
}
