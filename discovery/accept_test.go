package discovery

import (
	"strings"
	"testing"
)

func TestPreferXRDS(t *testing.T) {
	for _, tc := range []struct {
		accept string
		want   bool
	}{
		{"", false},
		{"*/*", false},
		{"text/html", false},
		{"application/xrds+xml", true},
		{"APPLICATION/XRDS+XML", true},
		{"application/xrds+xml; charset=utf-8", true},
		// Yadis clients (python-openid) send this.
		{"text/html; q=0.3, application/xhtml+xml; q=0.5, application/xrds+xml", true},
		// Browsers.
		{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", false},
		{"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8", false},
		// q-values decide.
		{"application/xrds+xml;q=0.5, text/html", false},
		{"application/xrds+xml, text/html;q=0.5", true},
		{"application/xrds+xml;q=0.9, text/html;q=0.8", true},
		{"application/xrds+xml;q=0", false},
		{"application/xrds+xml;q=0, */*", false},
		// Equal q: naming XRDS beats HTML matched by a wildcard only.
		{"application/xrds+xml, */*", true},
		{"application/xrds+xml;q=0.8, */*;q=0.8", true},
		{"application/xrds+xml, text/*", true},
		{"text/html, application/xrds+xml", false},
		{"application/xrds+xml, text/html", false},
		// Wildcards alone.
		{"application/*", true},
		{"application/*, text/*", false},
		{"*/*;q=0.1, text/html;q=0", true},
		{"text/*;q=0.9, application/*;q=0.5", false},
		// The most specific range wins, even with a lower q.
		{"application/xrds+xml;q=0.1, application/*;q=1, text/html;q=0.5", false},
		{"*/*, application/xrds+xml;q=0", false},
		// Repeats: the best among equally specific ranges counts.
		{"application/xrds+xml;q=0.1, application/xrds+xml;q=0.9, text/html;q=0.5", true},
		// Malformed elements are skipped, the rest is used.
		{"garbage, application/xrds+xml", true},
		{"application/xrds+xml;q=2, text/html;q=0.1", false},
		{"application/xrds+xml;q=abc", false},
		{"application/xrds+xml;q=NaN", false},
		{"*/xrds+xml", false},
		{";;;,,,", false},
		{`application/xrds+xml; foo="a,b", text/html;q=0.2`, true},
		{"application/xrds+xml;q=0.001", true},
	} {
		if got := PreferXRDS(tc.accept); got != tc.want {
			t.Errorf("PreferXRDS(%q) = %v, want %v", tc.accept, got, tc.want)
		}
	}
}

func FuzzPreferXRDS(f *testing.F) {
	f.Add("text/html; q=0.3, application/xhtml+xml; q=0.5, application/xrds+xml")
	f.Add(`a/b; x="\",", */*;q=0.1`)
	f.Fuzz(func(t *testing.T, accept string) {
		// Must not panic, and XRDS is only chosen when the header names
		// it or a range covering it.
		if PreferXRDS(accept) {
			lower := strings.ToLower(accept)
			if !strings.Contains(lower, "xrds+xml") && !strings.Contains(lower, "application/*") && !strings.Contains(lower, "*/*") {
				t.Fatalf("XRDS preferred for %q", accept)
			}
		}
	})
}
