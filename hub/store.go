package hub

import (
	"context"
	"fmt"
	"time"
)

// The hub's store ports: what the hub reads and writes, one small
// interface per role, each given explicitly in Config (Stores). The store
// package implements them all on SQLite and PostgreSQL; every method must
// be safe for concurrent use, apply a per-query timeout, and wrap
// ErrNotFound / ErrExists where it says so. Times are stored and returned
// in UTC. The parts that use the store beside the hub (delivery, the
// component, the HTTP API, upstream) declare their own ports.

// NodeStore is where nodes are kept: created, found, listed, configured
// and deleted.
type NodeStore interface {
	// CreateNode stores n and sets its ID, CreatedAt and UpdatedAt.
	// ErrExists if the name is taken.
	CreateNode(ctx context.Context, n *Node) error
	// Node returns the node by name; ErrNotFound.
	Node(ctx context.Context, name string) (*Node, error)
	// NodeByID returns the node by id; ErrNotFound.
	NodeByID(ctx context.Context, id int64) (*Node, error)
	// Nodes lists every node, by name.
	Nodes(ctx context.Context) ([]Node, error)
	// NodesPage lists one page of the nodes in name order (see NodePage):
	// one query that reads the page's rows, never the whole table.
	NodesPage(ctx context.Context, p NodePage) ([]Node, error)
	// CountNodes counts the nodes.
	CountNodes(ctx context.Context) (int, error)
	// NodesBySource lists the nodes following a source.
	NodesBySource(ctx context.Context, sourceID int64) ([]Node, error)
	// UpdateNodeConfig replaces a node's configuration; ErrNotFound.
	UpdateNodeConfig(ctx context.Context, name string, cfg NodeConfig) error
	// SetNodeToken replaces the hash of the node's token; ErrNotFound.
	SetNodeToken(ctx context.Context, name string, hash []byte) error
	// SetNodeSource points the node at a source (0: none); ErrNotFound.
	SetNodeSource(ctx context.Context, name string, sourceID int64) error
	// DeleteNode removes the node with its log, subscriptions and
	// affiliations; ErrNotFound. When the node had XMPP subscriptions, the
	// same transaction records the NodeDeletion they are to be told of.
	DeleteNode(ctx context.Context, name string) error
	// CountImplicitNodes counts the implicit nodes.
	CountImplicitNodes(ctx context.Context) (int, error)
	// OpenNodes lists up to limit nodes of the open access model with
	// their sources' URL, title and site, in creation order, and counts
	// all open nodes.
	OpenNodes(ctx context.Context, limit int) ([]ListedNode, int, error)
}

// LogStore is the nodes' logs: their events and current items.
type LogStore interface {
	// Append adds events to the node's log in one transaction and returns
	// them with Seq and Created set. An item event replaces the current
	// item with the same ItemID; a retract event removes it; a purge event
	// removes every item. Items beyond the node's MaxItems stop being
	// current (oldest first), without a retract event: they scrolled off.
	// Events that the append moves out of the node's LogWindow are removed
	// unless they are current items, whatever the cursors. ErrNotFound if
	// the node does not exist.
	Append(ctx context.Context, nodeID int64, events []Event) ([]Event, error)
	// KeepItems makes item events (Kind EventItem) the items of a node
	// that has no current item, as Append does, in one transaction that
	// also moves past them every cursor standing at the end of the node's
	// log (its XMPPSeq and its subscriptions' cursors): no one is told of
	// them. A node that has an item keeps what it has and nothing is
	// appended. It returns how many events it appended; ErrNotFound if the
	// node does not exist.
	KeepItems(ctx context.Context, nodeID int64, events []Event) (int, error)
	// Items returns the node's current items, newest first: those named in
	// ids (in any order, missing ones left out) or, when ids is empty, the
	// newest max (all when max <= 0).
	Items(ctx context.Context, nodeID int64, ids []string, max int) ([]Event, error)
	// EventsAfter returns up to limit events with Seq > after, oldest first.
	EventsAfter(ctx context.Context, nodeID int64, after int64, limit int) ([]Event, error)
}

