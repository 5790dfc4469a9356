package getpingd

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pingd/pingd/hub"
)

func TestParseWebhookRequest(t *testing.T) {
	for _, tc := range []struct {
		body string
		want WebhookRequest
	}{
		{`<subscribe><url href="http://x.example/h"/></subscribe>`,
			WebhookRequest{Action: Subscribe, Href: "http://x.example/h", Method: "POST", Diff: "none"}},
		{"\uFEFF<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<subscribe>\n <url href=\" https://x.example/h?a=1&amp;b=2 \" method=\"NOTIFY\" diff=\"application/xml-patch+xml\" secret=\"k\"/>\n <note>ignored</note>\n</subscribe>",
			WebhookRequest{Action: Subscribe, Href: "https://x.example/h?a=1&b=2", Method: "NOTIFY", Diff: DiffXMLPatch, Secret: "k"}},
		{`<s:subscribe xmlns:s="urn:x"><s:url href="http://x.example/" method="" diff=""/><url href="http://ignored.example/"/></s:subscribe>`,
			WebhookRequest{Action: Subscribe, Href: "http://x.example/", Method: "POST", Diff: "none"}},
		{`<unsubscribe><url href="http://x.example/h" method="bogus" secret="s"/></unsubscribe>`,
			WebhookRequest{Action: Unsubscribe, Href: "http://x.example/h"}},
	} {
		got, err := ParseWebhookRequest(strings.NewReader(tc.body))
		if err != nil || got != tc.want {
			t.Errorf("%q:\n got %+v, %v\nwant %+v", tc.body, got, err, tc.want)
		}
	}
}

func FuzzParseWebhookRequest(f *testing.F) {
	f.Add([]byte(`<subscribe><url href="http://example-listener.getpingd.com/feedupdated?feed=UniversalGadget" method="POST" diff="none" /></subscribe>`))
	f.Add([]byte(`<unsubscribe xmlns="urn:x"><url href="https://a.example/"/></unsubscribe>`))
	f.Add([]byte(`<!DOCTYPE a [<!ENTITY b "c">]><subscribe><url href="&b;"/></subscribe>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseWebhookRequest(bytes.NewReader(body))
		if err != nil {
			if req != (WebhookRequest{}) {
				t.Fatalf("error %v with request %+v", err, req)
			}
			return
		}
		if hub.ValidURL(req.Href) != nil || !utf8.ValidString(req.Href) {
			t.Fatalf("href %q accepted", req.Href)
		}
		switch req.Action {
		case Subscribe:
			if (req.Method != "POST" && req.Method != "NOTIFY") ||
				(req.Diff != DiffNone && req.Diff != DiffPatchOps && req.Diff != DiffXMLPatch) ||
				len(req.Secret) > MaxSecretBytes {
				t.Fatalf("accepted %+v", req)
			}
		case Unsubscribe:
			if req.Method != "" || req.Diff != "" || req.Secret != "" {
				t.Fatalf("unsubscribe with options %+v", req)
			}
		default:
			t.Fatalf("action %q", req.Action)
		}
		// The answer document carries the href back unchanged.
		var ans struct {
			Href string `xml:"href,attr"`
		}
		if err := xml.Unmarshal(WebhookAnswer("pending", Subscribe, "n", req.Href), &ans); err != nil || ans.Href != req.Href {
			t.Fatalf("answer for %q: %q, %v", req.Href, ans.Href, err)
		}
	})
}

func TestAnswerDocuments(t *testing.T) {
	for _, tc := range []struct {
		doc       []byte
		name      string
		jid, node string
	}{
		{SubscribedDocument("a@b.example", "demo"), "subscribed", "a@b.example", "demo"},
		{UnsubscribedDocument("a@b.example", `q"<&>'x`), "unsubscribed", "a@b.example", `q"<&>'x`},
		{SubscribedDocument("σ@b.example", "日本/🙂\nline"), "subscribed", "σ@b.example", "日本/🙂\nline"},
	} {
		var got struct {
			XMLName xml.Name
			JID     string `xml:"jid,attr"`
			Node    string `xml:"node,attr"`
		}
		dec := xml.NewDecoder(bytes.NewReader(tc.doc))
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("%s: %v", tc.doc, err)
		}
		if _, err := dec.Token(); err != io.EOF {
			t.Errorf("%s: more than one element (%v)", tc.doc, err)
		}
		if got.XMLName.Local != tc.name || got.XMLName.Space != "" || got.JID != tc.jid || got.Node != tc.node {
			t.Errorf("%s parsed as %+v", tc.doc, got)
		}
	}
	if got := string(SubscribedDocument("a@b", "n")); got != `<subscribed jid="a@b" node="n"/>` {
		t.Errorf("SubscribedDocument = %s", got)
	}
}
