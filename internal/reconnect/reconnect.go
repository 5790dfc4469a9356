package reconnect

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Policy is how long Loop waits between two sessions.
type Policy struct {
	// Min is the first wait after a failure; each failure in a row doubles
	// it, up to Max. Every wait is spread by ±50% and never exceeds Max.
	Min, Max time.Duration
	// StableAfter is how long a session must have been up for the next
	// wait to start from Min again.
	StableAfter time.Duration
}

// Backoff returns the policy's exponential backoff, for callers that retry
// one operation (backoff.Retry) rather than a session.
func (p Policy) Backoff() *backoff.ExponentialBackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     p.Min,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         max(p.Max, p.Min),
	}
	b.Reset()
	return b
}

// Loop runs session until ctx ends. session returns when it ends, saying
// whether it got up (connected and served, as opposed to failing to
// connect). After each session that ends while ctx lasts, retry is told
// the wait before the next one (to log why the session ended), and Loop
// waits that long or until ctx ends. Loop returns when ctx ends.
func Loop(ctx context.Context, p Policy, session func(ctx context.Context) (up bool), retry func(wait time.Duration)) {
	bo := p.Backoff()
	for {
		began := time.Now()
		up := session(ctx)
		if ctx.Err() != nil {
			return
		}
		if up && time.Since(began) >= p.StableAfter {
			bo.Reset()
		}
		wait := min(bo.NextBackOff(), bo.MaxInterval)
		if retry != nil {
			retry(wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
