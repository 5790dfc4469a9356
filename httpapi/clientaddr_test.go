package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestParseTrustedProxies(t *testing.T) {
	got, err := ParseTrustedProxies(" 10.0.0.0/8, 127.0.0.1 ::1,2001:db8::/32 ,::ffff:192.0.2.0/120,::ffff:198.51.100.7,10.1.2.3/8")
	if err != nil {
		t.Fatal(err)
	}
	want := "[10.0.0.0/8 127.0.0.1/32 ::1/128 2001:db8::/32 192.0.2.0/24 198.51.100.7/32 10.0.0.0/8]"
	if fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
	if got, err := ParseTrustedProxies(""); err != nil || len(got) != 0 {
		t.Errorf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "nginx", "10.0.0", "fe80::1%eth0", "10.0.0.1/x"} {
		if _, err := ParseTrustedProxies(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestClientAddress: which address a request is counted under, for
// trusted and untrusted peers, spoofed chains, IPv6 and garbage headers.
func TestClientAddress(t *testing.T) {
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 2001:db8:ffff::1")
	if err != nil {
		t.Fatal(err)
	}
	a := &clientResolver{proxies: trusted}
	none := &clientResolver{}
	h := func(kv ...string) http.Header {
		hdr := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			hdr.Add(kv[i], kv[i+1])
		}
		return hdr
	}
	for _, c := range []struct {
		name   string
		api    *clientResolver
		peer   string
		header http.Header
		want   string // the client address
		key    string // its bucket
	}{
		{"no proxy configured: the header is ignored", none, "10.0.0.5:4000", h("X-Forwarded-For", "203.0.113.9"), "10.0.0.5", "10.0.0.5"},
		{"untrusted peer: the header is ignored", a, "192.0.2.7:4000", h("X-Forwarded-For", "203.0.113.9"), "192.0.2.7", "192.0.2.7"},
		{"untrusted peer: Forwarded ignored", a, "192.0.2.7:4000", h("Forwarded", "for=203.0.113.9"), "192.0.2.7", "192.0.2.7"},
		{"trusted peer without a header", a, "10.0.0.5:4000", h(), "10.0.0.5", "10.0.0.5"},
		{"trusted peer, X-Forwarded-For", a, "10.0.0.5:4000", h("X-Forwarded-For", "203.0.113.9"), "203.0.113.9", "203.0.113.9"},
		{"spoof prepended by the client", a, "10.0.0.5:4000", h("X-Forwarded-For", "198.51.100.1, 203.0.113.9"), "203.0.113.9", "203.0.113.9"},
		{"spoof of a trusted address prepended", a, "10.0.0.5:4000", h("X-Forwarded-For", "10.9.9.9, 203.0.113.9"), "203.0.113.9", "203.0.113.9"},
		{"chain of trusted proxies", a, "10.0.0.5:4000", h("X-Forwarded-For", "198.51.100.1, 203.0.113.9, 10.2.0.1, 10.3.0.1"), "203.0.113.9", "203.0.113.9"},
		{"several header lines", a, "10.0.0.5:4000", h("X-Forwarded-For", "198.51.100.1", "X-Forwarded-For", "203.0.113.9, 10.2.0.1"), "203.0.113.9", "203.0.113.9"},
		{"only trusted hops: the leftmost", a, "10.0.0.5:4000", h("X-Forwarded-For", "10.7.0.1, 10.2.0.1"), "10.7.0.1", "10.7.0.1"},
		{"garbage left of the client is never reached", a, "10.0.0.5:4000", h("X-Forwarded-For", "<script>, 203.0.113.9"), "203.0.113.9", "203.0.113.9"},
		{"garbage: the peer", a, "10.0.0.5:4000", h("X-Forwarded-For", "203.0.113.9, not-an-address"), "10.0.0.5", "10.0.0.5"},
		{"unknown: the peer", a, "10.0.0.5:4000", h("X-Forwarded-For", "unknown"), "10.0.0.5", "10.0.0.5"},
		{"empty header: the peer", a, "10.0.0.5:4000", h("X-Forwarded-For", ""), "10.0.0.5", "10.0.0.5"},
		{"X-Forwarded-For with a port", a, "10.0.0.5:4000", h("X-Forwarded-For", "203.0.113.9:5555"), "203.0.113.9", "203.0.113.9"},
		{"X-Forwarded-For IPv6 with brackets and port", a, "10.0.0.5:4000", h("X-Forwarded-For", "[2001:db8:1:2:3:4:5:6]:5555"), "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"IPv6 shares its /64", a, "10.0.0.5:4000", h("X-Forwarded-For", "2001:db8:1:2::99"), "2001:db8:1:2::99", "2001:db8:1:2::/64"},
		{"IPv4-mapped IPv6 is IPv4", a, "10.0.0.5:4000", h("X-Forwarded-For", "::ffff:203.0.113.9"), "203.0.113.9", "203.0.113.9"},
		{"IPv4-mapped trusted peer", a, "[::ffff:10.0.0.5]:4000", h("X-Forwarded-For", "203.0.113.9"), "203.0.113.9", "203.0.113.9"},
		{"IPv6 peer untrusted", a, "[2001:db8:5:6::1]:4000", h(), "2001:db8:5:6::1", "2001:db8:5:6::/64"},
		{"IPv6 trusted peer", a, "[2001:db8:ffff::1]:4000", h("X-Forwarded-For", "192.0.2.44"), "192.0.2.44", "192.0.2.44"},
		{"Forwarded", a, "10.0.0.5:4000", h("Forwarded", "for=203.0.113.9;proto=https;by=10.0.0.5"), "203.0.113.9", "203.0.113.9"},
		{"Forwarded, case and spaces", a, "10.0.0.5:4000", h("Forwarded", `For="203.0.113.9" ; Proto=https`), "203.0.113.9", "203.0.113.9"},
		{"Forwarded, quoted IPv6 with port", a, "10.0.0.5:4000", h("Forwarded", `for="[2001:db8:cafe::17]:4711"`), "2001:db8:cafe::17", "2001:db8:cafe::/64"},
		{"Forwarded, quoted IPv4 with port", a, "10.0.0.5:4000", h("Forwarded", `for="192.0.2.43:47011"`), "192.0.2.43", "192.0.2.43"},
		{"Forwarded, unquoted IPv6 (for=$remote_addr)", a, "10.0.0.5:4000", h("Forwarded", "for=2001:db8:cafe::17"), "2001:db8:cafe::17", "2001:db8:cafe::/64"},
		{"Forwarded, spoof prepended", a, "10.0.0.5:4000", h("Forwarded", `for=198.51.100.1, for="[2001:db8:cafe::17]"`), "2001:db8:cafe::17", "2001:db8:cafe::/64"},
		{"Forwarded, a chain of proxies", a, "10.0.0.5:4000", h("Forwarded", `for=198.51.100.1;by=x, for=192.0.2.60, for=10.1.1.1`), "192.0.2.60", "192.0.2.60"},
		{"Forwarded, a quoted comma", a, "10.0.0.5:4000", h("Forwarded", `for=192.0.2.60;ext="a,b"`), "192.0.2.60", "192.0.2.60"},
		{"Forwarded, empty elements", a, "10.0.0.5:4000", h("Forwarded", `, for=192.0.2.60,`), "192.0.2.60", "192.0.2.60"},
		{"Forwarded, obfuscated: the peer", a, "10.0.0.5:4000", h("Forwarded", "for=_hidden"), "10.0.0.5", "10.0.0.5"},
		{"Forwarded, unknown: the peer", a, "10.0.0.5:4000", h("Forwarded", "for=unknown"), "10.0.0.5", "10.0.0.5"},
		{"Forwarded, no for=: the peer", a, "10.0.0.5:4000", h("Forwarded", "proto=https"), "10.0.0.5", "10.0.0.5"},
		{"Forwarded, unterminated quote: the peer", a, "10.0.0.5:4000", h("Forwarded", `for="192.0.2.60`), "10.0.0.5", "10.0.0.5"},
		{"Forwarded, garbage: the peer", a, "10.0.0.5:4000", h("Forwarded", `for=192.0.2.60 junk`), "10.0.0.5", "10.0.0.5"},
		{"Forwarded, for= twice: the peer", a, "10.0.0.5:4000", h("Forwarded", `for=192.0.2.60;for=192.0.2.61`), "10.0.0.5", "10.0.0.5"},
		{"Forwarded, bracketed IPv4: the peer", a, "10.0.0.5:4000", h("Forwarded", `for="[192.0.2.60]"`), "10.0.0.5", "10.0.0.5"},
		{"Forwarded, bad port: the peer", a, "10.0.0.5:4000", h("Forwarded", `for="[2001:db8::1]:http"`), "10.0.0.5", "10.0.0.5"},
		{"both headers agree", a, "10.0.0.5:4000", h("Forwarded", "for=203.0.113.9", "X-Forwarded-For", "203.0.113.9"), "203.0.113.9", "203.0.113.9"},
		{"both headers disagree: the peer", a, "10.0.0.5:4000", h("Forwarded", "for=198.51.100.1", "X-Forwarded-For", "203.0.113.9"), "10.0.0.5", "10.0.0.5"},
		{"one of both is garbage: the peer", a, "10.0.0.5:4000", h("Forwarded", "for=203.0.113.9", "X-Forwarded-For", "garbage"), "10.0.0.5", "10.0.0.5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = c.peer
			r.Header = c.header
			r = c.api.withClient(r)
			if got := clientIP(r); got != c.want {
				t.Errorf("client %q, want %q", got, c.want)
			}
			if got := clientKey(r); got != c.key {
				t.Errorf("bucket %q, want %q", got, c.key)
			}
		})
	}
}

// startProxy puts a reverse proxy on 127.0.0.1 in front of the API's
// server. It sets X-Forwarded-For to the address each request names in
// its "X-Test-Client" header, as nginx with proxy_set_header
// X-Forwarded-For $remote_addr sets it to its own peer's: every client on
// this machine is 127.0.0.1, so the test says which client it plays.
func startProxy(t *testing.T, backend string) *httptest.Server {
	t.Helper()
	target, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host
		// What the client sent is replaced, as nginx's $remote_addr does.
		pr.Out.Header.Set("X-Forwarded-For", pr.In.Header.Get("X-Test-Client"))
		pr.Out.Header.Del("X-Test-Client")
	}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, base, path string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestBehindTrustedProxy: behind a reverse proxy that is trusted, every
// client has its own bucket: a scraper of /changes.xml spending its own
// bucket does not lock out another reader, and IPv6 clients of one /64
// share one. Before, every request had the proxy's address and the first
// scraper locked everyone out.
func TestBehindTrustedProxy(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.ListRate, c.ListBurst = 0.001, 3
		c.TrustedProxies = mustTrust(t, "127.0.0.1")
	})
	proxy := startProxy(t, e.srv.URL)
	scrape := func(client string) int {
		code, _ := get(t, proxy.URL, "/changes.xml", "X-Test-Client", client)
		return code
	}
	for i := range 3 {
		if code := scrape("203.0.113.9"); code != http.StatusOK {
			t.Fatalf("scraper's request %d: %d", i+1, code)
		}
	}
	code, body := get(t, proxy.URL, "/changes.xml", "X-Test-Client", "203.0.113.9")
	if code != http.StatusTooManyRequests || !strings.Contains(body, "from 203.0.113.9;") {
		t.Fatalf("the scraper over its bucket: %d %q, want 429 naming its own address", code, body)
	}
	// Another reader behind the same proxy is not locked out.
	if code := scrape("198.51.100.20"); code != http.StatusOK {
		t.Errorf("another client behind the proxy: %d, want 200", code)
	}
	// IPv6 clients of one /64 share a bucket; another /64 has its own.
	for i := range 3 {
		if code := scrape(fmt.Sprintf("2001:db8:1:2::%x", i+1)); code != http.StatusOK {
			t.Fatalf("IPv6 request %d: %d", i+1, code)
		}
	}
	code, body = get(t, proxy.URL, "/changes.xml", "X-Test-Client", "2001:db8:1:2:ffff::1")
	if code != http.StatusTooManyRequests || !strings.Contains(body, "2001:db8:1:2::/64") {
		t.Errorf("a fourth address of the /64: %d %q, want 429 naming the /64", code, body)
	}
	if code := scrape("2001:db8:1:3::1"); code != http.StatusOK {
		t.Errorf("the next /64: %d, want 200", code)
	}
}

