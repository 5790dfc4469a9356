package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/netguard"
)

// site is a loopback web site whose pages the tests choose.
type site struct {
	*httptest.Server
	pages map[string]page
	// hits counts the requests the site was sent.
	hits atomic.Int32
}

type page struct {
	contentType string
	headers     map[string]string
	body        string
	status      int
	redirect    string
}

func newSite(t *testing.T) *site {
	s := &site{pages: map[string]page{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		p, ok := s.pages[r.URL.RequestURI()]
		if !ok {
			http.NotFound(w, r)
			return
		}
		for k, v := range p.headers {
			w.Header().Add(k, strings.ReplaceAll(v, "{base}", s.URL))
		}
		if p.redirect != "" {
			http.Redirect(w, r, strings.ReplaceAll(p.redirect, "{base}", s.URL), http.StatusFound)
			return
		}
		if p.contentType != "" {
			w.Header().Set("Content-Type", p.contentType)
		}
		if p.status != 0 {
			w.WriteHeader(p.status)
		}
		fmt.Fprint(w, strings.ReplaceAll(p.body, "{base}", s.URL))
	}))
	t.Cleanup(s.Close)
	return s
}

func testClient() *Client {
	return &Client{HTTP: netguard.NewClient(netguard.Options{AllowPrivate: true, Timeout: 10 * time.Second}), UserAgent: "pingd-test"}
}

const xrdsBody = `<?xml version="1.0"?>
<xrds:XRDS xmlns:xrds="xri://$xrds" xmlns="xri://$xrd*($v*2.0)" xmlns:getpingd="http://getpingd.com/core/getpingd-1.0" xmlns:getpingd-xmpp="http://getpingd.com/extensions/xmpp/getpingd-1.0">
<XRD><Service><Type>http://getpingd.com/services/subscribe</Type>
<URI getpingd:http-method="SUBSCRIBE">{base}/feeds/demo</URI>
<URI getpingd:http-method="POST">/feeds/demo?method=subscribe</URI>
<getpingd:Accept type="application/getpingd+http+subscribe+xml"><getpingd:SupportsDiff type="application/patch-ops+xml"/></getpingd:Accept>
<getpingd:Accept type="application/getpingd+xmpp+subscribe+xml"/>
<getpingd-xmpp:PubSub jid="pubsub.example.org" node="demo" security="whitelist"/>
</Service></XRD></xrds:XRDS>`

