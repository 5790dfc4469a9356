package hub

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Errors the hub and the stores return; callers test them with errors.Is and
// map them to their protocol's conditions (HTTP status, XMPP error).
var (
	ErrNotFound  = errors.New("not found")
	ErrExists    = errors.New("already exists")
	ErrInvalid   = errors.New("invalid")
	ErrForbidden = errors.New("forbidden")
	// ErrNotMember is returned when a JID that is not on a whitelist node's
	// whitelist tries to subscribe or read its items.
	ErrNotMember = fmt.Errorf("%w: not on the whitelist", ErrForbidden)
	// ErrSchemaTooNew is returned by a store whose database was written by a
	// newer pingd.
	ErrSchemaTooNew = errors.New("database schema is newer than this pingd")
	// ErrLimit is returned when a request would take pingd past one of the
	// bounds on what strangers can make it keep (bounds.go).
	ErrLimit = errors.New("limit reached")
	// ErrImplicitNodesFull: pingd follows as many URLs for subscribers as
	// Config.MaxImplicitNodes allows, and creates no implicit node more.
	ErrImplicitNodesFull = fmt.Errorf("%w: no more new URLs to follow for subscribers", ErrLimit)
	// ErrCallbackHostFull: the callback's host has as many subscriptions
	// as Config.MaxCallbackHostSubscriptions allows.
	ErrCallbackHostFull = fmt.Errorf("%w: too many subscriptions with callbacks on this host", ErrLimit)
)

// AccessModel says who may subscribe to a node and read its items.
type AccessModel string

const (
	AccessOpen      AccessModel = "open"
	AccessWhitelist AccessModel = "whitelist"
)

// Valid reports whether a is a supported access model.
func (a AccessModel) Valid() bool { return a == AccessOpen || a == AccessWhitelist }

// Affiliation is a JID's standing on a node (XEP-0060 §4.1).
type Affiliation string

const (
	AffOwner     Affiliation = "owner"
	AffPublisher Affiliation = "publisher"
	AffMember    Affiliation = "member"
	AffNone      Affiliation = "none"
	AffOutcast   Affiliation = "outcast"
)

// Valid reports whether a is an affiliation pingd supports.
func (a Affiliation) Valid() bool {
	switch a {
	case AffOwner, AffPublisher, AffMember, AffNone, AffOutcast:
		return true
	}
	return false
}

// MayRead reports whether the affiliation lets a JID subscribe to and read a
// node of the given access model.
func (a Affiliation) MayRead(model AccessModel) bool {
	switch a {
	case AffOutcast:
		return false
	case AffOwner, AffPublisher, AffMember:
		return true
	}
	return model == AccessOpen
}

// NotificationType is the XMPP message type of notifications.
const (
	NotifyNormal   = "normal"
	NotifyHeadline = "headline"
)

// NodeConfig is the part of a node an owner configures.
type NodeConfig struct {
	Title            string      `json:"title"`
	AccessModel      AccessModel `json:"access_model"`
	MaxItems         int         `json:"max_items"`
	DeliverPayloads  bool        `json:"deliver_payloads"`
	NotificationType string      `json:"notification_type"`
	// SendLastPublished says when the node's newest item goes to a
	// subscriber (XEP-0060 pubsub#send_last_published_item): SendLastOnSub
	// ("" too) or SendLastNever.
	SendLastPublished string `json:"send_last_published_item"`
	// Polling is what the node's own feeds tell readers about polling.
	Polling FeedPolling `json:"polling"`
}

// FeedPolling are the polling hints a node's owner sets for readers of
// the node's own feeds (/atom, /rss): RSS <ttl>, <skipHours>, <skipDays>
// and the syndication module's sy:updatePeriod and sy:updateFrequency.
// Zero values are left out (ttl: pingd's default).
type FeedPolling struct {
	TTLMinutes      int      `json:"ttl_minutes,omitempty"`
	SkipHours       []int    `json:"skip_hours,omitempty"`
	SkipDays        []string `json:"skip_days,omitempty"`
	UpdatePeriod    string   `json:"update_period,omitempty"`
	UpdateFrequency int      `json:"update_frequency,omitempty"`
}

var weekdays = []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