// SourceStore is where sources are kept and made due; their fetches are
// the fetch engine's (hub/fetching).
type SourceStore interface {
	// EnsureSource returns the source with this URL (matching the original
	// or the current URL), creating it if needed.
	EnsureSource(ctx context.Context, url string) (src *Source, created bool, err error)
	// Source returns a source by id, with its Body; ErrNotFound.
	Source(ctx context.Context, id int64) (*Source, error)
	// SourceBody returns only the source's last body: nil when it has none
	// or the source no longer exists.
	SourceBody(ctx context.Context, id int64) ([]byte, error)
	// SourcesMatching returns the sources whose original, current or site
	// URL is url, without their Body.
	SourcesMatching(ctx context.Context, url string) ([]Source, error)
	// Sources lists every source followed by at least one node, without
	// their Body.
	Sources(ctx context.Context) ([]Source, error)
	// MarkSourceDue makes the source due for a fetch at `at` (earlier only:
	// a due time already sooner is kept), records the ping time, and, when
	// note is set, keeps it for the next fetch. ErrNotFound.
	MarkSourceDue(ctx context.Context, id int64, at time.Time, note *ChangeNote) error
	// ScheduleSource makes the source due at `at` unless it is due sooner
	// already, recording reason as its NextFetchReason when the due time
	// changes. Unlike MarkSourceDue it records no ping. ErrNotFound.
	ScheduleSource(ctx context.Context, id int64, at time.Time, reason string) error
	// ReviveSource makes a gone source (HTTP 410, or moved to nowhere) a
	// live one again, due at `at` with reason; it reports whether the
	// source was gone. A node created for the source asks for it.
	ReviveSource(ctx context.Context, id int64, at time.Time, reason string) (bool, error)
}

// SubscriptionStore is where subscriptions of every kind are kept and
// their requests recorded.
type SubscriptionStore interface {
	// PutSubscription inserts s or, when a subscription with the same node,
	// kind and address exists, updates its state, options, SubID and expiry
	// (keeping its cursor) and drops its pending change. It sets s.ID and
	// reports whether it was new. Requests that the subscriber must verify
	// go through RequestSubscription instead.
	PutSubscription(ctx context.Context, s *Subscription) (created bool, err error)
	// RequestSubscription stores a subscribe request of a kind whose
	// subscriber verifies its requests (webhook, WebSub, rssCloud) in one
	// transaction, keyed by node, kind and address as PutSubscription is,
	// under a new Change.ID. With no such subscription, s is inserted as
	// given (state SubPending): RequestCreated. One not verified yet takes
	// s's options, SubID and expiry and stays pending: RequestReplaced. A
	// verified one (any other state) is left as it is, its cursor,
	// delivery state, settings and expiry included; the request becomes
	// its pending change (ChangeSubscribe with s's options), replacing an
	// earlier one and freeing its lease, so that the new change is verified
	// at once (a verification of the earlier one still running then
	// decides nothing): RequestChangePending. It fills s from the stored
	// row.
	RequestSubscription(ctx context.Context, s *Subscription) (RequestOutcome, error)
	// RequestUnsubscription stores an unsubscribe request about the node's
	// subscription of kind and address in one transaction: one not
	// verified yet is removed at once (RequestCancelled); a verified one
	// is left as it is with a pending ChangeUnsubscribe under a new
	// Change.ID, replacing an earlier change (RequestChangePending). It
	// returns the subscription as it stands (as it was, when removed);
	// ErrNotFound when there is none.
	RequestUnsubscription(ctx context.Context, nodeID int64, kind Kind, address string) (*Subscription, RequestOutcome, error)
	// Subscription returns one subscription by id; ErrNotFound.
	Subscription(ctx context.Context, id int64) (*Subscription, error)
	// Subscriptions lists the subscriptions matching f, oldest first.
	Subscriptions(ctx context.Context, f SubscriptionFilter) ([]Subscription, error)
	// DeleteSubscriptions removes the subscriptions matching f (at least
	// NodeID or BareJID must be set) and returns them.
	DeleteSubscriptions(ctx context.Context, f SubscriptionFilter) ([]Subscription, error)
	// DeleteSubscription removes one subscription; ErrNotFound.
	DeleteSubscription(ctx context.Context, id int64) error
	// SetSubscriptionState changes a subscription's state and expiry.
	SetSubscriptionState(ctx context.Context, id int64, state SubState, expires time.Time) error
	// CountXMPPSubscriptions counts the XMPP subscriptions of the bare JID
	// (all its resources, every state): to the node when nodeID > 0, to
	// every node otherwise.
	CountXMPPSubscriptions(ctx context.Context, bareJID string, nodeID int64) (int, error)
	// CountCallbackHostSubscriptions counts the subscriptions, of every
	// HTTP kind and state, whose callback is on host (CallbackHost of
	// their kind and address, which the store keeps with each).
	CountCallbackHostSubscriptions(ctx context.Context, host string) (int, error)
}

