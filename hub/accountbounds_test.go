package hub_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// TestAccountSubscriptionBounds: one account cannot make every item cost
// thousands of stanzas. 2,000 resources of one bare JID subscribing to one
// node, concurrently, get DefaultMaxNodeResources subscriptions and
// ErrNodeResourcesFull for the rest; subscribing to more nodes than
// DefaultMaxAccountSubscriptions, concurrently across nodes, stops at that
// many. A subscription that exists is renewed as ever, another account
// subscribes as usual, and admins are not bounded.
func TestAccountSubscriptionBounds(t *testing.T) {
	e := newEnv(t, envOptions{admins: []string{"admin@example.org"}})
	ctx := t.Context()
	n := e.createNode("n", "")
	subscribe := func(node, address, bare string) (bool, error) {
		_, existed, err := e.hub.Subscribe(ctx, hub.Subscription{NodeName: node, Kind: hub.KindXMPP, Address: address, BareJID: bare})
		return existed, err
	}
	// run subscribes count addresses on 8 goroutines and counts the
	// subscriptions made and the refusals.
	run := func(count int, each func(i int) (bool, error), refusal error) (made, refused int) {
		t.Helper()
		var ok, no atomic.Int64
		var wg sync.WaitGroup
		next := atomic.Int64{}
		for range 8 {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < count; i = int(next.Add(1)) - 1 {
					existed, err := each(i)
					switch {
					case errors.Is(err, refusal):
						no.Add(1)
					case err != nil:
						t.Errorf("subscription %d: %v", i, err)
					case !existed:
						ok.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return int(ok.Load()), int(no.Load())
	}

	made, refused := run(2000, func(i int) (bool, error) {
		return subscribe("n", fmt.Sprintf("leo@example.org/p%d", i+1), "leo@example.org")
	}, hub.ErrNodeResourcesFull)
	if made != hub.DefaultMaxNodeResources || refused != 2000-hub.DefaultMaxNodeResources {
		t.Fatalf("2,000 resources of one account: %d subscribed, %d refused; want %d and the rest", made, refused, hub.DefaultMaxNodeResources)
	}
	subs, err := e.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID, BareJID: "leo@example.org"})
	if err != nil || len(subs) != hub.DefaultMaxNodeResources {
		t.Fatalf("stored: %d subscriptions of leo, %v", len(subs), err)
	}
	// Those that exist are renewed, never refused.
	for _, s := range subs {
		if existed, err := subscribe("n", s.Address, s.BareJID); err != nil || !existed {
			t.Fatalf("resubscribing %s: existed %v, %v", s.Address, existed, err)
		}
	}
	// Another account is not affected.
	if existed, err := subscribe("n", "bob@example.org/phone", "bob@example.org"); err != nil || existed {
		t.Fatalf("another account: existed %v, %v", existed, err)
	}

	// Across nodes: the account's subscriptions together.
	const nodes = hub.DefaultMaxAccountSubscriptions + 100
	for i := range nodes {
		e.createNode(fmt.Sprintf("m%04d", i), "")
	}
	made, refused = run(nodes, func(i int) (bool, error) {
		return subscribe(fmt.Sprintf("m%04d", i), "leo@example.org", "leo@example.org")
	}, hub.ErrAccountSubscriptionsFull)
	want := hub.DefaultMaxAccountSubscriptions - hub.DefaultMaxNodeResources // n holds some already
	if made != want || refused != nodes-want {
		t.Fatalf("subscribing to %d nodes: %d subscribed, %d refused; want %d and the rest", nodes, made, refused, want)
	}
	if existed, err := subscribe("m0000", "bob@example.org", "bob@example.org"); err != nil || existed {
		t.Fatalf("another account after the first reached its bound: existed %v, %v", existed, err)
	}
	// Owners grant through Subscribe too: the bound holds.
	if _, _, err := e.hub.GrantSubscription(ctx, hub.Subscription{NodeName: "n", Kind: hub.KindXMPP,
		Address: "leo@example.org/granted", BareJID: "leo@example.org"}); !errors.Is(err, hub.ErrLimit) {
		t.Fatalf("a granted subscription past the bound: %v", err)
	}
	// Admins are not bounded.
	for i := range hub.DefaultMaxNodeResources + 2 {
		if _, err := subscribe("n", fmt.Sprintf("admin@example.org/r%d", i), "admin@example.org"); err != nil {
			t.Fatalf("admin's subscription %d: %v", i, err)
		}
	}
}

// TestAccountSubscriptionBoundsConfigured: the bounds are the operator's
// to set, and negative ones are none.
func TestAccountSubscriptionBoundsConfigured(t *testing.T) {
	for _, tc := range []struct {
		name              string
		account, node     int
		wantMade, attempt int
	}{
		{"small", 3, 2, 3, 6},
		{"none", -1, -1, 6, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t)
			h, err := hub.New(hub.Config{Stores: store.HubStores(st), MaxAccountSubscriptions: tc.account, MaxNodeResources: tc.node, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			made := 0
			for i := range tc.attempt {
				// Two resources on each of three nodes.
				node := fmt.Sprintf("n%d", i/2)
				if i%2 == 0 {
					if _, _, err := h.CreateNode(ctx, hub.NodeSpec{Name: node, Config: hub.DefaultNodeConfig()}); err != nil {
						t.Fatal(err)
					}
				}
				_, _, err := h.Subscribe(ctx, hub.Subscription{NodeName: node, Kind: hub.KindXMPP,
					Address: fmt.Sprintf("leo@example.org/r%d", i%2), BareJID: "leo@example.org"})
				switch {
				case err == nil:
					made++
				case !errors.Is(err, hub.ErrLimit):
					t.Fatal(err)
				}
			}
			if made != tc.wantMade {
				t.Fatalf("%d subscriptions made, want %d", made, tc.wantMade)
			}
		})
	}
}
