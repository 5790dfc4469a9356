package httpapi

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/netguard"
	"github.com/pingd/pingd/internal/nodeurl"
	"github.com/pingd/pingd/internal/testenv"
)

const (
	typeHTTPSub = "application/getpingd+http+subscribe+xml"
	typeXMPPSub = "application/getpingd+xmpp+subscribe+xml"
)

// createNode makes a node through the hub and returns its token.
func (e *env) createNode(name string, model hub.AccessModel) string {
	e.t.Helper()
	cfg := hub.DefaultNodeConfig()
	cfg.AccessModel = model
	cfg.Title = "Title of " + name
	_, token, err := e.hub.CreateNode(context.Background(), hub.NodeSpec{Name: name, Config: cfg})
	if err != nil {
		e.t.Fatal(err)
	}
	return token
}

func (e *env) nodeOf(name string) *hub.Node {
	e.t.Helper()
	n, err := e.hub.Node(context.Background(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) webhooks(node string) []hub.Subscription {
	e.t.Helper()
	subs, err := e.hub.Subscriptions(context.Background(), hub.SubscriptionFilter{NodeID: e.nodeOf(node).ID, Kind: hub.KindWebhook})
	if err != nil {
		e.t.Fatal(err)
	}
	return subs
}

// xrdsDocument is the GetPingd XRDS tree, read with its namespaces.
type xrdsDocument struct {
	XMLName xml.Name `xml:"xri://$xrds XRDS"`
	Ref     string   `xml:"ref,attr"`
	XRD     []struct {
		Services []struct {
			Types []string `xml:"xri://$xrd*($v*2.0) Type"`
			URIs  []struct {
				Method string `xml:"http://getpingd.com/core/getpingd-1.0 http-method,attr"`
				Value  string `xml:",chardata"`
			} `xml:"xri://$xrd*($v*2.0) URI"`
			Accepts []struct {
				Type  string `xml:"type,attr"`
				Diffs []struct {
					Type string `xml:"type,attr"`
				} `xml:"http://getpingd.com/core/getpingd-1.0 SupportsDiff"`
			} `xml:"http://getpingd.com/core/getpingd-1.0 Accept"`
			PubSub []struct {
				JID      string `xml:"jid,attr"`
				Node     string `xml:"node,attr"`
				Security string `xml:"security,attr"`
			} `xml:"http://getpingd.com/extensions/xmpp/getpingd-1.0 PubSub"`
		} `xml:"xri://$xrd*($v*2.0) Service"`
	} `xml:"xri://$xrd*($v*2.0) XRD"`
}

// checkXRDS parses an XRDS document back and checks it field by field.
func checkXRDS(t *testing.T, body []byte, node, security string) {
	t.Helper()
	// The root declares the namespaces with the proposal's prefixes.
	dec := xml.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.RawToken()
		if err != nil {
			t.Fatalf("no root element: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Space != "xrds" || se.Name.Local != "XRDS" {
				t.Errorf("root = %s:%s", se.Name.Space, se.Name.Local)
			}
			want := map[string]string{
				"xmlns:xrds":          discovery.NSXRDS,
				"xmlns":               discovery.NSXRD,
				"xmlns:getpingd":      getpingd.NSGetPingd,
				"xmlns:getpingd-xmpp": getpingd.NSGetPingdXMPP,
			}
			for _, a := range se.Attr {
				name := a.Name.Local
				if a.Name.Space != "" {
					name = a.Name.Space + ":" + a.Name.Local
				}
				if v, ok := want[name]; ok {
					if v != a.Value {
						t.Errorf("%s = %q, want %q", name, a.Value, v)
					}
					delete(want, name)
				}
			}
			if len(want) != 0 {
				t.Errorf("root lacks %v", want)
			}
			break
		}
	}

	var doc xrdsDocument
	if err := xml.Unmarshal(body, &doc); err != nil {
		t.Fatalf("XRDS does not parse: %v\n%s", err, body)
	}
	descriptor := "http://pingd.test:8080/feeds/" + nodeurl.PathSegment(node)
	if len(doc.XRD) != 1 || len(doc.XRD[0].Services) != 1 {
		t.Fatalf("want one XRD with one Service: %s", body)
	}
	s := doc.XRD[0].Services[0]
	if len(s.Types) != 1 || s.Types[0] != "http://getpingd.com/services/subscribe" {
		t.Errorf("Type = %q", s.Types)
	}
	if len(s.URIs) != 2 ||
		s.URIs[0].Method != "SUBSCRIBE" || s.URIs[0].Value != descriptor ||
		s.URIs[1].Method != "POST" || s.URIs[1].Value != descriptor+"?method=subscribe" {
		t.Errorf("URIs = %+v, want SUBSCRIBE %s and POST ?method=subscribe", s.URIs, descriptor)
	}
	if len(s.Accepts) != 2 || s.Accepts[0].Type != typeHTTPSub || s.Accepts[1].Type != typeXMPPSub {
		t.Errorf("Accept types = %+v", s.Accepts)
	}
	for _, acc := range s.Accepts {
		if len(acc.Diffs) != 1 || acc.Diffs[0].Type != "application/patch-ops+xml" {
			t.Errorf("SupportsDiff of %s = %+v", acc.Type, acc.Diffs)
		}
	}
	if len(s.PubSub) != 1 || s.PubSub[0].JID != "pubsub.localhost" || s.PubSub[0].Node != node || s.PubSub[0].Security != security {
		t.Errorf("PubSub = %+v, want jid pubsub.localhost node %q security %s", s.PubSub, node, security)
	}
}

// pageTags returns the <meta> and <link> tags of an HTML page's head.
func pageTags(t *testing.T, page []byte) []map[string]string {
	t.Helper()
	root, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var tags []map[string]string
	for n := range root.Descendants() {
		if n.Type != html.ElementNode || (n.DataAtom != atom.Meta && n.DataAtom != atom.Link) {
			continue
		}
		if n.Parent == nil || n.Parent.DataAtom != atom.Head {
			t.Errorf("<%s> outside <head>", n.Data)
		}
		attrs := map[string]string{"tag": n.Data}
		for _, a := range n.Attr {
			attrs[a.Key] = a.Val
		}
		tags = append(tags, attrs)
	}
	return tags
}

func hasTag(tags []map[string]string, want map[string]string) bool {
next:
	for _, tag := range tags {
		for k, v := range want {
			if tag[k] != v {
				continue next
			}
		}
		return true
	}
	return false
}

func TestDiscoveryDocuments(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		node     string
		model    hub.AccessModel
		security string
	}{
		{"feeds/demo", hub.AccessOpen, "none"},
		{`a "b" <c> & d`, hub.AccessWhitelist, "whitelist"},
		{"..", hub.AccessOpen, "none"},
	} {
		t.Run(tc.node, func(t *testing.T) {
			e.createNode(tc.node, tc.model)
			seg := nodeurl.PathSegment(tc.node)
			xrdsURL := "http://pingd.test:8080/xrds/" + seg

			// The XRDS document, by content negotiation and at /xrds.
			for _, path := range []string{"/feeds/" + seg, "/xrds/" + seg} {
				resp := e.do(http.MethodGet, path, "", nil, "Accept", "application/xrds+xml")
				wantStatus(t, resp, http.StatusOK)
				if ct := resp.Header.Get("Content-Type"); ct != "application/xrds+xml" {
					t.Errorf("%s: Content-Type %q, want exactly application/xrds+xml", path, ct)
				}
				checkXRDS(t, readBody(t, resp), tc.node, tc.security)
			}
			resp := e.do(http.MethodGet, "/feeds/"+seg, "", nil, "Accept", "application/xrds+xml")
			if v := resp.Header.Get("Vary"); v != "Accept" {
				t.Errorf("Vary = %q", v)
			}
			if loc := resp.Header.Get("X-XRDS-Location"); loc != xrdsURL {
				t.Errorf("X-XRDS-Location = %q", loc)
			}
			// /xrds answers XRDS whatever the client accepts.
			resp = e.do(http.MethodGet, "/xrds/"+seg, "", nil, "Accept", "text/html")
			if ct := resp.Header.Get("Content-Type"); ct != "application/xrds+xml" {
				t.Errorf("/xrds for text/html: Content-Type %q", ct)
			}

			// A browser gets the HTML page with the header and both tags.
			resp = e.do(http.MethodGet, "/feeds/"+seg, "", nil,
				"Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
			wantStatus(t, resp, http.StatusOK)
			if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("page Content-Type %q", ct)
			}
			if loc := resp.Header.Get("X-XRDS-Location"); loc != xrdsURL {
				t.Errorf("page X-XRDS-Location = %q, want %q", loc, xrdsURL)
			}
			if v := resp.Header.Get("Vary"); v != "Accept" {
				t.Errorf("page Vary = %q", v)
			}
			if ap := resp.Header.Get("Accept-Post"); !strings.Contains(ap, typeHTTPSub) || !strings.Contains(ap, typeXMPPSub) {
				t.Errorf("Accept-Post = %q", ap)
			}
			page := readBody(t, resp)
			tags := pageTags(t, page)
			if !hasTag(tags, map[string]string{"tag": "meta", "http-equiv": "X-XRDS-Location", "content": xrdsURL}) {
				t.Errorf("no <meta http-equiv=X-XRDS-Location content=%q> in %v", xrdsURL, tags)
			}
			// DESIGN.md: header, meta and link all point at /xrds/{node}.
			if !hasTag(tags, map[string]string{"tag": "link", "rel": "getpingd.updates.descriptor", "href": xrdsURL}) {
				t.Errorf("no <link rel=getpingd.updates.descriptor href=%q> in %v", xrdsURL, tags)
			}

			// HEAD: the same headers and length, no body.
			for _, accept := range []string{"text/html", "application/xrds+xml"} {
				get := e.do(http.MethodGet, "/feeds/"+seg, "", nil, "Accept", accept)
				full := readBody(t, get)
				head := e.do(http.MethodHead, "/feeds/"+seg, "", nil, "Accept", accept)
				wantStatus(t, head, http.StatusOK)
				if b := readBody(t, head); len(b) != 0 {
					t.Errorf("HEAD has a body of %d bytes", len(b))
				}
				if head.ContentLength != int64(len(full)) || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") ||
					head.Header.Get("X-XRDS-Location") != xrdsURL {
					t.Errorf("HEAD %s: length %d type %q, GET length %d type %q", accept, head.ContentLength,
						head.Header.Get("Content-Type"), len(full), get.Header.Get("Content-Type"))
				}
			}
		})
	}
	for _, path := range []string{"/feeds/nope", "/xrds/nope", "/atom/nope", "/rss/nope"} {
		wantStatus(t, e.do(http.MethodGet, path, "", nil), http.StatusNotFound)
		wantStatus(t, e.do(http.MethodHead, path, "", nil), http.StatusNotFound)
	}
	resp := e.do(http.MethodDelete, "/feeds/feeds%2Fdemo", "", nil)
	wantStatus(t, resp, http.StatusMethodNotAllowed)
	if allow := resp.Header.Get("Allow"); allow != "GET, HEAD, POST, SUBSCRIBE" {
		t.Errorf("Allow = %q", allow)
	}
}

