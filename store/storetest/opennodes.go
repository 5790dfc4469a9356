package storetest

import (
	"reflect"
	"testing"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// testOpenNodes: OpenNodes lists the open nodes only, oldest first, up to
// its limit, with their sources' URL, title and site as the last fetch
// left them, and counts every open node.
func testOpenNodes(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	if got, total := must2(s.OpenNodes(ctx, 10))(t); len(got) != 0 || total != 0 {
		t.Fatalf("empty store: %+v, %d", got, total)
	}
	src, _ := newSource(t, s, "https://a.example/feed", "z-followed")
	st := src.SourceState
	st.Title, st.SiteURL = "A's feed", "https://a.example/"
	must(s.ApplyFetch(ctx, hub.FetchOutcome{SourceID: src.ID, State: st}))(t)
	newNode(t, s, "b-private", withSource(src.ID), func(n *hub.Node) { n.AccessModel = hub.AccessWhitelist })
	newNode(t, s, "a-own", func(n *hub.Node) { n.Title = "Published here" })

	want := []hub.ListedNode{
		{Name: "z-followed", SourceURL: "https://a.example/feed", SourceTitle: "A's feed", SiteURL: "https://a.example/"},
		{Name: "a-own", Title: "Published here"},
	}
	got, total := must2(s.OpenNodes(ctx, 10))(t)
	if !reflect.DeepEqual(got, want) || total != 2 {
		t.Fatalf("OpenNodes = %+v, %d; want %+v, 2", got, total, want)
	}
	got, total = must2(s.OpenNodes(ctx, 1))(t)
	if !reflect.DeepEqual(got, want[:1]) || total != 2 {
		t.Fatalf("OpenNodes(limit 1) = %+v, %d; want %+v, 2", got, total, want[:1])
	}
}
