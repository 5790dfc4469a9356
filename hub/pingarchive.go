package hub

import (
	"context"
	"time"
)

// PingArchive reads the received pings by time range: the hourly archives
// serve them. The SQL store implements it beside Store.
type PingArchive interface {
	// PingsBetween returns the pings received in [since, until) (an end
	// open when zero), newest first, at most limit (all when <= 0), and
	// the number of pings ever received.
	PingsBetween(ctx context.Context, since, until time.Time, limit int) ([]Ping, int64, error)
}

// PingRetention is how long received pings are kept (and served in the
// hourly archives).
func (h *Hub) PingRetention() time.Duration { return h.cfg.PingRetention }
