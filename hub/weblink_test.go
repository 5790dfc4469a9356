package hub

import "testing"

func TestWebLink(t *testing.T) {
	for in, want := range map[string]string{
		"http://example.org/a?b=c#d": "http://example.org/a?b=c#d",
		" https://example.org/ ":     "https://example.org/",
		"HTTPS://Example.org/":       "HTTPS://Example.org/",
		"":                           "",
		"javascript:alert(1)":        "",
		"JavaScript:alert(1)":        "",
		" javascript:alert(1)":       "",
		"java\tscript:alert(1)":      "",
		"java\nscript:alert(1)":      "",
		"\x01javascript:alert(1)":    "",
		"data:text/html,<script>":    "",
		"vbscript:msgbox":            "",
		"file:///etc/passwd":         "",
		"ftp://example.org/f":        "",
		"mailto:a@example.org":       "",
		"//example.org/protocol-rel": "",
		"/relative/path":             "",
		"http:///no-host":            "",
		"http:example.org/opaque":    "",
		"https://exa mple.org/":      "",
	} {
		if got := WebLink(in); got != want {
			t.Errorf("WebLink(%q) = %q, want %q", in, got, want)
		}
	}
}
