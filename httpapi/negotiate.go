package httpapi

import (
	"mime"
	"strconv"
	"strings"
)

// Answer formats a REST endpoint of the rssCloud family can give
// (negotiateFormat).
const (
	formatXML  = "xml"
	formatJSON = "json"
	formatHTML = "html"
)

// formatTypes are the media types that name each format in an Accept
// header.
var formatTypes = map[string][]string{
	formatXML:  {"text/xml", "application/xml"},
	formatJSON: {"application/json"},
	formatHTML: {"text/html", "application/xhtml+xml"},
}

// negotiateFormat picks the answer format for an Accept header among
// offers, given in the server's order of preference: the offer with the
// highest quality wins, a tie goes to the earlier offer, and a request
// without Accept (or accepting none of them) gets the first offer. It
// never refuses: rssCloud clients send what they send, and a readable
// answer in the first format is better for them than a 406.
func negotiateFormat(accept string, offers ...string) string {
	if len(offers) == 0 {
		return ""
	}
	if strings.TrimSpace(accept) == "" {
		return offers[0]
	}
	type mediaRange struct {
		typ, sub string
		q        float64
	}
	var ranges []mediaRange
	for i, part := range strings.Split(accept, ",") {
		if i >= 64 { // a header longer than any client's is not read further
			break
		}
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		typ, sub, ok := strings.Cut(mt, "/")
		if !ok {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f <= 1 {
				q = f
			}
		}
		ranges = append(ranges, mediaRange{typ, sub, q})
	}
	// quality is the q of the most specific range matching one of the
	// format's types (-1: none matches).
	quality := func(format string) float64 {
		best, spec := -1.0, -1
		for _, t := range formatTypes[format] {
			typ, sub, _ := strings.Cut(t, "/")
			for _, r := range ranges {
				s := -1
				switch {
				case r.typ == typ && r.sub == sub:
					s = 2
				case r.typ == typ && r.sub == "*":
					s = 1
				case r.typ == "*" && r.sub == "*":
					s = 0
				}
				if s > spec || (s == spec && s >= 0 && r.q > best) {
					best, spec = r.q, s
				}
			}
		}
		return best
	}
	chosen, chosenQ := offers[0], 0.0
	for _, f := range offers {
		if q := quality(f); q > chosenQ {
			chosen, chosenQ = f, q
		}
	}
	return chosen
}
