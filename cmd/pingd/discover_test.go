package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// publisherSite is a loopback publisher: a page linking its RSS feed and
// a GetPingd descriptor; the feed names one WebSub hub in its body, another
// (and its self URL) in a Link header, and an rssCloud cloud.
func publisherSite(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := "http://" + r.Host
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<!doctype html><html><head><title>A weblog</title>
<link rel="alternate" type="application/rss+xml" title="Posts" href="/feed.rss">
<link rel="getpingd.updates.descriptor" href="/xrds">
</head><body>Hello</body></html>`)
		case "/feed.rss":
			w.Header().Add("Link", `<https://header-hub.example/>; rel="hub", <`+base+`/feed.rss>; rel="self"`)
			w.Header().Set("Content-Type", "application/rss+xml")
			fmt.Fprint(w, `<?xml version="1.0"?><rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel><title>Posts</title>
<link>`+base+`/</link><description>d</description>
<atom:link rel="hub" href="https://body-hub.example/"/>
<cloud domain="rpc.example" port="80" path="/RPC2" registerProcedure="xmlStorageSystem.rssPleaseNotify" protocol="xml-rpc"/>
<item><title>One</title><guid>one</guid></item></channel></rss>`)
		case "/xrds":
			w.Header().Set("Content-Type", "application/xrds+xml")
			fmt.Fprint(w, `<?xml version="1.0"?>
<xrds:XRDS xmlns:xrds="xri://$xrds" xmlns="xri://$xrd*($v*2.0)" xmlns:getpingd="http://getpingd.com/core/getpingd-1.0" xmlns:getpingd-xmpp="http://getpingd.com/extensions/xmpp/getpingd-1.0">
<XRD><Service><Type>http://getpingd.com/services/subscribe</Type>
<URI getpingd:http-method="SUBSCRIBE">`+base+`/feeds/blog</URI>
<getpingd:Accept type="application/getpingd+http+subscribe+xml"/>
<getpingd:Accept type="application/getpingd+xmpp+subscribe+xml"><getpingd-xmpp:PubSub jid="pubsub.example" node="blog" security="none"/></getpingd:Accept>
</Service></XRD></xrds:XRDS>`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDiscoverFollowsThePage: pingd discover of a publisher's page
// reports what the page offers and follows its chosen feed to the push
// endpoints the feed names — hubs in its body and in its Link header, its
// cloud — beside the descriptor's GetPingd services, in text and JSON.
func TestDiscoverFollowsThePage(t *testing.T) {
	site := publisherSite(t)
	allow := env(map[string]string{"PINGD_ALLOW_PRIVATE": "1"})

	var out, errOut bytes.Buffer
	if err := discoverCommand([]string{site.URL + "/"}, &out, &errOut, allow); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	text := out.String()
	for _, want := range []string{
		site.URL + "/feed.rss  application/rss+xml  \"Posts\"  (chosen)",
		"GetPingd descriptors:\n  " + site.URL + "/xrds",
		"webhook: SUBSCRIBE " + site.URL + "/feeds/blog",
		`XMPP: SUBSCRIBE ` + site.URL + `/feeds/blog  then xmpp:pubsub.example node "blog" security none`,
		"Following the chosen feed:\n\n  " + site.URL + "/feed.rss is a feed (application/rss+xml).",
		"  WebSub hubs:\n    https://header-hub.example/\n    https://body-hub.example/",
		"  Self (topic) URL:\n    " + site.URL + "/feed.rss",
		`  rssCloud clouds:` + "\n" + `    rpc.example:80/RPC2  protocol xml-rpc  procedure "xmlStorageSystem.rssPleaseNotify"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the text does not show %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "Nothing to subscribe to") {
		t.Errorf("text:\n%s", text)
	}

	out.Reset()
	if err := discoverCommand([]string{"--json", site.URL + "/"}, &out, &errOut, allow); err != nil {
		t.Fatal(err)
	}
	var found struct {
		Kind   string `json:"kind"`
		Chosen []struct {
			Type, URI string
		} `json:"chosen"`
		Followed *struct {
			URL    string   `json:"url"`
			Kind   string   `json:"kind"`
			Hubs   []string `json:"hubs"`
			Self   string   `json:"self"`
			Clouds []struct {
				Domain   string `json:"domain"`
				Protocol string `json:"protocol"`
			} `json:"clouds"`
		} `json:"followed"`
	}
	if err := json.Unmarshal(out.Bytes(), &found); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	f := found.Followed
	if found.Kind != "html" || len(found.Chosen) != 2 || found.Chosen[0].URI != site.URL+"/feeds/blog" || f == nil ||
		f.URL != site.URL+"/feed.rss" || f.Kind != "feed" || f.Self != site.URL+"/feed.rss" ||
		!slices.Equal(f.Hubs, []string{"https://header-hub.example/", "https://body-hub.example/"}) ||
		len(f.Clouds) != 1 || f.Clouds[0].Domain != "rpc.example" || f.Clouds[0].Protocol != "xml-rpc" {
		t.Errorf("JSON:\n%s", out.String())
	}

	// A feed given directly is not followed anywhere else.
	out.Reset()
	if err := discoverCommand([]string{"--json", site.URL + "/feed.rss"}, &out, &errOut, allow); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), `"followed"`) || !strings.Contains(out.String(), "https://header-hub.example/") {
		t.Errorf("a feed's JSON:\n%s", out.String())
	}
}
