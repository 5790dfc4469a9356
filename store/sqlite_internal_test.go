package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

func openTestSQLite(t testing.TB, opt Options) (*sqlStore, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pingd.db")
	if opt.Logger == nil {
		opt.Logger = quietOptions().Logger
	}
	s, err := Open(context.Background(), path, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*sqlStore), path
}

func TestOpenUnwritablePath(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	// The parent is a regular file: no one can create anything in it.
	file := filepath.Join(dir, "x")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(file, "pingd.db")
	_, err := Open(ctx, path, quietOptions())
	want := fmt.Sprintf("open database %q: directory %q is not writable: ", path, file)
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Open(%s) = %v, want %q…", path, err, want)
	}

	// The parent does not exist.
	missing := filepath.Join(dir, "missing")
	path = filepath.Join(missing, "pingd.db")
	_, err = Open(ctx, path, quietOptions())
	want = fmt.Sprintf("open database %q: directory %q is not writable: ", path, missing)
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Open(%s) = %v, want %q…", path, err, want)
	}

	// A read-only directory (permissions do not bind root).
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(ro, "pingd.db")
		_, err = Open(ctx, path, quietOptions())
		want = fmt.Sprintf("open database %q: directory %q is not writable: ", path, ro)
		if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, os.ErrPermission) {
			t.Fatalf("Open(%s) = %v, want %q…", path, err, want)
		}
	}

	// A directory where the file should be.
	_, err = Open(ctx, dir, quietOptions())
	if err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("Open(directory) = %v", err)
	}
}

// TestSQLiteOddFileName opens a file whose name holds what SQLite URIs
// give a meaning to.
func TestSQLiteOddFileName(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "we?ird#%20name.db")
	for _, dsn := range []string{path, "sqlite:" + path} {
		s, err := Open(ctx, dsn, quietOptions())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CreateNode(ctx, &hub.Node{Name: dsn, NodeConfig: hub.DefaultNodeConfig()}); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != "we?ird#%20name.db" {
		t.Fatalf("files %q, want only the named database", names)
	}
	s, err := Open(ctx, path, quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if nodes, err := s.Nodes(ctx); err != nil || len(nodes) != 2 {
		t.Fatalf("nodes = %v, %v: both opens should have used one file", nodes, err)
	}
}

func TestSQLiteFileMode(t *testing.T) {
	s, path := openTestSQLite(t, Options{})
	n := &hub.Node{Name: "n", NodeConfig: hub.DefaultNodeConfig()}
	if err := s.CreateNode(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %o, want 600", filepath.Base(p), mode)
		}
	}
}

