package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// yadisReport is what yadis_discover.py prints.
type yadisReport struct {
	LibraryAccept     string         `json:"library_accept"`
	Discover          yadisDiscovery `json:"discover"`
	DiscoverHTMLFirst yadisDiscovery `json:"discover_html_first"`
	YadisContentType  string         `json:"yadis_content_type"`
	Page              struct {
		Status           int         `json:"status"`
		ContentType      string      `json:"content_type"`
		XXRDSLocation    string      `json:"x_xrds_location"`
		MetaXRDSLocation string      `json:"meta_xrds_location"`
		Links            []yadisLink `json:"links"`
	} `json:"page"`
}

type yadisLink struct {
	Rel  string `json:"rel"`
	Href string `json:"href"`
}

type yadisDiscovery struct {
	Error             string         `json:"error"`
	ParseError        string         `json:"parse_error"`
	NormalizedURI     string         `json:"normalized_uri"`
	XRDSURI           string         `json:"xrds_uri"`
	ContentType       string         `json:"content_type"`
	IsXRDS            bool           `json:"is_xrds"`
	UsedYadisLocation bool           `json:"used_yadis_location"`
	Services          []yadisService `json:"services"`
}

type yadisService struct {
	Types []string `json:"types"`
	URIs  []struct {
		URI    string `json:"uri"`
		Method string `json:"method"`
	} `json:"uris"`
	Accept []struct {
		Type  string   `json:"type"`
		Diffs []string `json:"diffs"`
	} `json:"accept"`
	PubSub []map[string]string `json:"pubsub"`
}

