package store

import (
	"context"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

// BenchmarkStatusReportWebhooks reads the status report of a hub with
// 100,000 webhooks on 1,000 nodes, one in a hundred behind its node's
// log: the subscriptions' figures come from their indexes, so the
// report does not read every subscription.
func BenchmarkStatusReportWebhooks(b *testing.B) {
	s, _ := openTestSQLite(b, Options{})
	ctx := context.Background()
	now := s.timeArg(time.Now())
	for _, q := range []string{
		`WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM i WHERE x < 1000)
		 INSERT INTO nodes (name, access_model, max_items, deliver_payloads, notification_type, created_at, updated_at, last_seq)
		 SELECT 'n' || x, 'open', 10, 1, 'full', $1, $1, 5 FROM i`,
		`WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM i WHERE x < 100000)
		 INSERT INTO subscriptions (node_id, kind, address, state, created_at, updated_at, cursor_seq)
		 SELECT 1 + x % 1000, 'webhook', 'http://127.0.0.1/h' || x, 'active', $1, $1,
			CASE WHEN x % 100 = 0 THEN 4 ELSE 5 END FROM i`,
	} {
		if _, err := s.exec(ctx, s.write, q, now); err != nil {
			b.Fatal(err)
		}
	}
	q := hub.StatusQuery{Now: time.Now(), Subscribers: true}
	for b.Loop() {
		rep, err := s.StatusReport(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Queue.Subscriptions != 100000 || rep.Queue.Behind != 1000 {
			b.Fatalf("%d subscriptions, %d behind; want 100000, 1000", rep.Queue.Subscriptions, rep.Queue.Behind)
		}
	}
}
