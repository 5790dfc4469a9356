package store

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
)

// TestClaimDeliveriesPlanPostgres checks, on 50,000 subscriptions with
// fresh statistics, that PostgreSQL finds the subscriptions behind their
// node through subscriptions_behind, and those with a pending change
// through subscriptions_changing, instead of walking the table.
func TestClaimDeliveriesPlanPostgres(t *testing.T) {
	ctx := context.Background()
	s0, err := Open(ctx, testenv.PostgresURL(t), quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s0.Close()
	s := s0.(*sqlStore)
	var ids []int64
	for i := range 50 {
		n := &hub.Node{Name: fmt.Sprintf("n%d", i), NodeConfig: hub.DefaultNodeConfig()}
		if err := s.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, n.ID)
	}
	for _, id := range ids {
		if _, err := s.exec(ctx, s.write, `INSERT INTO subscriptions (node_id, kind, address, state, created_at, updated_at)
			SELECT $1, CASE WHEN i % 2 = 0 THEN 'webhook' ELSE 'xmpp' END, 'sub-' || i, 'active', $2, $2
			FROM generate_series(1, 1000) AS i`, id, s.timeArg(time.Now())); err != nil {
			t.Fatal(err)
		}
	}
	// And many nodes without subscriptions, as a hub following many
	// sources has: the claim must not walk them.
	if _, err := s.exec(ctx, s.write, `INSERT INTO nodes (name, access_model, max_items, deliver_payloads,
		notification_type, last_seq, created_at, updated_at)
		SELECT 'followed-' || i, access_model, max_items, deliver_payloads, notification_type, 3, created_at, updated_at
		FROM nodes, generate_series(1, 100000) AS i WHERE nodes.id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.exec(ctx, s.write, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, ids[25], []hub.Event{{Kind: hub.EventChange}}); err != nil {
		t.Fatal(err)
	}
	changing, _, behind := s.claimDeliveriesSQL(false)
	explain := func(query string) string {
		t.Helper()
		return explainPostgres(t, s, query, s.timeArg(time.Now()), 10)
	}
	text := explain(behind)
	if strings.Contains(text, "Seq Scan on nodes") || strings.Contains(text, "Seq Scan on subscriptions") {
		t.Fatalf("plan reads every node or every subscription:\n%s", text)
	}
	t.Logf("behind:\n%s", text)
	// Pending changes are found through their partial index alone.
	if text := explain(changing); !strings.Contains(text, "subscriptions_changing") || strings.Contains(text, "Seq Scan on subscriptions") {
		t.Fatalf("the claim of pending changes reads other subscriptions:\n%s", text)
	}
}

// TestSourcesLeasedPlanPostgres checks, on 100,000 sources with fresh
// statistics and a few under a lease, that a start's look for the sources
// left leased reads the partial index of leased sources, not every source.
func TestSourcesLeasedPlanPostgres(t *testing.T) {
	ctx := context.Background()
	s0, err := Open(ctx, testenv.PostgresURL(t), quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s0.Close()
	s := s0.(*sqlStore)
	now := time.Now()
	if _, err := s.exec(ctx, s.write, `INSERT INTO sources (original_url, url, lease_owner, lease_until, created_at)
		SELECT 'https://example.org/' || i, 'https://example.org/' || i,
			CASE WHEN i % 10000 = 0 THEN 'other' ELSE '' END, CASE WHEN i % 10000 = 0 THEN $1::timestamptz END, $1
		FROM generate_series(1, 100000) AS i`, s.timeArg(now.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.exec(ctx, s.write, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]struct {
		where string
		args  []any
	}{
		"SourcesLeasedByOthers": {sourcesLeasedByOthersWhere, []any{s.timeArg(now), "me"}},
		"SourcesLeasedBy":       {sourcesLeasedByWhere, []any{"other"}},
	} {
		text := explainPostgres(t, s, "SELECT "+sourceColumns+" FROM sources s "+q.where, q.args...)
		if !strings.Contains(text, "sources_leased") || strings.Contains(text, "Seq Scan on sources") {
			t.Errorf("%s reads every source:\n%s", name, text)
		}
		t.Logf("%s:\n%s", name, text)
	}
	if got, err := s.SourcesLeasedByOthers(ctx, "me", now); err != nil || len(got) != 10 {
		t.Fatalf("SourcesLeasedByOthers = %d sources, %v; want the 10 leased", len(got), err)
	}
}

// TestOpenPostgresUnreachable needs no server: nothing listens on the port
// of a socket this test opened and closed again.
func TestOpenPostgresUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dsn := "postgres://pingd:hunter2@" + addr + "/pingd?sslmode=disable&connect_timeout=5"
	_, err = Open(context.Background(), dsn, quietOptions())
	if err == nil {
		t.Fatal("Open succeeded without a server")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, `open database "postgres://pingd:xxxxx@`+addr) || strings.Contains(msg, "hunter2") || strings.Contains(msg, "\n") {
		t.Fatalf("error %q: want one line naming the database without its password", msg)
	}
	t.Log(msg)
}