// Validate checks the hints and puts day names in their RSS spelling.
func (p *FeedPolling) Validate() error {
	if p.TTLMinutes < 0 || p.TTLMinutes > 7*24*60 {
		return fmt.Errorf("%w: polling.ttl_minutes %d (want 0 to 10080)", ErrInvalid, p.TTLMinutes)
	}
	seenHour := map[int]bool{}
	for _, h := range p.SkipHours {
		if h < 0 || h > 23 || seenHour[h] {
			return fmt.Errorf("%w: polling.skip_hours: %d is not an hour 0 to 23 given once", ErrInvalid, h)
		}
		seenHour[h] = true
	}
	seenDay := map[string]bool{}
	for i, d := range p.SkipDays {
		found := ""
		for _, w := range weekdays {
			if strings.EqualFold(w, strings.TrimSpace(d)) {
				found = w
			}
		}
		if found == "" || seenDay[found] {
			return fmt.Errorf("%w: polling.skip_days: %q is not a day name (Monday … Sunday) given once", ErrInvalid, d)
		}
		seenDay[found] = true
		p.SkipDays[i] = found
	}
	switch p.UpdatePeriod {
	case "", "hourly", "daily", "weekly", "monthly", "yearly":
	default:
		return fmt.Errorf("%w: polling.update_period %q (want hourly, daily, weekly, monthly or yearly)", ErrInvalid, p.UpdatePeriod)
	}
	if p.UpdateFrequency < 0 || p.UpdateFrequency > 1000 || (p.UpdateFrequency > 0 && p.UpdatePeriod == "") {
		return fmt.Errorf("%w: polling.update_frequency %d (want 1 to 1000, with an update_period)", ErrInvalid, p.UpdateFrequency)
	}
	return nil
}

// The values of NodeConfig.SendLastPublished (XEP-0060 §12.5). pingd
// sends the newest item to each new subscription (on_sub, its default,
// so a reader sees at once that the subscription works) or never;
// on_sub_and_presence, which also sends it whenever a subscriber comes
// online, needs the subscribers' presence, which pingd does not ask for
// (a presence subscription would make their clients ask them), and is
// refused.
const (
	SendLastNever            = "never"
	SendLastOnSub            = "on_sub"
	SendLastOnSubAndPresence = "on_sub_and_presence"
)

// DefaultMaxItems is how many items a node keeps when its owner does not say.
const DefaultMaxItems = 50

// MaxItemsLimit is the largest max_items an owner may configure.
const MaxItemsLimit = 1000

// LogWindow is how many of its newest events a node's log keeps for its
// subscribers. Older events go once they are no longer current items,
// whatever the cursors: a subscriber further behind (a receiver down for
// days, an XMPP server away while a node publishes) skips ahead to the
// window, as it would need more than any node keeps (max_items is at most
// LogWindow). Bursts within it, such as an owner publishing hundreds of
// items at once to a node that keeps 50, still reach every subscriber.
const LogWindow = MaxItemsLimit

// MaxHiddenSeen bounds, per source, the remembered ids of entries its
// latest fetch no longer showed (the oldest are forgotten first; the ids
// it shows are always kept): without it a feed that shows ever new
// entries grows the record at every fetch. An id forgotten and shown
// again is new.
const MaxHiddenSeen = 10_000

// DefaultNodeConfig is the configuration of a node created without one.
func DefaultNodeConfig() NodeConfig {
	return NodeConfig{
		AccessModel:       AccessOpen,
		MaxItems:          DefaultMaxItems,
		DeliverPayloads:   true,
		NotificationType:  NotifyHeadline,
		SendLastPublished: SendLastOnSub,
	}
}

