package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/pingd/pingd/hub"
)

// TestNodeListPages: GET /api/nodes answers a page at a time in name
// order, and following "next" (or the Link header) reads every node once.
func TestNodeListPages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := range 7 {
		if _, _, err := e.hub.CreateNode(ctx, hub.NodeSpec{Name: fmt.Sprintf("n%02d", 6-i), Config: hub.DefaultNodeConfig()}); err != nil {
			t.Fatal(err)
		}
	}
	type page struct {
		Nodes []nodeJSON
		Next  string
	}
	var names []string
	path, pages := "/api/nodes?limit=3", 0
	for path != "" {
		resp := e.admin(http.MethodGet, path, nil)
		wantStatus(t, resp, http.StatusOK)
		link := resp.Header.Get("Link")
		p := decodeJSON[page](t, resp)
		if want := "<" + p.Next + `>; rel="next"`; (p.Next == "") != (link == "") || (link != "" && link != want) {
			t.Errorf("page %d: Link %q, next %q", pages, link, p.Next)
		}
		if len(p.Nodes) > 3 {
			t.Errorf("page %d has %d nodes, past the limit of 3", pages, len(p.Nodes))
		}
		for _, n := range p.Nodes {
			names = append(names, n.Name)
		}
		path = p.Next
		if pages++; pages > 5 {
			t.Fatal("the pages do not end")
		}
	}
	if got := strings.Join(names, " "); got != "n00 n01 n02 n03 n04 n05 n06" || pages != 3 {
		t.Errorf("%d pages: %s", pages, got)
	}

	// Without a limit: every node of a small list, and no next page.
	resp := e.admin(http.MethodGet, "/api/nodes", nil)
	if p := decodeJSON[page](t, resp); len(p.Nodes) != 7 || p.Next != "" || resp.Header.Get("Link") != "" {
		t.Errorf("first page without a limit: %d nodes, next %q", len(p.Nodes), p.Next)
	}
	// A limit that divides the list exactly has no empty last page.
	if p := decodeJSON[page](t, e.admin(http.MethodGet, "/api/nodes?after=n03&limit=3", nil)); len(p.Nodes) != 3 || p.Next != "" {
		t.Errorf("after n03: %d nodes, next %q", len(p.Nodes), p.Next)
	}
	for _, bad := range []string{"0", "-1", "x"} {
		wantStatus(t, e.admin(http.MethodGet, "/api/nodes?limit="+bad, nil), http.StatusBadRequest)
	}
}
