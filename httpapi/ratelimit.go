package httpapi

import (
	"net/url"
	"strings"
	"time"
)

// allowPing takes a token for a ping of rawURL from the URL's bucket and
// from its host's. A refusal by the host's bucket keeps the URL's token,
// which only slows down a publisher that is over a limit anyway.
func (a *API) allowPing(rawURL string) *RateLimitError {
	now := time.Now()
	if ok, wait := a.pingLimit.Allow(rawURL, now); !ok {
		return &RateLimitError{RetryAfter: wait, What: "too many pings for " + rawURL}
	}
	if host := urlHost(rawURL); host != "" {
		if ok, wait := a.pingHostLimit.Allow(host, now); !ok {
			return &RateLimitError{RetryAfter: wait, What: "too many pings for URLs on " + host}
		}
	}
	return nil
}

// allowSubscribe takes a token for a subscription request from the
// client's bucket: every such request makes pingd call a URL of the
// client's choosing (a verification, a test notification), so without a
// bound anyone could have pingd call a third party's server as often as
// they like.
func (a *API) allowSubscribe(clientIP string) *RateLimitError {
	if ok, wait := a.subLimit.Allow(clientIP, time.Now()); !ok {
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
