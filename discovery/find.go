package discovery

import (
	"bytes"
	"encoding/xml"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/linkheader"
	"github.com/pingd/pingd/internal/xmlguard"
)

// The client side: what a page, a feed or the headers of either say about
// where its feeds, push hubs and GetPingd descriptors are. These are the
// parsers of outside input (fuzzed); client.go does the fetching.

// Found is what discovery learnt about one URL.
type Found struct {
	// URL is the URL asked; FinalURL the one that answered after
	// redirects.
	URL      string `json:"url"`
	FinalURL string `json:"final_url"`
	// ContentType is the answer's media type, without parameters.
	ContentType string `json:"content_type,omitempty"`
	// Kind is "feed" (RSS or Atom), "html" or "other".
	Kind string `json:"kind"`
	// Feeds are the feeds an HTML page links to, best first (rankFeeds).
	Feeds []FeedLink `json:"feeds,omitempty"`
	// Descriptors are GetPingd descriptor URLs; Services what their XRDS
	// documents list.
	Descriptors []string  `json:"descriptors,omitempty"`
	Services    []Service `json:"services,omitempty"`
	// Hubs are WebSub hubs; Self the topic URL the document names for
	// itself (rel="self").
	Hubs []string `json:"hubs,omitempty"`
	Self string   `json:"self,omitempty"`
	// Clouds are rssCloud <cloud> elements of an RSS channel.
	Clouds []FoundCloud `json:"clouds,omitempty"`
	// Chosen are the GetPingd subscriptions a client would make, one per
	// subscription type some service offers (ChooseService).
	Chosen []Choice `json:"chosen,omitempty"`
	// Followed is what the feed a page stands for offers, when
	// Client.Follow followed it; FollowError why it could not be read.
	Followed    *Found `json:"followed,omitempty"`
	FollowError string `json:"follow_error,omitempty"`
}

// FeedLink is one <link rel="alternate"> to a feed.
type FeedLink struct {
	URL   string `json:"url"`
	Type  string `json:"type"`
	Title string `json:"title,omitempty"`
}

// Service is one GetPingd service of an XRDS document.
type Service struct {
	// Descriptor is the XRDS document's URL.
	Descriptor string   `json:"descriptor"`
	Types      []string `json:"types,omitempty"`
	// Priority is the Service element's priority attribute (0 first);
	// nil when it has none, which XRD ranks after every priority.
	Priority *int `json:"priority,omitempty"`
	// URIs are the service's URIs in the order a client tries them:
	// by priority, then in document order.
	URIs []ServiceURI `json:"uris,omitempty"`
	// Subscribe maps HTTP methods to subscribe URIs (SUBSCRIBE, POST):
	// per method the first of URIs.
	Subscribe map[string]string `json:"subscribe,omitempty"`
	// Accept are the subscription types offered.
	Accept []string `json:"accept,omitempty"`
	// JID, Node and Security are the getpingd-xmpp:PubSub element, a
	// child of the Service or (as in the proposal's sample) of its
	// getpingd:Accept of the XMPP subscription type.
	JID      string `json:"jid,omitempty"`
	Node     string `json:"node,omitempty"`
	Security string `json:"security,omitempty"`
}

// ServiceURI is one URI element of a service.
type ServiceURI struct {
	// Method is the getpingd:http-method ("GET" when none is given).
	Method   string `json:"method"`
	URL      string `json:"url"`
	Priority *int   `json:"priority,omitempty"`
}

// Choice is the subscription a GetPingd client makes with one
// subscription type: the service, the URI and the method to send the
// request to, and for XMPP the pubsub node.
type Choice struct {
	// Type is the subscription request's content type
	// (getpingd.ContentTypeHTTPSubscribe or getpingd.ContentTypeXMPPSubscribe).
	Type       string `json:"type"`
	Descriptor string `json:"descriptor"`
	Method     string `json:"method"`
	URI        string `json:"uri"`
	JID        string `json:"jid,omitempty"`
	Node       string `json:"node,omitempty"`
	Security   string `json:"security,omitempty"`
}

// FoundCloud is an rssCloud <cloud> element found in a feed.
type FoundCloud struct {
	Domain            string `json:"domain"`
	Port              int    `json:"port"`
	Path              string `json:"path"`
	RegisterProcedure string `json:"register_procedure,omitempty"`
	Protocol          string `json:"protocol"`
}

