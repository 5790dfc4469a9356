package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/ratelimit"
)

// allowPing takes a token for a ping of rawURL from the URL's bucket and
// from its host's. Both keys are canonical (hub.CanonicalURL, hub.HostKey):
// a URL or host spelled another way (a zero-padded or default port, a
// trailing dot, upper case) draws on the same buckets. A refusal by the
// host's bucket keeps the URL's token, which only slows down a publisher
// that is over a limit anyway.
func (a *API) allowPing(rawURL string) *RateLimitError {
	now := time.Now()
	key := rawURL
	if c, err := hub.CanonicalURL(rawURL); err == nil {
		key = c
	}
	if ok, wait := a.pingLimit.Allow(key, now); !ok {
		return &RateLimitError{RetryAfter: wait, What: "too many pings for " + key}
	}
	if host := hub.HostKey(key); host != "" {
		if ok, wait := a.pingHostLimit.Allow(host, now); !ok {
			return &RateLimitError{RetryAfter: wait, What: "too many pings for URLs on " + host}
		}
	}
	return nil
}

// allowSubscribe takes a token for a subscription request from the
// client's bucket (ratelimit.ClientKey: its address, or its /64 for IPv6): every
// such request makes pingd call a URL of the client's choosing (a
// verification, a test notification), so without a bound anyone could
// have pingd call a third party's server as often as they like.
func (a *API) allowSubscribe(clientIP string) *RateLimitError {
	return a.allowSubscribeN(clientIP, 1)
}

// allowSubscribeN is allowSubscribe for a request that makes pingd call
// back n times (an rssCloud registration checks each of its URLs with a
// call of its own): it takes n tokens, at most the whole burst.
func (a *API) allowSubscribeN(clientIP string, n int) *RateLimitError {
	key := ratelimit.ClientKey(clientIP)
	if ok, wait := a.subLimit.AllowN(key, time.Now(), n); !ok {
		return &RateLimitError{RetryAfter: wait, What: "too many subscription requests from " + key}
	}
	return nil
}

// allowImplicitNode takes a token for a new implicit node from the
// client's bucket: a node pingd creates for a URL nobody followed yet is
// kept, and its source polled, for as long as anyone subscribes, so a
// stranger may add only a few an hour. Subscribing to a URL a node follows
// already costs nothing here.
func (a *API) allowImplicitNode(clientIP string) *RateLimitError {
	key := ratelimit.ClientKey(clientIP)
	if ok, wait := a.implicitLimit.Allow(key, time.Now()); !ok {
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

// allowWhitelistRequest takes tokens for a GetPingd XMPP consumer request
// (application/getpingd+xmpp+subscribe+xml) to n: one from the client's
// subscription bucket and, unless the request carries the node's or the
// admin token, one from the node's bucket. The node's bucket bounds what
// strangers can ask of one node from many addresses (and guesses of its
// token); its owner is not held up by them.
func (a *API) allowWhitelistRequest(r *http.Request, n *hub.Node) *RateLimitError {
	if limited := a.allowSubscribe(clientIP(r)); limited != nil {
		return limited
	}
	if token, ok := bearerToken(r); ok && a.hub.Authorize(n, token) {
		return nil
	}
	if ok, wait := a.nodeSubLimit.Allow(strconv.FormatInt(n.ID, 10), time.Now()); !ok {
		return &RateLimitError{RetryAfter: wait, What: fmt.Sprintf("too many requests for the node %q without its token", n.Name)}
	}
	return nil
}
