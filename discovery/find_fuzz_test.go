package discovery

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The parsers of pages, feeds, headers and XRDS documents others serve:
// whatever they are given, they do not panic, and every URL they report
// is an absolute http(s) URL.

func checkFound(t *testing.T, f *Found) {
	t.Helper()
	urls := append([]string{}, f.Hubs...)
	urls = append(urls, f.Descriptors...)
	if f.Self != "" {
		urls = append(urls, f.Self)
	}
	for _, l := range f.Feeds {
		urls = append(urls, l.URL)
	}
	for _, u := range urls {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			t.Fatalf("reported %q, not an absolute http(s) URL", u)
		}
	}
}

var fuzzBase, _ = url.Parse("http://example.org/dir/page")

func FuzzDiscoverHTML(f *testing.F) {
	f.Add([]byte(`<html><head><base href="/x/"><link rel="alternate feed" type="application/atom+xml" href="a.xml"><meta http-equiv="X-XRDS-Location" content="/xrds"><link rel=hub href=//hub.example/></head></html>`))
	f.Add([]byte(`<link rel="alternate" type="application/rss+xml; charset=utf-8" title="Comments" href="javascript:alert(1)">`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var found Found
		found.parseHTML(fuzzBase, body)
		rankFeeds(found.Feeds)
		checkFound(t, &found)
	})
}

func FuzzDiscoverFeed(f *testing.F) {
	f.Add([]byte(`<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel><atom:link rel="hub" href="/hub"/><cloud domain="d" port="x" path="/p" protocol="http-post"/></channel></rss>`))
	f.Add([]byte(`<feed xmlns="http://www.w3.org/2005/Atom"><link rel="self hub" href="http://h/"/><entry><link rel="hub" href="/e"/></entry></feed>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var found Found
		found.parseFeed(fuzzBase, body)
		checkFound(t, &found)
		for _, c := range found.Clouds {
			if c.Port <= 0 || c.Port > 65535 || c.Domain == "" {
				t.Fatalf("cloud %+v", c)
			}
		}
	})
}

func FuzzLinkHeader(f *testing.F) {
	f.Add(`<https://hub.example/>; rel="hub", <http://example.org/feed>; rel=self`)
	f.Add(`<a>; title="x, y"; rel="hub self", <b`)
	f.Fuzz(func(t *testing.T, v string) {
		var found Found
		found.parseHeaders(fuzzBase, http.Header{"Link": strings.Split(v, "\n"), "X-Xrds-Location": {v}})
		checkFound(t, &found)
	})
}

func FuzzParseXRDS(f *testing.F) {
	f.Add([]byte(xrdsBody))
	f.Fuzz(func(t *testing.T, body []byte) {
		svcs, err := parseXRDS("http://example.org/xrds", body)
		if err != nil {
			return
		}
		if len(svcs) > maxServices {
			t.Fatalf("%d services, more than the cap", len(svcs))
		}
		for _, s := range svcs {
			for _, u := range s.Subscribe {
				if p, err := url.Parse(u); err != nil || p.Host == "" {
					t.Fatalf("subscribe URI %q", u)
				}
			}
		}
	})
}
