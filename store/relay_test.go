package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// The relay queue, on both backends.
func TestRelays(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testRelays(t, openSQLite(t)) })
	t.Run("postgres", func(t *testing.T) {
		testenv.SkipWithoutPostgres(t)
		testRelays(t, openPostgres(t))
	})
}

func testRelays(t *testing.T, s store.Store) {
	defer s.Close()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	const target = "get:http://127.0.0.1:9/ping?url={url}"
	enqueue := func(u string, at time.Time) bool {
		t.Helper()
		ok, err := s.EnqueueRelay(ctx, &hub.Relay{Target: target, URL: u, Name: "n", Tags: []string{"x", "y"}, CreatedAt: at}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !enqueue("http://a.example/", now) || enqueue("http://a.example/", now.Add(30*time.Second)) {
		t.Fatal("the second relay of a URL within a minute was not refused (or the first was)")
	}
	if !enqueue("http://a.example/", now.Add(61*time.Second)) || !enqueue("http://b.example/", now) {
		t.Fatal("a relay after the minute, or of another URL, was refused")
	}
	claimed, err := s.ClaimRelays(ctx, now.Add(2*time.Minute), 10, "me", now.Add(3*time.Minute))
	if err != nil || len(claimed) != 3 || claimed[0].State != hub.RelayPending || len(claimed[0].Tags) != 2 {
		t.Fatalf("claim: %+v, %v", claimed, err)
	}
	if again, _ := s.ClaimRelays(ctx, now.Add(2*time.Minute), 10, "other", now.Add(3*time.Minute)); len(again) != 0 {
		t.Fatalf("leased relays claimed again: %+v", again)
	}
	// A finish by anyone but the lease's holder (one whose lease ran out)
	// records nothing.
	stale := claimed[0]
	stale.LeaseOwner, stale.State, stale.LastError = "other", hub.RelayFailed, "late"
	if err := s.FinishRelay(ctx, &stale); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.ClaimRelays(ctx, now.Add(2*time.Minute), 10, "other", now.Add(3*time.Minute)); len(again) != 0 {
		t.Fatalf("a finish by another owner released the lease: %+v", again)
	}
	claimed[0].State, claimed[0].SentAt, claimed[0].Attempts = hub.RelaySent, now, 1
	claimed[1].State, claimed[1].LastError, claimed[1].Attempts, claimed[1].NextAttemptAt = hub.RelayPending, "HTTP 503", 1, now.Add(5*time.Minute)
	claimed[2].State, claimed[2].LastError, claimed[2].Attempts = hub.RelayFailed, "HTTP 404", 1
	for i := range claimed {
		if err := s.FinishRelay(ctx, &claimed[i]); err != nil {
			t.Fatal(err)
		}
	}
	if due, _ := s.ClaimRelays(ctx, now.Add(4*time.Minute), 10, "me", now.Add(5*time.Minute)); len(due) != 0 {
		t.Fatalf("a retry was claimed before its time: %+v", due)
	}
	if due, _ := s.ClaimRelays(ctx, now.Add(6*time.Minute), 10, "me", now.Add(7*time.Minute)); len(due) != 1 || due[0].LastError != "HTTP 503" {
		t.Fatalf("the retry: %+v", due)
	}
	st, err := s.RelayStatus(ctx)
	if err != nil || len(st) != 1 || st[0].Sent != 1 || st[0].Pending != 1 || st[0].Failed != 1 || st[0].LastSentAt.IsZero() || st[0].LastError == "" {
		t.Fatalf("status %+v, %v", st, err)
	}
	if err := s.PruneRelays(ctx, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.RelayStatus(ctx); len(st) != 1 || st[0].Sent+st[0].Failed != 0 || st[0].Pending != 1 {
		t.Fatalf("after pruning: %+v", st)
	}
}