// TestClientsYadis: python-openid's Yadis discovery finds each node's
// GetPingd XRDS document from the descriptor URL both ways Yadis allows —
// content negotiation (its own Accept header) and the X-XRDS-Location
// header (a client asking for HTML) — and from the HTML <meta> alone;
// the content type compares literally, and the service is the one
// DESIGN.md describes. A node name with a "/" is one percent-encoded
// path segment.
func TestClientsYadis(t *testing.T) {
	e := startClientsEnv(t)
	requirePython(t, map[string]string{"openid.yadis.discover": "python3-openid"})
	// Node names a stranger would pick that need escaping in a URL path.
	odd := []string{"feeds/demo", "Café au lait?", ".."}
	for i, name := range odd {
		if code := e.d.api("POST", "/api/nodes", map[string]string{"node": name, "source": fmt.Sprintf("%s/odd-%d.xml", e.feed.URL, i)}, nil); code != 201 {
			t.Fatalf("create %q: HTTP %d", name, code)
		}
	}
	cases := []struct{ node, security string }{{"news", "none"}, {"private", "whitelist"}}
	for _, name := range odd {
		cases = append(cases, struct{ node, security string }{name, "none"})
	}
	for _, n := range cases {
		t.Run(url.PathEscape(n.node), func(t *testing.T) {
			descriptor := e.d.URL + "/feeds/" + pathSegment(n.node)
			xrdsURL := e.d.URL + "/xrds/" + pathSegment(n.node)
			var r yadisReport
			if out := runClient(t, 30*time.Second, "yadis_discover.py", descriptor); json.Unmarshal(out, &r) != nil {
				t.Fatalf("yadis_discover.py printed %s", out)
			}
			if !strings.Contains(r.LibraryAccept, "application/xrds+xml") {
				t.Fatalf("python-openid's Accept header is %q", r.LibraryAccept)
			}
			// python-openid decodes a body whose Content-Type has no
			// charset as ISO-8859-1; the contract forbids the parameter on
			// application/xrds+xml, so only an ASCII document (non-ASCII
			// written as character references) reaches it intact.
			checkService := func(how string, d yadisDiscovery) {
				t.Helper()
				if len(d.Services) != 1 {
					t.Errorf("%s: services %+v", how, d.Services)
					return
				}
				s := d.Services[0]
				var uris []string
				for _, u := range s.URIs {
					uris = append(uris, u.Method+" "+u.URI)
				}
				var accepts []string
				for _, a := range s.Accept {
					accepts = append(accepts, a.Type+" "+strings.Join(a.Diffs, ","))
				}
				switch {
				case !slices.Equal(s.Types, []string{"http://getpingd.com/services/subscribe"}):
					t.Errorf("%s: service types %q", how, s.Types)
				case !slices.Equal(uris, []string{"SUBSCRIBE " + descriptor, "POST " + descriptor + "?method=subscribe"}):
					t.Errorf("%s: service URIs %q", how, uris)
				case !slices.Equal(accepts, []string{
					"application/getpingd+http+subscribe+xml application/patch-ops+xml",
					"application/getpingd+xmpp+subscribe+xml application/patch-ops+xml"}):
					t.Errorf("%s: accepted subscription types %q", how, accepts)
				case len(s.PubSub) == 1 && s.PubSub[0]["node"] != n.node && s.PubSub[0]["node"] == latin1Misreading(n.node):
					t.Errorf("%s: python-openid read node %q as %q: the XRDS document must be ASCII (character references)", how, n.node, s.PubSub[0]["node"])
				case len(s.PubSub) != 1 || s.PubSub[0]["jid"] != e.p.ComponentDomain || s.PubSub[0]["node"] != n.node || s.PubSub[0]["security"] != n.security:
					t.Errorf("%s: getpingd-xmpp:PubSub %v, want jid %s node %q security %s", how, s.PubSub, e.p.ComponentDomain, n.node, n.security)
				}
			}

			// Content negotiation: the descriptor URL answers the XRDS
			// itself, and isXRDS() holds only because the content type
			// equals application/xrds+xml literally.
			d := r.Discover
			if d.Error != "" || d.ParseError != "" {
				t.Fatalf("discover: %s%s", d.Error, d.ParseError)
			}
			if d.ContentType != r.YadisContentType || !d.IsXRDS || d.UsedYadisLocation || d.XRDSURI != descriptor {
				t.Errorf("discover with python-openid's Accept: content type %q (want exactly %q), isXRDS %v, used X-XRDS-Location %v, XRDS at %s",
					d.ContentType, r.YadisContentType, d.IsXRDS, d.UsedYadisLocation, d.XRDSURI)
			}
			checkService("discover", d)

			// The header: a client that asks for HTML is led to /xrds/.
			d = r.DiscoverHTMLFirst
			if d.Error != "" || d.ParseError != "" {
				t.Fatalf("discover asking for HTML: %s%s", d.Error, d.ParseError)
			}
			if !d.UsedYadisLocation || d.XRDSURI != xrdsURL || d.ContentType != r.YadisContentType || !d.IsXRDS {
				t.Errorf("discover asking for HTML: XRDS at %s (want %s via X-XRDS-Location), content type %q", d.XRDSURI, xrdsURL, d.ContentType)
			}
			checkService("discover asking for HTML", d)

			// The page: header, <meta http-equiv> and the GetPingd <link>.
			pg := r.Page
			if pg.Status != 200 || !strings.HasPrefix(pg.ContentType, "text/html") || pg.XXRDSLocation != xrdsURL || pg.MetaXRDSLocation != xrdsURL {
				t.Errorf("descriptor page: %+v, want X-XRDS-Location and <meta> pointing at %s", pg, xrdsURL)
			}

			t.Run("descriptor link", func(t *testing.T) {
				// DESIGN.md: the header, the <meta> and the <link> all point at /xrds/.
				if !slices.Contains(pg.Links, yadisLink{Rel: "getpingd.updates.descriptor", Href: xrdsURL}) {
					t.Errorf("descriptor page links %+v lack rel=getpingd.updates.descriptor → %s", pg.Links, xrdsURL)
				}
			})

		})
	}
}

// rpcResult is one xmlrpc.client call: its result or the Fault it raised.
type rpcResult struct {
	Result json.RawMessage `json:"result"`
	Fault  *struct {
		Code   int    `json:"code"`
		String string `json:"string"`
	} `json:"fault"`
	Status int `json:"status"`
}

