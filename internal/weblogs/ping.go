package weblogs

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// XML-RPC methods of the weblogUpdates interface.
const (
	// MethodPing is weblogUpdates.ping(name, url).
	MethodPing = "weblogUpdates.ping"
	// MethodExtendedPing is weblogUpdates.extendedPing(name, url,
	// changesUrl, feedUrl[, tags]).
	MethodExtendedPing = "weblogUpdates.extendedPing"
)

// MaxNameBytes caps the weblog name a ping may carry.
const MaxNameBytes = 1024

// Limits of extendedPing's tags.
const (
	MaxTags     = 20
	MaxTagBytes = 64
)

// ParseTags reads extendedPing's '|'-separated tags: trimmed, empty ones
// dropped, duplicates (case-insensitive) once.
func ParseTags(v string) ([]string, error) {
	var out []string
	for t := range strings.SplitSeq(v, "|") {
		t = strings.TrimSpace(t)
		if t == "" || slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, t) }) {
			continue
		}
		if len(t) > MaxTagBytes || !utf8.ValidString(t) {
			return nil, fmt.Errorf("%w: a tag is longer than %d bytes or not valid UTF-8", hub.ErrInvalid, MaxTagBytes)
		}
		out = append(out, t)
	}
	if len(out) > MaxTags {
		return nil, fmt.Errorf("%w: more than %d tags", hub.ErrInvalid, MaxTags)
	}
	return out, nil
}

// Answer is a weblogUpdates answer: the {flerror, message} struct.
func Answer(flerror bool, message string) map[string]any {
	return map[string]any{"flerror": flerror, "message": message}
}

// Refused reads a weblogUpdates answer: whether it says flerror, and its
// message. Anything but such a struct is no refusal.
func Refused(answer any) (refused bool, message string) {
	m, ok := answer.(map[string]any)
	if !ok {
		return false, ""
	}
	fl, _ := m["flerror"].(bool)
	msg, _ := m["message"].(string)
	return fl, msg
}

// MarshalPing renders the ping of a weblog as an XML-RPC call:
// weblogUpdates.extendedPing(name, url, url, feedURL[, tags]) when the
// feed is known, else weblogUpdates.ping(name, url).
func MarshalPing(name, url, feedURL string, tags []string) ([]byte, error) {
	if feedURL == "" {
		return xmlrpc.MarshalCall(MethodPing, name, url)
	}
	params := []any{name, url, url, feedURL}
	if len(tags) > 0 {
		params = append(params, strings.Join(tags, "|"))
	}
	return xmlrpc.MarshalCall(MethodExtendedPing, params...)
}

// The dialects of the pings that name a weblog, recorded with each ping
// (hub.Ping.Dialect): weblogUpdates.ping and extendedPing over XML-RPC,
// rssCloud's ping, and the REST and form pings of /ping and /pingSiteForm.
const (
	DialectWeblogUpdates = "xmlrpc-weblogupdates"
	DialectExtendedPing  = "xmlrpc-extended"
	DialectRSSCloud      = "rsscloud"
	DialectREST          = "rest"
	DialectForm          = "form"
)

// IsWeblogPing reports whether a ping of dialect names a weblog: those are
// the pings other ping servers take (the relay sends them on) and whose
// URL may be a homepage rather than a feed. CNWS, WebSub and upstream
// pings name a resource or topic and are neither.
func IsWeblogPing(dialect string) bool {
	switch dialect {
	case DialectWeblogUpdates, DialectExtendedPing, DialectRSSCloud, DialectREST, DialectForm:
		return true
	}
	return false
}

// PingPages splits the URLs a weblog ping named into the weblog's page and
// its feed: extendedPing names (feed, page, …) in that order — its url
// first, as recorded, is the feed URL when the ping named one — and the
// other dialects name the weblog's URL alone.
func PingPages(dialect string, urls []string) (pageURL, feedURL string) {
	if len(urls) == 0 {
		return "", ""
	}
	if dialect == DialectExtendedPing {
		feedURL = urls[0]
		pageURL = urls[0]
		if len(urls) > 1 {
			pageURL = urls[1]
		}
		return pageURL, feedURL
	}
	return urls[0], ""
}

// RelayHeader marks a ping one pingd relayed to another: the receiving
// pingd records it and relays it no further (the loop guard).
const RelayHeader = "X-Pingd-Relay"
