package hub_test

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/idna"

	"github.com/pingd/pingd/hub"
)

func TestCanonicalURL(t *testing.T) {
	cases := []struct{ in, want string }{
		// One origin, many spellings: the bypass of the per-host limits.
		{"http://127.0.0.1:18190/feed.xml", "http://127.0.0.1:18190/feed.xml"},
		{"http://127.0.0.1:018190/feed.xml", "http://127.0.0.1:18190/feed.xml"},
		{"http://127.0.0.1:0018190/feed.xml", "http://127.0.0.1:18190/feed.xml"},
		{"HTTP://Example.ORG./feed", "http://example.org/feed"},
		{"http://example.org:80/feed", "http://example.org/feed"},
		{"http://example.org:0080/feed", "http://example.org/feed"},
		{"https://example.org:443/feed", "https://example.org/feed"},
		{"http://example.org:443/feed", "http://example.org:443/feed"},
		{"http://example.org:/feed", "http://example.org/feed"},
		// Paths: empty is "/", dot segments go, escapes are normalised.
		{"http://example.org", "http://example.org/"},
		{"http://example.org?q=1", "http://example.org/?q=1"},
		{"http://example.org/./a/b/../c/.", "http://example.org/a/c/"},
		{"http://example.org/../../a", "http://example.org/a"},
		{"http://example.org/a/%2e%2E/b", "http://example.org/b"},
		{"http://example.org/%7euser/%41%62", "http://example.org/~user/Ab"},
		{"http://example.org/a%2fb%3a", "http://example.org/a%2Fb%3A"},
		{"http://example.org/a%2Fb", "http://example.org/a%2Fb"},
		{"http://example.org/ü x", "http://example.org/%C3%BC%20x"},
		{"http://example.org/%c3%bc", "http://example.org/%C3%BC"},
		{"http://example.org/a|b%2F", "http://example.org/a%7Cb%2F"},
		// The query keeps its order; "?" alone and fragments go.
		{"http://example.org/feed?", "http://example.org/feed"},
		{"http://example.org/feed?b=2&a=1", "http://example.org/feed?b=2&a=1"},
		{"http://example.org/feed?a=%7e%2f&b=x y", "http://example.org/feed?a=~%2F&b=x%20y"},
		{"http://example.org/feed#top", "http://example.org/feed"},
		{"http://example.org/feed?a=1#top", "http://example.org/feed?a=1"},
		// Hosts: IDN to punycode, IP literals in one text form.
		{"http://Bücher.example/", "http://xn--bcher-kva.example/"},
		{"http://xn--BCHER-KVA.example./", "http://xn--bcher-kva.example/"},
		{"http://bücher.example:8080/x", "http://xn--bcher-kva.example:8080/x"},
		{"http://[::FFFF:127.0.0.1]:80/", "http://127.0.0.1/"},
		{"http://[2001:DB8:0:0::1]:8080/", "http://[2001:db8::1]:8080/"},
		{"http://my_host.example/", "http://my_host.example/"},
		{"http://user:pa%73s@example.org/", "http://user:pass@example.org/"},
	}
	for _, c := range cases {
		got, err := hub.CanonicalURL(c.in)
		if err != nil {
			t.Errorf("CanonicalURL(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("CanonicalURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestCanonicalURLRefuses(t *testing.T) {
	for _, in := range []string{
		"", "ftp://example.org/", "http:example.org", "http:///feed", "/feed",
		"http://example.org:0/", "http://example.org:65536/", "http://example.org:99999/",
		"http://example..org/", "http://example.org../", "http://a!b.example/",
		"http://example.org/feed?a=%zz", "http://example.org/feed?a=%4",
		"http://[fe80::1%25eth0]/", "http://xn--a.example/",
		"http://example.org/" + strings.Repeat("ü", hub.MaxURLBytes/3),
	} {
		if got, err := hub.CanonicalURL(in); !errors.Is(err, hub.ErrInvalid) {
			t.Errorf("CanonicalURL(%q) = %q, %v; want ErrInvalid", in, got, err)
		}
	}
}

func TestHostKeyFoldsSpellings(t *testing.T) {
	want := "127.0.0.1:18190"
	for _, in := range []string{
		"http://127.0.0.1:18190/a", "http://127.0.0.1:018190/b", "http://127.0.0.1:0018190/c?x",
		"HTTP://127.0.0.1:18190/d", "http://[::ffff:127.0.0.1]:18190/",
	} {
		if got := hub.HostKey(in); got != want {
			t.Errorf("HostKey(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"http://Example.org./": "example.org:80", "https://example.org": "example.org:443",
		"http://example.org:443/": "example.org:443", "not a url": "",
	} {
		if got := hub.HostKey(in); got != want {
			t.Errorf("HostKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzCanonicalURL: CanonicalURL never panics, is idempotent, accepts its
// own output, and names the host and port net/url finds in the input.
func FuzzCanonicalURL(f *testing.F) {
	for _, s := range []string{
		"http://127.0.0.1:018190/feed.xml", "HTTP://Example.ORG./a/./b/../c?x=%7e&y#f",
		"https://bücher.example/%c3%bc", "http://[::ffff:10.0.0.1]:0080/", "http://h/a%2Fb/%2e%2e/c?",
		"http://user:p%41ss@h:1/../x y?q=ü", "http://xn--bcher-kva.example/", "http://h?",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := hub.CanonicalURL(in)
		if err != nil {
			if !errors.Is(err, hub.ErrInvalid) {
				t.Fatalf("CanonicalURL(%q) failed without ErrInvalid: %v", in, err)
			}
			return
		}
		again, err := hub.CanonicalURL(c)
		if err != nil || again != c {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, c, again, err)
		}
		if hub.ValidURL(c) != nil {
			t.Fatalf("ValidURL refuses the canonical %q", c)
		}
		orig, err := url.Parse(in)
		if err != nil {
			t.Fatalf("CanonicalURL took %q, which net/url refuses: %v", in, err)
		}
		cu, err := url.Parse(c)
		if err != nil {
			t.Fatalf("canonical %q does not parse: %v", c, err)
		}
		if cu.Fragment != "" || cu.ForceQuery {
			t.Fatalf("canonical %q keeps a fragment or an empty query", c)
		}
		if got, want := cu.Hostname(), expectedHost(t, orig.Hostname()); got != want {
			t.Fatalf("%q: canonical host %q, net/url found %q (want %q)", in, got, orig.Hostname(), want)
		}
		if got, want := portOf(cu), portOf(orig); got != want {
			t.Fatalf("%q: canonical port %s, net/url found %s", in, got, want)
		}
		if hub.HostKey(in) != hub.HostKey(c) || hub.HostKey(c) == "" {
			t.Fatalf("HostKey differs between %q and its canonical %q", in, c)
		}
	})
}

// expectedHost is the host net/url found, in the form the canonical URL
// must carry: IP addresses in one text form, names lower-cased (and in
// ASCII) without a trailing dot.
func expectedHost(t *testing.T, h string) string {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	a, err := idna.Lookup.ToASCII(h)
	if err != nil {
		a = h // an ASCII name with "_", which canonicalisation keeps
	}
	return strings.TrimSuffix(strings.ToLower(a), ".")
}

// portOf is the port a URL reaches, its scheme's default when none is
// written, without leading zeros.
func portOf(u *url.URL) string {
	p := strings.TrimLeft(u.Port(), "0")
	if p == "" {
		p = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return p
}

// spellingsOf returns five spellings of the origin's URL for path: a
// zero-padded port, dot segments, an empty query, a trailing dot, escapes,
// an IPv4-mapped address and a fragment.
func spellingsOf(t *testing.T, originURL, path string) []string {
	t.Helper()
	u, err := url.Parse(originURL)
	if err != nil {
		t.Fatal(err)
	}
	host, port := u.Hostname(), u.Port()
	escaped := strings.Replace(path, "f", "%66", 1)
	return []string{
		"http://" + host + ":0" + port + path,
		"http://" + host + ":00" + port + "/." + path + "?",
		"HTTP://" + host + ".:" + port + "/x/.." + path,
		"http://[::ffff:" + host + "]:" + port + escaped + "#top",
		"http://" + host + ":" + port + path,
	}
}

// TestOneSourceForEverySpelling: every spelling of a URL finds one source
// and one node, whether an owner made it or a URL subscription created it,
// and a ping in any spelling fetches that source.
func TestOneSourceForEverySpelling(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.run()
	ctx := t.Context()
	e.origin.serve("/feed", rss{title: "Feed", items: items("a")}.String(), false)
	e.origin.serve("/owned", rss{title: "Owned", items: items("a")}.String(), false)

	feedSpellings := spellingsOf(t, e.origin.URL, "/feed")
	first, err := e.hub.NodeForURL(ctx, feedSpellings[0], true)
	if err != nil {
		t.Fatal(err)
	}
	if first.Name != e.origin.url("/feed") || first.SourceURL != e.origin.url("/feed") {
		t.Fatalf("implicit node %q follows %q; want both the canonical URL %q", first.Name, first.SourceURL, e.origin.url("/feed"))
	}
	for _, u := range feedSpellings[1:] {
		n, err := e.hub.NodeForURL(ctx, u, true)
		if err != nil {
			t.Fatalf("NodeForURL(%s): %v", u, err)
		}
		if n.ID != first.ID {
			t.Errorf("NodeForURL(%s) = node %q, want %q", u, n.Name, first.Name)
		}
	}

	ownedSpellings := spellingsOf(t, e.origin.URL, "/owned")
	owned, _, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: "owned", Source: ownedSpellings[1], Config: hub.DefaultNodeConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if owned.SourceURL != e.origin.url("/owned") {
		t.Fatalf("owned node follows %q, want the canonical %q", owned.SourceURL, e.origin.url("/owned"))
	}
	for _, u := range ownedSpellings {
		n, err := e.hub.NodeForURL(ctx, u, true)
		if err != nil || n.ID != owned.ID {
			t.Errorf("NodeForURL(%s) = %+v, %v; want the owned node", u, n, err)
		}
	}
	srcs, err := e.hub.Sources(ctx)
	if err != nil || len(srcs) != 2 {
		t.Fatalf("sources = %d, %v; want one per URL, 2", len(srcs), err)
	}

	// A ping naming the URL five ways fetches its source once.
	n, err := e.hub.Ping(ctx, hub.Ping{Dialect: "rest"}, feedSpellings, nil)
	if err != nil || n != 1 {
		t.Fatalf("Ping(five spellings) scheduled %d sources, %v; want 1", n, err)
	}
}
