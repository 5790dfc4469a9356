package storetest

import (
	"testing"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// testCountImplicitNodes: only implicit nodes are counted, and a deleted
// one no longer is.
func testCountImplicitNodes(t *testing.T, s store.Store) {
	ctx := ctxOf(t)
	if n := must(s.CountImplicitNodes(ctx))(t); n != 0 {
		t.Fatalf("empty store counts %d implicit nodes", n)
	}
	newNode(t, s, "owned")
	newNode(t, s, "implicit-1", func(n *hub.Node) { n.Implicit = true })
	newNode(t, s, "implicit-2", func(n *hub.Node) { n.Implicit = true })
	if n := must(s.CountImplicitNodes(ctx))(t); n != 2 {
		t.Fatalf("CountImplicitNodes = %d, want 2", n)
	}
	noErr(t, s.DeleteNode(ctx, "implicit-1"))
	if n := must(s.CountImplicitNodes(ctx))(t); n != 1 {
		t.Fatalf("CountImplicitNodes after a deletion = %d, want 1", n)
	}
}
