package nodeurl

import "testing"

// TestOwnNodeNameSpellings: pingd's own node URLs name their node however
// they are spelled, so a subscription to one is never taken for a source.
func TestOwnNodeNameSpellings(t *testing.T) {
	const public = "http://pingd.test:8080/"
	for raw, want := range map[string]string{
		"http://pingd.test:8080/atom/news":            "news",
		"HTTP://Pingd.Test.:08080/atom/news":          "news",
		"http://pingd.test:8080/./rss/news?":          "news",
		"http://pingd.test:8080/feeds/%66eeds%2fdemo": "feeds/demo",
		"http://pingd.test:8080/xrds/%2E%2E":          "..",
		"http://pingd.test:8080/x/../atom/news#top":   "news",
	} {
		if got, ok := OwnNodeName(public, raw); !ok || got != want {
			t.Errorf("OwnNodeName(%s) = %q, %v; want %q", raw, got, ok, want)
		}
	}
	for _, raw := range []string{"http://pingd.test:8081/atom/news", "http://other.test:8080/atom/news", "http://pingd.test:8080/news"} {
		if got, ok := OwnNodeName(public, raw); ok {
			t.Errorf("OwnNodeName(%s) = %q, want none", raw, got)
		}
	}
}
