package hub

import (
	"time"
)

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
	// LeaseOwner and LeaseUntil mark a claim by one pingd instance. In a
	// state given to Store.SaveDeliveryState(s), LeaseOwner is the holder
	// whose lease the save releases ("" for a subscription nobody
	// leased): the store writes it only while the lease is still that
	// holder's, so a process whose lease ran out and was taken by another
	// cannot overwrite the next holder's state; LeaseUntil is ignored.
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
