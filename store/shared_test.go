package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// These tests open one database several times, as several pingd processes
// would, and check that the database, not the process, keeps them apart.

func TestSharedDatabaseSQLite(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "pingd.db")
	testSharedDatabase(t, dsn)
}

func TestSharedDatabasePostgres(t *testing.T) {
	testSharedDatabase(t, testenv.PostgresURL(t))
}

func testSharedDatabase(t *testing.T, dsn string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Instances starting together migrate the fresh database once.
	const instances = 3
	stores := make([]store.Store, instances)
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() {
			s, err := store.Open(ctx, dsn, store.Options{Logger: quietLogger(), MaxConns: 4})
			if err != nil {
				t.Errorf("instance %d: %v", i, err)
				return
			}
			stores[i] = s
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	defer func() {
		for _, s := range stores {
			s.Close()
		}
	}()

	n := &hub.Node{Name: "shared", NodeConfig: hub.DefaultNodeConfig()}
	if err := stores[0].CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := stores[1].CreateNode(ctx, &hub.Node{Name: "shared", NodeConfig: hub.DefaultNodeConfig()}); err == nil {
		t.Fatal("a second instance created the same node")
	}

	// Appends from every instance get distinct, gap-free sequences.
	const rounds = 20
	var mu sync.Mutex
	var seqs []int64
	for i, s := range stores {
		wg.Go(func() {
			for r := range rounds {
				got, err := s.Append(ctx, n.ID, []hub.Event{{Kind: hub.EventItem, ItemID: fmt.Sprintf("%d-%d", i, r)}})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seqs = append(seqs, got[0].Seq)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(seqs)
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("sequences from several instances are not gap-free and unique: %v", seqs)
		}
	}

	// Sources and deliveries go to one instance each.
	for i := range 12 {
		src, _, err := stores[0].EnsureSource(ctx, fmt.Sprintf("https://example.org/%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := stores[0].CreateNode(ctx, &hub.Node{Name: fmt.Sprintf("src-%d", i), NodeConfig: hub.DefaultNodeConfig(), SourceID: src.ID}); err != nil {
			t.Fatal(err)
		}
		if err := stores[0].MarkSourceDue(ctx, src.ID, time.Now().Add(-time.Minute), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := stores[0].PutSubscription(ctx, &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook,
			Address: fmt.Sprintf("http://127.0.0.1/%d", i), State: hub.SubPending}); err != nil {
			t.Fatal(err)
		}
	}
	claimedBy := map[string]string{}
	for i, s := range stores {
		owner := fmt.Sprintf("instance-%d", i)
		wg.Go(func() {
			for {
				srcs, err := s.ClaimDueSources(ctx, time.Now(), 2, owner, time.Now().Add(time.Hour))
				if err != nil {
					t.Error(err)
					return
				}
				subs, err := s.ClaimDeliveries(ctx, time.Now(), 0, 2, owner, time.Now().Add(time.Hour))
				if err != nil {
					t.Error(err)
					return
				}
				if len(srcs) == 0 && len(subs) == 0 {
					return
				}
				mu.Lock()
				for _, src := range srcs {
					key := fmt.Sprintf("source %d", src.ID)
					if prev, ok := claimedBy[key]; ok {
						t.Errorf("%s claimed by %s and %s", key, prev, owner)
					}
					claimedBy[key] = owner
				}
				for _, sub := range subs {
					key := fmt.Sprintf("subscription %d", sub.ID)
					if prev, ok := claimedBy[key]; ok {
						t.Errorf("%s claimed by %s and %s", key, prev, owner)
					}
					claimedBy[key] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claimedBy) != 24 {
		t.Fatalf("%d claims, want 12 sources and 12 subscriptions", len(claimedBy))
	}
}
