package store

import (
	"slices"
	"testing"

	"github.com/pingd/pingd/hub"
)

// TestHTTPKindMatchesKinds: the store's condition for the HTTP kinds
// (httpKind, the predicate of the delivery claims' partial indexes) keeps
// the kinds hub's registry calls HTTP. A kind that is not HTTP other than
// XMPP needs the condition and those indexes changed together.
func TestHTTPKindMatchesKinds(t *testing.T) {
	var other []hub.Kind
	for _, k := range hub.Kinds {
		if !k.HTTP() {
			other = append(other, k)
		}
	}
	if !slices.Equal(other, []hub.Kind{hub.KindXMPP}) || httpKind != "kind <> '"+string(hub.KindXMPP)+"'" {
		t.Fatalf("kinds that are not HTTP %v; the store keeps the HTTP kinds with %q", other, httpKind)
	}
}
