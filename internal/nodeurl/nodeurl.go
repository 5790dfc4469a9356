package nodeurl

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/pingd/pingd/hub"
)

// Paths pingd serves, relative to its public URL. A node name is one
// percent-encoded path segment after the node-specific prefixes.
const (
	PathDescriptor   = "/feeds/"
	PathXRDS         = "/xrds/"
	PathAtom         = "/atom/"
	PathRSS          = "/rss/"
	PathWebSub       = "/websub"
	PathPleaseNotify = "/pleaseNotify"
)

// Links are the absolute URLs pingd serves for one node.
type Links struct {
	// Descriptor is the GetPingd descriptor: the HTML page, the XRDS
	// document when asked for, and the SUBSCRIBE target.
	Descriptor string `json:"descriptor"`
	// Subscribe is the POST form of the subscribe URI (?method=subscribe).
	Subscribe string `json:"subscribe"`
	// XRDS is the XRDS document itself.
	XRDS string `json:"xrds"`
	// Atom and RSS are the node's own feeds.
	Atom string `json:"atom"`
	RSS  string `json:"rss"`
	// Hub is the WebSub hub endpoint (rel="hub").
	Hub string `json:"hub"`
	// PleaseNotify is the rssCloud REST registration endpoint.
	PleaseNotify string `json:"please_notify"`
}

// NodeLinks returns the URLs of the node under pingd's public base URL
// (an absolute http or https URL, possibly with a path prefix).
func NodeLinks(publicURL, node string) (Links, error) {
	base, err := parseBase(publicURL)
	if err != nil {
		return Links{}, err
	}
	seg := PathSegment(node)
	descriptor := base + PathDescriptor + seg
	return Links{
		Descriptor:   descriptor,
		Subscribe:    descriptor + "?method=subscribe",
		XRDS:         base + PathXRDS + seg,
		Atom:         base + PathAtom + seg,
		RSS:          base + PathRSS + seg,
		Hub:          base + PathWebSub,
		PleaseNotify: base + PathPleaseNotify,
	}, nil
}

// PathSegment percent-encodes a node name as one URL path segment:
// "feeds/demo" becomes "feeds%2Fdemo". The dot segments "." and ".." are
// encoded too, so that no client or router collapses them as relative
// path steps.
func PathSegment(node string) string {
	switch node {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(node)
}

// OwnNodeName recognises pingd's own URLs of a node (its Atom and RSS
// feeds, its descriptor and XRDS document) under the public URL and
// returns the node's name. The URL is taken as written, or else in
// canonical form (hub.CanonicalURL) against the public URL's: spelled
// another way, it still names the node and not a source to fetch. (As
// written first: the canonical form reads the "%2E" of nodes named "." and
// ".." as dot segments.)
func OwnNodeName(publicURL, raw string) (string, bool) {
	if name, ok := ownNodeName(publicURL, raw); ok {
		return name, true
	}
	base, err1 := hub.CanonicalURL(publicURL)
	canon, err2 := hub.CanonicalURL(raw)
	if err1 != nil || err2 != nil {
		return "", false
	}
	return ownNodeName(base, canon)
}

func ownNodeName(publicURL, raw string) (string, bool) {
	rest, ok := strings.CutPrefix(raw, strings.TrimRight(publicURL, "/"))
	if !ok {
		return "", false
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	for _, prefix := range []string{PathAtom, PathRSS, PathDescriptor, PathXRDS} {
		seg, ok := strings.CutPrefix(rest, prefix)
		if !ok || seg == "" || strings.Contains(seg, "/") {
			continue
		}
		name, err := url.PathUnescape(seg)
		if err != nil {
			return "", false
		}
		return name, true
	}
	return "", false
}

// parseBase checks the public URL and returns it without a trailing slash,
// query or fragment.
func parseBase(publicURL string) (string, error) {
	if err := hub.ValidURL(publicURL); err != nil {
		return "", fmt.Errorf("public URL: %w", err)
	}
	u, err := url.Parse(publicURL)
	if err != nil {
		return "", fmt.Errorf("public URL: %w", err)
	}
	u.RawQuery, u.Fragment, u.RawFragment, u.User = "", "", "", nil
	return strings.TrimRight(u.String(), "/"), nil
}

// PathRPC is pingd's XML-RPC and SOAP endpoint (weblogUpdates, rssCloud).
const PathRPC = "/RPC2"

// IsOwnEndpoint reports whether raw names one of pingd's own push
// endpoints under the public URL (its WebSub hub, its rssCloud
// pleaseNotify and /RPC2), in any spelling: scheme and host case, a
// default or zero-padded port, a trailing slash, a query or fragment. The
// scheme is not compared: http and https of pingd's host are pingd. A
// feed naming pingd as its hub must not make pingd subscribe to itself.
func IsOwnEndpoint(publicURL, raw string) bool {
	base, err1 := hub.CanonicalURL(publicURL)
	canon, err2 := hub.CanonicalURL(raw)
	if err1 != nil || err2 != nil {
		return false
	}
	b, err1 := url.Parse(base)
	u, err2 := url.Parse(canon)
	if err1 != nil || err2 != nil || !strings.EqualFold(b.Host, u.Host) {
		return false
	}
	prefix := strings.TrimRight(b.EscapedPath(), "/")
	rest, ok := strings.CutPrefix(strings.TrimRight(u.EscapedPath(), "/"), prefix)
	if !ok {
		return false
	}
	for _, p := range []string{PathWebSub, PathPleaseNotify, PathRPC} {
		if strings.EqualFold(rest, p) {
			return true
		}
	}
	return false
}
