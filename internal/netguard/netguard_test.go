package netguard

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestCheckAddr(t *testing.T) {
	tests := []struct {
		addr string
		kind string // "" means allowed
	}{
		{"127.0.0.1", "a loopback address"},
		{"127.8.9.10", "a loopback address"},
		{"::1", "a loopback address"},
		{"::ffff:127.0.0.1", "a loopback address"},
		{"10.0.0.1", "a private address"},
		{"172.16.5.4", "a private address"},
		{"192.168.1.1", "a private address"},
		{"fd12:3456::1", "a private address"},
		{"169.254.169.254", "a cloud metadata address"},
		{"fd00:ec2::254", "a cloud metadata address"},
		{"169.254.10.1", "a link-local address"},
		{"fe80::1", "a link-local address"},
		{"100.64.0.1", "a carrier-grade NAT address"},
		{"100.127.255.254", "a carrier-grade NAT address"},
		{"0.0.0.0", "an unspecified address"},
		{"0.1.2.3", "an unspecified address"},
		{"::", "an unspecified address"},
		{"224.0.0.1", "a link-local address"},
		{"239.1.2.3", "a multicast address"},
		{"ff0e::1", "a multicast address"},
		{"64:ff9b::7f00:1", "a NAT64 address"},
		{"192.0.2.1", "a reserved or special-purpose address"},
		{"198.18.0.1", "a reserved or special-purpose address"},
		{"240.0.0.1", "a reserved or special-purpose address"},
		{"2001:db8::1", "a reserved or special-purpose address"},
		{"93.184.215.14", ""},
		{"8.8.8.8", ""},
		{"100.128.0.1", ""},
		{"2606:4700::1111", ""},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			err := CheckAddr(netip.MustParseAddr(tt.addr))
			if tt.kind == "" {
				if err != nil {
					t.Fatalf("CheckAddr(%s) = %v, want allowed", tt.addr, err)
				}
				return
			}
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("CheckAddr(%s) = %v, want a *RefusedError", tt.addr, err)
			}
			if re.Kind != tt.kind {
				t.Errorf("kind = %q, want %q", re.Kind, tt.kind)
			}
			if !errors.Is(err, ErrRefused) {
				t.Error("errors.Is(err, ErrRefused) = false")
			}
		})
	}
}

func TestRefusedMessage(t *testing.T) {
	err := CheckAddr(netip.MustParseAddr("127.0.0.1"))
	if got, want := err.Error(), "refused: 127.0.0.1 is a loopback address"; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
}

// TestControlRefusesBeforeConnecting dials non-public addresses through the
// guarded dialer. The Control function runs before connect(2), so no packet
// leaves the machine; the addresses other than loopback are never reached.
func TestControlRefusesBeforeConnecting(t *testing.T) {
	d := NewDialer(false, 2*time.Second)
	for _, addr := range []string{"127.0.0.1:80", "[::1]:8080", "10.0.0.1:443", "169.254.169.254:80", "localhost:9"} {
		t.Run(addr, func(t *testing.T) {
			conn, err := d.DialContext(context.Background(), "tcp", addr)
			if err == nil {
				conn.Close()
				t.Fatalf("dial %s succeeded, want refused", addr)
			}
			if !errors.Is(err, ErrRefused) {
				skipWithoutIPv6(t, err)
				t.Fatalf("dial %s: %v, want a refusal", addr, err)
			}
		})
	}
}

func newLoopbackServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestClientRefusesLoopback(t *testing.T) {
	hits := 0
	srv := newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) { hits++ })
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	c := NewClient(Options{})
	for _, u := range []string{srv.URL, "http://localhost:" + strconv.Itoa(port) + "/", "http://[::1]:" + strconv.Itoa(port) + "/"} {
		resp, err := c.Get(u)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("GET %s succeeded, want refused", u)
		}
		if !errors.Is(err, ErrRefused) {
			skipWithoutIPv6(t, err)
			t.Fatalf("GET %s: %v, want a refusal", u, err)
		}
		if !strings.Contains(err.Error(), "is a loopback address") {
			t.Errorf("GET %s: message %q does not name the reason", u, err)
		}
	}
	if hits != 0 {
		t.Errorf("server was reached %d times", hits)
	}
}