// TestClientsXMLRPC: Python's xmlrpc.client pings pingd in every XML-RPC
// dialect of the contract and gets Faults (code and string) for bad
// calls; rssCloud receivers written with http.server (http-post, with and
// without domain) and xmlrpc.server (xml-rpc) register, are verified
// before the answer, and are notified of a change pinged over XML-RPC.
func TestClientsXMLRPC(t *testing.T) {
	e := startClientsEnv(t)
	requirePython(t, map[string]string{"xmlrpc.client": "python3", "xmlrpc.server": "python3"})
	report := runClientReport(t, 90*time.Second, "xmlrpc_client.py", map[string]any{
		"pingd_url": e.d.URL, "feed_url": e.newsFeed, "control_url": e.control, "site_url": "http://127.0.0.1/site",
	})
	result := func(step string, want any) {
		t.Helper()
		got, ok := field[rpcResult](t, report, step)
		if !ok {
			return
		}
		wantJSON, _ := json.Marshal(want)
		if got.Fault != nil || string(got.Result) != string(wantJSON) {
			t.Errorf("%s: %s, want %s", step, report[step], wantJSON)
		}
	}
	pingResult := func(step string) {
		t.Helper()
		got, ok := field[rpcResult](t, report, step)
		if !ok {
			return
		}
		var ans struct {
			FlError *bool   `json:"flerror"`
			Message *string `json:"message"`
		}
		if got.Fault != nil || json.Unmarshal(got.Result, &ans) != nil || ans.FlError == nil || *ans.FlError || ans.Message == nil {
			t.Errorf("%s: %s, want a struct with flerror false and a message", step, report[step])
		}
	}
	fault := func(step string, code int) {
		t.Helper()
		got, ok := field[rpcResult](t, report, step)
		if !ok {
			return
		}
		if got.Fault == nil || got.Fault.Code != code || got.Fault.String == "" {
			t.Errorf("%s: %s, want a Fault %d with a reason", step, report[step], code)
		}
	}

	pingResult("ping")
	pingResult("extended_ping")
	pingResult("extended_ping_tags")
	pingResult("untyped_ping")
	result("cloud_ping", true)
	// WordPress's sequence: the 3-parameter extendedPing (name, home,
	// feed) is taken; its fallback ping of the home page works too.
	pingResult("wordpress_extended_ping")
	pingResult("wordpress_fallback_ping")

	// Faults: the codes of the XML-RPC fault code interoperability spec.
	fault("fault_no_params", -32602)
	fault("fault_wrong_types", -32602)
	fault("fault_unknown_method", -32601)
	fault("fault_cloud_ping_not_http", -32602)
	fault("fault_please_notify_port", -32602)
	fault("fault_please_notify_short", -32602)
	fault("fault_not_xml", -32700)
	fault("fault_truncated", -32700)

	// rssCloud registrations answer true only once verified.
	type cloudRequest struct {
		Method string            `json:"method"`
		Path   string            `json:"path"`
		Query  map[string]string `json:"query"`
		Form   map[string]string `json:"form"`
	}
	result("please_notify_http_post", true)
	if got, ok := field[[]cloudRequest](t, report, "please_notify_http_post_requests"); ok &&
		(len(got) != 1 || got[0].Method != "POST" || got[0].Path != "/notify" || got[0].Form["url"] != e.newsFeed) {
		t.Errorf("without domain, the registration is checked by a test notification: %+v", got)
	}
	result("please_notify_domain", true)
	if got, ok := field[[]cloudRequest](t, report, "please_notify_domain_requests"); ok &&
		(len(got) != 1 || got[0].Method != "GET" || got[0].Path != "/verified" || got[0].Query["url"] != e.newsFeed || got[0].Query["challenge"] == "") {
		t.Errorf("with domain, the registration is checked by a challenge: %+v", got)
	}
	result("please_notify_xml_rpc", true)
	if got, ok := field[[]string](t, report, "please_notify_xml_rpc_calls"); ok && !slices.Equal(got, []string{e.newsFeed}) {
		t.Errorf("without domain, the xml-rpc registration is checked by a test call of its procedure: %q", got)
	}
	result("please_notify_unreachable", false)

	// A change pinged over XML-RPC reaches every registration once.
	pingResult("change_ping")
	if got, ok := field[[]cloudRequest](t, report, "change_http_post"); ok {
		var paths []string
		for _, r := range got {
			if r.Form["url"] != e.newsFeed {
				t.Errorf("rssCloud notification %+v does not name %s", r, e.newsFeed)
			}
			paths = append(paths, r.Path)
		}
		slices.Sort(paths)
		if !slices.Equal(paths, []string{"/notify", "/verified"}) {
			t.Errorf("http-post notifications of the change went to %q, want /notify and /verified once each", paths)
		}
	}
	if got, ok := field[[]string](t, report, "change_xml_rpc"); ok && !slices.Equal(got, []string{e.newsFeed}) {
		t.Errorf("xml-rpc notifications of the change: %q, want one naming %s", got, e.newsFeed)
	}
}

