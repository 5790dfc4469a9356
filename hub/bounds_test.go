package hub_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// TestDeleteUnusedImplicitNodes: an implicit node nobody subscribes to is
// deleted a day after the maintenance pass that found it so, and its
// source an hour after that, which ends its polling; an owner's node
// without subscribers and an implicit node with one stay, and their
// sources are still polled. The room it leaves under the cap of implicit
// nodes is free at once.
func TestDeleteUnusedImplicitNodes(t *testing.T) {
	e := newEnv(t, envOptions{maxImplicitNodes: 2})
	ctx := t.Context()
	for _, p := range []string{"/sentinel", "/owned", "/unused", "/kept", "/later"} {
		e.origin.serve(p, rss{title: p, items: items("a")}.String(), false)
	}
	e.run()
	sentinel := e.createNode("sentinel", "/sentinel")
	e.waitFetched(sentinel.SourceID)
	owned := e.createNode("owned", "/owned")
	e.waitFetched(owned.SourceID)
	implicit := func(path string) *hub.Node {
		t.Helper()
		n, err := e.hub.NodeForURL(ctx, e.origin.url(path), true)
		if err != nil {
			t.Fatalf("NodeForURL(%s): %v", path, err)
		}
		return n
	}
	unused, kept := implicit("/unused"), implicit("/kept")
	if _, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: kept.Name, Kind: hub.KindXMPP,
		Address: "reader@example.org/x", BareJID: "reader@example.org"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.hub.NodeForURL(ctx, e.origin.url("/later"), true); !errors.Is(err, hub.ErrImplicitNodesFull) {
		t.Fatalf("a third implicit node under a cap of 2: %v", err)
	}

	collect := func(wantNodes, wantSources int64) {
		t.Helper()
		nodes, sources, err := e.hub.DeleteUnused(ctx)
		if err != nil || nodes != wantNodes || sources != wantSources {
			t.Fatalf("DeleteUnused at %s = %d nodes, %d sources, %v; want %d, %d",
				e.clock.Now().Format(time.DateTime), nodes, sources, err, wantNodes, wantSources)
		}
	}
	collect(0, 0) // finds "unused" without subscriptions
	e.clock.Advance(hub.UnusedNodeGrace - time.Minute)
	collect(0, 0)
	e.clock.Advance(2 * time.Minute)
	collect(1, 0)
	if _, err := e.store.Node(ctx, unused.Name); !errors.Is(err, hub.ErrNotFound) {
		t.Fatalf("the unused implicit node: %v", err)
	}
	for _, name := range []string{"owned", "sentinel", kept.Name} {
		e.node(name)
	}
	// Its room under the cap is free.
	later := implicit("/later")
	if _, _, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: later.Name, Kind: hub.KindXMPP,
		Address: "reader@example.org/x", BareJID: "reader@example.org"}); err != nil {
		t.Fatal(err)
	}

	e.clock.Advance(hub.UnfollowedSourceGrace + time.Minute)
	collect(0, 1)
	if _, err := e.store.Source(ctx, unused.SourceID); !errors.Is(err, hub.ErrNotFound) {
		t.Fatalf("the source no node follows: %v", err)
	}
	// Days later every source still followed has been polled again, and
	// the deleted one has not.
	hits := map[string]int{}
	for _, p := range []string{"/unused", "/owned", "/kept"} {
		hits[p] = e.origin.hitCount(p)
	}
	e.clock.Advance(48 * time.Hour)
	e.settle(sentinel.SourceID)
	for _, p := range []string{"/owned", "/kept"} {
		testenv.WaitFor(t, 20*time.Second, "a poll of "+p, func() bool { return e.origin.hitCount(p) > hits[p] })
	}
	if got := e.origin.hitCount("/unused"); got != hits["/unused"] {
		t.Fatalf("the deleted source was fetched %d times more", got-hits["/unused"])
	}
}

// TestCallbackHost: the host of a callback in canonical form, every port
// of it counting together; none for XMPP addresses and what is no URL.
func TestCallbackHost(t *testing.T) {
	for _, tc := range []struct {
		kind    hub.Kind
		address string
		want    string
	}{
		{hub.KindWebSub, "http://EXAMPLE.org:8080/cb", "example.org"},
		{hub.KindWebhook, "https://example.org/cb#part", "example.org"},
		{hub.KindRSSCloud, "http://[::1]:9000/notify", "::1"},
		{hub.KindCNWS, "http://127.0.0.1/cnws", "127.0.0.1"},
		{hub.KindWebhook, "not a URL", ""},
		{hub.KindXMPP, "alice@example.org/phone", ""},
	} {
		if got := hub.CallbackHost(tc.kind, tc.address); got != tc.want {
			t.Errorf("CallbackHost(%s, %q) = %q, want %q", tc.kind, tc.address, got, tc.want)
		}
	}
	if got := hub.HostKey("http://EXAMPLE.org/x"); got != "example.org:80" {
		t.Errorf("HostKey = %q, want example.org:80", got)
	}
}
