package feed

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/pingd/pingd/hub"
)

// SchedulerConfig configures NewScheduler. Zero values take the defaults
// (the Default… constants below).
type SchedulerConfig struct {
	// MinInterval is the shortest time between two polls of a source;
	// default DefaultMinInterval. Only Retry-After may push a poll later
	// than the rest decided, nothing makes it sooner.
	MinInterval time.Duration
	// DefaultInterval is the poll interval of a source without hints;
	// default DefaultPollInterval.
	DefaultInterval time.Duration
	// MaxInterval caps every interval but Retry-After; default
	// DefaultMaxInterval.
	MaxInterval time.Duration
	// PingedInterval is the safety-net interval of a source that pings;
	// default DefaultPingedInterval.
	PingedInterval time.Duration
	// PingTrust is how long after its last ping a source still counts as
	// one that pings; default DefaultPingTrust.
	PingTrust time.Duration
	// MaxRetryAfter caps how far a Retry-After may push a poll; default
	// DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// Rand returns a number in [0, 1) for the ±10% jitter; default
	// math/rand/v2. It must be safe for concurrent use.
	Rand func() float64
}

// Defaults of SchedulerConfig.
const (
	// DefaultMinInterval keeps a feed that asks for a shorter ttl from
	// being polled more than 12 times an hour.
	DefaultMinInterval = 5 * time.Minute
	// DefaultPollInterval is the interval of a feed that gives no hint.
	DefaultPollInterval = time.Hour
	// DefaultMaxInterval makes every source polled at least daily.
	DefaultMaxInterval = 24 * time.Hour
	// DefaultPingedInterval polls a source that pings twice a day, in case
	// a ping was lost (pingd's --pinged-interval, PINGD_PINGED_INTERVAL).
	DefaultPingedInterval = 12 * time.Hour
	// DefaultPingTrust and DefaultMaxRetryAfter are a week.
	DefaultPingTrust     = 7 * 24 * time.Hour
	DefaultMaxRetryAfter = 7 * 24 * time.Hour
)

// Scheduler decides when a source is polled next from its hints and
// history; it implements hub.Scheduler and is safe for concurrent use.
type Scheduler struct {
	cfg SchedulerConfig
}

var _ hub.Scheduler = (*Scheduler)(nil)

// Reasons Next gives, naming the hint or rule that decided.
const (
	ReasonDefault      = "default interval"
	ReasonTTL          = "ttl"
	ReasonSy           = "sy:updatePeriod"
	ReasonMaxAge       = "max-age"
	ReasonExpires      = "expires"
	ReasonRetryAfter   = "retry-after"
	ReasonSkipHours    = "skipHours"
	ReasonSkipDays     = "skipDays"
	ReasonErrorBackoff = "error backoff"
	ReasonUnchanged    = "unchanged backoff"
	ReasonPinged       = "pinged source"
	ReasonMinInterval  = "min interval"
	ReasonMaxInterval  = "max interval"
)

// jitterFraction spreads polls by ±10% so sources with equal hints do not
// come due together.
const jitterFraction = 0.10

// unchangedGrowth is the factor by which the interval grows per unchanged
// fetch after the first; maxUnchangedSteps bounds the exponent.
const (
	unchangedGrowth   = 1.5
	maxUnchangedSteps = 8
)

// NewScheduler returns a Scheduler.
func NewScheduler(cfg SchedulerConfig) *Scheduler {
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = DefaultMinInterval
	}
	if cfg.DefaultInterval <= 0 {
		cfg.DefaultInterval = DefaultPollInterval
	}
	if cfg.MaxInterval <= 0 {
		cfg.MaxInterval = DefaultMaxInterval
	}
	if cfg.PingedInterval <= 0 {
		cfg.PingedInterval = DefaultPingedInterval
	}
	if cfg.PingTrust <= 0 {
		cfg.PingTrust = DefaultPingTrust
	}
	if cfg.MaxRetryAfter <= 0 {
		cfg.MaxRetryAfter = DefaultMaxRetryAfter
	}
	cfg.MaxInterval = max(cfg.MaxInterval, cfg.MinInterval)
	cfg.DefaultInterval = min(max(cfg.DefaultInterval, cfg.MinInterval), cfg.MaxInterval)
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	return &Scheduler{cfg: cfg}
}

