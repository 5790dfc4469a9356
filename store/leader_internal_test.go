package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pingd/pingd/internal/testenv"
)

// The leader lock, on both backends: two holders are impossible, release
// and close free it, and on PostgreSQL the death of the holding session
// frees it and tells the holder.

func TestLeaderSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pingd.db")
	openTwo := func() (Store, Store) {
		a, err := Open(context.Background(), path, quietOptions())
		if err != nil {
			t.Fatal(err)
		}
		b, err := Open(context.Background(), path, quietOptions())
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
	a, b := openTwo()
	defer b.Close()
	testLeaderExclusive(t, a, b)

	// The message names the holder and the lock file.
	l, err := a.TryLeader(context.Background(), "serve")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.TryLeader(context.Background(), "serve")
	want := fmt.Sprintf("%s-serve.lock, held by pid %d since ", path, os.Getpid())
	if !errors.Is(err, ErrLeaderHeld) || !strings.Contains(err.Error(), want) {
		t.Fatalf("second holder: %v, want ErrLeaderHeld naming %q", err, want)
	}
	// Closing the store releases what it holds.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	default:
		t.Fatal("Lost() still open after the store was closed")
	}
	l2, err := b.TryLeader(context.Background(), "serve")
	if err != nil {
		t.Fatalf("after the holder's store closed: %v", err)
	}
	l2.Release()
}

func TestLeaderPostgres(t *testing.T) {
	dsn := testenv.PostgresURL(t)
	open := func() Store {
		s, err := Open(context.Background(), dsn, quietOptions())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	testLeaderExclusive(t, a, b)

	// Another schema is another installation: its lock of the same name
	// is its own.
	other, err := Open(context.Background(), testenv.PostgresURL(t), quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	la, err := a.TryLeader(context.Background(), "xmpp")
	if err != nil {
		t.Fatal(err)
	}
	lo, err := other.TryLeader(context.Background(), "xmpp")
	if err != nil {
		t.Fatalf("a lock in another schema: %v", err)
	}
	lo.Release()

	// A standby asking again and again keeps one session for it. The
	// count is the cluster's, which other tests' pingd processes share (a
	// schema each), so what is checked is that ten more attempts add no
	// session of their own: a session kept per attempt would add ten.
	leaderSessions := func() int {
		var n int
		if err := a.(*sqlStore).queryRow(context.Background(), a.(*sqlStore).read, `SELECT COUNT(*) FROM pg_stat_activity
			WHERE application_name = 'pingd leader xmpp'`, nil, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := b.TryLeader(context.Background(), "xmpp"); !errors.Is(err, ErrLeaderHeld) {
		t.Fatalf("standby: %v", err)
	}
	before := leaderSessions()
	for range 10 {
		if _, err := b.TryLeader(context.Background(), "xmpp"); !errors.Is(err, ErrLeaderHeld) {
			t.Fatalf("standby: %v", err)
		}
	}
	if added := leaderSessions() - before; added > 2 {
		t.Fatalf("%d more leader sessions after ten more attempts of a standby, want none (two allowed for other tests)", added)
	}

	// The holder's session dies: the lock is free for b at once, and a
	// learns it lost the lock within seconds.
	terminateLeaderSession(t, a.(*sqlStore), "xmpp")
	testenv.WaitFor(t, 10*time.Second, "b to take the lock of a dead session", func() bool {
		lb, err := b.TryLeader(context.Background(), "xmpp")
		if err != nil {
			return false
		}
		t.Cleanup(lb.Release)
		return true
	})
	select {
	case <-la.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("the holder was not told that its session died")
	}
	la.Release() // after a loss, Release must not fail or hang
	if _, err := a.TryLeader(context.Background(), "xmpp"); !errors.Is(err, ErrLeaderHeld) {
		t.Fatalf("a took the lock b holds: %v", err)
	}
}

// testLeaderExclusive checks the rules every backend keeps.
func testLeaderExclusive(t *testing.T, a, b Store) {
	t.Helper()
	ctx := context.Background()
	if _, err := a.TryLeader(ctx, ""); err == nil {
		t.Fatal("an empty lock name was accepted")
	}
	if _, err := a.TryLeader(ctx, "two words"); err == nil {
		t.Fatal("a lock name with a space was accepted")
	}
	la, err := a.TryLeader(ctx, "component")
	if err != nil {
		t.Fatal(err)
	}
	if la.Name() != "component" {
		t.Fatalf("Name() = %q", la.Name())
	}
	if _, err := b.TryLeader(ctx, "component"); !errors.Is(err, ErrLeaderHeld) {
		t.Fatalf("a second holder: %v, want ErrLeaderHeld", err)
	}
	// The holder itself cannot take it twice either.
	if _, err := a.TryLeader(ctx, "component"); !errors.Is(err, ErrLeaderHeld) {
		t.Fatalf("the holder took it again: %v, want ErrLeaderHeld", err)
	}
	// Other names are other locks.
	lo, err := b.TryLeader(ctx, "other")
	if err != nil {
		t.Fatalf("another name: %v", err)
	}
	lo.Release()
	// A lock held for a while stays held: on PostgreSQL, whose holder
	// checks its session every second, two checks pass without a loss.
	if a.(*sqlStore).backend == backendPostgres {
		testenv.WaitFor(t, 10*time.Second, "two checks of the holder's session, or its loss", func() bool {
			select {
			case <-la.Lost():
				return true
			default:
				return la.vouched.Load() >= 2
			}
		})
	}
	select {
	case <-la.Lost():
		t.Fatal("the lock was lost while its holder lived")
	default:
	}
	if _, err := b.TryLeader(ctx, "component"); !errors.Is(err, ErrLeaderHeld) {
		t.Fatalf("a second holder after a while: %v", err)
	}
	la.Release()
	la.Release() // twice is harmless
	select {
	case <-la.Lost():
	default:
		t.Fatal("Lost() still open after Release")
	}
	lb, err := b.TryLeader(ctx, "component")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	if _, err := a.TryLeader(ctx, "component"); !errors.Is(err, ErrLeaderHeld) {
		t.Fatalf("after b took it: %v", err)
	}
	lb.Release()
}

// terminateLeaderSession ends the server process of the session that
// holds s's lock of that name, as a crash of the holder's host would.
func terminateLeaderSession(t *testing.T, s *sqlStore, name string) {
	t.Helper()
	ctx := context.Background()
	var schema string
	if err := s.queryRow(ctx, s.read, `SELECT current_schema()`, nil, &schema); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, s.pgConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var terminated int
	err = conn.QueryRow(ctx, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory'
		AND classid = $1 AND objid = $2 AND objsubid = 2 AND granted`,
		uint32(leaderLockClass), uint32(leaderKey(schema, name))).Scan(&terminated)
	if err != nil {
		t.Fatal(err)
	}
	if terminated != 1 {
		t.Fatalf("terminated %d sessions holding %q, want 1", terminated, name)
	}
}

func TestSQLiteLockPath(t *testing.T) {
	for name, want := range map[string]string{
		"serve":                 "/d/pingd.db-serve.lock",
		"xmpp:pubsub.localhost": "/d/pingd.db-xmpp_pubsub.localhost.lock",
		"a/b":                   "/d/pingd.db-a_b.lock",
	} {
		if got := sqliteLockPath("/d/pingd.db", name); got != want {
			t.Errorf("sqliteLockPath(%q) = %q, want %q", name, got, want)
		}
	}
}
