package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// nodeWithSubscribers makes a node with n subscriptions of every kind in
// turn, written in one transaction to keep the setup quick.
func nodeWithSubscribers(tb testing.TB, s *sqlStore, name string, n int) *hub.Node {
	tb.Helper()
	ctx := context.Background()
	node := &hub.Node{Name: name, NodeConfig: hub.DefaultNodeConfig()}
	if err := s.CreateNode(ctx, node); err != nil {
		tb.Fatal(err)
	}
	err := s.inTx(ctx, func(tx *txn) error {
		now := s.timeArg(time.Now())
		for i := range n {
			kind := hub.Kinds[i%len(hub.Kinds)]
			if _, err := s.exec(ctx, tx, `INSERT INTO subscriptions (node_id, kind, address, state, created_at, updated_at)
				VALUES ($1, $2, $3, 'active', $4, $4)`, node.ID, string(kind), fmt.Sprintf("sub-%d", i), now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return node
}

// rowWrites returns SQLite's count of rows changed on the write connection
// (the pool has exactly one).
func rowWrites(tb testing.TB, s *sqlStore) int64 {
	tb.Helper()
	var n int64
	if err := s.queryRow(context.Background(), s.write, `SELECT total_changes()`, nil, &n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// appendRowWrites publishes one item to the node and counts the rows the
// append wrote.
func appendRowWrites(tb testing.TB, s *sqlStore, nodeID int64, itemID string) int64 {
	tb.Helper()
	before := rowWrites(tb, s)
	if _, err := s.Append(context.Background(), nodeID, []hub.Event{{Kind: hub.EventItem, ItemID: itemID,
		Payload: []byte(`<entry xmlns="http://www.w3.org/2005/Atom"/>`)}}); err != nil {
		tb.Fatal(err)
	}
	return rowWrites(tb, s) - before
}

// TestAppendWritesDoNotDependOnSubscribers counts the rows one published
// item writes on a node with 10 and with 10,000 subscribers.
func TestAppendWritesDoNotDependOnSubscribers(t *testing.T) {
	s, _ := openTestSQLite(t, Options{})
	few := nodeWithSubscribers(t, s, "few", 10)
	many := nodeWithSubscribers(t, s, "many", 10_000)
	for i := range 3 {
		id := fmt.Sprintf("item-%d", i)
		a, b := appendRowWrites(t, s, few.ID, id), appendRowWrites(t, s, many.ID, id)
		if a != b {
			t.Fatalf("append %d wrote %d rows with 10 subscribers, %d with 10,000", i, a, b)
		}
		// The node row, the event and the current-items row.
		if a != 3 {
			t.Fatalf("append %d wrote %d rows, want 3", i, a)
		}
	}
}

// BenchmarkAppend publishes one item per operation and reports the rows
// each append wrote (rows/op) next to its time.
func BenchmarkAppend(b *testing.B) {
	for _, subscribers := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("subscribers=%d", subscribers), func(b *testing.B) {
			s, err := Open(context.Background(), b.TempDir()+"/pingd.db", quietOptions())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			st := s.(*sqlStore)
			node := nodeWithSubscribers(b, st, "n", subscribers)
			var rows int64
			for i := 0; b.Loop(); i++ {
				rows += appendRowWrites(b, st, node.ID, fmt.Sprintf("item-%d", i))
			}
			b.ReportMetric(float64(rows)/float64(b.N), "rows/op")
		})
	}
}

// BenchmarkClaimDeliveries measures a delivery claim over 100,000
// subscriptions on 100 nodes when one node has work: the claim reads that
// node's behind subscriptions, not the others.
func BenchmarkClaimDeliveries(b *testing.B) {
	const nodes, perNode = 100, 1000
	backends := map[string]func(b *testing.B) string{
		backendSQLite:   func(b *testing.B) string { return b.TempDir() + "/pingd.db" },
		backendPostgres: func(b *testing.B) string { return testenv.PostgresURL(b) },
	}
	for _, name := range []string{backendSQLite, backendPostgres} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(ctx, backends[name](b), quietOptions())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			st := s.(*sqlStore)
			var ids []int64
			for i := range nodes {
				n := &hub.Node{Name: fmt.Sprintf("n%d", i), NodeConfig: hub.DefaultNodeConfig()}
				if err := s.CreateNode(ctx, n); err != nil {
					b.Fatal(err)
				}
				ids = append(ids, n.ID)
			}
			now := st.timeArg(time.Now())
			for _, id := range ids {
				// Half HTTP, half XMPP subscriptions, every one caught up.
				if _, err := st.exec(ctx, st.write, `WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < $2)
					INSERT INTO subscriptions (node_id, kind, address, state, created_at, updated_at)
					SELECT $1, CASE WHEN i % 2 = 0 THEN 'webhook' ELSE 'xmpp' END, 'sub-' || i, 'active', $3, $3 FROM seq`,
					id, perNode, now); err != nil {
					b.Fatal(err)
				}
			}
			if name == backendPostgres {
				if _, err := st.exec(ctx, st.write, `ANALYZE`); err != nil {
					b.Fatal(err)
				}
			}
			busy := ids[nodes/2]
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				if _, err := s.Append(ctx, busy, []hub.Event{{Kind: hub.EventChange}}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				claimed, err := s.ClaimDeliveries(ctx, time.Now(), 0, 10, "bench", time.Now().Add(time.Minute))
				if err != nil {
					b.Fatal(err)
				}
				if len(claimed) != 10 {
					b.Fatalf("claimed %d", len(claimed))
				}
				b.StopTimer()
				// Catch the whole node up again for the next round.
				if _, err := st.exec(ctx, st.write, `UPDATE subscriptions SET cursor_seq = $1, lease_owner = '', lease_until = NULL
					WHERE node_id = $2`, int64(i+1), busy); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkClaimNodeDeliveries measures the claim of a woken node on
// SQLite, as the delivery engine makes it right after a publish: ten
// webhook subscriptions, all one item behind, claimed with the node and
// the new item read in the same transaction ("reads"), or with the new
// item held by the caller, as a publish of the same process hands it over
// ("held"), when the claim only checks the node's last_seq.
func BenchmarkClaimNodeDeliveries(b *testing.B) {
	for _, held := range []bool{false, true} {
		name := "reads"
		if held {
			name = "held"
		}
		b.Run(name, func(b *testing.B) { benchmarkClaimNode(b, held) })
	}
}

func benchmarkClaimNode(b *testing.B, held bool) {
	ctx := context.Background()
	s, err := Open(ctx, b.TempDir()+"/pingd.db", quietOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	st := s.(*sqlStore)
	n := &hub.Node{Name: "small", NodeConfig: hub.DefaultNodeConfig()}
	if err := s.CreateNode(ctx, n); err != nil {
		b.Fatal(err)
	}
	now := st.timeArg(time.Now())
	if _, err := st.exec(ctx, st.write, `WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < 10)
		INSERT INTO subscriptions (node_id, kind, address, state, options, created_at, updated_at)
		SELECT $1, 'webhook', 'http://127.0.0.1:9/hook/' || i, 'active', '{"method":"POST"}', $2, $2 FROM seq`, n.ID, now); err != nil {
		b.Fatal(err)
	}
	var cpu time.Duration // the claims' own, less noisy than the time on a shared machine
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		appended, err := s.Append(ctx, n.ID, []hub.Event{{Kind: hub.EventItem, ItemID: fmt.Sprint("item-", i),
			Payload: []byte(`<entry xmlns="http://www.w3.org/2005/Atom"><title>An item</title></entry>`)}})
		if err != nil {
			b.Fatal(err)
		}
		var span hub.EventSpan
		if held {
			span = hub.EventSpan{After: appended[0].Seq - 1, Last: appended[0].Seq}
		}
		b.StartTimer()
		before := processCPU()
		c, err := s.ClaimNodeDeliveries(ctx, time.Now(), n.ID, 256, "bench", time.Now().Add(time.Minute), 100, span)
		cpu += processCPU() - before
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if len(c.Subscriptions) != 10 || c.Held != held || (!held && len(c.Events) != 1) {
			b.Fatalf("claimed %d subscriptions and %d events, held %v", len(c.Subscriptions), len(c.Events), c.Held)
		}
		states := make([]hub.SavedDeliveryState, len(c.Subscriptions))
		for j, sub := range c.Subscriptions {
			states[j] = hub.SavedDeliveryState{ID: sub.ID, State: hub.DeliveryState{Cursor: appended[0].Seq, LeaseOwner: "bench"}}
		}
		if err := s.SaveDeliveryStates(ctx, states); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}
