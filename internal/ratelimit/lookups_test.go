package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestLookups: a look-up is refused before any request when its key or
// the process runs its share already, or when the key's budget is spent;
// every request of a look-up takes a token, the first one's at Begin.
func TestLookups(t *testing.T) {
	l := NewLookups(LookupLimits{RequestsPerHour: 3600, Burst: 5, Concurrent: 3, PerKey: 2, Timeout: time.Minute})
	ctx := context.Background()

	a1, err := l.Begin(ctx, "a", true)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := l.Begin(ctx, "a", true)
	if err != nil {
		t.Fatal(err)
	}
	var refused *LookupRefused
	if _, err := l.Begin(ctx, "a", true); !errors.As(err, &refused) || !errors.Is(err, ErrLookupsBusy) || !refused.KeyBusy {
		t.Fatalf("a third look-up of one key: %v, want refused as busy for the key", err)
	}
	b1, err := l.Begin(ctx, "b", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Begin(ctx, "c", true); !errors.As(err, &refused) || !errors.Is(err, ErrLookupsBusy) || refused.KeyBusy {
		t.Fatalf("a fourth look-up in all: %v, want refused as busy for the process", err)
	}
	b1.End()
	b1.End() // ending twice frees one place only

	// a's budget: 5 tokens, two taken by the two Begins. The first
	// request of each look-up is prepaid.
	for i, lk := range []*Lookup{a1, a2, a1, a1, a2} {
		if err := Spend(lk.Context()); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	err = Spend(a1.Context())
	if !errors.As(err, &refused) || !errors.Is(err, ErrLookupBudget) || refused.RetryIn <= 0 {
		t.Fatalf("the sixth request of a: %v, want over the budget with a wait", err)
	}
	if got := a1.Requests() + a2.Requests(); got != 6 {
		t.Errorf("%d requests counted, want 6 (the refused one too)", got)
	}
	a1.End()
	a2.End()
	// Spent: a new look-up of a is refused before it makes any request.
	if _, err := l.Begin(ctx, "a", true); !errors.Is(err, ErrLookupBudget) {
		t.Fatalf("a look-up of a spent key: %v, want over the budget", err)
	}
	// Unmetered (an admin): no budget, the same concurrency.
	adm, err := l.Begin(ctx, "a", false)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := Spend(adm.Context()); err != nil {
			t.Fatalf("unmetered request: %v", err)
		}
	}
	adm.End()
	if adm.Context().Err() == nil {
		t.Error("the context of an ended look-up is still live")
	}
	// Outside a look-up, Spend allows.
	if err := Spend(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLookupTimeout(t *testing.T) {
	l := NewLookups(LookupLimits{Timeout: 20 * time.Millisecond})
	lk, err := l.Begin(context.Background(), "a", true)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.End()
	select {
	case <-lk.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the look-up's context did not end after its timeout")
	}
}
