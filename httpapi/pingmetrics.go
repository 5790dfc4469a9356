package httpapi

import (
	"errors"

	"github.com/pingd/pingd/hub"
)

// Outcomes of a ping, as the ObservePing of PingsConfig, CNWSConfig and
// WebSubConfig is told them.
const (
	PingAccepted    = "accepted"
	PingRefused     = "refused"      // not a URL pingd takes: 400 or a fault
	PingRateLimited = "rate_limited" // 429 (or the dialect's form of it)
	PingError       = "error"        // not recorded: 500 or a fault
)

// pingObserver is a handler's ObservePing; nil observes nothing.
type pingObserver func(dialect, outcome string)

// count tells the observer the outcome of a ping of dialect.
func (o pingObserver) count(dialect string, err error) {
	if o == nil {
		return
	}
	o(dialect, pingOutcome(err))
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
