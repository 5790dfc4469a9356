package store

import (
	"context"
	"runtime"
	"syscall"
	"testing"
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
