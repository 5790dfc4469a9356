package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/pingd/pingd/hub"
)

// Sender speaks one subscriber kind's protocol.
type Sender interface {
	// Wants reports whether an event is delivered to this subscriber
	// (item-level kinds take items, URL-level kinds any change).
	Wants(sub *hub.Subscription, ev hub.Event) bool
	// Deliver sends the events to the subscriber in one request.
	Deliver(ctx context.Context, d *Delivery) Result
	// Verify checks a pending subscribe or unsubscribe request with the
	// subscriber; on success for a subscribe it returns the expiry of the
	// subscription (zero: none).
	Verify(ctx context.Context, sub *hub.Subscription, node *hub.Node, mode string) (time.Time, error)
	// Policy says how failures are handled for this kind.
	Policy() Policy
}

// Policy is a kind's failure rules.
type Policy struct {
	// RetryWindow is how long a failing receiver is retried, with one last
	// retry at its end, before the subscription is removed.
	RetryWindow time.Duration
	// SuspendAfter, when > 0, suspends the subscription after that many
	// consecutive errors instead (rssCloud: until it is renewed).
	SuspendAfter int
}

// Delivery is one request's worth of work.
type Delivery struct {
	Sub  *hub.Subscription
	Node *hub.Node
	// Events are the events after the cursor this kind wants, oldest first.
	Events []hub.Event

	batch *batch
}

// Result is what a receiver answered.
type Result struct {
	Status int
	// Err is nil on success.
	Err error
	// Remove says the receiver asked to be dropped (410, a false status,
	// a CNWS HTTP error): the subscription is deleted without retries.
	Remove bool
}

// errStatus formats an unexpected HTTP status as an error.
func errStatus(code int) error { return fmt.Errorf("HTTP %d", code) }
