package discovery

import (
	"mime"
	"strconv"
	"strings"
)

// PreferXRDS reports whether an Accept header value prefers the XRDS
// document (application/xrds+xml) to the HTML page (text/html).
//
// Each type gets the quality of the most specific media range matching it
// (RFC 9110 §12.5.1). XRDS wins with a higher quality, or with the same
// quality when the client named it while HTML only matched a wildcard; a
// header that matches both only by wildcards ("*/*") keeps the HTML
// default, as does an empty or unparsable header.
func PreferXRDS(accept string) bool {
	ranges := parseAccept(accept)
	qXRDS, exactXRDS := quality(ranges, "application", "xrds+xml")
	qHTML, exactHTML := quality(ranges, "text", "html")
	if qXRDS <= 0 {
		return false
	}
	if qXRDS != qHTML {
		return qXRDS > qHTML
	}
	return exactXRDS && !exactHTML
}

// mediaRange is one element of an Accept header.
type mediaRange struct {
	typ, sub string
	q        float64
}

// specificity orders matching ranges: type/subtype over type/* over */*.
func (r mediaRange) specificity() int {
	switch {
	case r.typ == "*":
		return 0
	case r.sub == "*":
		return 1
	}
	return 2
}

// quality returns the quality the ranges give to typ/sub (0 if none
// matches) and whether the deciding range named the type exactly. Media
// type parameters other than q are ignored: neither document has any.
func quality(ranges []mediaRange, typ, sub string) (float64, bool) {
	best, q := -1, 0.0
	for _, r := range ranges {
		matches := r.typ == "*" || (r.typ == typ && (r.sub == "*" || r.sub == sub))
		if !matches {
			continue
		}
		// Among equally specific ranges the highest quality counts, so a
		// repeated range cannot lower what another granted.
		if s := r.specificity(); s > best || (s == best && r.q > q) {
			best, q = s, r.q
		}
	}
	return q, best == 2
}

// parseAccept parses an Accept header value leniently: malformed elements
// are skipped, not fatal, as browsers and crawlers send all sorts.
func parseAccept(accept string) []mediaRange {
	var out []mediaRange
	for _, part := range splitOutsideQuotes(accept, ',') {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		mt, params, err := mime.ParseMediaType(part)
		if err != nil {
			continue
		}
		typ, sub, ok := strings.Cut(mt, "/")
		if !ok || typ == "" || sub == "" || (typ == "*" && sub != "*") {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= 0 && f <= 1) { // also refuses NaN
				continue
			}
			q = f
		}
		out = append(out, mediaRange{typ: typ, sub: sub, q: q})
	}
	return out
}

// splitOutsideQuotes splits s at sep where sep is not inside a quoted
// string (parameter values may be quoted and contain commas).
func splitOutsideQuotes(s string, sep byte) []string {
	var parts []string
	start, quoted, escaped := 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}