// subscribe sends a GetPingd subscription request with SUBSCRIBE.
func (e *env) subscribe(node, contentType, token, body string) *http.Response {
	e.t.Helper()
	return e.do("SUBSCRIBE", "/feeds/"+nodeurl.PathSegment(node), token, strings.NewReader(body), "Content-Type", contentType)
}

type webhookAnswerDoc struct {
	XMLName xml.Name
	Mode    string `xml:"mode,attr"`
	Node    string `xml:"node,attr"`
	Href    string `xml:"href,attr"`
}

func decodeAnswer(t *testing.T, resp *http.Response) webhookAnswerDoc {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/xml; charset=utf-8" {
		t.Errorf("answer Content-Type %q", ct)
	}
	var a webhookAnswerDoc
	if err := xml.Unmarshal(readBody(t, resp), &a); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestWebhookSubscription(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.createNode("news", hub.AccessOpen)
	const href = "https://receiver.example.org/hook?feed=news"

	// SUBSCRIBE with every attribute; charset and case are ignored.
	resp := e.subscribe("news", typeHTTPSub+"; charset=UTF-8", "",
		`<subscribe><url href="`+strings.ReplaceAll(href, "&", "&amp;")+`" method="notify" diff="Application/Patch-Ops+XML" secret="s3cret"/></subscribe>`)
	wantStatus(t, resp, http.StatusAccepted)
	if a := decodeAnswer(t, resp); a.XMLName.Local != "pending" || a.Mode != "subscribe" || a.Node != "news" || a.Href != href {
		t.Errorf("answer = %+v", a)
	}
	subs := e.webhooks("news")
	if len(subs) != 1 {
		t.Fatalf("subscriptions = %+v", subs)
	}
	s := subs[0]
	if s.Address != href || s.State != hub.SubPending || s.Options.Method != "NOTIFY" ||
		s.Options.Diff != "application/patch-ops+xml" || s.Options.Secret != "s3cret" {
		t.Errorf("stored %+v", s)
	}

	// POST ?method=subscribe with the defaults updates the same one.
	// Re-subscribing keeps the cursor: nothing is sent twice or skipped.
	if err := e.store.SaveDeliveryState(ctx, s.ID, hub.DeliveryState{Cursor: 7}); err != nil {
		t.Fatal(err)
	}
	resp = e.do(http.MethodPost, "/feeds/news?method=subscribe", "", strings.NewReader(`<subscribe><url href="`+strings.ReplaceAll(href, "&", "&amp;")+`"/></subscribe>`),
		"Content-Type", typeHTTPSub)
	wantStatus(t, resp, http.StatusAccepted)
	subs = e.webhooks("news")
	if len(subs) != 1 || subs[0].ID != s.ID || subs[0].Options.Method != "POST" || subs[0].Options.Diff != "none" ||
		subs[0].Options.Secret != "" || subs[0].State != hub.SubPending || subs[0].Cursor != 7 {
		t.Errorf("after re-subscribing: %+v", subs)
	}

	// A POST without ?method=subscribe is not a subscription.
	resp = e.do(http.MethodPost, "/feeds/news", "", strings.NewReader(`<subscribe><url href="https://x.example/"/></subscribe>`), "Content-Type", typeHTTPSub)
	wantStatus(t, resp, http.StatusBadRequest)

	// Unsubscribing a subscription never verified cancels it at once.
	resp = e.subscribe("news", typeHTTPSub, "", `<unsubscribe><url href="`+strings.ReplaceAll(href, "&", "&amp;")+`"/></unsubscribe>`)
	wantStatus(t, resp, http.StatusOK)
	if a := decodeAnswer(t, resp); a.XMLName.Local != "unsubscribed" || a.Href != href {
		t.Errorf("answer = %+v", a)
	}
	if subs := e.webhooks("news"); len(subs) != 0 {
		t.Errorf("left: %+v", subs)
	}

	// An active one stays active, options and all, with the unsubscription
	// as its pending change until the callback verifies it.
	wantStatus(t, e.subscribe("news", typeHTTPSub, "", `<subscribe><url href="https://r.example/a" method="POST" diff="none" secret="k"/></subscribe>`), http.StatusAccepted)
	s = e.webhooks("news")[0]
	if err := e.store.SetSubscriptionState(ctx, s.ID, hub.SubActive, time.Time{}); err != nil {
		t.Fatal(err)
	}
	resp = e.subscribe("news", typeHTTPSub, "", `<unsubscribe><url href="https://r.example/a"/></unsubscribe>`)
	wantStatus(t, resp, http.StatusAccepted)
	if a := decodeAnswer(t, resp); a.XMLName.Local != "pending" || a.Mode != "unsubscribe" {
		t.Errorf("answer = %+v", a)
	}
	if subs := e.webhooks("news"); len(subs) != 1 || subs[0].State != hub.SubActive || subs[0].Options.Secret != "k" ||
		subs[0].Change.Mode != hub.ChangeUnsubscribe {
		t.Errorf("after unsubscribe: %+v", subs)
	}
	// Unknown callback: 404.
	wantStatus(t, e.subscribe("news", typeHTTPSub, "", `<unsubscribe><url href="https://r.example/other"/></unsubscribe>`), http.StatusNotFound)
}

