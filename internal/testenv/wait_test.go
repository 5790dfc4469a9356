package testenv

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatalf instead of stopping the
// test, so WaitFor's failure path can be checked.
type recorder struct {
	testing.TB
	failed atomic.Bool
	msg    string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed.Store(true)
	r.msg = fmt.Sprintf(format, args...)
}

func TestWaitForReturnsOnceConditionHolds(t *testing.T) {
	var calls atomic.Int32
	r := &recorder{TB: t}
	WaitFor(r, 10*time.Second, "the third call", func() bool { return calls.Add(1) >= 3 })
	if r.failed.Load() {
		t.Fatalf("WaitFor failed although the condition came to hold: %s", r.msg)
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("condition called %d times, want 3 (it must stop once true)", got)
	}
}

func TestWaitForFailsAfterTimeoutNamingWhat(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	WaitFor(r, 30*time.Millisecond, "a thing that never happens", func() bool { return r.failed.Load() })
	if !r.failed.Load() {
		t.Fatal("WaitFor did not fail on a condition that never held")
	}
	if !strings.Contains(r.msg, "a thing that never happens") {
		t.Errorf("failure message %q does not name what was awaited", r.msg)
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Errorf("WaitFor gave up before its timeout")
	}
}
