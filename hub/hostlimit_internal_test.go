package hub

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestHostLimiterBoundsAndForgets(t *testing.T) {
	l := newHostLimiter(2)
	ctx := context.Background()
	r1 := l.acquire(ctx, "a.example")
	r2 := l.acquire(ctx, "a.example")
	if r1 == nil || r2 == nil {
		t.Fatal("the first two acquisitions must succeed")
	}
	// A third waits until one is released.
	got := make(chan func(), 1)
	go func() { got <- l.acquire(ctx, "a.example") }()
	select {
	case <-got:
		t.Fatal("a third slot was granted while two were held")
	case <-time.After(50 * time.Millisecond):
	}
	r1()
	r3 := <-got
	if r3 == nil {
		t.Fatal("the waiter did not get the released slot")
	}
	// A waiter whose context ends gets nil and leaves no trace.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if r := l.acquire(cctx, "b.example"); r != nil {
		// b.example has free slots, so acquisition may win the race with
		// the cancelled context; release it then.
		r()
	}
	r2()
	r3()
	if n := l.hosts(); n != 0 {
		t.Fatalf("%d hosts remembered after all work ended, want 0", n)
	}
	for i := range 1000 {
		l.acquire(ctx, fmt.Sprintf("h%d.example", i))()
	}
	if n := l.hosts(); n != 0 {
		t.Fatalf("%d hosts remembered after 1000 short jobs, want 0", n)
	}
}
