package ratelimit

import (
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Keyed keeps one token bucket per key (a client IP, a pinged URL, a
// callback). Buckets idle long enough to be full again are dropped, so
// memory follows the number of recently active keys.
type Keyed struct {
	rate  rate.Limit
	burst int
	// idle is how long a bucket takes to refill completely.
	idle time.Duration

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// maxBuckets bounds the map between sweeps; beyond it every bucket is
// dropped (they start full again), which only ever errs on the lenient side.
const maxBuckets = 100_000

// New returns a limiter of perSecond tokens a second per key, in bursts
// of burst.
func New(perSecond float64, burst int) *Keyed {
	idle := time.Duration(float64(burst) / perSecond * float64(time.Second))
	return &Keyed{
		rate:    rate.Limit(perSecond),
		burst:   burst,
		idle:    max(idle, time.Second),
		buckets: map[string]*bucket{},
	}
}

// Allow takes a token for key; when none is left it reports how long to
// wait for one.
func (k *Keyed) Allow(key string, now time.Time) (bool, time.Duration) {
	return k.AllowN(key, now, 1)
}

// AllowN takes n tokens for key at once, for a request that costs n
// (several calls made on its behalf), or none and how long to wait for
// them. n is capped at the burst, so a request costing more than the burst
// takes all of it rather than being refused for ever.
func (k *Keyed) AllowN(key string, now time.Time, n int) (bool, time.Duration) {
	n = min(max(n, 1), k.burst)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sweep(now)
	b := k.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(k.rate, k.burst)}
		k.buckets[key] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, n)
	if !r.OK() {
		return false, k.idle
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

func (k *Keyed) sweep(now time.Time) {
	if now.Sub(k.lastSweep) < k.idle && len(k.buckets) < maxBuckets {
		return
	}
	k.lastSweep = now
	for key, b := range k.buckets {
		if now.Sub(b.seen) >= k.idle {
			delete(k.buckets, key)
		}
	}
	if len(k.buckets) >= maxBuckets {
		clear(k.buckets)
	}
}

// RetryAfter is the value of a Retry-After header for a wait of d: whole
// seconds, rounded up, at least one.
func RetryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}
