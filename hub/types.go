package hub

import (
	"errors"
	"fmt"
	"time"
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
	// ErrAccountSubscriptionsFull: the XMPP account (a bare JID, all its
	// resources together) has as many subscriptions as
	// Config.MaxAccountSubscriptions allows.
	ErrAccountSubscriptionsFull = fmt.Errorf("%w: too many subscriptions for this account", ErrLimit)
	// ErrNodeResourcesFull: as many resources of the account as
	// Config.MaxNodeResources allows are subscribed to the node.
	ErrNodeResourcesFull = fmt.Errorf("%w: too many resources of this account subscribed to the node", ErrLimit)
	// ErrLeaseLost is returned by a write of a lease holder (a fetch's
	// outcome, a delivery's state) whose lease is no longer its own: it
	// ran out and another process took the row, so the write would
	// overwrite that holder's work. Nothing was written.
	ErrLeaseLost = errors.New("lease held by another process")
)

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
