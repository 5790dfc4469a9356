package httpapi

import "testing"

func TestNegotiateFormat(t *testing.T) {
	for accept, want := range map[string]string{
		"":                 formatXML,
		"*/*":              formatXML,
		"text/xml":         formatXML,
		"application/xml":  formatXML,
		"application/json": formatJSON,
		"application/json, text/javascript, */*; q=0.01":                  formatJSON,
		"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8": formatHTML,
		"text/html;q=0.5, text/xml":                                       formatXML,
		"text/*":                                                          formatXML,
		"image/png":                                                       formatXML,
		"text/html;q=0, */*":                                              formatXML,
		"application/json;q=0.2, text/html;q=0.1":                         formatJSON,
		"garbage;;;, , application/json":                                  formatJSON,
	} {
		if got := negotiateFormat(accept, formatXML, formatJSON, formatHTML); got != want {
			t.Errorf("Accept %q: %s, want %s", accept, got, want)
		}
	}
	if got := negotiateFormat("text/html", formatXML, formatJSON); got != formatXML {
		t.Errorf("an offer not made was chosen: %s", got)
	}
}