func TestDiscover(t *testing.T) {
	s := newSite(t)
	s.pages["/xrds"] = page{contentType: ContentTypeXRDS, body: xrdsBody}
	s.pages["/home"] = page{contentType: "text/html; charset=utf-8", body: `<!doctype html><html><head>
<title>Blog</title>
<link rel="alternate" type="application/rss+xml" title="Comments" href="/comments/feed">
<link rel="alternate" type="application/rss+xml" title="Posts (RSS)" href="/feed.rss">
<link rel="alternate" type="application/atom+xml" title="Posts (Atom)" href="feed.atom">
<link rel="alternate" type="text/html" href="/other-language">
<link rel="hub" href="https://hub.example.org/">
<link rel="self" href="/home">
<meta http-equiv="X-XRDS-Location" content="/xrds">
<link rel="getpingd.updates.descriptor" href="/xrds">
</head><body><link rel="alternate" type="application/atom+xml" href="/in-body.atom"></body></html>`}
	s.pages["/base"] = page{contentType: "text/html", body: `<html><head><base href="/deep/dir/"><link rel="alternate" type="application/atom+xml" href="f.xml"></head></html>`}
	s.pages["/broken"] = page{contentType: "text/html", body: `<html><head><link rel=alternate type="application/rss+xml" href=/rss.xml><link rel="alternate" type="application/atom+xml" href="http://[::1"><meta http-equiv=x-xrds-location content=/xrds><p>unclosed <b><i>`}
	s.pages["/headers"] = page{contentType: "text/plain", body: "hello",
		headers: map[string]string{"Link": `<https://hub.example.org/a>; rel="hub", <{base}/headers>; rel="self", <https://hub.example.org/b>; rel=hub`, "X-XRDS-Location": "{base}/xrds"}}
	s.pages["/anchored"] = page{contentType: "text/plain", body: "hello",
		headers: map[string]string{"Link": `<https://hub.example.org/other>; rel="hub"; anchor="https://other.example/", <https://hub.example.org/c>; title="a \"quoted\", title"; rel="hub"`}}
	s.pages["/feed.rss"] = page{contentType: "application/rss+xml", body: `<?xml version="1.0"?>
<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel><title>T</title>
<atom:link rel="hub" href="https://hub.example.org/rss"/>
<atom:link rel="self" href="{base}/feed.rss"/>
<atom:link rel="getpingd.updates.descriptor" href="/xrds"/>
<cloud domain="rpc.example.org" port="5337" path="/rsscloud/pleaseNotify" registerProcedure="" protocol="http-post"/>
<item><title>x</title><atom:link rel="hub" href="https://not-the-channel.example/"/></item>
</channel></rss>`}
	s.pages["/feed.atom"] = page{contentType: "application/atom+xml", body: `<feed xmlns="http://www.w3.org/2005/Atom"><title>A</title>
<link rel="hub" href="https://hub.example.org/atom"/><link rel="self" href="/feed.atom"/><entry><link rel="hub" href="https://entry.example/"/></entry></feed>`}
	s.pages["/r1"] = page{redirect: "{base}/r2"}
	s.pages["/r2"] = page{redirect: "{base}/r3"}
	s.pages["/r3"] = page{redirect: "{base}/home"}
	for i := 0; i < 7; i++ {
		s.pages[fmt.Sprintf("/loop%d", i)] = page{redirect: fmt.Sprintf("{base}/loop%d", i+1)}
	}
	s.pages["/gone"] = page{status: http.StatusGone, body: "gone"}

	cases := []struct {
		name, path  string
		kind        string
		feeds       []string // paths, best first
		hubs        []string
		self        string
		descriptors int
		services    int
		clouds      int
		err         bool
	}{
		{name: "html page", path: "/home", kind: "html", feeds: []string{"/feed.atom", "/feed.rss", "/comments/feed"},
			hubs: []string{"https://hub.example.org/"}, self: "/home", descriptors: 1, services: 1},
		{name: "base href", path: "/base", kind: "html", feeds: []string{"/deep/dir/f.xml"}},
		{name: "broken markup", path: "/broken", kind: "html", feeds: []string{"/rss.xml"}, descriptors: 1, services: 1},
		{name: "headers only", path: "/headers", kind: "other", hubs: []string{"https://hub.example.org/a", "https://hub.example.org/b"}, self: "/headers", descriptors: 1, services: 1},
		{name: "link headers with an anchor and escaped quotes", path: "/anchored", kind: "other", hubs: []string{"https://hub.example.org/c"}},
		{name: "rss feed", path: "/feed.rss", kind: "feed", hubs: []string{"https://hub.example.org/rss"}, self: "/feed.rss", descriptors: 1, services: 1, clouds: 1},
		{name: "atom feed", path: "/feed.atom", kind: "feed", hubs: []string{"https://hub.example.org/atom"}, self: "/feed.atom"},
		{name: "three redirects", path: "/r1", kind: "html", feeds: []string{"/feed.atom", "/feed.rss", "/comments/feed"},
			hubs: []string{"https://hub.example.org/"}, self: "/home", descriptors: 1, services: 1},
		{name: "more than five redirects", path: "/loop0", err: true},
		{name: "gone", path: "/gone", err: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := testClient().Discover(context.Background(), s.URL+tc.path)
			if tc.err {
				if err == nil {
					t.Fatalf("want an error, got %+v", f)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Kind != tc.kind {
				t.Errorf("kind %q, want %q", f.Kind, tc.kind)
			}
			var feeds []string
			for _, l := range f.Feeds {
				feeds = append(feeds, strings.TrimPrefix(l.URL, s.URL))
			}
			if !slices.Equal(feeds, tc.feeds) {
				t.Errorf("feeds %v, want %v", feeds, tc.feeds)
			}
			if !slices.Equal(f.Hubs, tc.hubs) {
				t.Errorf("hubs %v, want %v", f.Hubs, tc.hubs)
			}
			if want := ""; tc.self != "" {
				want = s.URL + tc.self
				if f.Self != want {
					t.Errorf("self %q, want %q", f.Self, want)
				}
			}
			if len(f.Descriptors) != tc.descriptors || len(f.Services) != tc.services || len(f.Clouds) != tc.clouds {
				t.Errorf("descriptors %v, services %+v, clouds %+v", f.Descriptors, f.Services, f.Clouds)
			}
		})
	}

	// The XRDS services are read field by field.
	f, err := testClient().Discover(context.Background(), s.URL+"/home")
	if err != nil {
		t.Fatal(err)
	}
	svc := f.Services[0]
	if svc.JID != "pubsub.example.org" || svc.Node != "demo" || svc.Security != "whitelist" ||
		svc.Subscribe["SUBSCRIBE"] != s.URL+"/feeds/demo" || svc.Subscribe["POST"] != s.URL+"/feeds/demo?method=subscribe" ||
		!slices.Equal(svc.Accept, []string{"application/getpingd+http+subscribe+xml", "application/getpingd+xmpp+subscribe+xml"}) ||
		!slices.Contains(svc.Types, "http://getpingd.com/services/subscribe") {
		t.Errorf("service %+v", svc)
	}
	rss, _ := testClient().Discover(context.Background(), s.URL+"/feed.rss")
	if c := rss.Clouds[0]; c.Domain != "rpc.example.org" || c.Port != 5337 || c.Path != "/rsscloud/pleaseNotify" || c.Protocol != "http-post" {
		t.Errorf("cloud %+v", c)
	}
}

func TestResolveSource(t *testing.T) {
	s := newSite(t)
	s.pages["/home"] = page{contentType: "text/html", body: `<link rel="alternate" type="application/rss+xml" href="/feed.rss"><link rel="alternate" type="application/atom+xml" href="/feed.atom">`}
	s.pages["/feed.atom"] = page{contentType: "application/atom+xml", body: `<feed xmlns="http://www.w3.org/2005/Atom"/>`}
	s.pages["/empty"] = page{contentType: "text/html", body: `<html><head><title>no feeds</title></head></html>`}
	s.pages["/opml"] = page{contentType: "text/x-opml", body: `<opml version="2.0"/>`}
	c := testClient()
	res, err := c.ResolveSource(context.Background(), s.URL+"/home")
	if err != nil || res.FeedURL != s.URL+"/feed.atom" || !res.FromPage || !slices.Equal(res.Alternatives, []string{s.URL + "/feed.rss"}) {
		t.Errorf("page: %+v, %v", res, err)
	}
	if res, err := c.ResolveSource(context.Background(), s.URL+"/feed.atom"); err != nil || res.FeedURL != s.URL+"/feed.atom" || res.FromPage {
		t.Errorf("feed: %+v, %v", res, err)
	}
	if res, err := c.ResolveSource(context.Background(), s.URL+"/opml"); err != nil || res.FeedURL != s.URL+"/opml" {
		t.Errorf("other resource: %+v, %v", res, err)
	}
	if _, err := c.ResolveSource(context.Background(), s.URL+"/empty"); !errors.Is(err, ErrNoFeed) {
		t.Errorf("page without feeds: %v", err)
	}
	// The guard refuses loopback unless allowed.
	guarded := &Client{HTTP: netguard.NewClient(netguard.Options{})}
	if _, err := guarded.ResolveSource(context.Background(), s.URL+"/home"); !errors.Is(err, netguard.ErrRefused) {
		t.Errorf("a loopback page through the guard: %v", err)
	}
	if _, err := c.ResolveSource(context.Background(), "ftp://example.org/"); !errors.Is(err, hub.ErrInvalid) {
		t.Errorf("ftp URL: %v", err)
	}
}

func TestDiscoverCapsTheBody(t *testing.T) {
	s := newSite(t)
	s.pages["/big"] = page{contentType: "text/html", body: `<head><link rel="alternate" type="application/atom+xml" href="/early.atom">` +
		strings.Repeat("<!-- padding -->", 1<<16) + `<link rel="alternate" type="application/atom+xml" href="/late.atom"></head>`}
	c := testClient()
	c.MaxBodyBytes = 64 << 10
	f, err := c.Discover(context.Background(), s.URL+"/big")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Feeds) != 1 || !strings.HasSuffix(f.Feeds[0].URL, "/early.atom") {
		t.Errorf("feeds %+v: want only the one before the cap", f.Feeds)
	}
}

