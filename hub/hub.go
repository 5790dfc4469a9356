package hub

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config configures a Hub.
type Config struct {
	// Stores are the store ports, every one required.
	Stores Stores
	// Fetches is the fetch engine (hub/fetching) that Run runs; nil: no
	// source is fetched in this process, and learning of one does not wait
	// for its baseline.
	Fetches FetchEngine
	// Fetcher reads a resource once for ReadResource; nil: ReadResource
	// refuses.
	Fetcher Fetcher
	// Entries reads the entries of a source's stored body, which a node
	// that starts following a source fetched before keeps as its items;
	// nil, or a feed that keeps no body (KeepsBody): such a node takes
	// another node's items of the source, or starts empty.
	Entries EntryReader
	Logger  *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Instance names this process in leases (several instances may share
	// one database); the fetch engine is given the same.
	Instance string
	// AdminToken authorises everything a node token authorises.
	AdminToken string
	// Admins are the bare JIDs that own every node.
	Admins []string
	// Observe, if set, is told what the hub did (metrics): items
	// published by their owners (the fetch engine tells its own).
	Observe Observer
	// PingRetention is how long received pings are kept; default
	// DefaultPingRetention.
	PingRetention time.Duration
	// MaxImplicitNodes bounds the implicit nodes (those created for a URL
	// someone subscribed to); beyond it NodeForURL creates none and
	// answers ErrImplicitNodesFull. 0: DefaultMaxImplicitNodes; negative:
	// no implicit node is created at all (pingd serves its owners' nodes
	// only).
	MaxImplicitNodes int
	// MaxCallbackHostSubscriptions bounds the HTTP subscriptions (of every
	// kind and state) whose callback is on one host (CallbackHost); a new
	// one beyond it is refused with ErrCallbackHostFull, while those that
	// exist are renewed as ever. 0: DefaultMaxCallbackHostSubscriptions;
	// negative: no bound.
	MaxCallbackHostSubscriptions int
	// MaxAccountSubscriptions bounds the XMPP subscriptions of one
	// account (a bare JID, every resource and node together), and
	// MaxNodeResources those of one account to one node (its resources):
	// a new subscription beyond either is refused with
	// ErrAccountSubscriptionsFull or ErrNodeResourcesFull, while one that
	// exists is renewed as ever. Admins are not bounded. 0:
	// DefaultMaxAccountSubscriptions, DefaultMaxNodeResources; negative:
	// no bound.
	MaxAccountSubscriptions int
	MaxNodeResources        int
	// PingCommitDelay, when positive, answers a ping once it is queued
	// rather than once it is committed: Run commits the queued pings in
	// batches, each within PingCommitDelay of its first ping, and the
	// rest of the queue before it returns. A crash of the process loses
	// the pings answered and not yet committed (at most MaxQueuedPings),
	// and the answer cannot say how many followed sources the ping made
	// due. 0: every ping is answered after its own commit.
	PingCommitDelay time.Duration
}

// Defaults of Config: what a zero (or negative) field is taken as.
const (
	// DefaultPingRetention is how long received pings are kept: a week of
	// hourly archives.
	DefaultPingRetention = 7 * 24 * time.Hour
)

// Hub is the core service. Its methods are safe for concurrent use.
type Hub struct {
	*AccessUseCases
	*NodeUseCases
	*SubscriptionUseCases

	stores   Stores
	fetches  FetchEngine
	fetcher  Fetcher
	log      *slog.Logger
	now      func() time.Time
	instance string
	cfg      Config

	mu         sync.RWMutex
	transports map[Kind][]Transport
	// pingListeners hear of recorded pings (pinglisteners.go).
	pingListeners []PingListener

	// reads remembers ReadResource's recent fetches (readresource.go).
	reads recentReads
	// pingQueue holds the pings answered before their commit
	// (Config.PingCommitDelay; pingqueue.go); nil when off.
	pingQueue *pingQueue
}

// New returns a hub; Run starts its background work.
func New(cfg Config) (*Hub, error) {
	if err := cfg.Stores.check(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Instance == "" {
		cfg.Instance = randomToken(8)
	}
	if cfg.Observe == nil {
		cfg.Observe = nopObserver{}
	}
	if cfg.PingRetention <= 0 {
		cfg.PingRetention = DefaultPingRetention
	}
	if cfg.MaxImplicitNodes == 0 {
		cfg.MaxImplicitNodes = DefaultMaxImplicitNodes
	}
	if cfg.MaxCallbackHostSubscriptions == 0 {
		cfg.MaxCallbackHostSubscriptions = DefaultMaxCallbackHostSubscriptions
	}
	if cfg.MaxAccountSubscriptions == 0 {
		cfg.MaxAccountSubscriptions = DefaultMaxAccountSubscriptions
	}
	if cfg.MaxNodeResources == 0 {
		cfg.MaxNodeResources = DefaultMaxNodeResources
	}

	h := &Hub{
		stores:     cfg.Stores,
		fetches:    cfg.Fetches,
		fetcher:    cfg.Fetcher,
		log:        cfg.Logger,
		now:        func() time.Time { return cfg.Now().UTC() },
		instance:   cfg.Instance,
		cfg:        cfg,
		transports: map[Kind][]Transport{},
	}
	if cfg.PingCommitDelay > 0 {
		h.pingQueue = newPingQueue(cfg.PingCommitDelay)
	}
	sh := shared{stores: h.stores, log: h.log, now: h.now, wake: h.wake, appended: h.appended}
	h.AccessUseCases = &AccessUseCases{shared: sh, admins: map[string]bool{}}
	if cfg.AdminToken != "" {
		h.AccessUseCases.adminHash = sha256.Sum256([]byte(cfg.AdminToken))
		h.AccessUseCases.hasAdmin = true
	}
	for _, a := range cfg.Admins {
		if a = strings.TrimSpace(a); a != "" {
			h.AccessUseCases.admins[a] = true
		}
	}
	h.NodeUseCases = &NodeUseCases{
		shared:           sh,
		baselines:        baselines{ensureBaseline: h.ensureBaseline, scheduleBaseline: h.scheduleBaseline, wakeFetcher: h.WakeFetcher},
		entries:          cfg.Entries,
		observe:          cfg.Observe,
		maxImplicitNodes: cfg.MaxImplicitNodes,
	}
	h.SubscriptionUseCases = &SubscriptionUseCases{
		shared:                       sh,
		access:                       h.AccessUseCases,
		ensureBaseline:               h.ensureBaseline,
		serves:                       h.serves,
		maxCallbackHostSubscriptions: cfg.MaxCallbackHostSubscriptions,
		maxAccountSubscriptions:      cfg.MaxAccountSubscriptions,
		maxNodeResources:             cfg.MaxNodeResources,
	}
	return h, nil
}

// Register makes t the transport told about work for the given kinds.
func (h *Hub) Register(t Transport, kinds ...Kind) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range kinds {
		h.transports[k] = append(h.transports[k], t)
	}
}

// Now returns the hub's clock reading, in UTC.
func (h *Hub) Now() time.Time { return h.now() }

// Instance is the name this process uses in leases.
func (h *Hub) Instance() string { return h.instance }

// serves reports whether a transport is registered for the kind.
func (h *Hub) serves(kind Kind) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.transports[kind]) > 0
}

