package hub

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
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

// MinHiddenSeen is the least margin HiddenSeenKept gives a source, so
// that a document that shows few entries for a while (a short or stale
// copy) does not make the others new when they come back.
const MinHiddenSeen = 100

// HiddenSeenKept is how many of the ids a source's latest fetch did not
// show are remembered, the most recently shown first: the feed's own
// window (as many as that fetch showed), at least MinHiddenSeen and at
// most MaxHiddenSeen. An entry that drops out of the document and comes
// back before that many others have dropped out is not new again.
func HiddenSeenKept(shown int) int {
	return min(MaxHiddenSeen, max(shown, MinHiddenSeen))
}

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
	if len(c.Title) > maxNodeTitleBytes {
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

// NodeDeletion is what a deleted node's XMPP subscribers are to be told
// (XEP-0060 §8.4): the store records it in the transaction that deletes a
// node with XMPP subscriptions and keeps it until ForgetNodeDeletions, so
// the notifications survive a restart and reach the subscribers from
// whichever process sends notifications, like the events of a node's log.
// The node, its log and its subscriptions are gone: it keeps their part
// the notifications need.
type NodeDeletion struct {
	ID int64
	// Node is the deleted node: its ID, Name, Title and NotificationType.
	Node Node
	// Subscribers are its XMPP subscriptions when it was deleted: their
	// Kind, Address and Options.
	Subscribers []Subscription
	DeletedAt   time.Time
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
