package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

func TestHealthAndReadiness(t *testing.T) {
	e := newEnv(t)
	resp := e.do(http.MethodGet, "/healthz", "", nil)
	wantStatus(t, resp, http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("healthz Content-Type = %q", ct)
	}

	wantStatus(t, e.do(http.MethodGet, "/readyz", "", nil), http.StatusServiceUnavailable)
	e.ready.Store(true)
	wantStatus(t, e.do(http.MethodGet, "/readyz", "", nil), http.StatusOK)
	e.ready.Store(false)
	wantStatus(t, e.do(http.MethodGet, "/readyz", "", nil), http.StatusServiceUnavailable)

	resp = e.do(http.MethodPost, "/healthz", "", nil)
	wantStatus(t, resp, http.StatusMethodNotAllowed)
	if allow := resp.Header.Get("Allow"); allow != "GET, HEAD" {
		t.Errorf("Allow = %q, want GET, HEAD", allow)
	}

	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	resp = e.do(http.MethodGet, "/healthz", "", nil)
	wantStatus(t, resp, http.StatusServiceUnavailable)
}

func TestReadyWithoutProbe(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Ready = nil })
	wantStatus(t, e.do(http.MethodGet, "/readyz", "", nil), http.StatusServiceUnavailable)
}

func TestUnknownRoute(t *testing.T) {
	e := newEnv(t)
	wantStatus(t, e.do(http.MethodGet, "/no/such/thing", "", nil), http.StatusNotFound)
	wantStatus(t, e.do(http.MethodGet, "/api/nodes/x/nothing", testAdminToken, nil), http.StatusNotFound)
}

func TestNewRejectsBadConfig(t *testing.T) {
	e := newEnv(t)
	if _, err := New(Config{PublicURL: "http://x"}); err == nil {
		t.Error("New without a hub succeeded")
	}
	if _, err := New(Config{Hub: e.hub, PublicURL: "http://x"}); err == nil {
		t.Error("New without a store succeeded")
	}
	for _, u := range []string{"", "localhost:8080", "ftp://x", "http://"} {
		if _, err := New(Config{Hub: e.hub, Store: e.store, PublicURL: u}); err == nil {
			t.Errorf("New with public URL %q succeeded", u)
		}
	}
}