// seedXRDS is the proposal's sample made well-formed, with its
// getpingd-xmpp:PubSub inside the XMPP getpingd:Accept, beside services
// and URIs ranked by XRD priority attributes.
const seedXRDS = `<?xml version="1.0"?>
<xrds:XRDS xmlns:xrds="xri://$xrds" xmlns="xri://$xrd*($v*2.0)" ref="http://www.example.com/page"
 xmlns:getpingd="http://getpingd.com/core/getpingd-1.0" xmlns:getpingd-xmpp="http://getpingd.com/extensions/xmpp/getpingd-1.0">
<XRD>
<Service priority="20">
 <Type>http://getpingd.com/services/subscribe</Type>
 <URI getpingd:http-method="SUBSCRIBE">{base}/low</URI>
 <getpingd:Accept type="application/getpingd+http+subscribe+xml"/>
</Service>
<Service priority="5">
 <Type>http://specs.openid.net/auth/2.0/signon</Type>
 <URI>{base}/openid</URI>
</Service>
<Service>
 <Type>http://getpingd.com/services/subscribe</Type>
 <URI getpingd:http-method="SUBSCRIBE">{base}/unranked</URI>
 <getpingd:Accept type="application/getpingd+http+subscribe+xml"/>
</Service>
<Service priority="10">
 <Type>http://getpingd.com/services/subscribe</Type>
 <URI>{base}/page-only</URI>
 <URI getpingd:http-method="POST" priority="2">{base}/feeds/TheUniversalGadget?method=subscribe</URI>
 <URI getpingd:http-method="SUBSCRIBE" priority="1">{base}/feeds/TheUniversalGadget</URI>
 <getpingd:Accept type="application/getpingd+http+subscribe+xml">
  <getpingd:SupportsDiff type="application/patch-ops+xml" />
 </getpingd:Accept>
 <getpingd:Accept type="application/getpingd+xmpp+subscribe+xml">
  <getpingd:SupportsDiff type="application/patch-ops+xml" />
  <getpingd-xmpp:PubSub jid="user@example.com" node="feeds/TheUniversalGadget" security="whitelist" />
 </getpingd:Accept>
</Service>
</XRD>
</xrds:XRDS>`

