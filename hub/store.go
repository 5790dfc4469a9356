package hub

import (
	"context"
	"time"
)

// Store is the persistence the hub needs. The store package implements it
// on SQLite and PostgreSQL; every method must be safe for concurrent use,
// apply a per-query timeout, and wrap ErrNotFound / ErrExists where it says
// so. Times are stored and returned in UTC.
type Store interface {
	// Check answers nil while the database answers (health checks).
	Check(ctx context.Context) error
	Close() error

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
	// NodeDeletions lists the recorded node deletions, oldest first, at
	// most limit.
	NodeDeletions(ctx context.Context, limit int) ([]NodeDeletion, error)
	// ForgetNodeDeletions removes recorded node deletions whose
	// subscribers were told; ids that are gone already are no error.
	ForgetNodeDeletions(ctx context.Context, ids []int64) error
	// CountImplicitNodes counts the implicit nodes.
	CountImplicitNodes(ctx context.Context) (int, error)
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
	// SetXMPPSeq records that events up to seq went to the XMPP server; it
	// never moves the cursor back.
	SetXMPPSeq(ctx context.Context, nodeID int64, seq int64) error
	// NodesBehindXMPP lists nodes whose LastSeq is beyond their XMPPSeq.
	NodesBehindXMPP(ctx context.Context) ([]Node, error)
	// OpenNodes lists up to limit nodes of the open access model with
	// their sources' URL, title and site, in creation order, and counts
	// all open nodes.
	OpenNodes(ctx context.Context, limit int) ([]ListedNode, int, error)

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
	// SourcesLeasedByOthers lists, without their Body, the sources whose
	// lease is held by someone other than owner and has not run out at
	// now: a few, where Sources would read every source.
	SourcesLeasedByOthers(ctx context.Context, owner string, now time.Time) ([]Source, error)
	// SourcesLeasedBy lists, without their Body, the sources whose lease
	// owner holds, run out or not: what a process of that name left
	// leased when it died.
	SourcesLeasedBy(ctx context.Context, owner string) ([]Source, error)
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
	// ClaimDueSources leases up to limit sources due at now that are not
	// gone, not leased by anyone else and followed by a node, the earliest
	// due first, each with its Subscribers counted (one query for the
	// claim, not one per fetch), without its Body (SourceBody reads it
	// when an origin answers with a delta).
	ClaimDueSources(ctx context.Context, now time.Time, limit int, owner string, until time.Time) ([]Source, error)
	// ApplyFetch stores a fetch's outcome in one transaction: the source
	// state (releasing the lease and clearing a pending note it consumed),
	// the ids seen, and the events of every node of the source. See
	// FetchOutcome and FetchApplied. What the fetch brings is the hub's
	// to decide: the store reads the source's baseline flag and latest
	// ping and which ids are unseen, and writes what FetchNewsOf,
	// FetchNews.ForNode and NextFetchAfter (fetchrules.go) decide from
	// them: on the baseline every entry id is recorded as seen and no item
	// is told: a feed's entries (FetchNews.Kept, the newest MaxItems of
	// them) are kept as each node's items as KeepItems keeps them, cursors
	// standing at the end of a node's log moved past them, and implicit
	// nodes without a title take FetchNews.Title; a node takes at most its
	// MaxItems of the newest new entries. A cursor only moves forward:
	// SaveDeliveryState(s) and SaveDigest never take one back. It sets the stored LastNewItems to the number of new
	// entries. The body (State.Body) is written only when o.Changed: an
	// outcome that did not change the representation keeps the stored
	// one, whatever State.Body holds (sources read without it).
	//
	// Every new id is recorded as seen,
	// published or not, and those left out are never announced. A source
	// without nodes records its ids and publishes nothing. When new ids
	// were recorded, the ids the fetch did not show beyond the
	// HiddenSeenKept shown last are forgotten.
	//
	// It is the lease holder's write: when the source's lease is no
	// longer o.Owner's (it ran out and another process took it), nothing
	// is written and it returns ErrLeaseLost.
	ApplyFetch(ctx context.Context, o FetchOutcome) (FetchApplied, error)
	// ApplyUnchangedFetches stores several outcomes that change nothing
	// but their sources' fetch state (FetchOutcome.Unchanged) in one
	// transaction, with one statement for many sources where the database
	// allows: what ApplyFetch would store for each, the representation
	// (body, hash, content type, title, description, site), the seen ids
	// and a pending note left as they are. Each lease is released, and a
	// ping stored while the fetch ran makes the source due again
	// (NextFetchAfter, decided in the statement itself). Sources removed
	// meanwhile are skipped, and so are those whose lease is no longer
	// their Owner's (see ApplyFetch). An outcome that is not Unchanged is refused
	// with ErrInvalid and nothing is written.
	ApplyUnchangedFetches(ctx context.Context, outs []FetchOutcome) error

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
	// CountXMPPSubscriptions counts the XMPP subscriptions of the bare JID
	// (all its resources, every state): to the node when nodeID > 0, to
	// every node otherwise.
	CountXMPPSubscriptions(ctx context.Context, bareJID string, nodeID int64) (int, error)
	// CountCallbackHostSubscriptions counts the subscriptions, of every
	// HTTP kind and state, whose callback is on host (CallbackHost of
	// their kind and address, which the store keeps with each).
	CountCallbackHostSubscriptions(ctx context.Context, host string) (int, error)
	// RequestUnsubscription stores an unsubscribe request about the node's
	// subscription of kind and address in one transaction: one not
	// verified yet is removed at once (RequestCancelled); a verified one
	// is left as it is with a pending ChangeUnsubscribe under a new
	// Change.ID, replacing an earlier change (RequestChangePending). It
	// returns the subscription as it stands (as it was, when removed);
	// ErrNotFound when there is none.
	RequestUnsubscription(ctx context.Context, nodeID int64, kind Kind, address string) (*Subscription, RequestOutcome, error)
	// ApplySubscriptionChange applies the request changeID, which the
	// subscriber verified, in one transaction: a subscription not verified
	// yet becomes active, expiring at expires; a pending subscribe change
	// replaces the subscription's options and expiry and makes it active;
	// a pending unsubscribe change deletes it. A (re)subscription applied
	// gets a clean failure record and no retry time (a verified renewal is
	// a sign of life); its cursor and the rest of its delivery state stay.
	// Deciding a change releases its lease. It reports false and changes
	// nothing when changeID is not the subscription's latest request (a
	// newer one replaced it), or no longer waits, or the subscription is
	// gone.
	ApplySubscriptionChange(ctx context.Context, id int64, changeID string, expires time.Time) (bool, error)
	// ReleaseSubscriptionChange gives back the lease of the verification of
	// the change changeID, undecided (a verification cut off by shutdown,
	// or put off for a busy host), so that it is claimed again.
	// Only owner's lease is given back: one that ran out and was taken
	// by another process stays that process's.
	ReleaseSubscriptionChange(ctx context.Context, id int64, changeID, owner string) error
	// RefuseSubscriptionChange records that the subscriber did not verify
	// the request changeID: a subscription not verified yet is deleted; a
	// pending change is dropped (Outcome ChangeRefused) and the verified
	// subscription stays exactly as it is. It reports false and changes
	// nothing as ApplySubscriptionChange does.
	RefuseSubscriptionChange(ctx context.Context, id int64, changeID string) (bool, error)
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
	// ClaimDeliveries leases up to limit subscriptions of the HTTP kinds
	// that have work at now: pending or unsubscribing ones, and active ones
	// whose cursor is behind their node's LastSeq, in both cases with
	// NextAttemptAt <= now and no live lease of another owner. It also
	// leases the verification of pending changes whose change lease is
	// free, whatever the subscription's NextAttemptAt and delivery lease (a
	// renewal is verified at once, not after the backoff of earlier
	// failures, and a slow verification holds no delivery back): such an
	// entry has Change.Claimed set and its change lease taken, and the
	// subscription may come once more for its deliveries. nodeID > 0
	// restricts the claim to one node.
	ClaimDeliveries(ctx context.Context, now time.Time, nodeID int64, limit int, owner string, until time.Time) ([]Subscription, error)
	// ClaimNodeDeliveries is ClaimDeliveries of one node's subscriptions
	// (nodeID > 0) that, when it claims any, also reads in the same
	// transaction the node and up to eventsLimit of its events after the
	// cursor most of the active subscriptions claimed stand at: what their
	// deliveries read next.
	ClaimNodeDeliveries(ctx context.Context, now time.Time, nodeID int64, limit int, owner string, until time.Time, eventsLimit int) (*NodeClaim, error)
	// SaveDeliveryState writes a subscription's delivery bookkeeping and
	// releases its lease; ErrNotFound if it was removed meanwhile. It is
	// the lease holder's write: it changes nothing unless the row's lease
	// is still st.LeaseOwner's ("" for a row nobody leases), and reports
	// ErrLeaseLost when another process holds or released it since. The
	// cursor never moves back: the stored one is kept when it is further.
	SaveDeliveryState(ctx context.Context, id int64, st DeliveryState) error
	// SaveDeliveryStates does what SaveDeliveryState does for several
	// subscriptions at once, in one transaction, skipping those removed
	// meanwhile and those whose lease is no longer their state's
	// LeaseOwner's: all are saved or none. A subscription named twice gets
	// the last of its states.
	SaveDeliveryStates(ctx context.Context, states []SavedDeliveryState) error
	// RenewDeliveryLeases extends to `until` the delivery and change
	// leases that owner holds of the subscriptions ids (one that ran out
	// and nobody else took included), and returns how many: a process
	// renews what it works on, so its leases can be short and a process
	// that died frees its subscriptions soon.
	RenewDeliveryLeases(ctx context.Context, owner string, ids []int64, until time.Time) (int64, error)
	// ReleaseDeliveryLeases frees every delivery and change lease owner
	// holds, whatever their time, and returns how many: a process
	// starting under the name of one that died takes back what that one
	// left leased, instead of waiting for the leases to run out.
	ReleaseDeliveryLeases(ctx context.Context, owner string) (int64, error)
	// DeleteExpiredSubscriptions removes subscriptions whose expiry passed
	// and returns them.
	DeleteExpiredSubscriptions(ctx context.Context, now time.Time) ([]Subscription, error)

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

	// SetAffiliation sets jid's affiliation on the node; AffNone removes it.
	SetAffiliation(ctx context.Context, nodeID int64, jid string, a Affiliation) error
	// Affiliation returns jid's affiliation (AffNone if it has none).
	Affiliation(ctx context.Context, nodeID int64, jid string) (Affiliation, error)
	// Affiliations lists the node's affiliations by JID.
	Affiliations(ctx context.Context, nodeID int64) (map[string]Affiliation, error)
	// JIDAffiliations lists the JID's affiliations on every node, by node
	// name, in one query.
	JIDAffiliations(ctx context.Context, jid string) ([]NodeAffiliation, error)

	// RecordPingMarkingDue stores a received ping and sets its ID and, in
	// the same transaction, does MarkSourceDue(at, note) of every source
	// that is not gone and whose original, current or site URL is one of
	// urls. It returns the ids of
	// the sources it marked, each once, in the order first matched. Either
	// all of it is stored or none.
	RecordPingMarkingDue(ctx context.Context, p *Ping, urls []string, at time.Time, note *ChangeNote) ([]int64, error)
	// Pings returns pings received since the given time, newest first, and
	// the number of pings ever received.
	Pings(ctx context.Context, since time.Time, limit int) (pings []Ping, total int64, err error)

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
}

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
