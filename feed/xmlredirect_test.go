package feed

import (
	"strings"
	"testing"
)

func TestXMLRedirect(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		wantOK bool
		want   string
	}{
		{"redirect", `<?xml version="1.0"?><redirect><newLocation>http://example.org/new.xml</newLocation></redirect>`, true, "http://example.org/new.xml"},
		{"white space", "<redirect>\n  <newLocation>\n   http://example.org/new.xml\n  </newLocation>\n</redirect>", true, "http://example.org/new.xml"},
		{"published example, newLocation never closed", `<?xml version="1.0"?>
<redirect>
   <newLocation>http://feeds.feedburner.com/TheRssBlog<newLocation>
</redirect>`, true, "http://feeds.feedburner.com/TheRssBlog"},
		{"gone, self-closed", `<?xml version="1.0"?><redirect><newLocation/></redirect>`, true, ""},
		{"gone, empty", `<redirect><newLocation>  </newLocation></redirect>`, true, ""},
		{"escaped", `<redirect><newLocation>http://e.org/?a=1&amp;b=2</newLocation></redirect>`, true, "http://e.org/?a=1&b=2"},
		{"comment before", `<!-- moved --><redirect><newLocation>http://e.org/x</newLocation></redirect>`, true, "http://e.org/x"},
		{"no newLocation", `<redirect><other>x</other></redirect>`, false, ""},
		{"nested deeper", `<redirect><a><newLocation>http://e.org/x</newLocation></a></redirect>`, false, ""},
		{"other root", `<rss><newLocation>http://e.org/x</newLocation></rss>`, false, ""},
		{"a feed mentioning newLocation", `<rss version="2.0"><channel><title>newLocation</title></channel></rss>`, false, ""},
		{"text", "newLocation", false, ""},
		{"too large", `<redirect><newLocation>http://e.org/x</newLocation></redirect>` + strings.Repeat(" ", maxRedirectDocBytes), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := XMLRedirect([]byte(tt.body))
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("XMLRedirect = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func FuzzXMLRedirect(f *testing.F) {
	f.Add([]byte(`<redirect><newLocation>http://example.org/new.xml</newLocation></redirect>`))
	f.Add([]byte(`<redirect><newLocation/></redirect>`))
	f.Add([]byte("<redirect>\n<newLocation>http://e.org/<newLocation>\n</redirect>"))
	f.Add([]byte(`<rss/>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		loc, ok := XMLRedirect(body)
		if !ok && loc != "" {
			t.Fatalf("location %q without a redirect", loc)
		}
		if loc != strings.TrimSpace(loc) {
			t.Fatalf("location %q not trimmed", loc)
		}
	})
}
