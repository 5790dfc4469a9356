package store

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/internal/testenv"
)

// TestStatusQueriesReadNoWholeTable: the status page's queries read the
// nodes, the sources and the subscriptions through indexes (a partial
// one, or a walk of an ordered one that stops at its limit), never every
// row: at a million followed sources a scan and sort of nodes or sources
// took seconds, and at 100,000 webhooks the reads of every subscription
// took 260 ms. The totals count the nodes, the followed sources and the
// HTTP subscriptions from an index of theirs.
func TestStatusQueriesReadNoWholeTable(t *testing.T) {
	s, _ := openTestSQLite(t, Options{})
	now := s.timeArg(time.Now())
	nodeLists := s.statusNodesSQL()
	// A step that reads a table of nodes, sources or subscriptions: "SCAN
	// n", "SEARCH s USING …", "SCAN nodes USING COVERING INDEX …";
	// aliases as in stats.go.
	step := regexp.MustCompile(`^(SCAN|SEARCH) (n|s|src|f|o|x|bn|nodes|sources|subscriptions)\b(.*)$`)
	// The walk of the nodes with HTTP subscriptions (withSubscribedNodes):
	// its first node and each next one are one seek in their index.
	walk := []string{"SEARCH subscriptions USING INDEX subscriptions_behind", "SEARCH x USING INDEX subscriptions_behind (node_id>?)"}
	const problemSubs = "SCAN s USING INDEX subscriptions_problems"
	const byName = "SCAN n USING INDEX sqlite_autoindex_nodes_1"
	cases := []struct {
		name  string
		query string
		args  []any
		// scans are the only whole reads allowed, each a plan line
		// exactly: a partial index's, an index's walked in order up to
		// the limit, or a covering index's counted.
		scans []string
	}{
		{"totals", s.statusTotalsSQL(), []any{now, now}, append([]string{
			"SCAN nodes USING COVERING INDEX sqlite_autoindex_nodes_1",
			"SCAN nodes USING INDEX nodes_behind_xmpp",
			"SEARCH nodes USING COVERING INDEX nodes_source (source_id>?)",
			"SCAN s USING INDEX sources_problems",
			"SEARCH s USING INDEX sources_due (next_fetch_at<?)",
			// The HTTP subscriptions counted through their partial
			// index (the XMPP ones are not read);
			// the failing and suspended ones read from theirs.
			"SCAN s USING INDEX subscriptions_behind",
			problemSubs,
		}, walk...)},
		// The node lists may walk the names' index: each stops at its limit.
		{"nodes with failing subscriptions", nodeLists[0], []any{10}, []string{byName, problemSubs}},
		{"nodes with failing sources", nodeLists[1], []any{10}, []string{byName, "SCAN s USING INDEX sources_problems"}},
		{"nodes behind XMPP", nodeLists[2], []any{10}, []string{"SCAN n USING INDEX nodes_behind_xmpp"}},
		{"nodes behind HTTP", nodeLists[3], []any{10}, append([]string{byName}, walk...)},
		{"delivery problems", s.statusDeliveriesSQL(), []any{10}, append([]string{problemSubs}, walk...)},
		{"other nodes", nodeLists[4], []any{10}, []string{byName}},
		{"problem sources", statusProblemSourcesSQL, []any{10}, []string{"SCAN s USING INDEX sources_problems"}},
		{"other sources", statusOtherSourcesSQL, []any{10}, []string{"SCAN s USING INDEX sources_url"}},
	}
	for _, c := range cases {
		plan := explain(t, s, c.query, c.args...)
		t.Logf("%s: %s", c.name, strings.Join(plan, "; "))
		for _, line := range plan {
			m := step.FindStringSubmatch(line)
			if m == nil || m[1] == "SEARCH" && strings.Contains(m[3], "=?") {
				continue // not the nodes or sources, or a lookup by key
			}
			ok := false
			for _, allowed := range c.scans {
				ok = ok || line == allowed
			}
			if !ok {
				t.Errorf("%s reads every row of a table: %q", c.name, line)
			}
		}
		if text := strings.Join(plan, "; "); c.name == "totals" && (!strings.Contains(text, "SCAN s USING INDEX sources_problems") ||
			!strings.Contains(text, "SEARCH s USING INDEX sources_due")) {
			t.Errorf("the totals count the sources without their indexes: %s", text)
		}
		if strings.HasPrefix(c.name, "other") && strings.Contains(strings.Join(plan, ";"), "TEMP B-TREE FOR ORDER BY") {
			t.Errorf("%s sorts what it reads instead of walking an index in order", c.name)
		}
	}
}

