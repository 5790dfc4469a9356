package feed

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pingd/pingd/hub"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestSchedulerNext(t *testing.T) {
	// 2024-03-13 is a Wednesday.
	wed10 := at("2024-03-13T10:00:00Z")
	fetchErr := &hub.FetchError{URL: "http://e.org/", Status: 500, Err: errors.New("boom")}
	tests := []struct {
		name       string
		now        time.Time
		state      hub.SourceState
		res        *hub.FetchResult
		err        error
		want       time.Time
		wantReason string
	}{
		{"no hints", wed10, hub.SourceState{}, &hub.FetchResult{}, nil, wed10.Add(time.Hour), ReasonDefault},
		{"ttl", wed10, hub.SourceState{Hints: hub.PollHints{TTL: 2 * time.Hour}}, nil, nil, wed10.Add(2 * time.Hour), ReasonTTL},
		{"ttl from the result", wed10, hub.SourceState{}, &hub.FetchResult{IsFeed: true, Hints: hub.PollHints{TTL: 3 * time.Hour}}, nil, wed10.Add(3 * time.Hour), ReasonTTL},
		{"ttl below the minimum", wed10, hub.SourceState{Hints: hub.PollHints{TTL: time.Minute}}, nil, nil, wed10.Add(5 * time.Minute), ReasonMinInterval},
		{"ttl above the maximum", wed10, hub.SourceState{Hints: hub.PollHints{TTL: 48 * time.Hour}}, nil, nil, wed10.Add(24 * time.Hour), ReasonMaxInterval},
		{"sy hourly twice", wed10, hub.SourceState{Hints: hub.PollHints{UpdatePeriod: "hourly", UpdateFrequency: 2}}, nil, nil, wed10.Add(30 * time.Minute), ReasonSy},
		{"sy weekly", wed10, hub.SourceState{Hints: hub.PollHints{UpdatePeriod: "weekly", UpdateFrequency: 14}}, nil, nil, wed10.Add(12 * time.Hour), ReasonSy},
		{"sy longer than ttl wins", wed10, hub.SourceState{Hints: hub.PollHints{TTL: time.Hour, UpdatePeriod: "daily", UpdateFrequency: 8}}, nil, nil, wed10.Add(3 * time.Hour), ReasonSy},
		{"ttl longer than sy wins", wed10, hub.SourceState{Hints: hub.PollHints{TTL: 4 * time.Hour, UpdatePeriod: "daily", UpdateFrequency: 8}}, nil, nil, wed10.Add(4 * time.Hour), ReasonTTL},
		{"sy updateBase aligns to the next slot", wed10, hub.SourceState{Hints: hub.PollHints{UpdatePeriod: "daily", UpdateFrequency: 4, UpdateBase: at("2000-01-01T12:00:00Z")}}, nil, nil, at("2024-03-13T12:00:00Z"), ReasonSy},
		{"sy updateBase slot too close", at("2024-03-13T11:58:00Z"), hub.SourceState{Hints: hub.PollHints{UpdatePeriod: "daily", UpdateFrequency: 4, UpdateBase: at("2000-01-01T12:00:00Z")}}, nil, nil, at("2024-03-13T18:00:00Z"), ReasonSy},
		{"sy updateBase in the future", wed10, hub.SourceState{Hints: hub.PollHints{UpdatePeriod: "hourly", UpdateFrequency: 1, UpdateBase: at("2030-01-01T00:30:00Z")}}, nil, nil, at("2024-03-13T10:30:00Z"), ReasonSy},
		{"max-age pushes later", wed10, hub.SourceState{Hints: hub.PollHints{MaxAge: 3 * time.Hour}}, nil, nil, wed10.Add(3 * time.Hour), ReasonMaxAge},
		{"short max-age does not speed up", wed10, hub.SourceState{Hints: hub.PollHints{MaxAge: 10 * time.Minute}}, nil, nil, wed10.Add(time.Hour), ReasonDefault},
		{"expires pushes later", wed10, hub.SourceState{Hints: hub.PollHints{Expires: wed10.Add(5 * time.Hour)}}, nil, nil, wed10.Add(5 * time.Hour), ReasonExpires},
		{"past expires ignored", wed10, hub.SourceState{Hints: hub.PollHints{Expires: wed10.Add(-time.Hour)}}, nil, nil, wed10.Add(time.Hour), ReasonDefault},
		{"retry-after beyond the maximum", wed10, hub.SourceState{Hints: hub.PollHints{RetryAfter: wed10.Add(30 * time.Hour)}}, nil, nil, wed10.Add(30 * time.Hour), ReasonRetryAfter},
		{"retry-after sooner changes nothing", wed10, hub.SourceState{Hints: hub.PollHints{RetryAfter: wed10.Add(10 * time.Minute)}}, nil, nil, wed10.Add(time.Hour), ReasonDefault},
		{"retry-after capped", wed10, hub.SourceState{Hints: hub.PollHints{RetryAfter: wed10.Add(100 * 24 * time.Hour)}}, nil, nil, wed10.Add(7 * 24 * time.Hour), ReasonRetryAfter},
		{"first error", wed10, hub.SourceState{ConsecutiveErrors: 1}, nil, fetchErr, wed10.Add(5 * time.Minute), ReasonErrorBackoff},
		{"third error", wed10, hub.SourceState{ConsecutiveErrors: 3}, nil, fetchErr, wed10.Add(20 * time.Minute), ReasonErrorBackoff},
		{"many errors capped", wed10, hub.SourceState{ConsecutiveErrors: 40}, nil, fetchErr, wed10.Add(24 * time.Hour), ReasonErrorBackoff},
		{"error ignores ttl", wed10, hub.SourceState{ConsecutiveErrors: 1, Hints: hub.PollHints{TTL: 6 * time.Hour}}, nil, fetchErr, wed10.Add(5 * time.Minute), ReasonErrorBackoff},
		{"error with retry-after", wed10, hub.SourceState{ConsecutiveErrors: 1}, nil,
			&hub.FetchError{URL: "http://e.org/", Status: 503, RetryAfter: wed10.Add(2 * time.Hour), Err: errors.New("busy")}, wed10.Add(2 * time.Hour), ReasonRetryAfter},
		{"one unchanged fetch", wed10, hub.SourceState{Unchanged: 1}, nil, nil, wed10.Add(time.Hour), ReasonDefault},
		{"repeated unchanged fetches slow down", wed10, hub.SourceState{Unchanged: 3}, nil, nil, wed10.Add(135 * time.Minute), ReasonUnchanged},
		{"unchanged backoff on ttl", wed10, hub.SourceState{Unchanged: 2, Hints: hub.PollHints{TTL: 2 * time.Hour}}, nil, nil, wed10.Add(3 * time.Hour), ReasonUnchanged},
		{"unchanged backoff capped", wed10, hub.SourceState{Unchanged: 100}, nil, nil, wed10.Add(24 * time.Hour), ReasonUnchanged},
		{"changed again: back to the base", wed10, hub.SourceState{Unchanged: 0, LastChangeAt: wed10}, nil, nil, wed10.Add(time.Hour), ReasonDefault},
		{"pinged source", wed10, hub.SourceState{LastPingAt: wed10.Add(-time.Hour)}, nil, nil, wed10.Add(12 * time.Hour), ReasonPinged},
		{"pinged long ago", wed10, hub.SourceState{LastPingAt: wed10.Add(-8 * 24 * time.Hour)}, nil, nil, wed10.Add(time.Hour), ReasonDefault},
		{"pinged with a longer ttl", wed10, hub.SourceState{LastPingAt: wed10.Add(-time.Hour), Hints: hub.PollHints{TTL: 20 * time.Hour}}, nil, nil, wed10.Add(20 * time.Hour), ReasonTTL},
		{"skipHours", wed10, hub.SourceState{Hints: hub.PollHints{SkipHours: []int{11, 12}}}, nil, nil, at("2024-03-13T13:00:00Z"), ReasonSkipHours},
		{"skipHours not hit", wed10, hub.SourceState{Hints: hub.PollHints{SkipHours: []int{3, 4}}}, nil, nil, wed10.Add(time.Hour), ReasonDefault},
		{"skipHours across midnight", at("2024-03-13T22:30:00Z"), hub.SourceState{Hints: hub.PollHints{SkipHours: []int{23, 0, 1}}}, nil, nil, at("2024-03-14T02:00:00Z"), ReasonSkipHours},
		{"skipHours from before midnight to the next day", at("2024-03-13T23:30:00Z"), hub.SourceState{Hints: hub.PollHints{SkipHours: []int{0, 1, 2, 3, 4, 5}}}, nil, nil, at("2024-03-14T06:00:00Z"), ReasonSkipHours},
		{"skipDays", at("2024-03-15T23:30:00Z"), hub.SourceState{Hints: hub.PollHints{SkipDays: []time.Weekday{time.Saturday, time.Sunday}}}, nil, nil, at("2024-03-18T00:00:00Z"), ReasonSkipDays},
		{"skipDays and skipHours", at("2024-03-15T23:30:00Z"), hub.SourceState{Hints: hub.PollHints{SkipDays: []time.Weekday{time.Saturday, time.Sunday}, SkipHours: []int{0, 1, 2, 3, 4, 5}}}, nil, nil, at("2024-03-18T06:00:00Z"), ReasonSkipDays},
		{"every hour skipped is ignored", wed10, hub.SourceState{Hints: hub.PollHints{SkipHours: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}}}, nil, nil, wed10.Add(time.Hour), ReasonDefault},
		{"every day skipped is ignored", wed10, hub.SourceState{Hints: hub.PollHints{SkipDays: []time.Weekday{0, 1, 2, 3, 4, 5, 6}}}, nil, nil, wed10.Add(time.Hour), ReasonDefault},
		{"retry-after into a skipped hour", wed10, hub.SourceState{Hints: hub.PollHints{RetryAfter: at("2024-03-13T14:10:00Z"), SkipHours: []int{14}}}, nil, nil, at("2024-03-13T15:00:00Z"), ReasonSkipHours},
		{"error backoff into a skipped day", at("2024-03-16T23:58:00Z"), hub.SourceState{ConsecutiveErrors: 1, Hints: hub.PollHints{SkipDays: []time.Weekday{time.Sunday}}}, nil, fetchErr, at("2024-03-18T00:00:00Z"), ReasonSkipDays},
	}
	s := NewScheduler(SchedulerConfig{Rand: func() float64 { return 0.5 }})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := s.Next(tt.now, &hub.Source{SourceState: tt.state}, tt.res, tt.err)
			if !got.Equal(tt.want) || reason != tt.wantReason {
				t.Errorf("Next = %s %q, want %s %q", got.Format(time.RFC3339), reason, tt.want.Format(time.RFC3339), tt.wantReason)
			}
		})
	}
}