// Next returns when to fetch src again after a fetch at now that gave res,
// or failed with err. src carries the state after that fetch (hints,
// ConsecutiveErrors, Unchanged, LastPingAt).
//
// In order: the base interval (error backoff; else the document's ttl or
// sy:updatePeriod, else the default), slowed down by repeated unchanged
// fetches; a source that pings is polled at the safety-net interval at
// most; HTTP freshness (max-age, Expires) only pushes later; the result is
// kept within [MinInterval, MaxInterval] and jittered; Retry-After pushes
// later still; finally skipHours and skipDays (UTC) move it out of skipped
// hours and days.
func (s *Scheduler) Next(now time.Time, src *hub.Source, res *hub.FetchResult, err error) (time.Time, string) {
	now = now.UTC()
	var st hub.SourceState
	if src != nil {
		st = src.SourceState
	}
	hints := st.Hints
	if res != nil && err == nil {
		hints.MaxAge, hints.Expires, hints.RetryAfter = res.Hints.MaxAge, res.Hints.Expires, res.Hints.RetryAfter
		if res.IsFeed {
			hints.TTL, hints.UpdatePeriod, hints.UpdateFrequency, hints.UpdateBase = res.Hints.TTL, res.Hints.UpdatePeriod, res.Hints.UpdateFrequency, res.Hints.UpdateBase
			hints.SkipHours, hints.SkipDays = res.Hints.SkipHours, res.Hints.SkipDays
		}
	}

	var interval time.Duration
	var reason string
	var aligned time.Time // a sy:updateBase slot, when it decided
	if err != nil {
		n := max(st.ConsecutiveErrors, 1)
		interval = s.cfg.MinInterval * time.Duration(1<<min(n-1, 20))
		if interval <= 0 || interval > s.cfg.MaxInterval {
			interval = s.cfg.MaxInterval
		}
		reason = ReasonErrorBackoff
		var fe *hub.FetchError
		if errors.As(err, &fe) && fe.RetryAfter.After(hints.RetryAfter) {
			hints.RetryAfter = fe.RetryAfter
		}
	} else {
		interval, reason = s.cfg.DefaultInterval, ReasonDefault
		if hints.TTL > 0 {
			interval, reason = hints.TTL, ReasonTTL
		}
		if sy := SyInterval(hints); sy > 0 && (hints.TTL == 0 || sy > hints.TTL) {
			interval, reason = sy, ReasonSy
			if !hints.UpdateBase.IsZero() {
				aligned = nextSlot(hints.UpdateBase, sy, now.Add(s.cfg.MinInterval))
				interval = aligned.Sub(now)
			}
		}
		// Repeated unchanged fetches slow down; a change (Unchanged back to
		// 0) returns to the base interval at once.
		if st.Unchanged >= 2 {
			f := math.Pow(unchangedGrowth, float64(min(st.Unchanged-1, maxUnchangedSteps)))
			interval = time.Duration(float64(interval) * f)
			reason, aligned = ReasonUnchanged, time.Time{}
		}
		if !st.LastPingAt.IsZero() && now.Sub(st.LastPingAt) < s.cfg.PingTrust && s.cfg.PingedInterval > interval {
			interval, reason, aligned = s.cfg.PingedInterval, ReasonPinged, time.Time{}
		}
		if hints.MaxAge > interval {
			interval, reason, aligned = hints.MaxAge, ReasonMaxAge, time.Time{}
		}
		if d := hints.Expires.Sub(now); !hints.Expires.IsZero() && d > interval {
			interval, reason, aligned = d, ReasonExpires, time.Time{}
		}
	}

	if interval < s.cfg.MinInterval {
		interval, reason, aligned = s.cfg.MinInterval, ReasonMinInterval, time.Time{}
	}
	if interval > s.cfg.MaxInterval {
		interval, aligned = s.cfg.MaxInterval, time.Time{}
		if reason != ReasonErrorBackoff && reason != ReasonUnchanged {
			reason = ReasonMaxInterval
		}
	}
	next := aligned
	if next.IsZero() {
		// Jitter, but never below the minimum.
		j := 1 + (s.rand()*2-1)*jitterFraction
		interval = max(time.Duration(float64(interval)*j), s.cfg.MinInterval)
		next = now.Add(interval)
	}

	if ra := hints.RetryAfter; ra.After(next) {
		next, reason = minTime(ra, now.Add(s.cfg.MaxRetryAfter)), ReasonRetryAfter
	}
	if moved, why := skip(next, hints.SkipHours, hints.SkipDays); !moved.Equal(next) {
		next, reason = moved, why
	}
	return next, reason
}

func (s *Scheduler) rand() float64 {
	r := s.cfg.Rand()
	if math.IsNaN(r) || r < 0 || r >= 1 {
		return 0.5
	}
	return r
}

// nextSlot is the first time base + k·step (k any integer) at or after t.
func nextSlot(base time.Time, step time.Duration, t time.Time) time.Time {
	// Sub saturates after ~292 years; the final check covers that case.
	slot := base.Add(t.Sub(base) / step * step)
	if slot.Before(t) {
		slot = slot.Add(step)
	}
	if slot.Before(t) || slot.Sub(t) > step {
		return t
	}
	return slot
}

// skip moves t to the first whole hour that is neither a skipped hour nor
// on a skipped day (both UTC), and names which rule moved it. Nonsense hints
// that skip every hour or every day are ignored.
func skip(t time.Time, hours []int, days []time.Weekday) (time.Time, string) {
	hours = validHours(hours)
	days = validDays(days)
	if len(hours) == 24 {
		hours = nil
	}
	if len(days) == 7 {
		days = nil
	}
	if len(hours) == 0 && len(days) == 0 {
		return t, ""
	}
	t = t.UTC()
	reason := ""
	for range 8 * 24 {
		switch {
		case slices.Contains(days, t.Weekday()):
			if reason == "" {
				reason = ReasonSkipDays
			}
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
		case slices.Contains(hours, t.Hour()):
			if reason == "" {
				reason = ReasonSkipHours
			}
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour()+1, 0, 0, 0, time.UTC)
		default:
			return t, reason
		}
	}
	return t, reason
}

func validHours(hs []int) []int {
	var out []int
	for _, h := range hs {
		if h >= 0 && h < 24 && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

func validDays(ds []time.Weekday) []time.Weekday {
	var out []time.Weekday
	for _, d := range ds {
		if d >= time.Sunday && d <= time.Saturday && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