func TestClientAllowPrivate(t *testing.T) {
	srv := newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	c := NewClient(Options{AllowPrivate: true})
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "ok" {
		t.Errorf("body %q", b)
	}
}

// TestRedirectTargetGuarded lets the first hop through to a loopback server
// and dials everything else through the guard: the redirect target, named
// "localhost", is refused, so redirects are checked again when dialled.
func TestRedirectTargetGuarded(t *testing.T) {
	target := newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secret") })
	c := NewClient(Options{})
	first := newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(target.URL, "127.0.0.1", "localhost", 1), http.StatusFound)
	})
	firstAddr := first.Listener.Addr().String()
	guarded := NewDialer(false, time.Second)
	open := NewDialer(true, time.Second)
	tr := c.Transport.(*http.Transport)
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == firstAddr {
			return open.DialContext(ctx, network, addr)
		}
		return guarded.DialContext(ctx, network, addr)
	}
	resp, err := c.Get(first.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("redirect to loopback was followed")
	}
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("err = %v, want refusal", err)
	}
}

func TestClientRedirectLimit(t *testing.T) {
	var srv *httptest.Server
	srv = newLoopbackServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL+r.URL.Path+"x", http.StatusFound)
	})
	c := NewClient(Options{AllowPrivate: true, MaxRedirects: 3})
	_, err := c.Get(srv.URL + "/")
	if err == nil || !strings.Contains(err.Error(), "stopped after 3 redirects") {
		t.Fatalf("err = %v", err)
	}
}

func TestCheckHost(t *testing.T) {
	ctx := context.Background()
	if err := CheckHost(ctx, "localhost"); !errors.Is(err, ErrRefused) {
		t.Errorf("CheckHost(localhost) = %v, want refused", err)
	}
	if err := CheckHost(ctx, "10.1.2.3"); !errors.Is(err, ErrRefused) {
		t.Errorf("CheckHost(10.1.2.3) = %v, want refused", err)
	}
	if err := CheckHost(ctx, "8.8.4.4"); err != nil {
		t.Errorf("CheckHost(8.8.4.4) = %v", err)
	}
}

// skipWithoutIPv6 skips when the kernel cannot even open an IPv6 socket, so
// the guard never got to see the address.
func skipWithoutIPv6(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Skipf("no IPv6 here: %v", err)
	}
}

// TestMaxIdleConnsKeepsManyHosts fans out to more hosts than the default
// idle pool holds, twice: with MaxIdleConns above the host count the
// second round dials nothing, with the default it dials the hosts that
// did not fit again.
func TestMaxIdleConnsKeepsManyHosts(t *testing.T) {
	const hosts = 150
	var dialled atomic.Int64
	urls := make([]string, hosts)
	for i := range urls {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				dialled.Add(1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		urls[i] = srv.URL
	}
	round := func(c *http.Client) int64 {
		before := dialled.Load()
		for _, u := range urls {
			resp, err := c.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return dialled.Load() - before
	}
	for _, tc := range []struct {
		name        string
		maxIdle     int
		redialAtMin int64
		redialAtMax int64
	}{
		{"default pool", 0, hosts - 100, hosts},
		{"pool above the host count", 2 * hosts, 0, 0},
	} {
		c := NewClient(Options{AllowPrivate: true, MaxIdleConns: tc.maxIdle})
		if first := round(c); first != hosts {
			t.Fatalf("%s: first round dialled %d connections, want %d", tc.name, first, hosts)
		}
		again := round(c)
		t.Logf("%s: second round dialled %d", tc.name, again)
		if again < tc.redialAtMin || again > tc.redialAtMax {
			t.Errorf("%s: second round dialled %d connections, want %d–%d", tc.name, again, tc.redialAtMin, tc.redialAtMax)
		}
		c.CloseIdleConnections()
	}
}