// Validate checks the configuration and fills in defaults for zero values.
func (c *NodeConfig) Validate() error {
	if c.AccessModel == "" {
		c.AccessModel = AccessOpen
	}
	if !c.AccessModel.Valid() {
		return fmt.Errorf("%w: access_model %q (want open or whitelist)", ErrInvalid, c.AccessModel)
	}
	if c.MaxItems == 0 {
		c.MaxItems = DefaultMaxItems
	}
	if c.MaxItems < 1 || c.MaxItems > MaxItemsLimit {
		return fmt.Errorf("%w: max_items %d (want 1 to %d)", ErrInvalid, c.MaxItems, MaxItemsLimit)
	}
	if c.NotificationType == "" {
		c.NotificationType = NotifyHeadline
	}
	if c.NotificationType != NotifyNormal && c.NotificationType != NotifyHeadline {
		return fmt.Errorf("%w: notification_type %q (want normal or headline)", ErrInvalid, c.NotificationType)
	}
	switch c.SendLastPublished {
	case "":
		c.SendLastPublished = SendLastOnSub
	case SendLastOnSub, SendLastNever:
	case SendLastOnSubAndPresence:
		return fmt.Errorf("%w: send_last_published_item %q: pingd does not follow its subscribers' presence; "+
			"it sends the newest item to new subscriptions (on_sub) or never", ErrInvalid, c.SendLastPublished)
	default:
		return fmt.Errorf("%w: send_last_published_item %q (want on_sub or never)", ErrInvalid, c.SendLastPublished)
	}
	if len(c.Title) > 1024 {
		return fmt.Errorf("%w: title longer than 1024 bytes", ErrInvalid)
	}
	return c.Polling.Validate()
}

// Node is a pubsub node: a named log of events with subscribers.
type Node struct {
	ID   int64
	Name string
	NodeConfig
	// SourceID and SourceURL name the web resource the node follows; zero
	// and empty for a node that only its owners publish to.
	SourceID  int64
	SourceURL string
	// Implicit is true for a node pingd created itself because someone
	// subscribed to a URL (rssCloud, CNWS, WebSub) that no node followed.
	Implicit bool
	// TokenHash is the SHA-256 of the node's bearer token.
	TokenHash []byte
	// LastSeq is the sequence number of the newest event in the node's log.
	LastSeq int64
	// XMPPSeq is the newest event the XMPP server has acknowledged
	// ("sent up to"; written, with Config.Shared of the component).
	XMPPSeq   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// MaxNodeNameBytes is the longest node name XMPP allows pingd to use.
const MaxNodeNameBytes = 255

// ValidNodeName checks that name is 1–255 bytes of printable UTF-8.
func ValidNodeName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty node name", ErrInvalid)
	}
	if len(name) > MaxNodeNameBytes {
		return fmt.Errorf("%w: node name longer than %d bytes", ErrInvalid, MaxNodeNameBytes)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("%w: node name is not valid UTF-8", ErrInvalid)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%w: node name contains the non-printable character %U", ErrInvalid, r)
		}
	}
	return nil
}

// ReservedNodePrefix starts the node names pingd keeps for itself: the
// component's XEP-0050 command nodes share XEP-0030's node names with the
// pubsub nodes, so a pubsub node of such a name would be hidden behind a
// command in disco#info. The prefix is case-sensitive, as node names are.
const ReservedNodePrefix = "pingd#"

// ValidNewNodeName checks the name of a node to be created: a valid node
// name that does not start with ReservedNodePrefix. Looking nodes up needs
// only ValidNodeName, so a node created before the prefix was reserved
// stays reachable.
func ValidNewNodeName(name string) error {
	if err := ValidNodeName(name); err != nil {
		return err
	}
	if strings.HasPrefix(name, ReservedNodePrefix) {
		return fmt.Errorf("%w: node names starting with %q are reserved for pingd's ad-hoc commands", ErrInvalid, ReservedNodePrefix)
	}
	return nil
}

// EventKind says what an event in a node's log records.
type EventKind string

const (
	// EventItem is a new or replaced item with an Atom entry payload.
	EventItem EventKind = "item"
	// EventRetract removes the item ItemID.
	EventRetract EventKind = "retract"
	// EventPurge removes every item of the node.
	EventPurge EventKind = "purge"
	// EventChange says the source changed without new items (an edited
	// entry, a non-entry change, a trusted CNWS resourceChange). Only
	// URL-level subscribers (rssCloud, CNWS) are told.
	EventChange EventKind = "change"
	// EventRevoke records that the subscription of the JID Address (as it
	// subscribed, full or bare) was removed because its bare JID left the
	// whitelist; XMPP tells that JID.
	EventRevoke EventKind = "revoke"
	// EventSubscribed records that an owner subscribed the JID Address
	// (XEP-0060 §8.8.2); XMPP tells that JID, as it does for a revoke.
	EventSubscribed EventKind = "subscribed"
	// EventLast sends the node's newest item (a copy of it: ItemID,
	// Payload and the plain fields; Updated is the entry's time, else when
	// the item was published) to the new XMPP subscription of the JID
	// Address alone (XEP-0060 §12.5, send_last_published_item on_sub). It
	// is not an item of the node and tells no one else.
	EventLast EventKind = "last"
)