func TestWebhookSubscriptionErrors(t *testing.T) {
	e := newEnv(t)
	e.createNode("news", hub.AccessOpen)
	for name, body := range map[string]string{
		"empty":             ``,
		"no url":            `<subscribe/>`,
		"no href":           `<subscribe><url method="POST"/></subscribe>`,
		"relative href":     `<subscribe><url href="/hook"/></subscribe>`,
		"ftp href":          `<subscribe><url href="ftp://x.example/hook"/></subscribe>`,
		"no host":           `<subscribe><url href="http:///hook"/></subscribe>`,
		"bad method":        `<subscribe><url href="http://x.example/" method="PUT"/></subscribe>`,
		"bad diff":          `<subscribe><url href="http://x.example/" diff="text/plain"/></subscribe>`,
		"two urls":          `<subscribe><url href="http://x.example/"/><url href="http://y.example/"/></subscribe>`,
		"two roots":         `<subscribe><url href="http://x.example/"/></subscribe><subscribe/>`,
		"wrong root":        `<notify><url href="http://x.example/"/></notify>`,
		"doctype":           `<!DOCTYPE s [<!ENTITY e "http://x.example/">]><subscribe><url href="&e;"/></subscribe>`,
		"unclosed":          `<subscribe><url href="http://x.example/"/>`,
		"invalid utf-8":     "<subscribe><url href=\"http://x.example/\xff\"/></subscribe>",
		"latin-1":           `<?xml version="1.0" encoding="ISO-8859-1"?><subscribe><url href="http://x.example/"/></subscribe>`,
		"repeated attr":     `<subscribe><url href="http://x.example/" href="http://y.example/"/></subscribe>`,
		"long secret":       `<subscribe><url href="http://x.example/" secret="` + strings.Repeat("s", 200) + `"/></subscribe>`,
		"other namespace":   `<subscribe xmlns="urn:a"><url xmlns="urn:b" href="http://x.example/"/></subscribe>`,
		"text after root":   `<subscribe><url href="http://x.example/"/></subscribe>junk`,
		"very long href":    `<subscribe><url href="http://x.example/` + strings.Repeat("a", 3000) + `"/></subscribe>`,
		"unsubscribe empty": `<unsubscribe/>`,
	} {
		t.Run(name, func(t *testing.T) {
			resp := e.subscribe("news", typeHTTPSub, "", body)
			wantStatus(t, resp, http.StatusBadRequest)
			if msg := string(readBody(t, resp)); !strings.Contains(msg, "malformed subscription request") {
				t.Errorf("reason = %q", msg)
			}
			if subs := e.webhooks("news"); len(subs) != 0 {
				t.Errorf("stored %+v", subs)
			}
		})
	}

	// 413, declared and not declared.
	big := `<subscribe><url href="http://x.example/"/>` + strings.Repeat("<!-- padding -->", 5000) + `</subscribe>`
	wantStatus(t, e.subscribe("news", typeHTTPSub, "", big), http.StatusRequestEntityTooLarge)
	resp := e.do("SUBSCRIBE", "/feeds/news", "", &unsizedReader{strings.NewReader(big)}, "Content-Type", typeHTTPSub)
	wantStatus(t, resp, http.StatusRequestEntityTooLarge)
	resp = e.do("SUBSCRIBE", "/feeds/news", "", &unsizedReader{strings.NewReader(big)}, "Content-Type", typeXMPPSub)
	wantStatus(t, resp, http.StatusRequestEntityTooLarge)

	// 415 lists what is accepted.
	for _, ct := range []string{"", "text/xml", "application/json", "application/getpingd+http+subscribe", "garbage;;"} {
		resp := e.do("SUBSCRIBE", "/feeds/news", "", strings.NewReader(`<subscribe><url href="http://x.example/"/></subscribe>`), "Content-Type", ct)
		wantStatus(t, resp, http.StatusUnsupportedMediaType)
		msg := string(readBody(t, resp))
		ap := resp.Header.Get("Accept-Post")
		for _, want := range []string{typeHTTPSub, typeXMPPSub} {
			if !strings.Contains(msg, want) || !strings.Contains(ap, want) {
				t.Errorf("Content-Type %q: 415 body %q / Accept-Post %q lack %s", ct, msg, ap, want)
			}
		}
	}

	// 404 for an unknown node, whatever the body.
	wantStatus(t, e.subscribe("nope", typeHTTPSub, "", `<subscribe><url href="http://x.example/"/></subscribe>`), http.StatusNotFound)
	wantStatus(t, e.subscribe("nope", typeXMPPSub, "", `<subscribe><consumer jid="a@b"/></subscribe>`), http.StatusNotFound)
	if subs := e.webhooks("news"); len(subs) != 0 {
		t.Errorf("stored %+v", subs)
	}
}

