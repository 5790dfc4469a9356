package hub

import (
	"context"
	"time"
)

// Upstream push: a source that advertises its own push (a WebSub hub, an
// rssCloud cloud) is subscribed to there, so its changes come to pingd
// instead of being polled for. The upstream package manages these
// subscriptions; this is their record.

// Upstream kinds.
const (
	UpstreamWebSub   = "websub"
	UpstreamRSSCloud = "rsscloud"
)

// Upstream states.
const (
	UpstreamPending = "pending" // asked for; the hub has not verified it yet
	UpstreamActive  = "active"
	UpstreamFailed  = "failed" // the last request failed; retried at NextRenewAt
)

// Upstream is one subscription pingd holds at an upstream hub or cloud.
type Upstream struct {
	ID       int64
	SourceID int64
	Kind     string
	// Endpoint is the WebSub hub URL, or the rssCloud registration URL
	// (http://domain:port/path).
	Endpoint string
	// Topic is the URL subscribed to (the feed's self URL or its URL).
	Topic string
	// Secret keys the HMAC of WebSub content distributions; it is never
	// shown.
	Secret string
	State  string
	// LeaseSeconds is what the hub granted (WebSub).
	LeaseSeconds int
	ExpiresAt    time.Time
	NextRenewAt  time.Time
	LastPushAt   time.Time
	LastError    string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// UpstreamStore keeps upstream subscriptions. The SQL store implements it
// beside Store.
type UpstreamStore interface {
	// PutUpstream inserts u or replaces the one of the same source and
	// kind; it sets u.ID.
	PutUpstream(ctx context.Context, u *Upstream) error
	// Upstream returns one by id; ErrNotFound.
	Upstream(ctx context.Context, id int64) (*Upstream, error)
	// UpstreamsOfSource lists a source's upstream subscriptions.
	UpstreamsOfSource(ctx context.Context, sourceID int64) ([]Upstream, error)
	// Upstreams lists every upstream subscription.
	Upstreams(ctx context.Context) ([]Upstream, error)
	// MarkUpstreamPush records a push received at t.
	MarkUpstreamPush(ctx context.Context, id int64, t time.Time) error
	// DeleteUpstream removes one; ErrNotFound.
	DeleteUpstream(ctx context.Context, id int64) error
}
