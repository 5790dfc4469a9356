package hub_test

import (
	"slices"
	"testing"

	"github.com/pingd/pingd/hub"
)

// TestKindRegistry: what each kind is, as the registry says it, and the
// lists made from it.
func TestKindRegistry(t *testing.T) {
	for _, tc := range []struct {
		kind                      hub.Kind
		itemLevel, verified, http bool
	}{
		{hub.KindXMPP, true, false, false},
		{hub.KindWebhook, true, true, true},
		{hub.KindWebSub, true, true, true},
		{hub.KindRSSCloud, false, true, true},
		{hub.KindCNWS, false, false, true},
		{hub.Kind("gopher"), false, false, false},
	} {
		if got := [3]bool{tc.kind.ItemLevel(), tc.kind.Verified(), tc.kind.HTTP()}; got != [3]bool{tc.itemLevel, tc.verified, tc.http} {
			t.Errorf("%s: item level, verified, HTTP = %v", tc.kind, got)
		}
		if _, ok := tc.kind.Info(); ok != tc.kind.Valid() || ok == (tc.kind == "gopher") {
			t.Errorf("%s: known = %v, valid = %v", tc.kind, ok, tc.kind.Valid())
		}
	}
	if want := []hub.Kind{hub.KindXMPP, hub.KindWebhook, hub.KindWebSub, hub.KindRSSCloud, hub.KindCNWS}; !slices.Equal(hub.Kinds, want) {
		t.Errorf("Kinds = %v, want %v", hub.Kinds, want)
	}
	http := hub.HTTPKinds()
	if want := []hub.Kind{hub.KindWebhook, hub.KindWebSub, hub.KindRSSCloud, hub.KindCNWS}; !slices.Equal(http, want) {
		t.Errorf("HTTPKinds = %v, want %v", http, want)
	}
	http[0] = "changed"
	if hub.HTTPKinds()[0] != hub.KindWebhook {
		t.Error("HTTPKinds hands out the registry's own list")
	}
}
