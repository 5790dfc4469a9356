package reconnect

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestLoopBacksOffAndResets: failures in a row wait longer and longer, up
// to Max and never more; a session that stayed up StableAfter starts the
// waits from Min again; each wait is Min's or the previous one's ±50%.
// It runs on the fake time of a synctest bubble, so the waits and the
// session that stays up take no real time and StableAfter is met exactly.
func TestLoopBacksOffAndResets(t *testing.T) {
	synctest.Test(t, testLoopBacksOffAndResets)
}

func testLoopBacksOffAndResets(t *testing.T) {
	p := Policy{Min: time.Second, Max: 16 * time.Second, StableAfter: 5 * time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waits []time.Duration
	sessions := 0
	const failures = 8
	Loop(ctx, p, func(context.Context) bool {
		sessions++
		if sessions == failures+1 {
			time.Sleep(p.StableAfter) // up, and just long enough (fake time)
			return true
		}
		if sessions == failures+2 {
			cancel()
		}
		return false
	}, func(wait time.Duration) { waits = append(waits, wait) })

	if sessions != failures+2 {
		t.Fatalf("%d sessions, want %d", sessions, failures+2)
	}
	if len(waits) != failures+1 {
		t.Fatalf("%d waits, want %d (none after the session that ended with ctx): %v", len(waits), failures+1, waits)
	}
	for i, w := range waits {
		if w > p.Max || w < p.Min/2 {
			t.Errorf("wait %d is %v, outside [Min/2, Max]", i, w)
		}
	}
	if first := waits[0]; first > 3*p.Min/2 {
		t.Errorf("first wait %v, want at most 1.5×Min", first)
	}
	if late := waits[failures-1]; late < p.Max/2 {
		t.Errorf("wait after %d failures in a row is %v, want near Max %v", failures, late, p.Max)
	}
	if reset := waits[failures]; reset > 3*p.Min/2 {
		t.Errorf("wait after a stable session is %v, want it from Min again", reset)
	}
}

// TestLoopShortSessionDoesNotReset: a session that got up but went down
// before StableAfter keeps the backoff growing (a server that accepts and
// drops at once is not hammered).
func TestLoopShortSessionDoesNotReset(t *testing.T) {
	p := Policy{Min: time.Millisecond, Max: 64 * time.Millisecond, StableAfter: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waits []time.Duration
	Loop(ctx, p, func(context.Context) bool { return true }, func(wait time.Duration) {
		waits = append(waits, wait)
		if len(waits) == 6 {
			cancel()
		}
	})
	if len(waits) != 6 || waits[5] < 8*p.Min {
		t.Errorf("waits %v: want them growing past 8×Min by the sixth", waits)
	}
}

// TestLoopStopsWhileWaiting: Loop returns when ctx ends during a wait,
// without running the session again.
func TestLoopStopsWhileWaiting(t *testing.T) {
	p := Policy{Min: time.Hour, Max: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	sessions := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Loop(ctx, p, func(context.Context) bool { sessions++; return false }, func(time.Duration) { cancel() })
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Loop did not return after ctx ended during its wait")
	}
	if sessions != 1 {
		t.Errorf("%d sessions, want 1", sessions)
	}
}
