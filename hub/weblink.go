package hub

import (
	"net/url"
	"strings"
)

// WebLink returns s, trimmed, when it is an absolute http or https URL
// with a host, else "". Links that come from sources (an entry's link, its
// enclosures, a feed's site) are handed on to readers: in a feed reader, a
// chat client or a web page a javascript:, data: or vbscript: link runs
// code or hides content when followed, so every link pingd republishes
// passes through here and any other is dropped.
func WebLink(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	u, err := url.Parse(s) // refuses control characters, such as the tab of "java\tscript:"
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return s
}