// IsChange reports whether the event changes the node's content, the
// condition on which URL-level protocols notify.
func (k EventKind) IsChange() bool {
	return k == EventItem || k == EventRetract || k == EventPurge || k == EventChange
}

// Event is one entry of a node's log.
type Event struct {
	NodeID int64
	Seq    int64
	Kind   EventKind
	// ItemID is the stable item id (items and retractions).
	ItemID string
	// Payload is the Atom <entry xmlns="http://www.w3.org/2005/Atom"> element
	// of an item, complete and self-contained.
	Payload []byte
	// Title, Summary and Link are plain-text copies for protocols that
	// carry them without the payload (CNWS, chat).
	Title   string
	Summary string
	Link    string
	// Address is the subscribed JID of a revoke event.
	Address   string
	Publisher string
	Updated   time.Time
	Created   time.Time
}

// Entry is one item as the feed parser or a publisher gives it, before it
// enters a log.
type Entry struct {
	ID      string
	Payload []byte
	Title   string
	Summary string
	Link    string
	Updated time.Time
}

// ChangeNote is what a publisher said about a change (CNWS resourceChange):
// carried into URL-level notifications, and a change even when a fetch
// shows none.
type ChangeNote struct {
	Title       string
	Description string
	// Extensions are elements of other namespaces the announcement carried
	// (CNWS: "extra information … in a different namespace"), each a
	// self-contained XML element, passed on as they came.
	Extensions string
}

// Kind is the transport a subscriber asked to be notified over.
type Kind string

const (
	KindXMPP     Kind = "xmpp"
	KindWebhook  Kind = "webhook" // GetPingd HTTP subscription
	KindWebSub   Kind = "websub"
	KindRSSCloud Kind = "rsscloud"
	KindCNWS     Kind = "cnws"
)

// Kinds lists every subscriber kind.
var Kinds = []Kind{KindXMPP, KindWebhook, KindWebSub, KindRSSCloud, KindCNWS}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool {
	for _, x := range Kinds {
		if k == x {
			return true
		}
	}
	return false
}

// ItemLevel reports whether subscribers of this kind get items (only the
// new entries) rather than a bare "this URL changed".
func (k Kind) ItemLevel() bool { return k == KindXMPP || k == KindWebhook || k == KindWebSub }

// SubState is where a subscription stands.
type SubState string

const (
	// SubPending waits for verification of intent (WebSub, GetPingd
	// webhooks, rssCloud with domain) or a first test notification.
	SubPending SubState = "pending"
	// SubActive receives notifications.
	SubActive SubState = "active"
	// SubUnsubscribing waits for verification of an unsubscribe request,
	// receiving nothing meanwhile. Only rows an earlier pingd wrote have
	// it: an unsubscription is now a pending SubChange of the active
	// subscription, which is served until the change is verified.
	SubUnsubscribing SubState = "unsubscribing"
	// SubSuspended receives nothing until it is renewed (rssCloud after
	// three consecutive errors).
	SubSuspended SubState = "suspended"
)

