package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// Benchmarks of the store's hot paths on SQLite: publishing (one item per
// append, and a batch per append), appends and pings from many goroutines
// at once (where group commit applies), and the reads of the XMPP
// dispatcher.

func benchStore(b *testing.B) (store.Store, *hub.Node) {
	b.Helper()
	return benchStoreAt(b, filepath.Join(b.TempDir(), "pingd.db"))
}

// benchStoreAt is benchStore on the database dsn names.
func benchStoreAt(b *testing.B, dsn string) (store.Store, *hub.Node) {
	b.Helper()
	s, err := store.Open(context.Background(), dsn, store.Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	n := &hub.Node{Name: "bench", NodeConfig: hub.DefaultNodeConfig()}
	if err := s.CreateNode(context.Background(), n); err != nil {
		b.Fatal(err)
	}
	return s, n
}

var benchPayload = []byte(`<entry xmlns="http://www.w3.org/2005/Atom"><id>urn:x</id><title>An item</title>` +
	`<link href="http://example.org/x"/><updated>2026-01-01T00:00:00Z</updated><summary>` +
	`A change notification benchmark entry, padded to the size of a typical feed entry. ` +
	`A change notification benchmark entry, padded to the size of a typical feed entry.</summary></entry>`)

func benchItems(prefix string, n int) []hub.Event {
	out := make([]hub.Event, n)
	for i := range out {
		out[i] = hub.Event{Kind: hub.EventItem, ItemID: fmt.Sprintf("%s-%d", prefix, i), Payload: benchPayload,
			Title: "An item", Link: "http://example.org/x", Updated: time.Now()}
	}
	return out
}

func BenchmarkAppendOne(b *testing.B) {
	s, n := benchStore(b)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		if _, err := s.Append(ctx, n.ID, benchItems(fmt.Sprint(i), 1)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendBatch64(b *testing.B) {
	s, n := benchStore(b)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		if _, err := s.Append(ctx, n.ID, benchItems(fmt.Sprint(i), 64)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64)/1e3, "µs/item")
}

func BenchmarkAppendParallel(b *testing.B) {
	s, _ := benchStore(b)
	ctx := context.Background()
	var nodes atomic.Int64
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		n := &hub.Node{Name: fmt.Sprintf("p%d", nodes.Add(1)), NodeConfig: hub.DefaultNodeConfig()}
		if err := s.CreateNode(ctx, n); err != nil {
			b.Error(err)
			return
		}
		for i := 0; pb.Next(); i++ {
			if _, err := s.Append(ctx, n.ID, benchItems(fmt.Sprint(i), 1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// benchPing records one ping as hub.Ping does: the ping, its URL marked
// due (it matches nothing, as most pinged URLs) and the counter.
func benchPing(ctx context.Context, s store.Store, i int64) error {
	u := fmt.Sprintf("http://blog-%d.example.org/", i)
	p := &hub.Ping{Dialect: "xmlrpc-weblogupdates", Name: "bench", URL: u, Remote: "127.0.0.1"}
	_, err := s.RecordPingMarkingDue(ctx, p, []string{u}, time.Now(), nil)
	return err
}

// BenchmarkRecordPing is one pinger: each ping its own transaction, with
// SQLite's default synchronous=NORMAL and with synchronous=FULL (each
// commit waits for the disk), which an operator may set in the DSN.
func BenchmarkRecordPing(b *testing.B) {
	for _, sync := range []string{"NORMAL", "FULL"} {
		b.Run(sync, func(b *testing.B) {
			s, _ := benchStoreAt(b, "file:"+filepath.Join(b.TempDir(), "pingd.db")+"?_pragma=synchronous("+sync+")")
			ctx := context.Background()
			for i := int64(0); b.Loop(); i++ {
				if err := benchPing(ctx, s, i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecordPingParallel is many pingers, whose transactions are
// committed in groups.
func BenchmarkRecordPingParallel(b *testing.B) {
	s, _ := benchStore(b)
	ctx := context.Background()
	var seq atomic.Int64
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := benchPing(ctx, s, seq.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkDispatchReads is what the XMPP dispatcher reads per wake: the
// node, its subscribers and the new events.
func BenchmarkDispatchReads(b *testing.B) {
	s, n := benchStore(b)
	ctx := context.Background()
	for i := range 10 {
		if _, err := s.PutSubscription(ctx, &hub.Subscription{NodeID: n.ID, Kind: hub.KindXMPP,
			Address: fmt.Sprintf("u%d@localhost/r", i), BareJID: fmt.Sprintf("u%d@localhost", i), State: hub.SubActive}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.Append(ctx, n.ID, benchItems("x", 16)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		node, err := s.NodeByID(ctx, n.ID)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP, State: hub.SubActive}); err != nil {
			b.Fatal(err)
		}
		if evs, err := s.EventsAfter(ctx, n.ID, node.LastSeq-16, 256); err != nil || len(evs) != 16 {
			b.Fatal(len(evs), err)
		}
	}
}

// BenchmarkSaveDeliveryStates compares saving the delivery states of 64
// finished deliveries one transaction each (SaveDeliveryState) with one
// SaveDeliveryStates call, on SQLite and, when PINGD_TEST_POSTGRES is set,
// on PostgreSQL. The figure to read is µs/state.
func BenchmarkSaveDeliveryStates(b *testing.B) {
	const subs, per = 1000, 64
	backends := []string{"sqlite", "postgres"}
	for _, backend := range backends {
		for _, together := range []bool{false, true} {
			name := backend + "/one-by-one"
			if together {
				name = backend + "/together"
			}
			b.Run(name, func(b *testing.B) {
				dsn := filepath.Join(b.TempDir(), "pingd.db")
				if backend == "postgres" {
					dsn = testenv.PostgresURL(b)
				}
				s, err := store.Open(context.Background(), dsn, store.Options{Logger: quietLogger()})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ctx := context.Background()
				n := &hub.Node{Name: "bench", NodeConfig: hub.DefaultNodeConfig()}
				if err := s.CreateNode(ctx, n); err != nil {
					b.Fatal(err)
				}
				ids := make([]int64, subs)
				for i := range ids {
					sub := &hub.Subscription{NodeID: n.ID, Kind: hub.KindWebhook, Address: fmt.Sprintf("http://127.0.0.1/%d", i), State: hub.SubActive}
					if _, err := s.PutSubscription(ctx, sub); err != nil {
						b.Fatal(err)
					}
					ids[i] = sub.ID
				}
				states := make([]hub.SavedDeliveryState, per)
				for i := 0; b.Loop(); i++ {
					for j := range states {
						states[j] = hub.SavedDeliveryState{ID: ids[(i*per+j)%subs], State: hub.DeliveryState{Cursor: int64(i), Attempts: 1, LastStatus: 204}}
					}
					if together {
						err = s.SaveDeliveryStates(ctx, states)
					} else {
						for _, st := range states {
							if err = s.SaveDeliveryState(ctx, st.ID, st.State); err != nil {
								break
							}
						}
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*per), "µs/state")
			})
		}
	}
}
