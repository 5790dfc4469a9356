package cnws

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Namespace is the namespace of CNWS documents (the 2003-04-08 draft).
const Namespace = "http://www.owlfish.com/thoughts/cnws-2003-04-08.html"

// MaxTitleRunes is the longest title CNWS allows.
const MaxTitleRunes = 255

// MinRetryLimit is the shortest ageing of an unreachable subscriber
// the CNWS draft allows: "a minimum of a 24 hour period".
const MinRetryLimit = 24 * time.Hour

// ContentType is what pingd posts and answers CNWS documents as.
const ContentType = "text/xml; charset=utf-8"

// Text makes s fit CNWS's plain text: valid UTF-8, no control
// characters but white space, surrounding space trimmed, at most max
// runes (0: any length).
func Text(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if max > 0 && utf8.RuneCountInString(s) > max {
		runes := []rune(s)
		s = strings.TrimSpace(string(runes[:max]))
	}
	return s
}