// feedSummary is what feedparser_client.py reports of one parsed feed.
type feedSummary struct {
	Status   int               `json:"status"`
	Bozo     bool              `json:"bozo"`
	BozoExc  string            `json:"bozo_exception"`
	Version  string            `json:"version"`
	ETag     string            `json:"etag"`
	Modified string            `json:"modified"`
	Headers  map[string]string `json:"headers"`
	Title    string            `json:"title"`
	Links    []struct {
		Rel  string `json:"rel"`
		Href string `json:"href"`
	} `json:"links"`
	Cloud   map[string]string `json:"cloud"`
	Entries []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
		Link  string `json:"link"`
	} `json:"entries"`
}

func (f feedSummary) link(rel string) string {
	for _, l := range f.Links {
		if l.Rel == rel {
			return l.Href
		}
	}
	return ""
}

func (f feedSummary) titles() []string {
	var out []string
	for _, e := range f.Entries {
		out = append(out, e.Title)
	}
	return out
}

// TestClientsFeedparser: feedparser reads /atom/{node} and /rss/{node}
// cleanly (no bozo), finds the hub and self links and the rssCloud
// <cloud>, revalidates with the ETag and Last-Modified it kept (304), and
// after a change gets the RFC 3229 delta it asks for (A-IM: feed). A
// reader then uses what the feeds advertise: it registers at the <cloud>
// and subscribes at the hub, and both tell it of the change.
func TestClientsFeedparser(t *testing.T) {
	e := startClientsEnv(t)
	requirePython(t, map[string]string{"feedparser": "python3-feedparser"})
	report := runClientReport(t, 90*time.Second, "feedparser_client.py", map[string]any{
		"pingd_url": e.d.URL, "feed_url": e.newsFeed, "control_url": e.control,
		"node": "news", "whitelist_node": "private", "token": e.privateToken, "admin_token": testAdminToken,
	})
	urls := map[string]string{"atom": e.d.URL + "/atom/news", "rss": e.d.URL + "/rss/news"}
	contentTypes := map[string]string{"atom": "application/atom+xml", "rss": "application/rss+xml"}
	versions := map[string]string{"atom": "atom10", "rss": "rss20"}
	for _, format := range []string{"atom", "rss"} {
		f, ok := field[feedSummary](t, report, format)
		if !ok {
			continue
		}
		if f.Status != 200 || f.Bozo || f.Version != versions[format] || f.Title != "News" ||
			!strings.HasPrefix(f.Headers["content-type"], contentTypes[format]) {
			t.Errorf("%s: HTTP %d, bozo %v (%s), version %q, title %q, %s", format, f.Status, f.Bozo, f.BozoExc, f.Version, f.Title, f.Headers["content-type"])
		}
		if f.ETag == "" || f.Modified == "" {
			t.Errorf("%s: no validators (ETag %q, Last-Modified %q)", format, f.ETag, f.Modified)
		}
		if f.link("self") != urls[format] || f.link("hub") != e.d.URL+"/websub" {
			t.Errorf("%s: links %+v, want self %s and hub %s/websub", format, f.Links, urls[format], e.d.URL)
		}
		for _, cond := range []string{"_etag_modified", "_etag", "_modified"} {
			if c, ok := field[feedSummary](t, report, format+cond); ok && (c.Status != 304 || len(c.Entries) != 0) {
				t.Errorf("%s revalidated with %s: HTTP %d with %d entries, want 304", format, strings.TrimPrefix(cond, "_"), c.Status, len(c.Entries))
			}
		}
	}
	if rss, ok := field[feedSummary](t, report, "rss"); ok {
		want := map[string]string{"domain": "127.0.0.1", "port": strings.TrimPrefix(e.d.URL[strings.LastIndex(e.d.URL, ":"):], ":"),
			"path": "/pleaseNotify", "registerprocedure": "rssCloud.pleaseNotify", "protocol": "http-post"}
		if fmt.Sprint(rss.Cloud) != fmt.Sprint(want) {
			t.Errorf("rss <cloud>: %v, want %v", rss.Cloud, want)
		}
	}
	if f, ok := field[feedSummary](t, report, "private_no_token"); ok && f.Status != 401 {
		t.Errorf("whitelist node's feed without token: HTTP %d", f.Status)
	}
	if f, ok := field[feedSummary](t, report, "private_token"); ok && (f.Status != 200 || f.Bozo || f.Title != "Private") {
		t.Errorf("whitelist node's feed with its token: HTTP %d, bozo %v (%s)", f.Status, f.Bozo, f.BozoExc)
	}

	// What the feeds advertise works for a stranger.
	if got, ok := field[struct {
		URL    string `json:"url"`
		Status int    `json:"status"`
		Body   string `json:"body"`
	}](t, report, "cloud_register"); ok && (got.Status != 200 || !strings.Contains(got.Body, `success="true"`)) {
		t.Errorf("registering at the feed's <cloud> (%s): HTTP %d %s", got.URL, got.Status, got.Body)
	}
	type received struct {
		Method      string            `json:"method"`
		Path        string            `json:"path"`
		Query       map[string]string `json:"query"`
		ContentType string            `json:"content_type"`
		Link        string            `json:"link"`
		Body        string            `json:"body"`
	}
	if got, ok := field[struct {
		Status        int        `json:"status"`
		Verifications []received `json:"verifications"`
		Verified      bool       `json:"verified"`
	}](t, report, "websub_subscribe"); ok {
		if got.Status != 202 || !got.Verified || got.Verifications[0].Query["hub.topic"] != urls["atom"] || got.Verifications[0].Query["hub.mode"] != "subscribe" {
			t.Errorf("subscribing at the feed's hub: %+v", got)
		}
	}

	if active, ok := field[bool](t, report, "websub_active"); ok && !active {
		t.Errorf("the verified WebSub subscription never became active")
	}

	// The change.
	if seen, ok := field[bool](t, report, "change_seen"); ok && !seen {
		t.Fatalf("the change never reached /atom/news")
	}
	for _, format := range []string{"atom", "rss"} {
		f, ok := field[feedSummary](t, report, format+"_after_change")
		if !ok {
			continue
		}
		// feedparser sends A-IM: feed: the answer is the delta.
		if f.Status != 226 || f.Bozo || f.Headers["im"] != "feed" || !slices.Equal(f.titles(), []string{"Seen by feedparser"}) {
			t.Errorf("%s revalidated after the change: HTTP %d, bozo %v, IM %q, entries %q; want 226 with the new entry only",
				format, f.Status, f.Bozo, f.Headers["im"], f.titles())
		}
	}
	if got, ok := field[[]received](t, report, "cloud_notifications"); ok &&
		(len(got) != 1 || got[0].Body != "url="+url.QueryEscape(urls["rss"])) {
		t.Errorf("rssCloud notifications of the change: %+v, want one naming %s", got, urls["rss"])
	}
	if got, ok := field[[]struct {
		ContentType string      `json:"content_type"`
		Link        string      `json:"link"`
		Feed        feedSummary `json:"feed"`
	}](t, report, "websub_posts"); ok {
		if len(got) != 1 || !strings.HasPrefix(got[0].ContentType, "application/atom+xml") || got[0].Feed.Bozo ||
			!slices.Equal(got[0].Feed.titles(), []string{"Seen by feedparser"}) || !strings.Contains(got[0].Link, "<"+urls["atom"]+`>; rel="self"`) {
			t.Errorf("WebSub content distributions of the change: %+v", got)
		}
	}
}

// pathSegment percent-encodes a node name as one URL path segment, with
// the dot segments written %2E as pingd writes them.
func pathSegment(node string) string {
	switch node {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(node)
}

// latin1Misreading is what a client that decodes UTF-8 bytes as ISO-8859-1
// makes of s.
func latin1Misreading(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		b.WriteRune(rune(c))
	}
	return b.String()
}