func TestWebhookSubscriptionToWhitelistNodeNeedsToken(t *testing.T) {
	e := newEnv(t)
	token := e.createNode("private", hub.AccessWhitelist)
	otherToken := e.createNode("other", hub.AccessWhitelist)
	body := `<subscribe><url href="https://r.example/hook"/></subscribe>`
	for name, tok := range map[string]string{"none": "", "wrong": "nope", "another node's": otherToken} {
		resp := e.subscribe("private", typeHTTPSub, tok, body)
		wantStatus(t, resp, http.StatusUnauthorized)
		challenge := resp.Header.Get("WWW-Authenticate")
		if !strings.HasPrefix(challenge, "Bearer") || strings.Contains(challenge, "invalid_token") != (tok != "") {
			t.Errorf("%s token: WWW-Authenticate %q", name, challenge)
		}
		if subs := e.webhooks("private"); len(subs) != 0 {
			t.Fatalf("%s token stored %+v", name, subs)
		}
	}
	wantStatus(t, e.subscribe("private", typeHTTPSub, token, body), http.StatusAccepted)
	wantStatus(t, e.subscribe("private", typeHTTPSub, testAdminToken, `<subscribe><url href="https://r.example/2"/></subscribe>`), http.StatusAccepted)
	if subs := e.webhooks("private"); len(subs) != 2 {
		t.Fatalf("stored %+v", subs)
	}
	// Unsubscribing needs it too.
	wantStatus(t, e.subscribe("private", typeHTTPSub, "", `<unsubscribe><url href="https://r.example/hook"/></unsubscribe>`), http.StatusUnauthorized)
	if subs := e.webhooks("private"); len(subs) != 2 {
		t.Fatalf("unauthorised unsubscribe removed one: %+v", subs)
	}
	wantStatus(t, e.subscribe("private", typeHTTPSub, token, `<unsubscribe><url href="https://r.example/hook"/></unsubscribe>`), http.StatusOK)
}