// TestStatusQueriesPlanPostgres: on 20,000 followed sources with fresh
// statistics, PostgreSQL lists the status page's nodes and sources, and
// counts the sources' problems, without reading either table whole.
func TestStatusQueriesPlanPostgres(t *testing.T) {
	ctx := context.Background()
	s0, err := Open(ctx, testenv.PostgresURL(t), quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s0.Close()
	s := s0.(*sqlStore)
	now := s.timeArg(time.Now())
	nodeLists := s.statusNodesSQL()
	for _, q := range []string{
		`INSERT INTO sources (original_url, url, baselined, next_fetch_at, created_at)
			SELECT 'http://127.0.0.1/' || i, 'http://127.0.0.1/' || i, TRUE, $1::timestamptz + interval '1 hour', $1
			FROM generate_series(1, 20000) AS i`,
		`INSERT INTO nodes (name, access_model, max_items, deliver_payloads, notification_type, source_id, created_at, updated_at)
			SELECT 'n' || id, 'open', 10, TRUE, 'full', id, $1, $1 FROM sources`,
		`UPDATE sources SET consecutive_errors = 1 WHERE id % 1000 = 0 AND $1::timestamptz IS NOT NULL`,
		`UPDATE nodes SET last_seq = 2, xmpp_seq = 1 WHERE id % 1000 = 1 AND $1::timestamptz IS NOT NULL`,
		// Five webhooks on every tenth node, one of every thousand behind,
		// one failing.
		`INSERT INTO subscriptions (node_id, kind, address, state, created_at, updated_at, cursor_seq)
			SELECT n.id, 'webhook', 'http://127.0.0.1/' || n.id || '/' || i, 'active', $1, $1, n.last_seq
			FROM nodes n CROSS JOIN generate_series(1, 5) AS i WHERE n.id % 10 = 0`,
		`UPDATE subscriptions SET cursor_seq = -1 WHERE id % 1000 = 0 AND $1::timestamptz IS NOT NULL`,
		`UPDATE subscriptions SET consecutive_errors = 1, first_failure_at = $1 WHERE id % 1000 = 1`,
	} {
		if _, err := s.exec(ctx, s.write, q, now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.exec(ctx, s.write, `VACUUM ANALYZE`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, query string
		args        []any
	}{
		{"totals", s.statusTotalsSQL(), []any{now, now}},
		{"nodes with failing subscriptions", nodeLists[0], []any{10}},
		{"nodes with failing sources", nodeLists[1], []any{10}},
		{"nodes behind XMPP", nodeLists[2], []any{10}},
		{"nodes behind HTTP", nodeLists[3], []any{10}},
		{"other nodes", nodeLists[4], []any{10}},
		{"problem sources", statusProblemSourcesSQL, []any{10}},
		{"other sources", statusOtherSourcesSQL, []any{10}},
		{"delivery problems", s.statusDeliveriesSQL(), []any{10}},
	} {
		text := explainPostgres(t, s, c.query, c.args...)
		seq := regexp.MustCompile(`Seq Scan on (nodes|sources|subscriptions)\b`).FindAllString(text, -1)
		// The totals count every node, which PostgreSQL does by reading
		// them (or an index of them) whatever the indexes, and the HTTP
		// subscriptions from an index of theirs, but not every source,
		// and the subscriptions' problems from their indexes; the lists
		// read none whole.
		if c.name == "totals" {
			if strings.Contains(text, "Seq Scan on sources") || !strings.Contains(text, "sources_problems") ||
				!strings.Contains(text, "sources_due") {
				t.Errorf("totals count the sources' problems without their indexes:\n%s", text)
			}
			if strings.Contains(text, "Seq Scan on subscriptions") || !strings.Contains(text, "subscriptions_problems") ||
				!strings.Contains(text, "subscriptions_behind") {
				t.Errorf("totals count the subscriptions' problems without their indexes:\n%s", text)
			}
			t.Logf("totals:\n%s", text)
			continue
		}
		if len(seq) > 0 {
			t.Errorf("%s reads a whole table:\n%s", c.name, text)
		}
	}
}