// ReaderStore is the state of XMPP readers' subscriptions beside their
// options: bounces and digests.
type ReaderStore interface {
	// RecordBounce counts one bounced notification of the XMPP
	// subscription id at `at` with its reason: it adds one to its
	// ConsecutiveErrors, sets FirstFailureAt if unset and LastError to
	// reason, and returns the count and the first bounce's time.
	// ErrNotFound if there is no such XMPP subscription.
	RecordBounce(ctx context.Context, id int64, reason string, at time.Time) (count int, first time.Time, err error)
	// ClearBounces forgets the bounces of the XMPP subscriptions ids.
	ClearBounces(ctx context.Context, ids []int64) error
	// SetDigest replaces the options of the XMPP subscription id with its
	// cursor and due time (zero: no digest due) in one write; ErrNotFound.
	SetDigest(ctx context.Context, id int64, opts Options, cursor int64, next time.Time) error
	// DueDigests lists up to limit XMPP subscriptions whose NextAttemptAt
	// is set and not after now, the earliest first.
	DueDigests(ctx context.Context, now time.Time, limit int) ([]Subscription, error)
	// SaveDigest records a digest of the XMPP subscription id that was due
	// at `due`: its cursor, the next due time (zero: none) and when it was
	// sent (LastDeliveredAt). It changes nothing and reports false when
	// the subscription is gone or its due time is not `due` any more.
	SaveDigest(ctx context.Context, id int64, due time.Time, cursor int64, next, sent time.Time) (bool, error)
}

// AffiliationStore is the JIDs' affiliations with nodes.
type AffiliationStore interface {
	// SetAffiliation sets jid's affiliation on the node; AffNone removes it.
	SetAffiliation(ctx context.Context, nodeID int64, jid string, a Affiliation) error
	// Affiliation returns jid's affiliation (AffNone if it has none).
	Affiliation(ctx context.Context, nodeID int64, jid string) (Affiliation, error)
	// Affiliations lists the node's affiliations by JID.
	Affiliations(ctx context.Context, nodeID int64) (map[string]Affiliation, error)
	// JIDAffiliations lists the JID's affiliations on every node, by node
	// name, in one query.
	JIDAffiliations(ctx context.Context, jid string) ([]NodeAffiliation, error)
}

// PingToRecord is one ping of RecordPingsMarkingDue: the ping, the
// canonical URLs its sources are matched by, and its change note.
type PingToRecord struct {
	Ping *Ping
	URLs []string
	Note *ChangeNote
}

// PingStore records the pings received.
type PingStore interface {
	// RecordPingMarkingDue stores a received ping and sets its ID and, in
	// the same transaction, does MarkSourceDue(at, note) of every source
	// that is not gone and whose original, current or site URL is one of
	// urls. It returns the ids of
	// the sources it marked, each once, in the order first matched. Either
	// all of it is stored or none.
	RecordPingMarkingDue(ctx context.Context, p *Ping, urls []string, at time.Time, note *ChangeNote) ([]int64, error)
	// RecordPingsMarkingDue is RecordPingMarkingDue of every ping of
	// batch, in one transaction: either all of them are stored or none.
	// It returns the ids each ping marked, in batch order.
	RecordPingsMarkingDue(ctx context.Context, batch []PingToRecord, at time.Time) ([][]int64, error)
	// Pings returns pings received since the given time, newest first, and
	// the number of pings ever received.
	Pings(ctx context.Context, since time.Time, limit int) (pings []Ping, total int64, err error)
}

