package hub

import (
	"time"
)

// PollHints are what a source says about how often to fetch it.
type PollHints struct {
	TTL             time.Duration  `json:"ttl,omitempty"`
	SkipHours       []int          `json:"skip_hours,omitempty"`
	SkipDays        []time.Weekday `json:"skip_days,omitempty"`
	UpdatePeriod    string         `json:"update_period,omitempty"`
	UpdateFrequency int            `json:"update_frequency,omitempty"`
	UpdateBase      time.Time      `json:"update_base,omitzero"`
	MaxAge          time.Duration  `json:"max_age,omitempty"`
	Expires         time.Time      `json:"expires,omitzero"`
	RetryAfter      time.Time      `json:"retry_after,omitzero"`
}

// SourceState is a source's fetch state, written after each fetch.
type SourceState struct {
	// URL is where the source is now, after permanent redirects.
	URL          string
	ETag         string
	LastModified string
	BodyHash     string
	ContentType  string
	// Body is the last representation (capped), kept only where a later
	// fetch or reader needs it (KeepsBody): for protocols that distribute
	// whole documents (WebSub for non-feed topics, and the format of a
	// feed served as generic XML) and for merging RFC 3229 deltas; empty
	// for other feeds. It is stored apart from the rest of the
	// state and read only by Store.Source and Store.ClaimDueSources;
	// sources listed by other reads have none. Only a changed outcome
	// writes it (Store.ApplyFetch).
	Body        []byte
	IsFeed      bool
	Title       string
	Description string
	SiteURL     string
	Hints       PollHints
	// Baselined is set after the first successful fetch.
	Baselined bool
	Gone      bool
	// MovedFrom is the URL before the last permanent redirect.
	MovedFrom         string
	MovedAt           time.Time
	LastFetchAt       time.Time
	LastStatus        int
	LastBytes         int64
	LastNewItems      int
	LastError         string
	ConsecutiveErrors int
	// Unchanged counts fetches in a row that found no change, for
	// adaptive polling.
	Unchanged       int
	LastChangeAt    time.Time
	LastPingAt      time.Time
	NextFetchAt     time.Time
	NextFetchReason string
}

// Source is a web resource pingd fetches.
type Source struct {
	ID int64
	// OriginalURL is the URL the source was first known by.
	OriginalURL string
	SourceState
	// PendingNote is a trusted change announcement waiting for the next
	// fetch (CNWS resourceChange).
	PendingNote *ChangeNote
	LeaseOwner  string
	LeaseUntil  time.Time
	CreatedAt   time.Time
	// Subscribers counts the subscriptions of every kind of the nodes
	// following the source, read by ClaimDueSources with the claim (the
	// User-Agent's "N subscribers"); other reads leave it zero.
	Subscribers int
}

// FetchOutcome is what one fetch of a source produced, applied by the store
// in one transaction.
type FetchOutcome struct {
	SourceID int64
	// State is the new fetch state of the source; it also releases the
	// fetch lease.
	State SourceState
	// Changed is true when the representation differs from the last fetch.
	Changed bool
	// Entries are the candidate items in publishing order (oldest first);
	// the store keeps only those whose ids were never seen for the source.
	Entries []Entry
	// Note, when set, is emitted as a change event even if nothing changed.
	Note *ChangeNote
	// Owner is the holder of the source's fetch lease the outcome releases
	// (the claim's LeaseOwner; "" for a source nobody leased). The store
	// writes the outcome only while the source's lease is still Owner's:
	// one whose lease ran out and was taken by another process changes
	// nothing (ErrLeaseLost).
	Owner string
}

// Unchanged reports whether the outcome changes nothing but the source's
// fetch state: no new representation, no entries, no announcement to
// publish. A 304, an identical body, a failed fetch and a fetch given
// back unfetched are such outcomes; the store writes them in batches
// (Store.ApplyUnchangedFetches) rather than a transaction each.
func (o FetchOutcome) Unchanged() bool {
	return !o.Changed && o.Note == nil && len(o.Entries) == 0
}

// FetchApplied reports what ApplyFetch did.
type FetchApplied struct {
	// Baseline is true when this was the source's first successful fetch:
	// the entries were recorded as seen and nothing was published (the
	// newest of a feed's entries were kept as its nodes' items: Kept).
	Baseline bool
	// New are the entries never seen before, in publishing order.
	New []Entry
	// Published counts the item events written, over every node: each
	// node takes at most its max_items of the newest New entries.
	Published int
	// Kept counts the baseline's entries kept as items without telling
	// anyone, over every node (FetchNews.Kept).
	Kept int
	// Nodes are the ids of nodes whose logs grew.
	Nodes []int64
}
