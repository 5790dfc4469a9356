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
