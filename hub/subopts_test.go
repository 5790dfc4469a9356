package hub_test

import (
	"errors"
	"testing"

	"github.com/pingd/pingd/hub"
)

// TestXMPPDiffOption: an XMPP subscription asks for no diff or for
// application/patch-ops+xml; anything else is invalid, when subscribing
// and when changing the options, and changes nothing.
func TestXMPPDiffOption(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	e.createNode("news", "")
	const addr = "reader@example.org"
	subscribe := func(diff string) (*hub.Subscription, error) {
		s, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: "news", Kind: hub.KindXMPP, Address: addr, BareJID: addr,
			Options: hub.Options{Diff: diff}})
		return s, err
	}
	for _, bad := range []string{"none", "application/xml-patch+xml", "text/plain"} {
		if _, err := subscribe(bad); !errors.Is(err, hub.ErrInvalid) {
			t.Errorf("subscribing with diff %q: %v, want ErrInvalid (the component stores none as \"\" and the alias as %s)", bad, err, hub.DiffPatchOps)
		}
	}
	sub, err := subscribe(hub.DiffPatchOps)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Options.Diff != hub.DiffPatchOps {
		t.Errorf("stored diff %q", sub.Options.Diff)
	}
	if _, err := e.hub.SetSubscriptionOptions(ctx, *sub, hub.Options{Diff: "application/json-patch+json"}); !errors.Is(err, hub.ErrInvalid) {
		t.Errorf("setting an unknown diff: %v, want ErrInvalid", err)
	}
	changed, err := e.hub.SetSubscriptionOptions(ctx, *sub, hub.Options{})
	if err != nil || changed.Options.Diff != "" {
		t.Fatalf("turning diffs off: %+v, %v", changed, err)
	}
	subs, err := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{Kind: hub.KindXMPP, Address: addr})
	if err != nil || len(subs) != 1 || subs[0].Options.Diff != "" {
		t.Errorf("after turning diffs off: %+v, %v", subs, err)
	}
}