func TestSchedulerJitter(t *testing.T) {
	now := at("2024-03-13T10:00:00Z")
	tests := []struct {
		r    float64
		ttl  time.Duration
		want time.Duration
	}{
		{0, time.Hour, 54 * time.Minute},
		{0.75, time.Hour, 63 * time.Minute},
		{0, 5 * time.Minute, 5 * time.Minute}, // jitter never goes below the minimum
		{0.5, time.Hour, time.Hour},
	}
	for _, tt := range tests {
		s := NewScheduler(SchedulerConfig{Rand: func() float64 { return tt.r }})
		got, _ := s.Next(now, &hub.Source{SourceState: hub.SourceState{Hints: hub.PollHints{TTL: tt.ttl}}}, nil, nil)
		if d := got.Sub(now); d != tt.want {
			t.Errorf("rand %v ttl %v: interval %v, want %v", tt.r, tt.ttl, d, tt.want)
		}
	}
}

func TestSchedulerDefaults(t *testing.T) {
	s := NewScheduler(SchedulerConfig{})
	if s.cfg.MinInterval != 5*time.Minute || s.cfg.DefaultInterval != time.Hour || s.cfg.MaxInterval != 24*time.Hour || s.cfg.PingedInterval != 12*time.Hour {
		t.Errorf("defaults %+v", s.cfg)
	}
}

