package httpapi

import (
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// keyedLimiter keeps one token bucket per key (a client IP, a pinged URL).
// Buckets idle long enough to be full again are dropped, so memory follows
// the number of recently active keys.
type keyedLimiter struct {
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

func newKeyedLimiter(perSecond float64, burst int) *keyedLimiter {
	idle := time.Duration(float64(burst) / perSecond * float64(time.Second))
	return &keyedLimiter{
		rate:    rate.Limit(perSecond),
		burst:   burst,
		idle:    max(idle, time.Second),
		buckets: map[string]*bucket{},
	}
}

// allow takes a token for key; when none is left it reports how long to
// wait for one.
func (k *keyedLimiter) allow(key string, now time.Time) (bool, time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sweep(now)
	b := k.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(k.rate, k.burst)}
		k.buckets[key] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, k.idle
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

func (k *keyedLimiter) sweep(now time.Time) {
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

// allowPing takes a token for a ping of rawURL from the URL's bucket and
// from its host's. A refusal by the host's bucket keeps the URL's token,
// which only slows down a publisher that is over a limit anyway.
func (a *API) allowPing(rawURL string) *RateLimitError {
	now := time.Now()
	if ok, wait := a.pingLimit.allow(rawURL, now); !ok {
		return &RateLimitError{RetryAfter: wait, What: "too many pings for " + rawURL}
	}
	if host := urlHost(rawURL); host != "" {
		if ok, wait := a.pingHostLimit.allow(host, now); !ok {
			return &RateLimitError{RetryAfter: wait, What: "too many pings for URLs on " + host}
		}
	}
	return nil
}

// AllowPing takes a token for a ping of rawURL as a ping through the API
// would (the URL's and its host's limits); when none is left it reports
// how long to wait. Pushes to pingd's upstream callbacks are pings of a
// feed by another road and count against the same limits.
func (a *API) AllowPing(rawURL string) (retryAfter time.Duration, ok bool) {
	if limited := a.allowPing(rawURL); limited != nil {
		return limited.RetryAfter, false
	}
	return 0, true
}

// allowSubscribe takes a token for a subscription request from the
// client's bucket: every such request makes pingd call a URL of the
// client's choosing (a verification, a test notification), so without a
// bound anyone could have pingd call a third party's server as often as
// they like.
func (a *API) allowSubscribe(clientIP string) *RateLimitError {
	if ok, wait := a.subLimit.allow(clientIP, time.Now()); !ok {
		return &RateLimitError{RetryAfter: wait, What: "too many subscription requests from " + clientIP}
	}
	return nil
}

// urlHost is the lower-cased host and port of a URL: one origin server.
func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Host)
}