// TestDiscoverGetPingdAsTheSeedWritesIt: a page naming its descriptor
// with the proposal's other spelling (getpingd.updates.description);
// services tried by priority and then in document order, each one's URIs
// too; the first compatible service wins; a PubSub nested in Accept is
// read.
func TestDiscoverGetPingdAsTheSeedWritesIt(t *testing.T) {
	s := newSite(t)
	s.pages["/xrds"] = page{contentType: ContentTypeXRDS, body: seedXRDS}
	s.pages["/page"] = page{contentType: "text/html", body: `<html><head><link rel="getpingd.updates.description" href="/xrds"></head></html>`}
	s.pages["/plain.xrds"] = page{contentType: ContentTypeXRDS, body: xrdsBody}
	s.pages["/feed"] = page{contentType: "application/atom+xml", body: `<feed xmlns="http://www.w3.org/2005/Atom"><link rel="getpingd.updates.description" href="/plain.xrds"/></feed>`}

	f, err := testClient().Discover(context.Background(), s.URL+"/page")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Descriptors, []string{s.URL + "/xrds"}) {
		t.Fatalf("descriptors %v", f.Descriptors)
	}
	var order []string
	for _, svc := range f.Services {
		order = append(order, strings.TrimPrefix(svc.URIs[0].URL, s.URL))
	}
	if want := []string{"/openid", "/feeds/TheUniversalGadget", "/low", "/unranked"}; !slices.Equal(order, want) {
		t.Errorf("services in the order %v, want %v", order, want)
	}
	gadget := f.Services[1]
	if gadget.Subscribe["SUBSCRIBE"] != s.URL+"/feeds/TheUniversalGadget" || gadget.Subscribe["POST"] != s.URL+"/feeds/TheUniversalGadget?method=subscribe" ||
		gadget.URIs[0].Method != "SUBSCRIBE" || gadget.URIs[1].Method != "POST" || gadget.URIs[2].Method != "GET" {
		t.Errorf("URIs %+v", gadget.URIs)
	}
	if gadget.JID != "user@example.com" || gadget.Node != "feeds/TheUniversalGadget" || gadget.Security != getpingd.SecurityWhitelist {
		t.Errorf("the PubSub nested in Accept was not read: %+v", gadget)
	}
	want := []Choice{
		{Type: getpingd.ContentTypeHTTPSubscribe, Descriptor: s.URL + "/xrds", Method: "SUBSCRIBE", URI: s.URL + "/feeds/TheUniversalGadget"},
		{Type: getpingd.ContentTypeXMPPSubscribe, Descriptor: s.URL + "/xrds", Method: "SUBSCRIBE", URI: s.URL + "/feeds/TheUniversalGadget",
			JID: "user@example.com", Node: "feeds/TheUniversalGadget", Security: getpingd.SecurityWhitelist},
	}
	if !slices.Equal(f.Chosen, want) {
		t.Errorf("chosen %+v\nwant   %+v", f.Chosen, want)
	}

	// Without priorities the document's order decides, in a feed's
	// atom:link with the other spelling too.
	f, err = testClient().Discover(context.Background(), s.URL+"/feed")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Chosen) != 2 || f.Chosen[0].URI != s.URL+"/feeds/demo" || f.Chosen[0].Method != "SUBSCRIBE" || f.Chosen[1].Node != "demo" {
		t.Errorf("chosen %+v", f.Chosen)
	}
}