// wake tells every transport of the kinds that the node has work.
func (h *Hub) wake(nodeID int64, kinds ...Kind) {
	h.eachTransport(kinds, func(t Transport) { t.Wake(nodeID) })
}

// eachTransport calls fn once for each transport of the kinds (every kind
// when none is named), a transport serving several kinds once.
func (h *Hub) eachTransport(kinds []Kind, fn func(Transport)) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	seen := map[Transport]bool{}
	if len(kinds) == 0 {
		kinds = Kinds
	}
	for _, k := range kinds {
		for _, t := range h.transports[k] {
			if !seen[t] {
				seen[t] = true
				fn(t)
			}
		}
	}
}

// appended is wake of every kind after events were appended to the node
// n: a transport that takes them (AppendedTransport) is handed them, so
// that it need not read back what was just written.
func (h *Hub) appended(n *Node, events []Event) {
	if len(events) == 0 {
		h.wake(n.ID)
		return
	}
	node := *n
	node.LastSeq = max(node.LastSeq, events[len(events)-1].Seq)
	events = slices.Clip(slices.Clone(events)) // the publisher's own copy stays its own
	h.eachTransport(nil, func(t Transport) {
		if at, ok := t.(AppendedTransport); ok {
			at.Appended(&node, events)
		} else {
			t.Wake(n.ID)
		}
	})
}

