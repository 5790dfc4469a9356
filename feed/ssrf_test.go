package feed

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/netguard"
)

// TestFetchRedirectToPrivateRefused: a public origin cannot send the
// fetcher to a private address with a redirect (HTTP or the RSS
// <redirect> element), whichever way the target is written. The fetcher
// follows redirects itself, so each hop must be dialled through the guard.
// The public origin is played by a loopback server that the test's dialer
// lets through under the name public.example; every other address goes
// through the guard as in production.
func TestFetchRedirectToPrivateRefused(t *testing.T) {
	secret := newFeedServer(t)
	secret.serve("/feed", "application/rss+xml", rssDoc("internal"))
	port := strconv.Itoa(secret.Listener.Addr().(*net.TCPAddr).Port)

	origin := newFeedServer(t)
	originAddr := origin.Listener.Addr().String()
	guarded := netguard.NewDialer(false, time.Second)
	direct := &net.Dialer{Timeout: time.Second}
	tr := netguard.NewTransport(netguard.Options{})
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == "public.example:80" {
			return direct.DialContext(ctx, network, originAddr)
		}
		return guarded.DialContext(ctx, network, addr)
	}
	f := NewFetcher(FetcherConfig{Client: &http.Client{Transport: tr}, Now: func() time.Time { return clock }})

	// The fetcher really reaches the pretend-public origin.
	origin.serve("/ok", "application/rss+xml", rssDoc("a"))
	if res, err := fetch(t, f, hub.FetchRequest{URL: "http://public.example/ok"}); err != nil || len(res.Entries) != 1 {
		t.Fatalf("fetch of the public origin: %v", err)
	}

	targets := []string{
		"http://127.0.0.1:" + port + "/feed",
		"http://localhost:" + port + "/feed",
		"http://[::1]:" + port + "/feed",
		"http://[::ffff:127.0.0.1]:" + port + "/feed",
		"http://169.254.169.254/latest/meta-data/",
		"http://10.0.0.1/feed",
		"http://192.168.1.1/feed",
		"http://0.0.0.0:" + port + "/feed",
	}
	for _, target := range targets {
		for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect} {
			origin.redirect("/moved", target, code)
			res, err := fetch(t, f, hub.FetchRequest{URL: "http://public.example/moved"})
			if err == nil {
				t.Errorf("%d to %s: fetched %+v", code, target, res)
				continue
			}
			if !errors.Is(err, netguard.ErrRefused) && !noIPv6(err) {
				t.Errorf("%d to %s: %v, want a refusal by the guard", code, target, err)
			}
		}
		// RSS 2.0's <redirect><newLocation> moves a feed too.
		origin.serve("/xml-moved", "application/rss+xml",
			`<?xml version="1.0"?><redirect><newLocation>`+target+`</newLocation></redirect>`)
		if res, err := fetch(t, f, hub.FetchRequest{URL: "http://public.example/xml-moved"}); err == nil || !errors.Is(err, netguard.ErrRefused) && !noIPv6(err) {
			t.Errorf("<redirect> to %s: %v %+v, want a refusal by the guard", target, err, res)
		}
	}
	if n := len(secret.all()); n != 0 {
		t.Errorf("the private server was reached %d times", n)
	}
}

// noIPv6 reports a machine that cannot open an IPv6 socket at all: the
// guard never saw the address then, and nothing was reached either.
func noIPv6(err error) bool {
	return errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.EADDRNOTAVAIL)
}
