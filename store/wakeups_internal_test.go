package store

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pingd/pingd/internal/testenv"
)

// received collects what a Wakeups hands to its process.
type received struct {
	mu  sync.Mutex
	ids []int64
}

func (r *received) add(id int64) {
	r.mu.Lock()
	r.ids = append(r.ids, id)
	r.mu.Unlock()
}

func (r *received) snapshot() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ids)
}

func (r *received) has(id int64) bool { return slices.Contains(r.snapshot(), id) }

func (r *received) count(id int64) int {
	n := 0
	for _, x := range r.snapshot() {
		if x == id {
			n++
		}
	}
	return n
}

func runWakeups(t *testing.T, s Store) (*Wakeups, *received) {
	t.Helper()
	w := s.Wakeups()
	r := &received{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, r.add) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	return w, r
}

func TestWakeupsPostgres(t *testing.T) {
	dsn := testenv.PostgresURL(t)
	open := func(dsn string) Store {
		s, err := Open(context.Background(), dsn, quietOptions())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(dsn), open(dsn)
	otherDSN := testenv.PostgresURL(t)
	other, otherPeer := open(otherDSN), open(otherDSN)
	wa, ra := runWakeups(t, a)
	wb, rb := runWakeups(t, b)
	_, ro := runWakeups(t, other)
	wp, rp := runWakeups(t, otherPeer)
	// Each listens once it has said "look at everything".
	for _, r := range []*received{ra, rb, ro, rp} {
		testenv.WaitFor(t, 10*time.Second, "the listening sessions", func() bool { return r.has(0) })
	}

	wa.Wake(7)
	wa.Wake(8)
	testenv.WaitFor(t, 5*time.Second, "b to hear of nodes 7 and 8", func() bool { return rb.has(7) && rb.has(8) })
	wa.Wake(0)
	testenv.WaitFor(t, 5*time.Second, "b to hear of every node", func() bool { return rb.count(0) == 2 })
	// Many at once are split into payloads PostgreSQL takes.
	for id := int64(1000); id < 3000; id++ {
		wa.Wake(id)
	}
	testenv.WaitFor(t, 5*time.Second, "b to hear of 2000 nodes", func() bool {
		for id := int64(1000); id < 3000; id++ {
			if !rb.has(id) {
				return false
			}
		}
		return true
	})
	// What a and the other schema did not hear: PostgreSQL hands every
	// listener the notifications in the order they were committed, so once
	// each has heard one sent after all of a's (b heard those, so they
	// were committed), it has been handed a's and ignored them.
	wb.Wake(4000)
	wp.Wake(4001)
	testenv.WaitFor(t, 5*time.Second, "a to hear b's later announcement", func() bool { return ra.has(4000) })
	testenv.WaitFor(t, 5*time.Second, "the other schema to hear its peer's later announcement", func() bool { return ro.has(4001) })
	if got := ra.snapshot(); !slices.Equal(got, []int64{0, 4000}) {
		t.Fatalf("a heard %d nodes, first %v, want only its own start (0) and b's 4000: a process ignores its own announcements", len(got), got[:min(len(got), 10)])
	}
	if got := ro.snapshot(); !slices.Equal(got, []int64{0, 4001}) {
		t.Fatalf("another schema heard %d nodes, first %v, want only its start (0) and its peer's 4001: installations must not wake each other", len(got), got[:min(len(got), 10)])
	}

	// b's listening session dies: b listens again, says "look at
	// everything" for what it may have missed, and hears a again.
	before := rb.count(0)
	conn, err := pgx.ConnectConfig(context.Background(), b.(*sqlStore).pgConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1`, "pingd wake-ups "+wb.origin).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminated %d listening sessions of b (%v), want 1", n, err)
	}
	testenv.WaitFor(t, 10*time.Second, "b to listen again", func() bool { return rb.count(0) == before+1 })
	wa.Wake(99)
	testenv.WaitFor(t, 5*time.Second, "b to hear of node 99 after listening again", func() bool { return rb.has(99) })
}

func TestWakeupsSQLite(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "pingd.db"), quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := s.Wakeups()
	w.Wake(1) // nothing to announce to, and no growing backlog
	if len(w.pending) != 0 || w.all {
		t.Fatal("an SQLite Wakeups kept an announcement")
	}
	if err := w.Run(context.Background(), func(int64) { t.Error("SQLite delivered a wake-up") }); err != nil {
		t.Fatal(err)
	}
}

func TestWakeupPayloads(t *testing.T) {
	if got := wakeupPayloads("o", true, []int64{1, 2}); !slices.Equal(got, []string{"o *"}) {
		t.Fatalf("all: %q", got)
	}
	if got := wakeupPayloads("o", false, []int64{3, 1, 2}); !slices.Equal(got, []string{"o 1,2,3"}) {
		t.Fatalf("three: %q", got)
	}
	if got := wakeupPayloads("o", false, nil); len(got) != 0 {
		t.Fatalf("none: %q", got)
	}
	var ids []int64
	for i := range 5000 {
		ids = append(ids, int64(1e12+i))
	}
	payloads := wakeupPayloads("origin", false, slices.Clone(ids))
	if len(payloads) < 2 {
		t.Fatalf("5000 long ids in %d payload(s)", len(payloads))
	}
	var back []int64
	for _, p := range payloads {
		if len(p) > maxWakeupPayload {
			t.Fatalf("payload of %d bytes", len(p))
		}
		origin, all, got, err := parseWakeup(p)
		if err != nil || origin != "origin" || all {
			t.Fatalf("parse %q…: %v %q %v", p[:20], err, origin, all)
		}
		back = append(back, got...)
	}
	if !slices.Equal(back, ids) {
		t.Fatal("ids did not survive the split")
	}
	for _, bad := range []string{"", "o", "o ", " 1", "o 1,,2", "o 0", "o -1", "o x", "o 1 2", strings.Repeat("9", 9000)} {
		if _, _, _, err := parseWakeup(bad); err == nil {
			t.Errorf("parseWakeup(%q) accepted", bad)
		}
	}
}

// FuzzParseWakeup: payloads come from other processes; whatever arrives is
// either refused or read back the same after writing it again.
func FuzzParseWakeup(f *testing.F) {
	for _, s := range []string{"abc 1,2,3", "abc *", "abc", "abc 9223372036854775807", "abc 1,-2", " *"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		origin, all, ids, err := parseWakeup(payload)
		if err != nil {
			return
		}
		if origin == "" || strings.Contains(origin, " ") {
			t.Fatalf("origin %q from %q", origin, payload)
		}
		for _, id := range ids {
			if id <= 0 {
				t.Fatalf("node id %d from %q", id, payload)
			}
		}
		var again []int64
		for _, p := range wakeupPayloads(origin, all, slices.Clone(ids)) {
			o2, all2, ids2, err := parseWakeup(p)
			if err != nil || o2 != origin || all2 != all {
				t.Fatalf("%q re-encoded as %q: %v", payload, p, err)
			}
			again = append(again, ids2...)
		}
		want := slices.Clone(ids)
		slices.Sort(want)
		if !all && !slices.Equal(again, want) {
			t.Fatalf("%q: ids %v came back as %v", payload, want, again)
		}
	})
}