// TestSchedulerNeverTooSoon draws random states and checks the one promise
// that must always hold: never sooner than MinInterval.
func TestSchedulerNeverTooSoon(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := NewScheduler(SchedulerConfig{Rand: rng.Float64})
	now := at("2024-03-13T10:00:00Z")
	for i := range 5000 {
		st := hub.SourceState{
			ConsecutiveErrors: rng.IntN(30),
			Unchanged:         rng.IntN(30),
			Hints: hub.PollHints{
				TTL:             time.Duration(rng.IntN(3000)) * time.Minute,
				MaxAge:          time.Duration(rng.IntN(100000)) * time.Second,
				UpdatePeriod:    []string{"", "hourly", "daily", "weekly", "monthly", "yearly"}[rng.IntN(6)],
				UpdateFrequency: rng.IntN(100),
				SkipHours:       []int{rng.IntN(30) - 3, rng.IntN(24)},
				SkipDays:        []time.Weekday{time.Weekday(rng.IntN(9) - 1)},
			},
		}
		if rng.IntN(2) == 0 {
			st.Hints.UpdateBase = now.Add(time.Duration(rng.Int64N(1<<50) - 1<<49))
		}
		if rng.IntN(3) == 0 {
			st.LastPingAt = now.Add(-time.Duration(rng.IntN(300)) * time.Hour)
		}
		var err error
		if st.ConsecutiveErrors > 20 {
			err = errors.New("x")
		}
		next, reason := s.Next(now, &hub.Source{SourceState: st}, nil, err)
		if next.Before(now.Add(5*time.Minute)) || reason == "" {
			t.Fatalf("case %d: %+v gave %v (%s), sooner than the minimum", i, st, next.Sub(now), reason)
		}
		if next.After(now.Add(9 * 24 * time.Hour)) {
			t.Fatalf("case %d: %+v gave %v (%s), later than the caps allow", i, st, next.Sub(now), reason)
		}
	}
}
