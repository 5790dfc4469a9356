package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/pingd/pingd/hub"
)

// TestAdminPatchAccessModel: the admin API changes a node's access model
// as the owner's XMPP configuration does: a node made whitelist-only keeps
// its members' XMPP subscriptions and ends everyone else's; an unknown
// model is refused and changes nothing.
func TestAdminPatchAccessModel(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.createNode("club", hub.AccessOpen)
	club := e.nodeOf("club")
	if err := e.hub.SetAffiliation(ctx, club, "member@example.org", hub.AffMember); err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"member@example.org", "stranger@example.org"} {
		if _, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "club", Kind: hub.KindXMPP, Address: who + "/r", BareJID: who}); err != nil {
			t.Fatal(err)
		}
	}

	resp := e.admin(http.MethodPatch, "/api/nodes/club", map[string]any{"access_model": "whitelist"})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PATCH access_model whitelist: %d %s", resp.StatusCode, body)
	}
	var got struct {
		AccessModel string `json:"access_model"`
	}
	if err := json.Unmarshal(body, &got); err != nil || got.AccessModel != "whitelist" {
		t.Fatalf("answer %s (%v), want the node with access_model whitelist", body, err)
	}
	subs, err := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: club.ID, Kind: hub.KindXMPP})
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 1 || subs[0].BareJID != "member@example.org" {
		t.Errorf("XMPP subscriptions left %+v, want the member's alone", subs)
	}

	resp = e.admin(http.MethodPatch, "/api/nodes/club", map[string]any{"access_model": "secret"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("PATCH access_model secret: %d, want 400 or 422", resp.StatusCode)
	}
	if m := e.nodeOf("club").AccessModel; m != hub.AccessWhitelist {
		t.Errorf("access model %q after a refused change", m)
	}
}
