package store

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestLoneTransactionRunsOnItsCaller: with the connection idle and
// nothing queued, a transaction runs on its caller's goroutine instead of
// being handed to the committer's and back (two goroutine wake-ups per
// lone ping or claim). The caller is locked to its thread, which runs no
// other goroutine, so the thread tells where the transaction ran.
func TestLoneTransactionRunsOnItsCaller(t *testing.T) {
	s, _ := openTestSQLite(t, Options{})
	ctx := context.Background()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	caller := syscall.Gettid()
	for range 3 {
		ranOn := 0
		if err := s.inTx(ctx, func(tx *txn) error {
			ranOn = syscall.Gettid()
			_, err := s.exec(ctx, tx, `UPDATE counters SET value = value WHERE name = 'pings'`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if ranOn != caller {
			t.Fatalf("a lone transaction ran on thread %d, its caller is on %d", ranOn, caller)
		}
	}
}

// TestContendedWritersQueueForTheCommitter: for a moment after a writer
// found the connection busy, a transaction goes to the committer, which
// may wait for company, instead of running alone on its caller; once
// writers stop colliding, it runs on its caller again.
func TestContendedWritersQueueForTheCommitter(t *testing.T) {
	s, _ := openTestSQLite(t, Options{})
	ctx := context.Background()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	caller := syscall.Gettid()
	ranOn := func() int {
		t.Helper()
		tid := 0
		if err := s.inTx(ctx, func(tx *txn) error {
			tid = syscall.Gettid()
			_, err := s.exec(ctx, tx, `UPDATE counters SET value = value WHERE name = 'pings'`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return tid
	}
	// A writer that collides with one holding the connection marks the
	// contention.
	release := holdWriter(t, s)
	before := time.Now().UnixNano()
	collided := make(chan error, 1)
	go func() { collided <- s.inTx(ctx, func(*txn) error { return nil }) }()
	waitQueued(t, s, 1)
	release()
	if err := <-collided; err != nil {
		t.Fatal(err)
	}
	if at := s.group.contended.Load(); at < before {
		t.Fatalf("a collision at %d or later was not marked (mark %d)", before, at)
	}
	// Within contendedFor of it, a transaction goes to the committer.
	s.group.contended.Store(time.Now().UnixNano())
	if tid := ranOn(); tid == caller {
		t.Errorf("right after a collision a transaction ran alone on its caller's thread %d", caller)
	}
	// Long after it: alone again.
	s.group.contended.Store(time.Now().Add(-2 * contendedFor).UnixNano())
	if tid := ranOn(); tid != caller {
		t.Errorf("with no collision for %v a transaction ran on thread %d, its caller is on %d", 2*contendedFor, tid, caller)
	}
}
