package httpapi

import (
	"errors"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/ratelimit"
)

// PingLimitsConfig configures PingLimits; zero values take the defaults.
type PingLimitsConfig struct {
	// Rate and Burst bound the pings of one URL: default 1 per second in
	// bursts of 10.
	Rate  float64
	Burst int
	// HostRate and HostBurst bound the pings of URLs on one host (and
	// port), so that varying the path or the query does not multiply the
	// pings one origin draws: default 10 per second in bursts of 100.
	HostRate  float64
	HostBurst int
}

// PingLimits are the buckets every ping dialect draws on (pings.go,
// CNWS resourceChange, WebSub publish): one limit whatever the dialect.
type PingLimits struct {
	url, host *ratelimit.Keyed
}

// NewPingLimits returns the ping buckets.
func NewPingLimits(cfg PingLimitsConfig) *PingLimits {
	if cfg.Rate <= 0 {
		cfg.Rate = DefaultPingRate
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultPingBurst
	}
	if cfg.HostRate <= 0 {
		cfg.HostRate = DefaultPingHostRate
	}
	if cfg.HostBurst <= 0 {
		cfg.HostBurst = DefaultPingHostBurst
	}
	return &PingLimits{url: ratelimit.New(cfg.Rate, cfg.Burst), host: ratelimit.New(cfg.HostRate, cfg.HostBurst)}
}

// allow takes a token for a ping of rawURL from the URL's bucket and
// from its host's. Both keys are canonical (hub.CanonicalURL, hub.HostKey):
// a URL or host spelled another way (a zero-padded or default port, a
// trailing dot, upper case) draws on the same buckets. A refusal by the
// host's bucket keeps the URL's token, which only slows down a publisher
// that is over a limit anyway.
func (l *PingLimits) allow(rawURL string) *RateLimitError {
	key := rawURL
	if c, err := hub.CanonicalURL(rawURL); err == nil {
		key = c
	}
	return l.allowCanonical(key)
}

// allowCanonical is allow for a URL already in canonical form.
func (l *PingLimits) allowCanonical(key string) *RateLimitError {
	now := time.Now()
	if ok, wait := l.url.Allow(key, now); !ok {
		return &RateLimitError{RetryAfter: wait, What: "too many pings for " + key}
	}
	if host := hub.CanonicalHostKey(key); host != "" {
		if ok, wait := l.host.Allow(host, now); !ok {
			return &RateLimitError{RetryAfter: wait, What: "too many pings for URLs on " + host}
		}
	}
	return nil
}

// SubscribeLimitsConfig configures SubscribeLimits; zero values take the
// defaults.
type SubscribeLimitsConfig struct {
	// Rate and Burst bound the subscription requests of one client (WebSub
	// subscribe and unsubscribe, GetPingd subscribe, rssCloud
	// pleaseNotify, CNWS subscribe), each of which makes pingd call a URL
	// the client chose: default 10 per second in bursts of 100.
	Rate  float64
	Burst int
	// A subscription request naming a URL no node follows creates an
	// implicit node, which costs a token of the client's bucket of new
	// implicit nodes: default 300 an hour, all at once if need be (the
	// burst, when zero, is an hour's worth).
	ImplicitNodesPerHour float64
	ImplicitNodeBurst    int
}

// SubscribeLimits are the per-client buckets every subscription dialect
// (rssCloud, CNWS, WebSub, GetPingd) draws on: one limit whatever the
// dialect.
type SubscribeLimits struct {
	requests *ratelimit.Keyed
	implicit *ratelimit.Keyed
}

// NewSubscribeLimits returns the subscription buckets.
func NewSubscribeLimits(cfg SubscribeLimitsConfig) *SubscribeLimits {
	if cfg.Rate <= 0 {
		cfg.Rate = DefaultSubscribeRate
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultSubscribeBurst
	}
	if cfg.ImplicitNodesPerHour <= 0 {
		cfg.ImplicitNodesPerHour = DefaultImplicitNodesPerHour
	}
	if cfg.ImplicitNodeBurst <= 0 {
		cfg.ImplicitNodeBurst = max(1, int(cfg.ImplicitNodesPerHour))
	}
	return &SubscribeLimits{
		requests: ratelimit.New(cfg.Rate, cfg.Burst),
		implicit: ratelimit.New(cfg.ImplicitNodesPerHour/3600, cfg.ImplicitNodeBurst),
	}
}

// allow takes a token for a subscription request from the client's
// bucket (ratelimit.ClientKey: its address, or its /64 for IPv6): every
// such request makes pingd call a URL of the client's choosing (a
// verification, a test notification), so without a bound anyone could
// have pingd call a third party's server as often as they like.
func (l *SubscribeLimits) allow(clientIP string) *RateLimitError {
	return l.allowN(clientIP, 1)
}

// allowN is allow for a request that makes pingd call back n times (an
// rssCloud registration checks each of its URLs with a call of its own):
// it takes n tokens, at most the whole burst.
func (l *SubscribeLimits) allowN(clientIP string, n int) *RateLimitError {
	key := ratelimit.ClientKey(clientIP)
	if ok, wait := l.requests.AllowN(key, time.Now(), n); !ok {
		return &RateLimitError{RetryAfter: wait, What: "too many subscription requests from " + key}
	}
	return nil
}

// allowImplicitNode takes a token for a new implicit node from the
// client's bucket: a node pingd creates for a URL nobody followed yet is
// kept, and its source polled, for as long as anyone subscribes, so a
// stranger may add only a few an hour. Subscribing to a URL a node follows
// already costs nothing here.
func (l *SubscribeLimits) allowImplicitNode(clientIP string) *RateLimitError {
	key := ratelimit.ClientKey(clientIP)
	if ok, wait := l.implicit.Allow(key, time.Now()); !ok {
		return &RateLimitError{RetryAfter: wait, What: "too many new URLs to follow from " + key}
	}
	return nil
}

// callbackHostLimit is the refusal of a subscription whose callback's
// host has as many subscriptions as pingd keeps for one host
// (hub.ErrCallbackHostFull), nil for any other error. The client asked
// too much (429); room comes back as that host's subscriptions expire or
// are removed, so the wait is long.
func callbackHostLimit(err error) *RateLimitError {
	if !errors.Is(err, hub.ErrCallbackHostFull) {
		return nil
	}
	return &RateLimitError{RetryAfter: time.Hour, What: err.Error()}
}
