package testenv

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds and fails the test after timeout,
// naming what it waited for. The timeout is meant to catch a hang, not a
// slow machine, so callers pass a generous one. Polling starts every few
// milliseconds and backs off to 50 ms, so short waits stay short and long
// ones (a daemon starting, a fetch over HTTP) do not spin.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := 2 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}
