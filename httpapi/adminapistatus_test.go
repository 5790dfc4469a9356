package httpapi

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
)

// TestAPIStatusTakesStatusPageCredentials: /api/status answers the
// credentials the status page's admin view asks for (the admin token as
// the password of HTTP Basic, any user name) as well as the Bearer token;
// the admin API's reads take them too, its changes only the Bearer token.
func TestAPIStatusTakesStatusPageCredentials(t *testing.T) {
	e := newEnv(t)
	e.createNode("news", hub.AccessOpen)
	basic := func(user, pass string) []string {
		return []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))}
	}

	// What the status page takes…
	wantStatus(t, e.do(http.MethodGet, "/?admin=1", "", nil, basic("admin", testAdminToken)...), http.StatusOK)
	// …/api/status takes.
	resp := e.do(http.MethodGet, "/api/status", "", nil, basic("admin", testAdminToken)...)
	wantStatus(t, resp, http.StatusOK)
	st := decodeJSON[map[string]any](t, resp)
	if st["nodes"] != float64(1) || st["backend"] == "" || st["component"] == nil {
		t.Errorf("/api/status answered %v", st)
	}
	wantStatus(t, e.do(http.MethodGet, "/api/status", testAdminToken, nil), http.StatusOK)
	wantStatus(t, e.do(http.MethodGet, "/api/nodes", "", nil, basic("", testAdminToken)...), http.StatusOK)

	// A wrong password is refused, with a challenge a browser answers.
	resp = e.do(http.MethodGet, "/api/status", "", nil, basic("admin", "wrong")...)
	wantStatus(t, resp, http.StatusUnauthorized)
	if !slices.Contains(resp.Header.Values("WWW-Authenticate"), `Basic realm="pingd"`) {
		t.Errorf("WWW-Authenticate = %q, want a Basic challenge too", resp.Header.Values("WWW-Authenticate"))
	}
	resp = e.do(http.MethodGet, "/api/status", "", nil)
	wantStatus(t, resp, http.StatusUnauthorized)

	// Changes need the Bearer token: a remembered Basic login does not
	// make them.
	resp = e.do(http.MethodPost, "/api/nodes", "", strings.NewReader(`{"node":"made"}`),
		append(basic("admin", testAdminToken), "Content-Type", "application/json")...)
	wantStatus(t, resp, http.StatusUnauthorized)
	if _, err := e.hub.Node(context.Background(), "made"); err == nil {
		t.Error("a Basic login created a node")
	}
	wantStatus(t, e.do(http.MethodDelete, "/api/nodes/news", "", nil, basic("admin", testAdminToken)...), http.StatusUnauthorized)
}