func TestSQLiteConnectionSettings(t *testing.T) {
	ctx := context.Background()
	s, _ := openTestSQLite(t, Options{QueryTimeout: 3 * time.Second})
	pragma := func(db *sql.DB, name string) string {
		t.Helper()
		var v string
		if err := s.queryRow(ctx, db, "PRAGMA "+name, nil, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, db := range []*sql.DB{s.write, s.read} {
		if got := pragma(db, "journal_mode"); got != "wal" {
			t.Errorf("journal_mode = %s", got)
		}
		if got := pragma(db, "foreign_keys"); got != "1" {
			t.Errorf("foreign_keys = %s", got)
		}
		if got := pragma(db, "busy_timeout"); got != "3000" {
			t.Errorf("busy_timeout = %s", got)
		}
	}
	// WAL with synchronous=NORMAL (1) unless the DSN says otherwise.
	if got := pragma(s.write, "synchronous"); got != "1" {
		t.Errorf("synchronous = %s, want 1 (NORMAL)", got)
	}
	if got := pragma(s.read, "query_only"); got != "1" {
		t.Errorf("read pool query_only = %s", got)
	}
	if got := pragma(s.write, "query_only"); got != "0" {
		t.Errorf("write pool query_only = %s", got)
	}
	if _, err := s.read.ExecContext(ctx, `DELETE FROM nodes`); err == nil {
		t.Error("the read pool accepted a write")
	}
}

// TestSQLiteSynchronousFromDSN: an operator's synchronous pragma in a
// file: DSN is the one the connections use (FULL: each commit waits for
// the disk), on the write connection and the readers alike.
func TestSQLiteSynchronousFromDSN(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "pingd.db")
	st, err := Open(ctx, "file:"+path+"?_pragma=synchronous(FULL)", quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := st.(*sqlStore)
	for name, db := range map[string]*sql.DB{"write": s.write, "read": s.read} {
		var v int
		if err := s.queryRow(ctx, db, "PRAGMA synchronous", nil, &v); err != nil {
			t.Fatal(err)
		}
		if v != 2 {
			t.Errorf("%s pool: synchronous = %d, want 2 (FULL)", name, v)
		}
	}
}

// TestSQLiteWriteLockTimeout holds the write lock from another connection,
// as another process would: a write fails after the query timeout instead
// of hanging, and succeeds once the lock is released.
func TestSQLiteWriteLockTimeout(t *testing.T) {
	ctx := context.Background()
	s, path := openTestSQLite(t, Options{QueryTimeout: 300 * time.Millisecond})
	n := &hub.Node{Name: "n", NodeConfig: hub.DefaultNodeConfig()}
	if err := s.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", "file:"+escapeURIPath(path)+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, n.ID, []hub.Event{{Kind: hub.EventChange}})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Append succeeded while another connection held the write lock")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Append hung on a locked database")
	}
	// Reads go on meanwhile (WAL).
	if _, err := s.NodeByID(ctx, n.ID); err != nil {
		t.Fatalf("read during a foreign write lock: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, n.ID, []hub.Event{{Kind: hub.EventChange}}); err != nil {
		t.Fatalf("Append after the lock was released: %v", err)
	}
}

// TestClaimDeliveriesUsesIndexes checks that SQLite answers the claim
// queries from the subscription indexes rather than reading every
// subscription.
func TestClaimDeliveriesUsesIndexes(t *testing.T) {
	ctx := context.Background()
	s, _ := openTestSQLite(t, Options{})
	var nodes []int64
	for i := range 20 {
		n := &hub.Node{Name: fmt.Sprintf("n%d", i), NodeConfig: hub.DefaultNodeConfig()}
		if err := s.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n.ID)
	}
	err := s.inTx(ctx, func(tx *txn) error {
		for i := range 5000 {
			kind := hub.KindXMPP
			if i%2 == 0 {
				kind = hub.KindWebhook
			}
			if _, err := s.exec(ctx, tx, `INSERT INTO subscriptions (node_id, kind, address, state, created_at, updated_at)
				VALUES ($1, $2, $3, 'active', $4, $4)`, nodes[i%len(nodes)], string(kind), fmt.Sprintf("a%d", i),
				s.timeArg(time.Now())); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, byNode := range []bool{false, true} {
		changing, waiting, behind := s.claimDeliveriesSQL(byNode)
		for name, query := range map[string]string{"changing": changing, "waiting": waiting, "behind": behind} {
			args := []any{s.timeArg(time.Now()), 10}
			if byNode {
				args = append(args, nodes[0])
			}
			plan := explain(t, s, query, args...)
			text := strings.Join(plan, "; ")
			for _, step := range plan {
				// Walking the partial index of pending changes reads only
				// the subscriptions that have one.
				if strings.HasPrefix(step, "SCAN s") && step != "SCAN s USING INDEX subscriptions_changing" {
					t.Errorf("%s claim (by node %v) scans subscriptions: %s", name, byNode, text)
				}
				// Nodes are read by key only: a hub may follow a million
				// sources, each a node, with few subscriptions.
				if strings.HasPrefix(step, "SCAN n") {
					t.Errorf("%s claim (by node %v) scans the nodes: %s", name, byNode, text)
				}
				// The claim of every node stops after its limit, unsorted.
				if name == "behind" && strings.Contains(step, "TEMP B-TREE") {
					t.Errorf("%s claim (by node %v) sorts: %s", name, byNode, text)
				}
			}
			wantIndex := map[string]string{
				"changing": "USING INDEX subscriptions_changing",
				"waiting":  "USING INDEX subscriptions_",
				"behind":   "USING INDEX subscriptions_behind (node_id=? AND state=? AND cursor_seq<?)",
			}[name]
			// The nodes with HTTP subscriptions come from their partial
			// index, without the XMPP subscriptions.
			if name == "behind" && !byNode && !strings.Contains(text, "INDEX subscriptions_behind (node_id>?)") {
				t.Errorf("%s claim (by node %v) does not seek the next node in subscriptions_behind: %s", name, byNode, text)
			}
			if !strings.Contains(text, wantIndex) {
				t.Errorf("%s claim (by node %v) does not use %q: %s", name, byNode, wantIndex, text)
			}
			t.Logf("%s (by node %v): %s", name, byNode, text)
		}
	}
}

// TestDueDigestsUseIndex: the due digests are found through the index of
// due times, not by reading every subscription or every XMPP state.
func TestDueDigestsUseIndex(t *testing.T) {
	s, _ := openTestSQLite(t, Options{})
	text := strings.Join(explain(t, s, `SELECT `+subColumns+subsFrom+` `+dueDigestsWhere, s.timeArg(time.Now()), 10), "; ")
	if !strings.Contains(text, "USING INDEX xmpp_subscription_state_digests") || strings.Contains(text, "SCAN s") {
		t.Errorf("plan: %s", text)
	}
	t.Log(text)
}

func TestClaimDueSourcesUsesIndex(t *testing.T) {
	s, _ := openTestSQLite(t, Options{})
	text := strings.Join(explain(t, s, s.claimSourcesSQL(), s.timeArg(time.Now()), 10), "; ")
	if !strings.Contains(text, "SEARCH s USING INDEX sources_due (") || !strings.Contains(text, "nodes_source") {
		t.Errorf("plan: %s", text)
	}
	t.Log(text)
}

// TestSourcesLeasedUseIndex: a start's look for the sources left leased
// reads the partial index of leased sources, not every source.
func TestSourcesLeasedUseIndex(t *testing.T) {
	s, _ := openTestSQLite(t, Options{})
	for name, q := range map[string]struct {
		where string
		args  []any
	}{
		"SourcesLeasedByOthers": {sourcesLeasedByOthersWhere, []any{s.timeArg(time.Now()), "me"}},
		"SourcesLeasedBy":       {sourcesLeasedByWhere, []any{"me"}},
	} {
		plan := explain(t, s, `SELECT `+sourceColumns+` FROM sources s `+q.where, q.args...)
		text := strings.Join(plan, "; ")
		// Walking the partial index (SCAN s USING INDEX) reads the leased
		// sources alone.
		if !strings.Contains(text, "USING INDEX sources_leased") || slices.Contains(plan, "SCAN s") {
			t.Errorf("%s plan: %s", name, text)
		}
		t.Logf("%s: %s", name, text)
	}
}

// explain returns the steps of SQLite's plan for query.
func explain(t *testing.T, s *sqlStore, query string, args ...any) []string {
	t.Helper()
	var plan []string
	err := s.query(context.Background(), s.read, "EXPLAIN QUERY PLAN "+query, args, func(r *sql.Rows) error {
		var id, parent, unused int
		var detail string
		if err := r.Scan(&id, &parent, &unused, &detail); err != nil {
			return err
		}
		plan = append(plan, detail)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// explainPostgres returns PostgreSQL's plan for query, a line a step.
func explainPostgres(t *testing.T, s *sqlStore, query string, args ...any) string {
	t.Helper()
	var plan []string
	err := s.query(context.Background(), s.read, "EXPLAIN "+query, args, func(r *sql.Rows) error {
		var line string
		if err := r.Scan(&line); err != nil {
			return err
		}
		plan = append(plan, strings.TrimSpace(line))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}