// TestForgedForwardingIgnored: without the option, or from a peer that is
// not a trusted proxy, a forged X-Forwarded-For or Forwarded is ignored:
// the forger stays in its own (the peer's) bucket.
func TestForgedForwardingIgnored(t *testing.T) {
	for _, trusted := range []string{"", "10.0.0.0/8"} {
		t.Run("trusted="+trusted, func(t *testing.T) {
			e := newEnv(t, func(c *Config) {
				c.ListRate, c.ListBurst = 0.001, 3
				c.TrustedProxies = mustTrust(t, trusted)
			})
			for i := range 3 {
				if code, _ := get(t, e.srv.URL, "/changes.xml", "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i)); code != http.StatusOK {
					t.Fatalf("request %d: %d", i+1, code)
				}
			}
			for _, hdr := range [][]string{{"X-Forwarded-For", "198.51.100.77"}, {"Forwarded", "for=198.51.100.78"}} {
				code, body := get(t, e.srv.URL, "/changes.xml", hdr...)
				if code != http.StatusTooManyRequests || !strings.Contains(body, "from 127.0.0.1;") {
					t.Errorf("forged %s: %d %q, want 429 for 127.0.0.1", hdr[0], code, body)
				}
			}
		})
	}
}

// TestBucketsPerClientBehindProxy: behind a trusted proxy, the
// buckets of subscription requests and of new implicit nodes are each
// client's; the proxy's own address is not one shared bucket.
func TestBucketsPerClientBehindProxy(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.SubscribeRate, c.SubscribeBurst = 0.001, 1
		c.AdminRate, c.AdminBurst = 0.001, 1
		c.TrustedProxies = mustTrust(t, "127.0.0.1")
	})
	proxy := startProxy(t, e.srv.URL)
	post := func(client, path, contentType, body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, proxy.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("X-Test-Client", client)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	form := url.Values{"hub.mode": {"subscribe"}, "hub.topic": {"http://pingd.test:8080/atom/none"}, "hub.callback": {"http://127.0.0.1:9/cb"}}.Encode()
	const ct = "application/x-www-form-urlencoded"
	if code, body := post("203.0.113.9", "/websub", ct, form); code == http.StatusTooManyRequests {
		t.Fatalf("first subscription request limited: %s", body)
	}
	if code, body := post("203.0.113.9", "/websub", ct, form); code != http.StatusTooManyRequests || !strings.Contains(body, "from 203.0.113.9") {
		t.Fatalf("second from the same client: %d %q, want 429 naming it", code, body)
	}
	if code, body := post("198.51.100.20", "/websub", ct, form); code == http.StatusTooManyRequests {
		t.Errorf("another client's first subscription request limited: %s", body)
	}
	// The status page and the admin API share a bucket per client.
	if code, _ := get(t, proxy.URL, "/", "X-Test-Client", "203.0.113.9"); code != http.StatusOK {
		t.Fatalf("status page: %d", code)
	}
	if code, _ := get(t, proxy.URL, "/", "X-Test-Client", "203.0.113.9"); code != http.StatusTooManyRequests {
		t.Errorf("status page again from the same client: %d, want 429", code)
	}
	if code, _ := get(t, proxy.URL, "/", "X-Test-Client", "198.51.100.20"); code != http.StatusOK {
		t.Errorf("status page from another client: %d, want 200", code)
	}
	// A ping records the client's address, not the proxy's.
	if code, body := post("2001:db8:77::5", "/ping", ct, url.Values{"name": {"Blog"}, "url": {"http://127.0.0.1:1/"}}.Encode()); code != http.StatusOK {
		t.Fatalf("ping: %d %s", code, body)
	}
	if p := e.pings(); len(p) != 1 || p[0].Remote != "2001:db8:77::5" {
		t.Errorf("recorded pings = %+v, want one from 2001:db8:77::5", p)
	}
}

func mustTrust(t *testing.T, s string) []netip.Prefix {
	t.Helper()
	p, err := ParseTrustedProxies(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
