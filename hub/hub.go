package hub

import (
	"crypto/sha256"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Config configures a Hub.
type Config struct {
	// Stores are the store ports, every one required.
	Stores  Stores
	Fetcher Fetcher
	// Scheduler decides the next fetch of each source; nil means a plain
	// hourly schedule with exponential backoff on errors.
	Scheduler Scheduler
	Logger    *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Instance names this process in leases (several instances may share
	// one database).
	Instance string
	// AdminToken authorises everything a node token authorises.
	AdminToken string
	// Admins are the bare JIDs that own every node.
	Admins []string
	// FetchWorkers bounds concurrent fetches; FetchesPerHost bounds them
	// per origin host. Defaults DefaultFetchWorkers and
	// DefaultFetchesPerHost.
	FetchWorkers   int
	FetchesPerHost int
	// FetchHostSpacing is the least time between the starts of two
	// fetches of one host (HostKey), on the hub's clock. Zero means none;
	// pingd serve gives DefaultFetchHostSpacing unless told otherwise.
	FetchHostSpacing time.Duration
	// FetchTimeout bounds one fetch; default DefaultFetchTimeout.
	FetchTimeout time.Duration
	// PingRetention is how long received pings are kept; default
	// DefaultPingRetention.
	PingRetention time.Duration
	// BaselineWait bounds how long learning of a source (node creation,
	// a subscription) waits for the source's baseline fetch before it
	// returns; default DefaultBaselineWait.
	BaselineWait time.Duration
	// Observe, if set, is told what the hub did (metrics).
	Observe Observer
	// Exclusive says this process is the only one using the store (an
	// SQLite file, which one pingd process serves at a time): fetch leases
	// found when Run starts were left by a process that died, and are
	// taken back at once instead of delaying those sources until they run
	// out. Never set it on a store that several processes share.
	Exclusive bool
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
}

// Defaults of Config: what a zero (or negative) field is taken as.
const (
	// DefaultFetchWorkers fetches at once keep a few slow sources from
	// holding up the others without opening hundreds of connections.
	DefaultFetchWorkers = 8
	// DefaultFetchesPerHost is the most fetches of one origin at once, so
	// that a host with many feeds is not fetched by every worker together.
	DefaultFetchesPerHost = 2
	// DefaultFetchHostSpacing is what pingd serve puts between two
	// fetches of one host: a second, the pace crawlers have long kept to,
	// still lets one host serve 3,600 feeds polled hourly.
	DefaultFetchHostSpacing = time.Second
	// DefaultFetchTimeout bounds one fetch, every redirect included.
	DefaultFetchTimeout = 30 * time.Second
	// DefaultPingRetention is how long received pings are kept: a week of
	// hourly archives.
	DefaultPingRetention = 7 * 24 * time.Hour
	// DefaultBaselineWait is how long a request that made pingd learn of a
	// source waits for its first fetch before it answers.
	DefaultBaselineWait = 10 * time.Second
)

// Hub is the core service. Its methods are safe for concurrent use.
type Hub struct {
	stores    Stores
	fetcher   Fetcher
	scheduler Scheduler
	log       *slog.Logger
	now       func() time.Time
	instance  string
	adminHash [sha256.Size]byte
	hasAdmin  bool
	admins    map[string]bool
	cfg       Config

	mu         sync.RWMutex
	transports map[Kind][]Transport
	// pingListeners hear of recorded pings (pinglisteners.go).
	pingListeners []PingListener

	fetchWake chan struct{}

	// fetchedMu guards fetchLoopOn and fetched: per source, a channel
	// closed when this process next stores a fetch outcome for it, which
	// awaitBaseline waits on.
	fetchedMu   sync.Mutex
	fetchLoopOn bool
	fetched     map[int64]chan struct{}

	// implicitNodes caches the number of implicit nodes (bounds.go).
	implicitNodes implicitNodeCount
	// accountLocks serialise the new XMPP subscriptions of one account,
	// so that concurrent requests cannot pass its bounds together
	// (bounds.go, mayAddXMPPSubscription).
	accountLocks [64]sync.Mutex
	// nodeCount caches the number of nodes (NodeCount).
	nodeCount nodeCountCache

	// load is what the fetch loop holds (FetchLoad).
	load fetchLoad
	// reads remembers ReadResource's recent fetches (readresource.go).
	reads recentReads
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
	if cfg.Scheduler == nil {
		cfg.Scheduler = defaultScheduler{}
	}
	if cfg.Instance == "" {
		cfg.Instance = randomToken(8)
	}
	if cfg.FetchWorkers <= 0 {
		cfg.FetchWorkers = DefaultFetchWorkers
	}
	if cfg.FetchesPerHost <= 0 {
		cfg.FetchesPerHost = DefaultFetchesPerHost
	}
	if cfg.FetchHostSpacing < 0 {
		cfg.FetchHostSpacing = 0
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = DefaultFetchTimeout
	}
	if cfg.Observe == nil {
		cfg.Observe = nopObserver{}
	}
	if cfg.PingRetention <= 0 {
		cfg.PingRetention = DefaultPingRetention
	}
	if cfg.BaselineWait <= 0 {
		cfg.BaselineWait = DefaultBaselineWait
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
		fetcher:    cfg.Fetcher,
		scheduler:  cfg.Scheduler,
		log:        cfg.Logger,
		now:        func() time.Time { return cfg.Now().UTC() },
		instance:   cfg.Instance,
		admins:     map[string]bool{},
		cfg:        cfg,
		transports: map[Kind][]Transport{},
		fetchWake:  make(chan struct{}, 1),
		fetched:    map[int64]chan struct{}{},
	}
	if cfg.AdminToken != "" {
		h.adminHash = sha256.Sum256([]byte(cfg.AdminToken))
		h.hasAdmin = true
	}
	for _, a := range cfg.Admins {
		if a = strings.TrimSpace(a); a != "" {
			h.admins[a] = true
		}
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

// wake tells every transport of the kinds that the node has work.
func (h *Hub) wake(nodeID int64, kinds ...Kind) {
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
				t.Wake(nodeID)
			}
		}
	}
}

// WakeFetcher makes the fetch loop look for due sources now.
func (h *Hub) WakeFetcher() {
	select {
	case h.fetchWake <- struct{}{}:
	default:
	}
}
