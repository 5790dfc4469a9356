package testenv

import (
	"sync"
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := NewClock(t0)
	if !c.Now().Equal(t0) {
		t.Fatalf("Now = %v, want %v", c.Now(), t0)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { c.Advance(time.Minute) })
	}
	wg.Wait()
	if got := c.Advance(0); !got.Equal(t0.Add(10 * time.Minute)) {
		t.Errorf("after ten concurrent minutes: %v", got)
	}
	c.Set(t0)
	if !c.Now().Equal(t0) {
		t.Errorf("Set: %v", c.Now())
	}
}