// Feed media types, in the order of preference.
var feedTypes = []string{"application/atom+xml", "application/rss+xml", "application/rdf+xml", "application/feed+json", "application/json"}

// isFeedType reports whether a link type names a feed pingd can follow.
func isFeedType(t string) bool {
	t = mediaType(t)
	return t == "application/atom+xml" || t == "application/rss+xml" || t == "application/rdf+xml"
}

// mediaType is a Content-Type or type attribute without parameters, lower case.
func mediaType(v string) string {
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(v))
	}
	return mt
}

// resolve makes ref absolute against base; "" when it cannot be an
// http(s) URL.
func resolve(base *url.URL, ref string) string {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return ""
	}
	u, err := url.Parse(ref)
	if err != nil {
		return ""
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return ""
	}
	u.Fragment = ""
	return u.String()
}

// addUnique appends s to list unless it is empty or there already.
func addUnique(list []string, s string) []string {
	if s == "" || slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// relTokens splits a rel attribute into its lower-case tokens.
func relTokens(rel string) []string {
	return strings.Fields(strings.ToLower(rel))
}

// addLink records a hub, self or GetPingd descriptor link; it reports
// whether rel was one of those.
func (f *Found) addLink(rel, href string) bool {
	switch rel {
	case "hub":
		f.Hubs = addUnique(f.Hubs, href)
	case "self":
		if f.Self == "" {
			f.Self = href
		}
	case getpingd.RelDescriptor, getpingd.RelDescription:
		f.Descriptors = addUnique(f.Descriptors, href)
	default:
		return false
	}
	return true
}

// parseHeaders reads the discovery headers of an answer: X-XRDS-Location
// and Link (RFC 8288) with rel="hub", rel="self" and the GetPingd
// descriptor relations. A link whose anchor names another resource is not
// about this one and is skipped.
func (f *Found) parseHeaders(base *url.URL, h http.Header) {
	for _, v := range h.Values(XRDSLocationHeader) {
		f.Descriptors = addUnique(f.Descriptors, resolve(base, v))
	}
	for _, l := range linkheader.Parse(h.Values("Link"), base) {
		if !l.AboutBase(base) {
			continue
		}
		href := resolve(base, l.Target)
		if href == "" {
			continue
		}
		for _, rel := range l.Rels {
			f.addLink(rel, href)
		}
	}
}

// parseHTML reads the <head> links of an HTML page: feeds, hubs, self,
// GetPingd descriptors (link and meta http-equiv), honouring <base href>.
func (f *Found) parseHTML(base *url.URL, body []byte) {
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		a := atom.Lookup(name)
		if a == atom.Body {
			return // links that matter are in the head
		}
		if !hasAttr || (a != atom.Link && a != atom.Meta && a != atom.Base) {
			continue
		}
		attrs := map[string]string{}
		for {
			k, v, more := z.TagAttr()
			key := strings.ToLower(string(k))
			if _, seen := attrs[key]; !seen {
				attrs[key] = string(v)
			}
			if !more {
				break
			}
		}
		switch a {
		case atom.Base:
			if b := resolve(base, attrs["href"]); b != "" {
				if u, err := url.Parse(b); err == nil {
					base = u
				}
			}
		case atom.Meta:
			if strings.EqualFold(strings.TrimSpace(attrs["http-equiv"]), XRDSLocationHeader) {
				f.Descriptors = addUnique(f.Descriptors, resolve(base, attrs["content"]))
			}
		case atom.Link:
			href := resolve(base, attrs["href"])
			if href == "" {
				continue
			}
			for _, rel := range relTokens(attrs["rel"]) {
				if (rel == "alternate" || rel == "feed") && isFeedType(attrs["type"]) &&
					!slices.ContainsFunc(f.Feeds, func(l FeedLink) bool { return l.URL == href }) {
					f.Feeds = append(f.Feeds, FeedLink{URL: href, Type: mediaType(attrs["type"]), Title: strings.TrimSpace(attrs["title"])})
					continue
				}
				f.addLink(rel, href)
			}
		}
	}
}

// rankFeeds orders a page's feeds: Atom, then RSS, then RDF; within a
// type the page's order; comment feeds after every other feed (a page
// that offers "Comments on …" beside its posts means the posts).
func rankFeeds(feeds []FeedLink) {
	typeRank := func(t string) int {
		if i := slices.Index(feedTypes, t); i >= 0 {
			return i
		}
		return len(feedTypes)
	}
	isComments := func(l FeedLink) bool {
		return strings.Contains(strings.ToLower(l.Title), "comment") || strings.Contains(strings.ToLower(l.URL), "comment")
	}
	slices.SortStableFunc(feeds, func(a, b FeedLink) int {
		if ca, cb := isComments(a), isComments(b); ca != cb {
			if ca {
				return 1
			}
			return -1
		}
		return typeRank(a.Type) - typeRank(b.Type)
	})
}