// TestChooseService: a service without the subscribe type, without the
// subscription type asked for, or without a usable method is passed
// over; an XMPP choice needs the pubsub node.
func TestChooseService(t *testing.T) {
	sub := []string{getpingd.ServiceSubscribe}
	services := []Service{
		{Descriptor: "d0", Types: []string{"other"}, Accept: []string{getpingd.ContentTypeHTTPSubscribe}, URIs: []ServiceURI{{Method: "POST", URL: "http://x/0"}}},
		{Descriptor: "d1", Types: sub, Accept: []string{getpingd.ContentTypeXMPPSubscribe}, URIs: []ServiceURI{{Method: "POST", URL: "http://x/1"}}},
		{Descriptor: "d2", Types: sub, Accept: []string{getpingd.ContentTypeHTTPSubscribe}, URIs: []ServiceURI{{Method: "GET", URL: "http://x/2"}}},
		{Descriptor: "d3", Types: sub, Accept: []string{getpingd.ContentTypeHTTPSubscribe, getpingd.ContentTypeXMPPSubscribe}, JID: "pubsub.example", Node: "n",
			URIs: []ServiceURI{{Method: "GET", URL: "http://x/3g"}, {Method: "POST", URL: "http://x/3"}}},
	}
	if c, ok := ChooseService(services, getpingd.ContentTypeHTTPSubscribe); !ok || c.Descriptor != "d3" || c.URI != "http://x/3" || c.Method != "POST" {
		t.Errorf("HTTP: %+v %v", c, ok)
	}
	if c, ok := ChooseService(services, getpingd.ContentTypeXMPPSubscribe); !ok || c.Descriptor != "d3" || c.JID != "pubsub.example" {
		t.Errorf("XMPP: %+v %v", c, ok)
	}
	if _, ok := ChooseService(services[:3], getpingd.ContentTypeHTTPSubscribe); ok {
		t.Error("a choice among services none of which fits")
	}
}

// TestFollow: a page is followed to the feed ResolveSource chooses, and
// that feed's own offers (its Link header and body) are reported; a feed
// that cannot be read is reported, not an error; a feed is not followed.
func TestFollow(t *testing.T) {
	s := newSite(t)
	s.pages["/home"] = page{contentType: "text/html", body: `<link rel="alternate" type="application/rss+xml" href="/feed.rss"><link rel="alternate" type="application/atom+xml" href="/feed.atom">`}
	s.pages["/feed.atom"] = page{contentType: "application/atom+xml", headers: map[string]string{"Link": `<https://hub.example.org/h>; rel="hub"`},
		body: `<feed xmlns="http://www.w3.org/2005/Atom"><link rel="hub" href="https://hub.example.org/b"/></feed>`}
	s.pages["/broken"] = page{contentType: "text/html", body: `<link rel="alternate" type="application/atom+xml" href="/missing.atom">`}
	c := testClient()
	f, err := c.Follow(context.Background(), s.URL+"/home")
	if err != nil {
		t.Fatal(err)
	}
	if f.Followed == nil || f.Followed.URL != s.URL+"/feed.atom" || !slices.Equal(f.Followed.Hubs, []string{"https://hub.example.org/h", "https://hub.example.org/b"}) {
		t.Errorf("followed %+v", f.Followed)
	}
	f, err = c.Follow(context.Background(), s.URL+"/broken")
	if err != nil || f.Followed != nil || !strings.Contains(f.FollowError, "HTTP 404") {
		t.Errorf("a page whose feed is missing: %+v, %v", f, err)
	}
	f, err = c.Follow(context.Background(), s.URL+"/feed.atom")
	if err != nil || f.Followed != nil || f.Kind != "feed" {
		t.Errorf("a feed: %+v, %v", f, err)
	}
}
