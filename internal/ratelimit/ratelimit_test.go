package ratelimit

import (
	"testing"
	"time"
)

func TestKeyed(t *testing.T) {
	l := New(1, 3)
	now := time.Unix(1_700_000_000, 0)
	for i := range 3 {
		if ok, _ := l.Allow("a", now); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, wait := l.Allow("a", now)
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("over the burst: ok %v wait %v, want refused with a wait of at most 1s", ok, wait)
	}
	if ok, _ := l.Allow("b", now); !ok {
		t.Fatal("another key shares the bucket")
	}
	// A refused request takes no token: one second later one is back.
	if ok, _ := l.Allow("a", now.Add(time.Second)); !ok {
		t.Fatal("no token after one second")
	}
	// Idle buckets are dropped once full again.
	later := now.Add(time.Hour)
	l.Allow("c", later)
	l.mu.Lock()
	n := len(l.buckets)
	l.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d buckets after an hour idle, want only the new one", n)
	}
}

func TestKeyedAllowN(t *testing.T) {
	l := New(1, 10)
	now := time.Unix(1_700_000_000, 0)
	if ok, _ := l.AllowN("a", now, 8); !ok {
		t.Fatal("8 of a burst of 10 refused")
	}
	ok, wait := l.AllowN("a", now, 3)
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("3 with 2 left: ok %v wait %v, want refused with a wait of at most 1s", ok, wait)
	}
	if ok, _ := l.AllowN("a", now, 2); !ok {
		t.Fatal("the 2 left refused: a refusal took tokens")
	}
	// More than the burst takes the whole burst, once it is full.
	if ok, _ := l.AllowN("b", now, 50); !ok {
		t.Fatal("50 from a full bucket of 10 refused")
	}
	if ok, _ := l.Allow("b", now); ok {
		t.Fatal("a token left after taking more than the burst")
	}
}

func TestRetryAfter(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1", time.Millisecond: "1", time.Second: "1", 1500 * time.Millisecond: "2", 10 * time.Second: "10"} {
		if got := RetryAfter(d); got != want {
			t.Errorf("RetryAfter(%v) = %q, want %q", d, got, want)
		}
	}
}