// Namespaces read in feeds.
const (
	nsAtom   = "http://www.w3.org/2005/Atom"
	nsRDF    = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
	nsRSS10  = "http://purl.org/rss/1.0/"
	maxDepth = 64
)

// parseFeed reads a feed's discovery elements: Atom <link rel="hub|self|
// getpingd.updates.descriptor"> (as atom:link in RSS too) and the RSS
// <cloud>. It reports whether the document is a feed at all.
func (f *Found) parseFeed(base *url.URL, body []byte) bool {
	d := xmlguard.NewDecoder(body, discoveryDecoding)
	// stack holds the local names of the open elements; the elements read
	// are the feed's own (children of <feed>) or the channel's (children
	// of <channel>), never an entry's.
	var stack []string
	isFeed, ownDepth := false, 0
	for {
		tok, err := d.Token()
		if err != nil {
			return isFeed
		}
		switch t := tok.(type) {
		case xml.StartElement:
			stack = append(stack, t.Name.Local)
			depth := len(stack)
			if depth > maxDepth {
				return isFeed
			}
			if depth == 1 {
				switch {
				case t.Name.Local == "feed" && t.Name.Space == nsAtom:
					isFeed, ownDepth = true, 2
				case t.Name.Local == "rss" && t.Name.Space == "",
					t.Name.Local == "RDF" && t.Name.Space == nsRDF:
					isFeed, ownDepth = true, 3
				default:
					return false
				}
				continue
			}
			if depth != ownDepth || (ownDepth == 3 && stack[1] != "channel") {
				continue
			}
			attr := func(name string) string {
				for _, a := range t.Attr {
					if a.Name.Local == name && a.Name.Space == "" {
						return a.Value
					}
				}
				return ""
			}
			switch {
			case t.Name.Local == "link" && t.Name.Space == nsAtom:
				href := resolve(base, attr("href"))
				for _, rel := range relTokens(attr("rel")) {
					f.addLink(rel, href)
				}
			case t.Name.Local == "cloud" && (t.Name.Space == "" || t.Name.Space == nsRSS10):
				port, err := strconv.Atoi(strings.TrimSpace(attr("port")))
				if err != nil || port <= 0 || port > 65535 {
					port = 80
				}
				c := FoundCloud{Domain: strings.TrimSpace(attr("domain")), Port: port, Path: strings.TrimSpace(attr("path")),
					RegisterProcedure: strings.TrimSpace(attr("registerProcedure")), Protocol: strings.TrimSpace(attr("protocol"))}
				if c.Domain != "" && len(f.Clouds) < 8 {
					f.Clouds = append(f.Clouds, c)
				}
			}
		case xml.EndElement:
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
}

// discoveryDecoding is how discovery reads XML: non-strict, any declared
// encoding read as it is, and no start tag longer than maxStartTagBytes
// (the decoder collects a tag's attributes before it returns the tag,
// about 25 bytes of memory per byte of valueless attributes).
var discoveryDecoding = xmlguard.Options{
	Limits:        xmlguard.Limits{StartTagBytes: maxStartTagBytes},
	CharsetReader: func(_ string, r io.Reader) (io.Reader, error) { return r, nil },
}

const maxStartTagBytes = 64 << 10

// choose fills Chosen from Services.
func (f *Found) choose() {
	f.Chosen = nil
	for _, t := range []string{getpingd.ContentTypeHTTPSubscribe, getpingd.ContentTypeXMPPSubscribe} {
		if c, ok := ChooseService(f.Services, t); ok {
			f.Chosen = append(f.Chosen, c)
		}
	}
}

// FromFeed reads the discovery elements of a feed document already
// fetched (its hubs, self URL, descriptors and clouds); nil when body is
// not an RSS or Atom feed.
func FromFeed(feedURL string, body []byte) *Found {
	base, err := url.Parse(feedURL)
	if err != nil {
		return nil
	}
	f := &Found{URL: feedURL, FinalURL: feedURL, Kind: "feed"}
	if !f.parseFeed(base, body) {
		return nil
	}
	return f
}
