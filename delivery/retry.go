package delivery

import (
	"time"

	"github.com/pingd/pingd/hub"
)

// nextAttempt schedules the retry after a failure at now: exponential
// backoff with ±20% jitter, never past the end of the retry window, where
// one last retry happens; giveUp is true once that last retry failed.
func (e *Engine) nextAttempt(now time.Time, ds hub.DeliveryState, p Policy) (next time.Time, giveUp bool) {
	window := p.RetryWindow
	if window <= 0 {
		window = 24 * time.Hour
	}
	deadline := ds.FirstFailureAt.Add(window)
	if !now.Before(deadline) {
		return time.Time{}, true
	}
	d := e.cfg.MinBackoff << min(ds.ConsecutiveErrors-1, 20)
	if d <= 0 || d > e.cfg.MaxBackoff {
		d = e.cfg.MaxBackoff
	}
	d = time.Duration(float64(d) * (0.8 + 0.4*e.rand()))
	next = now.Add(d)
	if next.After(deadline) {
		next = deadline
	}
	return next, false
}
