package hub

import (
	"fmt"
	"time"
)

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
	// subscribed, full or bare) was removed on its owner's word, because
	// its bare JID may no longer read the node, or by a GetPingd unsubscribe
	// request; XMPP tells that JID, in words too when it read plain
	// messages (PlainType).
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
	Address string
	// PlainType is, on a revoke event, the message type of the removed
	// subscription's notifications when they were plain messages
	// (FormatMessage): the subscription is gone when the event is sent,
	// and a reader whose client shows no pubsub events is told in words,
	// as it was told of entries. Empty for an XEP-0060 subscription.
	PlainType string
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