func TestWhitelistRequests(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	token := e.createNode("wl", hub.AccessWhitelist)
	n := e.nodeOf("wl")
	members := func() map[string]hub.Affiliation {
		affs, err := e.hub.Affiliations(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		return affs
	}
	body := `<subscribe><consumer jid="Listener@Example.com/FeedListener"/></subscribe>`

	for _, tok := range []string{"", "wrong"} {
		resp := e.subscribe("wl", typeXMPPSub, tok, body)
		wantStatus(t, resp, http.StatusUnauthorized)
		if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("WWW-Authenticate = %q", resp.Header.Get("WWW-Authenticate"))
		}
		if len(members()) != 0 {
			t.Fatalf("unauthorised request changed the whitelist: %v", members())
		}
	}
	resp := e.do(http.MethodPost, "/feeds/wl?method=subscribe", token, strings.NewReader(body), "Content-Type", typeXMPPSub+"; charset=utf-8")
	wantStatus(t, resp, http.StatusOK)
	var ans struct {
		XMLName xml.Name
		JID     string `xml:"jid,attr"`
		Node    string `xml:"node,attr"`
	}
	if err := xml.Unmarshal(readBody(t, resp), &ans); err != nil || ans.XMLName.Local != "subscribed" ||
		ans.JID != "listener@example.com" || ans.Node != "wl" {
		t.Errorf("answer %+v, %v", ans, err)
	}
	if got := members(); got["listener@example.com"] != hub.AffMember || len(got) != 1 {
		t.Errorf("whitelist = %v", got)
	}

	for name, bad := range map[string]string{
		"bad JID":   `<subscribe><consumer jid="@example.com"/></subscribe>`,
		"no JID":    `<subscribe><consumer/></subscribe>`,
		"malformed": `<subscribe><consumer jid="a@b.example">`,
	} {
		resp := e.subscribe("wl", typeXMPPSub, token, bad)
		wantStatus(t, resp, http.StatusBadRequest)
		if msg := string(readBody(t, resp)); len(strings.TrimSpace(msg)) < 10 {
			t.Errorf("%s: no reason given: %q", name, msg)
		}
	}

	// Unsubscribing always needs the token, then removes the member.
	un := `<unsubscribe><consumer jid="listener@example.com"/></unsubscribe>`
	wantStatus(t, e.subscribe("wl", typeXMPPSub, "", un), http.StatusUnauthorized)
	if len(members()) != 1 {
		t.Fatal("unauthorised unsubscribe changed the whitelist")
	}
	wantStatus(t, e.subscribe("wl", typeXMPPSub, testAdminToken, un), http.StatusOK)
	if len(members()) != 0 {
		t.Errorf("whitelist after unsubscribe = %v", members())
	}

	// An open node takes a subscribe request without a token.
	e.createNode("open", hub.AccessOpen)
	wantStatus(t, e.subscribe("open", typeXMPPSub, "", body), http.StatusOK)
}