// Options are the per-kind settings of a subscription, stored as one JSON
// document so new kinds need no schema change.
type Options struct {
	// GetPingd webhooks: POST or NOTIFY; diff "none" or "application/patch-ops+xml"
	// (or its alias). XMPP subscriptions: Diff is "" or DiffPatchOps (the
	// x-pingd#diff option).
	Method string `json:"method,omitempty"`
	Diff   string `json:"diff,omitempty"`
	// Secret keys the HMAC signature of deliveries (webhooks, WebSub). It
	// must be kept in clear to sign; it is never logged or shown.
	Secret string `json:"secret,omitempty"`
	// WebSub: the topic as the subscriber named it, the requested lease and
	// the signature algorithm (sha1, sha256, sha384, sha512).
	Topic        string `json:"topic,omitempty"`
	LeaseSeconds int    `json:"lease_seconds,omitempty"`
	SigAlgo      string `json:"sig_algo,omitempty"`
	// rssCloud: http-post, https-post, xml-rpc or soap, and the procedure
	// to call (xml-rpc, soap).
	Protocol  string `json:"protocol,omitempty"`
	Procedure string `json:"procedure,omitempty"`
	// XMPP: Format is what a notification is, FormatPubsub ("" too) or
	// FormatMessage. IncludeBody (XEP-0060 subscription option) adds a
	// readable <body> (title, link, summary) to each pubsub#event;
	// MessageType is the notification's message type (headline, normal or
	// chat), "" for the default: the node's own for FormatPubsub, chat for
	// FormatMessage.
	Format      string `json:"format,omitempty"`
	IncludeBody bool   `json:"include_body,omitempty"`
	MessageType string `json:"message_type,omitempty"`
	// Digest (XEP-0060 pubsub#digest) gathers an XMPP subscription's items
	// into one notification every DigestFrequencyMS milliseconds
	// (pubsub#digest_frequency) instead of one each; see Hub digests.
	Digest            bool  `json:"digest,omitempty"`
	DigestFrequencyMS int64 `json:"digest_frequency_ms,omitempty"`
	// Verify carries a pending request's verification parameters (for
	// example a subscriber's hub.verify_token) until it is verified.
	Verify map[string]string `json:"verify,omitempty"`
}

// DeliveryState is a subscription's delivery bookkeeping. Only the delivery
// side writes it, and only when it serves that subscription.
type DeliveryState struct {
	// Cursor is the sequence of the last event delivered (or skipped as not
	// for this kind).
	Cursor            int64
	Attempts          int
	ConsecutiveErrors int
	FirstFailureAt    time.Time
	NextAttemptAt     time.Time
	LastError         string
	LastDeliveredAt   time.Time
	LastStatus        int
	// LeaseOwner and LeaseUntil mark a claim by one pingd instance.
	LeaseOwner string
	LeaseUntil time.Time
}

// SavedDeliveryState is one subscription's delivery bookkeeping to save.
type SavedDeliveryState struct {
	ID    int64
	State DeliveryState
}

// Subscription is one subscriber of one node, of any kind.
type Subscription struct {
	ID       int64
	NodeID   int64
	NodeName string
	Kind     Kind
	// Address is the subscriber: a JID (xmpp) or a callback URL.
	Address string
	// BareJID is the bare JID of an xmpp subscriber (who it belongs to).
	BareJID string
	// SubID is the XEP-0060 subscription id.
	SubID     string
	State     SubState
	Options   Options
	ExpiresAt time.Time // zero: does not expire
	CreatedAt time.Time
	UpdatedAt time.Time
	// Change is the latest request about the subscription that its
	// subscriber has to verify (see SubChange).
	Change SubChange
	DeliveryState
}

// Modes of a pending SubChange.
const (
	ChangeSubscribe   = "subscribe"
	ChangeUnsubscribe = "unsubscribe"
)

// Outcomes of a SubChange once it was decided.
const (
	ChangeApplied = "applied"
	ChangeRefused = "refused"
)

// SubChange is a request about an HTTP subscription whose subscriber
// verifies its requests (GetPingd webhooks, WebSub, rssCloud). Anyone can
// name any callback, so a request about a subscription that was verified
// (active or suspended) changes nothing until the callback verifies it: it
// waits here as the subscription's pending change while the subscription
// goes on as it was, and only a verified change replaces its settings or
// ends it. A subscription has at most one pending change; a newer request
// replaces it, even one being verified (that verification then applies
// nothing), so a callback is asked about each request it may see applied.
type SubChange struct {
	// ID names the latest request about the subscription: its pending
	// change, or, on a subscription not verified yet (SubPending), the
	// request its settings come from. Verifying applies only the request
	// it asked about.
	ID string
	// Mode is ChangeSubscribe or ChangeUnsubscribe while a change waits
	// for verification, "" when none does.
	Mode string
	// Options are the settings a subscribe change asks for.
	Options     Options
	RequestedAt time.Time
	// Outcome is what became of the latest change (ChangeApplied or
	// ChangeRefused); "" while it waits and before any.
	Outcome string
	// LeaseOwner and LeaseUntil mark a claim of the change's verification
	// by one pingd instance. It is leased apart from the subscription's
	// deliveries, so that a callback slow to answer holds none back.
	LeaseOwner string
	LeaseUntil time.Time
	// Claimed is set only in ClaimDeliveries' answer, on the entry that
	// leases this change's verification; that entry stands for the
	// verification alone (the subscription may come once more in the same
	// answer, for its deliveries).
	Claimed bool
}

