package nodeurl

import (
	"net/url"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
)

// hostileNodes are node names that would break naive URL building: URL
// syntax, markup characters, dot segments, non-ASCII and a 255-byte name.
var hostileNodes = []string{
	"demo",
	"feeds/TheUniversalGadget",
	`quote"d'and<tag>&amp;`,
	"]]></URI><x/>",
	"a&b=c?d#e%2F f",
	"ünïcødé/日本語/🙂",
	"..",
	".",
	"?method=subscribe",
	"spaces  and +plus+ and ;semi,colon:@",
	strings.Repeat("é", 127) + "x",
}

func TestNodeLinks(t *testing.T) {
	l, err := NodeLinks("http://localhost:8080/", "feeds/demo")
	if err != nil {
		t.Fatal(err)
	}
	want := Links{
		Descriptor:   "http://localhost:8080/feeds/feeds%2Fdemo",
		Subscribe:    "http://localhost:8080/feeds/feeds%2Fdemo?method=subscribe",
		XRDS:         "http://localhost:8080/xrds/feeds%2Fdemo",
		Atom:         "http://localhost:8080/atom/feeds%2Fdemo",
		RSS:          "http://localhost:8080/rss/feeds%2Fdemo",
		Hub:          "http://localhost:8080/websub",
		PleaseNotify: "http://localhost:8080/pleaseNotify",
	}
	if l != want {
		t.Errorf("NodeLinks = %+v\nwant %+v", l, want)
	}
	// A base path is kept; a query, fragment and user info are not.
	l, err = NodeLinks("https://user:pw@example.org/pingd/?x=1#top", "a b")
	if err != nil {
		t.Fatal(err)
	}
	if l.Descriptor != "https://example.org/pingd/feeds/a%20b" || l.Hub != "https://example.org/pingd/websub" {
		t.Errorf("with a base path: %+v", l)
	}
	for _, bad := range []string{"", "localhost:8080", "ftp://example.org", "http://"} {
		if _, err := NodeLinks(bad, "n"); err == nil {
			t.Errorf("NodeLinks(%q) accepted", bad)
		}
	}
}

func TestPathSegmentRoundTrips(t *testing.T) {
	for _, node := range hostileNodes {
		if err := hub.ValidNodeName(node); err != nil {
			t.Fatalf("test node %q is not a valid node name: %v", node, err)
		}
		seg := PathSegment(node)
		if strings.ContainsAny(seg, "/?#") || seg == "." || seg == ".." {
			t.Errorf("PathSegment(%q) = %q is not one opaque segment", node, seg)
		}
		back, err := url.PathUnescape(seg)
		if err != nil || back != node {
			t.Errorf("PathSegment(%q) = %q decodes to %q, %v", node, seg, back, err)
		}
	}
}