// hookReceiver is a webhook receiver that answers verification requests
// by echoing the challenge and records them.
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	checks []url.Values
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		h.mu.Lock()
		h.checks = append(h.checks, q)
		h.mu.Unlock()
		_, _ = io.WriteString(w, q.Get("hub.challenge"))
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookReceiver) verifications() []url.Values {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]url.Values(nil), h.checks...)
}

// TestWebhookVerifiedByTheEngine runs the delivery engine beside the API:
// a subscription made over HTTP is verified with the descriptor as topic,
// and so is its unsubscription.
func TestWebhookVerifiedByTheEngine(t *testing.T) {
	e := newEnv(t)
	e.createNode("news", hub.AccessOpen)
	rcv := newHookReceiver(t)
	engine, err := delivery.New(delivery.Config{
		Store:        e.store,
		PollInterval: 20 * time.Millisecond,
		Senders: map[hub.Kind]delivery.Sender{hub.KindWebhook: &delivery.Webhook{HTTPSender: delivery.HTTPSender{
			Client:    netguard.NewClient(netguard.Options{AllowPrivate: true}),
			PublicURL: "http://pingd.test:8080/",
			UserAgent: "pingd/test",
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.hub.Register(engine, hub.KindWebhook)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = engine.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	href := rcv.URL + "/hook?k=v"
	wantStatus(t, e.subscribe("news", typeHTTPSub, "", `<subscribe><url href="`+strings.ReplaceAll(href, "&", "&amp;")+`"/></subscribe>`), http.StatusAccepted)
	testenv.WaitFor(t, 10*time.Second, "the subscription to be verified", func() bool {
		subs := e.webhooks("news")
		return len(subs) == 1 && subs[0].State == hub.SubActive
	})
	checks := rcv.verifications()
	if len(checks) != 1 || checks[0].Get("hub.mode") != "subscribe" || checks[0].Get("hub.topic") != "http://pingd.test:8080/feeds/news" ||
		checks[0].Get("hub.challenge") == "" || checks[0].Get("k") != "v" {
		t.Errorf("verification requests: %v", checks)
	}

	wantStatus(t, e.subscribe("news", typeHTTPSub, "", `<unsubscribe><url href="`+strings.ReplaceAll(href, "&", "&amp;")+`"/></unsubscribe>`), http.StatusAccepted)
	testenv.WaitFor(t, 10*time.Second, "the unsubscription to be verified", func() bool { return len(e.webhooks("news")) == 0 })
	if checks := rcv.verifications(); len(checks) != 2 || checks[1].Get("hub.mode") != "unsubscribe" {
		t.Errorf("verification requests: %v", checks)
	}
}

// TestAdminNodeAnswerHasLinksAndSnippets: the admin API's node answer
// carries every link of the node and what a publisher pastes.
func TestAdminNodeAnswerHasLinksAndSnippets(t *testing.T) {
	e := newEnv(t)
	resp := e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": "feeds/demo"})
	wantStatus(t, resp, http.StatusCreated)
	created := decodeJSON[nodeJSON](t, resp)
	resp = e.admin(http.MethodGet, "/api/nodes/feeds%2Fdemo", nil)
	wantStatus(t, resp, http.StatusOK)
	got := decodeJSON[map[string]any](t, resp)

	const base = "http://pingd.test:8080"
	wantLinks := map[string]any{
		"descriptor":    base + "/feeds/feeds%2Fdemo",
		"subscribe":     base + "/feeds/feeds%2Fdemo?method=subscribe",
		"xrds":          base + "/xrds/feeds%2Fdemo",
		"atom":          base + "/atom/feeds%2Fdemo",
		"rss":           base + "/rss/feeds%2Fdemo",
		"hub":           base + "/websub",
		"please_notify": base + "/pleaseNotify",
	}
	links, _ := got["links"].(map[string]any)
	for k, v := range wantLinks {
		if links[k] != v {
			t.Errorf("links[%s] = %v, want %v", k, links[k], v)
		}
	}
	snippets, _ := got["snippets"].(map[string]any)
	head, _ := snippets["html_head"].(string)
	tags := pageTags(t, []byte("<!DOCTYPE html><html><head>"+head+"</head><body></body></html>"))
	if !hasTag(tags, map[string]string{"tag": "link", "rel": "getpingd.updates.descriptor", "href": base + "/feeds/feeds%2Fdemo"}) ||
		!hasTag(tags, map[string]string{"tag": "meta", "http-equiv": "X-XRDS-Location", "content": base + "/xrds/feeds%2Fdemo"}) {
		t.Errorf("html_head snippet %q", head)
	}
	for _, k := range []string{"atom", "rss"} {
		s, _ := snippets[k].(string)
		if !strings.Contains(s, `rel="getpingd.updates.descriptor"`) || !strings.Contains(s, base+"/websub") {
			t.Errorf("%s snippet %q", k, s)
		}
	}
	if rss, _ := snippets["rss"].(string); !strings.Contains(rss, `<cloud domain="pingd.test" port="8080" path="/pleaseNotify"`) {
		t.Errorf("rss snippet lacks the cloud: %q", rss)
	}
	if created.Snippets.HTMLHead != head || created.Links.Descriptor != wantLinks["descriptor"] {
		t.Errorf("the creation answer differs: %+v", created)
	}
}

// TestSnippetCloudFollowsTheCloudProtocol: when registrations are to come
// over SOAP or XML-RPC, the <cloud> a publisher pastes says so, as the
// node's own RSS feed does.
func TestSnippetCloudFollowsTheCloudProtocol(t *testing.T) {
	for protocol, want := range map[string]string{
		"xml-rpc": `<cloud domain="pingd.test" port="8080" path="/RPC2" registerProcedure="rssCloud.pleaseNotify" protocol="xml-rpc"/>`,
		"soap":    `<cloud domain="pingd.test" port="8080" path="/RPC2" registerProcedure="pleaseNotify" protocol="soap"/>`,
	} {
		t.Run(protocol, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.CloudProtocol = protocol })
			resp := e.admin(http.MethodPost, "/api/nodes", map[string]any{"node": "demo"})
			wantStatus(t, resp, http.StatusCreated)
			created := decodeJSON[nodeJSON](t, resp)
			if !strings.Contains(created.Snippets.RSS, want) {
				t.Errorf("rss snippet %q lacks %s", created.Snippets.RSS, want)
			}
			resp = e.do(http.MethodGet, "/rss/demo", "", nil)
			wantStatus(t, resp, http.StatusOK)
			body := string(readBody(t, resp))
			for _, attr := range []string{`path="/RPC2"`, `protocol="` + protocol + `"`} {
				if !strings.Contains(body, attr) {
					t.Errorf("node feed's cloud lacks %s: %s", attr, body)
				}
			}
		})
	}
}
