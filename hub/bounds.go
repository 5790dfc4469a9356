package hub

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"
)

// Bounds on what strangers can make pingd keep. Anyone may subscribe to
// any URL over HTTP (WebSub, rssCloud, CNWS), and a URL no node follows
// gets an implicit node and a source that pingd fetches from then on, so
// the number of implicit nodes is capped (Config.MaxImplicitNodes) and
// the adapters charge each creation to the client that asked for it
// (NodeForURLCreating).

// DefaultMaxImplicitNodes is Config.MaxImplicitNodes's default: room for
// every feed a large community follows, far below what one database
// keeps and polls comfortably.
const DefaultMaxImplicitNodes = 100_000

// implicitCountFor is how long a count of the implicit nodes read from the
// store is trusted; creations by this process are added to it meanwhile,
// so only other processes sharing the store can take the total a little
// past the cap.
const implicitCountFor = 30 * time.Second

// implicitNodeCount caches the number of implicit nodes.
type implicitNodeCount struct {
	mu    sync.Mutex
	n     int
	at    time.Time
	valid bool
}

// created counts an implicit node this process created.
func (c *implicitNodeCount) created() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
}

// forget drops the cached count (nodes were deleted).
func (c *implicitNodeCount) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.valid = false
}

// NodeForURLCreating is NodeForURL with create set, for requests from
// strangers: mayCreate is asked right before an implicit node would be
// created, and only then (a URL some node follows costs nothing), so an
// adapter can charge the creation to the client; its error is returned
// as it is.
func (u *NodeUseCases) NodeForURLCreating(ctx context.Context, rawURL string, mayCreate func(context.Context) error) (*Node, error) {
	return u.nodeForURL(ctx, rawURL, true, mayCreate)
}

// mayCreateImplicitNode answers ErrImplicitNodesFull when the implicit
// nodes have reached Config.MaxImplicitNodes.
func (u *NodeUseCases) mayCreateImplicitNode(ctx context.Context) error {
	limit := u.maxImplicitNodes
	if limit < 0 {
		return fmt.Errorf("%w (this server follows only the URLs of its owners' nodes)", ErrImplicitNodesFull)
	}
	c := &u.implicitNodes
	c.mu.Lock()
	defer c.mu.Unlock()
	now := u.now()
	if !c.valid || now.Before(c.at) || now.Sub(c.at) >= implicitCountFor {
		n, err := u.stores.Nodes.CountImplicitNodes(ctx)
		if err != nil {
			return fmt.Errorf("count implicit nodes: %w", err)
		}
		c.n, c.at, c.valid = n, now, true
	}
	if c.n >= limit {
		return fmt.Errorf("%w (it follows %d, its most)", ErrImplicitNodesFull, limit)
	}
	return nil
}

// UnusedNodeGrace is how long an implicit node may be without any
// subscription (none pending, none active) before DeleteUnused removes it
// with its log: long enough for a subscriber whose verification failed,
// or whose lease ran out, to come back, and short enough that strangers'
// one-off subscriptions do not pile up.
const UnusedNodeGrace = 24 * time.Hour

// UnfollowedSourceGrace is how long a source may be followed by no node
// before DeleteUnused removes it with its fetch state, so that pingd stops
// fetching it; an owner who deletes a node and makes it again within it
// keeps the source's seen entries.
const UnfollowedSourceGrace = time.Hour

// DeleteUnused removes the implicit nodes nobody has subscribed to for
// UnusedNodeGrace and the sources no node has followed for
// UnfollowedSourceGrace (Store.DeleteUnused); owners' nodes stay. The
// maintenance loop runs it with each prune; it is safe to run in several
// processes at once.
func (u *NodeUseCases) DeleteUnused(ctx context.Context) (nodes, sources int64, err error) {
	now := u.now()
	nodes, sources, err = u.stores.Maintenance.DeleteUnused(ctx, now, now.Add(-UnusedNodeGrace), now.Add(-UnfollowedSourceGrace))
	if nodes > 0 {
		u.implicitNodes.forget()
	}
	if nodes > 0 || sources > 0 {
		u.log.InfoContext(ctx, "removed unused implicit nodes and unfollowed sources", "nodes", nodes, "sources", sources,
			"nodes_unused_for", UnusedNodeGrace, "sources_unfollowed_for", UnfollowedSourceGrace)
	}
	if err != nil {
		return nodes, sources, fmt.Errorf("remove unused nodes and sources: %w", err)
	}
	return nodes, sources, nil
}

// DefaultMaxCallbackHostSubscriptions is Config.MaxCallbackHostSubscriptions's
// default: far more than one receiver's subscriptions (an aggregator's
// callbacks), while one stranger naming ever new callback URLs of one
// host from many addresses cannot fill the table.
const DefaultMaxCallbackHostSubscriptions = 10_000

