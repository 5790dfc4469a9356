package httpapi

import (
	"errors"

	"github.com/pingd/pingd/hub"
)

// Outcomes of a ping, as Config.ObservePing is told them.
const (
	PingAccepted    = "accepted"
	PingRefused     = "refused"      // not a URL pingd takes: 400 or a fault
	PingRateLimited = "rate_limited" // 429 (or the dialect's form of it)
	PingError       = "error"        // not recorded: 500 or a fault
)

// countPing tells Config.ObservePing the outcome of a ping of dialect.
func (a *API) countPing(dialect string, err error) {
	if a.cfg.ObservePing == nil {
		return
	}
	a.cfg.ObservePing(dialect, pingOutcome(err))
}

func pingOutcome(err error) string {
	var limited *RateLimitError
	switch {
	case err == nil:
		return PingAccepted
	case errors.As(err, &limited):
		return PingRateLimited
	case errors.Is(err, hub.ErrInvalid):
		return PingRefused
	}
	return PingError
}
