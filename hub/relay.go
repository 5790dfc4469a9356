package hub

import (
	"context"
	"time"
)

// Ping relay (seed 003, "Who to ping?"): accepted pings are forwarded to
// the ping servers the operator lists, so a publisher pings pingd once and
// reaches the others. The delivery package sends them; this is their
// durable queue.

// Relay states.
const (
	RelayPending = "pending"
	RelaySent    = "sent"
	RelayFailed  = "failed" // refused by the target, or retried for a day
)

// Relay is one ping to forward to one target.
type Relay struct {
	ID     int64
	Target string // as configured: "xmlrpc:URL" or "get:URL-template"
	Name   string
	URL    string
	// FeedURL is set when the ping named a feed (extendedPing): the relay
	// is then an extendedPing too.
	FeedURL       string
	Tags          []string
	State         string
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	CreatedAt     time.Time
	SentAt        time.Time
	// LeaseOwner is the process that claimed it (ClaimRelays);
	// FinishRelay records the attempt only while the lease is its own.
	LeaseOwner string
}

// RelayTargetStatus sums up one target's relays.
type RelayTargetStatus struct {
	Target      string    `json:"target"`
	Pending     int       `json:"pending"`
	Sent        int       `json:"sent"`
	Failed      int       `json:"failed"`
	LastSentAt  time.Time `json:"last_sent_at"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at"`
}

// RelayStore keeps the relay queue. The SQL store implements it beside
// Store.
type RelayStore interface {
	// EnqueueRelay adds r unless a relay of the same URL to the same
	// target was queued within dedupe; it reports whether it added one.
	EnqueueRelay(ctx context.Context, r *Relay, dedupe time.Duration) (bool, error)
	// ClaimRelays leases up to limit pending relays due at now until
	// `until` for owner, oldest first.
	ClaimRelays(ctx context.Context, now time.Time, limit int, owner string, until time.Time) ([]Relay, error)
	// FinishRelay records an attempt's outcome: state, error, the next
	// attempt (pending ones) and attempts; it releases the lease. It
	// changes nothing when the lease is no longer r.LeaseOwner's.
	FinishRelay(ctx context.Context, r *Relay) error
	// RelayStatus sums up every target's relays.
	RelayStatus(ctx context.Context) ([]RelayTargetStatus, error)
	// PruneRelays removes finished relays older than before.
	PruneRelays(ctx context.Context, before time.Time) error
}