// CallbackHost is the host an HTTP subscription's callback is on: the
// canonical host name of its address (port and fragment left out, so the
// ports of one host count together), "" for kinds that are not HTTP
// (XMPP) and addresses that are no URL.
func CallbackHost(kind Kind, address string) string {
	if !kind.HTTP() {
		return ""
	}
	address, _, _ = strings.Cut(address, "#")
	return HostName(address)
}

// mayAddCallback answers ErrCallbackHostFull when a new subscription of
// kind and address to n would take its callback host past
// Config.MaxCallbackHostSubscriptions; the subscription that exists
// already (a renewal, a new request about it) always passes. Concurrent
// requests can take a host a little past the bound, never far.
func (u *SubscriptionUseCases) mayAddCallback(ctx context.Context, n *Node, kind Kind, address string) error {
	limit := u.maxCallbackHostSubscriptions
	host := CallbackHost(kind, address)
	if limit < 0 || host == "" {
		return nil
	}
	count, err := u.stores.Subscriptions.CountCallbackHostSubscriptions(ctx, host)
	if err != nil {
		return err
	}
	if count < limit {
		return nil
	}
	existing, err := u.stores.Subscriptions.Subscriptions(ctx, SubscriptionFilter{NodeID: n.ID, Kind: kind, Address: address})
	if err != nil {
		return err
	}
	if len(existing) > 0 {
		return nil
	}
	return fmt.Errorf("%w (%s has %d)", ErrCallbackHostFull, host, limit)
}

// DefaultMaxAccountSubscriptions is Config.MaxAccountSubscriptions's
// default: far more nodes than one reader follows, while one account
// cannot make every new item cost thousands of stanzas.
const DefaultMaxAccountSubscriptions = 1000

// DefaultMaxNodeResources is Config.MaxNodeResources's default: a person's
// devices, each subscribed by its full JID, with room to spare.
const DefaultMaxNodeResources = 10

// lockAccount serialises the new XMPP subscriptions of one bare JID (by a
// hash: accounts that share a lock only wait for each other briefly) and
// returns the unlock.
func (u *SubscriptionUseCases) lockAccount(bareJID string) func() {
	f := fnv.New32a()
	f.Write([]byte(bareJID))
	mu := &u.accountLocks[f.Sum32()%uint32(len(u.accountLocks))]
	mu.Lock()
	return mu.Unlock
}

// MayAddXMPPSubscription answers ErrNodeResourcesFull or
// ErrAccountSubscriptionsFull when Subscribe would refuse a new XMPP
// subscription of address (of bareJID) to n for the account's bounds, nil
// when it would not, also when the subscription exists: a check ahead of a
// request that makes several changes at once (an owner's, XEP-0060
// §8.8.2.4), which Subscribe checks again as each is made.
func (u *SubscriptionUseCases) MayAddXMPPSubscription(ctx context.Context, n *Node, address, bareJID string) error {
	existing, err := u.stores.Subscriptions.Subscriptions(ctx, SubscriptionFilter{NodeID: n.ID, Kind: KindXMPP, Address: address})
	if err != nil || len(existing) > 0 {
		return err
	}
	return u.mayAddXMPPSubscription(ctx, n, bareJID)
}

// mayAddXMPPSubscription answers ErrNodeResourcesFull or
// ErrAccountSubscriptionsFull when a new XMPP subscription of bareJID to
// n would take the account past Config.MaxNodeResources or
// Config.MaxAccountSubscriptions. The caller holds lockAccount(bareJID)
// until the subscription is stored, so one process never passes a bound;
// processes sharing a store (ejabberd, every process answering) can take
// an account a few past it, never far.
func (u *SubscriptionUseCases) mayAddXMPPSubscription(ctx context.Context, n *Node, bareJID string) error {
	if u.access.IsAdmin(bareJID) {
		return nil
	}
	if limit := u.maxNodeResources; limit >= 0 {
		count, err := u.stores.Subscriptions.CountXMPPSubscriptions(ctx, bareJID, n.ID)
		if err != nil {
			return err
		}
		if count >= limit {
			return fmt.Errorf("%w (%s has %d subscriptions to %q, the most allowed)", ErrNodeResourcesFull, bareJID, count, n.Name)
		}
	}
	if limit := u.maxAccountSubscriptions; limit >= 0 {
		count, err := u.stores.Subscriptions.CountXMPPSubscriptions(ctx, bareJID, 0)
		if err != nil {
			return err
		}
		if count >= limit {
			return fmt.Errorf("%w (%s has %d, the most allowed)", ErrAccountSubscriptionsFull, bareJID, count)
		}
	}
	return nil
}