// Pending reports whether a change waits for verification.
func (c SubChange) Pending() bool { return c.Mode != "" }

// RequestOutcome says what storing a subscribe or unsubscribe request did.
type RequestOutcome string

const (
	// RequestCreated: a new subscription, pending until verified.
	RequestCreated RequestOutcome = "created"
	// RequestReplaced: a subscription not verified yet took the request's
	// settings; it stays pending until verified.
	RequestReplaced RequestOutcome = "replaced"
	// RequestChangePending: a verified subscription, left as it is, with
	// the request as its pending change.
	RequestChangePending RequestOutcome = "change pending"
	// RequestCancelled: a subscription not verified yet was removed at
	// once (an unsubscribe request).
	RequestCancelled RequestOutcome = "cancelled"
)

// SubscriptionFilter selects subscriptions; zero fields match everything.
type SubscriptionFilter struct {
	NodeID  int64
	Kind    Kind
	Address string
	BareJID string
	State   SubState
}

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
	// Body is the last representation (capped), kept for protocols that
	// distribute whole documents (WebSub for non-feed topics) and for
	// merging RFC 3229 deltas.
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
}

// FetchApplied reports what ApplyFetch did.
type FetchApplied struct {
	// Baseline is true when this was the source's first successful fetch:
	// the entries were recorded as seen and nothing was published.
	Baseline bool
	// New are the entries never seen before, in publishing order.
	New []Entry
	// Published counts the item events written, over every node: each
	// node takes at most its max_items of the newest New entries.
	Published int
	// Nodes are the ids of nodes whose logs grew.
	Nodes []int64
}

// Ping is one change notification received from a publisher.
type Ping struct {
	ID      int64
	Dialect string // xmlrpc-weblogupdates, xmlrpc-extended, rsscloud, rest, form, cnws, websub
	Name    string // the weblog's name, when given
	// URL is the URL the ping submitted, as written: the weblog's URL of
	// weblogUpdates (extendedPing's url), the resource of rssCloud and
	// CNWS, the topic of WebSub, also where it names one of pingd's own
	// node feeds. changes.xml lists it.
	URL string
	// FeedURL is the feed that extendedPing names beside its url (its
	// feedUrl), listed as weblogs.com's rssUrl; "" for the other dialects.
	FeedURL string
	Remote  string // the pinging address
	// Tags are extendedPing's categories (its fifth parameter).
	Tags       []string
	ReceivedAt time.Time
	// Relayed is set, and not stored, when another pingd relayed the ping
	// here: ping listeners do not relay it again (the loop guard).
	Relayed bool
}

// ValidURL checks that s is an absolute http or https URL with a host
// that CanonicalURL accepts.
func ValidURL(s string) error {
	_, err := CanonicalURL(s)
	return err
}

// MaxURLBytes is the longest URL pingd accepts as a source or callback.
const MaxURLBytes = 2048

// MaxEntryPayloadBytes bounds an entry's payload, its Atom entry, where it
// enters: the feed parser makes a larger entry smaller (it loses its
// content) and an owner's larger publish is refused. An XMPP notification
// carries one payload, and may carry a readable body and a patch that
// repeats the entry beside it; 64 KiB leaves all of that well within the
// component's stanza budget (256 KiB, ejabberd's and Prosody's default
// limit for what clients send; Prosody ends a component stream bringing a
// stanza over 512 KiB). A long article's HTML is some tens of KiB.
const MaxEntryPayloadBytes = 64 << 10

// ErrPayloadTooBig is returned (with ErrInvalid) for an entry whose
// payload is larger than MaxEntryPayloadBytes.
var ErrPayloadTooBig = fmt.Errorf("%w: payload larger than %d bytes", ErrInvalid, MaxEntryPayloadBytes)
