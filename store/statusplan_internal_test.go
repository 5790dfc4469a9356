package store

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestStatusQueriesReadNoWholeTable: the status page's queries read the
// nodes and the sources through indexes (a partial one, or a walk of an
// ordered one that stops at its limit), never every row: at a million
// followed sources a scan and sort of either took seconds. The totals
// count the nodes and the followed sources from an index of theirs.
func TestStatusQueriesReadNoWholeTable(t *testing.T) {
	s, _ := openTestSQLite(t, Options{})
	now := s.timeArg(time.Now())
	// A step that reads a table of nodes or sources: "SCAN n", "SEARCH
	// s USING …", "SCAN nodes USING COVERING INDEX …"; aliases as in
	// stats.go.
	step := regexp.MustCompile(`^(SCAN|SEARCH) (n|s|src|f|o|x|bn|nodes|sources)\b(.*)$`)
	cases := []struct {
		name  string
		query string
		args  []any
		// scans are the only whole reads allowed, each a plan line
		// exactly: a partial index's, an index's walked in order up to
		// the limit, or a covering index's counted.
		scans []string
	}{
		{"totals", statusTotalsSQL, []any{now, now}, []string{
			"SCAN nodes USING COVERING INDEX sqlite_autoindex_nodes_1",
			"SCAN nodes USING INDEX nodes_behind_xmpp",
			"SEARCH nodes USING COVERING INDEX nodes_source (source_id>?)",
			"SCAN s USING INDEX sources_problems",
			"SEARCH s USING INDEX sources_due (next_fetch_at<?)",
			// The delivery problems read every subscription ("s" is
			// their alias there too); the sources' counts, above, read
			// their indexes only, as the plan's lines must show.
			"SCAN s",
		}},
		{"problem nodes", statusProblemNodesSQL, []any{10}, []string{
			"SCAN s USING INDEX sources_problems",
			"SCAN nodes USING INDEX nodes_behind_xmpp",
		}},
		{"other nodes", statusOtherNodesSQL, []any{10}, []string{
			"SCAN n USING INDEX sqlite_autoindex_nodes_1",
			"SCAN s USING INDEX sources_problems",
			"SCAN nodes USING INDEX nodes_behind_xmpp",
		}},
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