// MaintenanceStore removes what no one needs any more.
type MaintenanceStore interface {
	// Prune removes what no one needs any more: pings older than
	// pingsBefore, and log events that are not among the node's current
	// items and that every cursor has passed (the node's XMPP cursor, HTTP
	// subscriptions' and digest subscriptions') or that are out of the
	// node's LogWindow.
	Prune(ctx context.Context, pingsBefore time.Time) error
	// ForgetSeenEntries forgets, per source, the entry ids its fetches have
	// not shown for `after`, counted back from the latest fetch that showed
	// any (so an unchanging feed forgets nothing); it returns how many.
	// An id forgotten and shown again is a new entry.
	ForgetSeenEntries(ctx context.Context, after time.Duration) (int64, error)
	// DeleteExpiredSubscriptions removes subscriptions whose expiry passed
	// and returns them.
	DeleteExpiredSubscriptions(ctx context.Context, now time.Time) ([]Subscription, error)
	// DeleteUnused removes what strangers made pingd keep and nobody uses
	// any more. An implicit node without subscriptions (of any kind, in
	// any state) is marked with now; one marked before nodesBefore and
	// still without subscriptions is deleted with its log, as DeleteNode
	// does. A source no node follows is marked likewise and deleted with
	// its fetch state and seen ids once marked before sourcesBefore. A
	// subscription stored for a node, or a node for a source, clears its
	// mark in the same transaction; a node or source that is in use at
	// the moment of the deletion is never deleted, also when several
	// processes run this at once. Owners' nodes are never touched. It
	// returns how many nodes and sources it deleted.
	DeleteUnused(ctx context.Context, now, nodesBefore, sourcesBefore time.Time) (nodes, sources int64, err error)
}

// Stores are the hub's store ports, one field per role; New refuses a
// missing one. cmd/pingd gives the one store for all (store.HubStores).
type Stores struct {
	Nodes         NodeStore
	Log           LogStore
	Sources       SourceStore
	Subscriptions SubscriptionStore
	Readers       ReaderStore
	Affiliations  AffiliationStore
	Pings         PingStore
	Maintenance   MaintenanceStore
}

// check names the first port missing.
func (s Stores) check() error {
	for _, p := range []struct {
		name    string
		missing bool
	}{
		{"Nodes", s.Nodes == nil}, {"Log", s.Log == nil}, {"Sources", s.Sources == nil},
		{"Subscriptions", s.Subscriptions == nil},
		{"Readers", s.Readers == nil}, {"Affiliations", s.Affiliations == nil},
		{"Pings", s.Pings == nil}, {"Maintenance", s.Maintenance == nil},
	} {
		if p.missing {
			return fmt.Errorf("hub: no store for %s", p.name)
		}
	}
	return nil
}

// NodeClaim is what ClaimNodeDeliveries claimed and read.
type NodeClaim struct {
	Subscriptions []Subscription
	// Node is nil when nothing was claimed or the node is gone; then
	// Events is empty too.
	Node *Node
	// Events are the node's events after the cursor After, oldest first.
	After  int64
	Events []Event
	// Held reports that the events after After are the ones the claimer
	// said it holds (its held EventSpan): the log ends where they end, so
	// neither Node nor Events was read (both are left empty).
	Held bool
}

// EventSpan names the events of a node's log after After up to Last
// (After < Last): those a claimer already holds in memory.
type EventSpan struct{ After, Last int64 }

// NodePage is one page of the nodes in name order, for paging through
// them (XEP-0059 on disco#items, the chat command "nodes"). With Backward
// it is the Limit nodes right before Before ("": the last ones), in name
// order; otherwise the Limit nodes after After ("": from the first),
// skipping Offset more.
type NodePage struct {
	After    string
	Before   string
	Backward bool
	Offset   int
	Limit    int
}

// NodeAffiliation is a JID's affiliation on one node.
type NodeAffiliation struct {
	Node        string
	Affiliation Affiliation
}