// The hub's use cases by area, each a type of its own so that none grows
// past what one reader can hold; Hub embeds them, so their methods are the
// Hub's (see doc.go). Each holds what it works with and nothing more: the
// shared pieces every area uses, and its own state, limits and the few
// ways into the Hub or another area it needs, so an area's dependencies
// are its fields.
type (
	// AccessUseCases: who may do what on a node (admins, owners, tokens,
	// affiliations, revocations) and a node's configuration.
	AccessUseCases struct {
		shared
		// admins are the bare JIDs that own every node; adminHash the
		// hash of the admin token, when hasAdmin.
		admins    map[string]bool
		adminHash [sha256.Size]byte
		hasAdmin  bool
	}
	// NodeUseCases: creating, finding and deleting nodes (the implicit
	// nodes of URLs included), their sources, publishing and reading their
	// items and logs.
	NodeUseCases struct {
		shared
		baselines
		// entries reads a source's stored entries (Config.Entries).
		entries EntryReader
		// observe is told of items published (Config.Observe).
		observe Observer
		// maxImplicitNodes is Config.MaxImplicitNodes, defaults applied.
		maxImplicitNodes int
		// implicitNodes caches the number of implicit nodes (bounds.go).
		implicitNodes implicitNodeCount
		// nodeCount caches the number of nodes (NodeCount).
		nodeCount nodeCountCache
	}
	// SubscriptionUseCases: subscribing of every kind, verified requests,
	// options and states, the bounds on an account's and a callback
	// host's subscriptions, bounces and digests.
	SubscriptionUseCases struct {
		shared
		// access decides who may subscribe (MaySubscribe, IsAdmin).
		access *AccessUseCases
		// ensureBaseline makes a new source's first fetch and waits for
		// it (the Hub's, baseline.go).
		ensureBaseline func(ctx context.Context, sourceID int64) error
		// serves reports whether a transport serves a kind (the Hub's
		// registry of transports).
		serves func(Kind) bool
		// The bounds of Config, defaults applied.
		maxCallbackHostSubscriptions, maxAccountSubscriptions, maxNodeResources int
		// accountLocks serialise the new XMPP subscriptions of one
		// account, so that concurrent requests cannot pass its bounds
		// together (bounds.go, mayAddXMPPSubscription).
		accountLocks [64]sync.Mutex
	}
)

// shared is what every area of the use cases works with: the store ports,
// the log, the clock (UTC) and waking a node's transports (Hub.wake).
type shared struct {
	stores Stores
	log    *slog.Logger
	now    func() time.Time
	wake   func(nodeID int64, kinds ...Kind)
	// appended wakes the node's transports of every kind after a publish
	// appended events, handing them to those that take them
	// (Hub.appended).
	appended func(n *Node, events []Event)
}

// baselines is how the node area reaches a source's first fetch, which
// the Hub runs (baseline.go, fetchengine.go).
type baselines struct {
	ensureBaseline   func(ctx context.Context, sourceID int64) error
	scheduleBaseline func(ctx context.Context, src *Source) error
	wakeFetcher      func()
}
