package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
)

// TestNodeFeedsDropNonWebLinks: an item stored with a javascript: link,
// in its plain fields and in its payload, is served in /atom/{node} and
// /rss/{node} without it.
func TestNodeFeedsDropNonWebLinks(t *testing.T) {
	e := newEnv(t)
	e.createNode("n", hub.AccessOpen)
	if _, err := e.hub.Publish(t.Context(), "n", "owner@example.org", []hub.Entry{{
		ID: "x1", Title: "Click me", Link: "javascript:alert(document.cookie)",
		Payload: []byte(`<entry xmlns="http://www.w3.org/2005/Atom"><id>x1</id><title>Click me</title>` +
			`<link href="javascript:alert(document.cookie)"/><link rel="enclosure" href="JavaScript:alert(2)"/>` +
			`<updated>2026-01-02T03:04:05Z</updated></entry>`),
	}}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/atom/n", "/rss/n"} {
		resp := e.do(http.MethodGet, path, "", nil)
		wantStatus(t, resp, http.StatusOK)
		body := string(readBody(t, resp))
		if !strings.Contains(body, "Click me") || strings.Contains(strings.ToLower(body), "javascript:") {
			t.Errorf("%s: want the item without its javascript: links:\n%s", path, body)
		}
	}
}
