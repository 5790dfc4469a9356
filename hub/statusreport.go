package hub

import "time"

// The status report: what the status page and GET /api/status show an
// operator, read by the store in a fixed number of queries (the store's
// StatusReport). Its types live here so that the HTTP side reads them
// without importing the store.

// StatusQuery says what StatusReport reads.
type StatusQuery struct {
	// Limit caps each list of the report (nodes, sources, deliveries,
	// pings, subscribers); default DefaultStatusLimit.
	Limit int
	// PingsSince: the pings received at or after it are counted and the
	// newest of them listed.
	PingsSince time.Time
	// LateBefore: a source not gone whose next fetch was due before it is
	// counted as late (the fetcher is not keeping up). Zero counts none.
	LateBefore time.Time
	// Subscribers asks for the newest subscriptions of every kind with
	// their addresses (an admin's view).
	Subscribers bool
	// Now, when set, has the fetch loop's load counted as of then:
	// FetchDue, FetchRunning and FetchOldestDue.
	Now time.Time
}

// DefaultStatusLimit is the length of each list of a StatusReport when the
// query does not say.
const DefaultStatusLimit = 100

// StatusReport is what an operator looks at to tell whether something is
// wrong: totals over everything, and each list capped at the query's limit
// with the worst rows first.
type StatusReport struct {
	// Nodes are the nodes with their subscriber counts, those with
	// problems first, then by name; NodesTotal counts them all.
	Nodes      []NodeStatus
	NodesTotal int
	// NodesBehindXMPP counts nodes whose log is ahead of the XMPP stream,
	// EventsBehindXMPP the events between them.
	NodesBehindXMPP  int
	EventsBehindXMPP int64
	// Subscribers counts subscriptions by kind (every kind is present).
	Subscribers map[Kind]int

	// Sources are the sources followed by a node, worst first: failing,
	// gone, never fetched, moved, then the rest by URL.
	Sources []SourceStatus
	// SourcesTotal counts the followed sources; the others count those
	// with errors in a row, gone, moved, and late (see LateBefore).
	SourcesTotal, SourcesFailing, SourcesGone, SourcesMoved, SourcesLate int
	// The fetch loop's load as of the query's Now, over every process:
	// followed sources due and waiting to be claimed (FetchDue), claimed
	// and being fetched (FetchRunning), and the oldest due time among
	// them (zero when none is due).
	FetchDue, FetchRunning int
	FetchOldestDue         time.Time

	// Queue is the health of the HTTP deliveries.
	Queue QueueStatus
	// Deliveries are the HTTP subscriptions with a problem (failing,
	// suspended or behind their node), worst first: failing and suspended
	// ones by their oldest failure, then the furthest behind.
	Deliveries []DeliveryStatus
	// Bouncing are the XMPP subscriptions whose notifications bounce, the
	// oldest first bounce first; BouncingTotal counts them all.
	Bouncing      []BouncingStatus
	BouncingTotal int

	// Pings are the newest pings since PingsSince; PingsRecent counts all
	// of them and PingsTotal every ping ever received.
	Pings       []Ping
	PingsRecent int
	PingsTotal  int64

	// RecentSubscribers are the newest subscriptions of every kind, only
	// when the query asked for them.
	RecentSubscribers []SubscriberStatus
}

// NodeStatus is one node of a StatusReport.
type NodeStatus struct {
	ID          int64
	Name        string
	Title       string
	AccessModel AccessModel
	Implicit    bool
	// SourceURL is where the node's source is now; empty for a node only
	// its owners publish to.
	SourceURL string
	// SourceFailing and SourceGone describe its source.
	SourceFailing bool
	SourceGone    bool
	LastSeq       int64
	XMPPSeq       int64
	// Subscribers counts the node's subscriptions by kind (every kind is
	// present).
	Subscribers map[Kind]int
	// Failing, Suspended and Behind count its HTTP subscriptions with
	// errors in a row, suspended ones and active ones behind its log.
	Failing, Suspended, Behind int
}

// SourceStatus is one source of a StatusReport.
type SourceStatus struct {
	ID                int64
	URL               string
	OriginalURL       string
	Title             string
	IsFeed            bool
	Baselined         bool
	Gone              bool
	MovedFrom         string
	MovedAt           time.Time
	LastFetchAt       time.Time
	LastStatus        int
	LastError         string
	ConsecutiveErrors int
	LastChangeAt      time.Time
	LastPingAt        time.Time
	NextFetchAt       time.Time
	NextFetchReason   string
	// Nodes counts the nodes following the source; Open is true when at
	// least one of them is an open node (its URL is no secret then).
	Nodes int
	Open  bool
}

// QueueStatus sums up the HTTP subscriptions' delivery state.
type QueueStatus struct {
	// Subscriptions counts the HTTP subscriptions; Pending those waiting
	// for verification of intent; Suspended those that get nothing until
	// renewed; Failing those whose last attempt failed; Behind the active
	// ones whose cursor is behind their node's log, and EventsBehind the
	// events they have yet to get.
	Subscriptions, Pending, Suspended, Failing, Behind int
	EventsBehind                                       int64
	// Problems counts the subscriptions StatusReport.Deliveries lists.
	Problems int
	// OldestFailure is the earliest first failure of a failing
	// subscription (zero if none fails).
	OldestFailure time.Time
}

// DeliveryStatus is one HTTP subscription with a problem.
type DeliveryStatus struct {
	ID       int64
	NodeName string
	Kind     Kind
	// Address is the callback URL.
	Address     string
	State       SubState
	Cursor      int64
	NodeLastSeq int64
	DeliveryState
}

// SubscriberStatus is one subscription in the admin's list.
type SubscriberStatus struct {
	ID        int64
	NodeName  string
	Kind      Kind
	Address   string
	State     SubState
	CreatedAt time.Time
	ExpiresAt time.Time
}

// BouncingStatus is one XMPP subscription whose notifications bounce.
type BouncingStatus struct {
	ID       int64
	NodeName string
	// Address is the subscribed JID.
	Address string
	// Bounces counts them in a row, since FirstBounce; LastError is the
	// last one's condition and text.
	Bounces     int
	FirstBounce time.Time
	LastError   string
}
