package component

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/ratelimit"
	"github.com/pingd/pingd/internal/reconnect"
)

// Store is what the component reads and writes itself rather than
// through the hub: the nodes it serves, their logs and XMPP subscriptions,
// the per-node XMPP cursor, the pruning after a cursor moved, and the
// deleted nodes whose subscribers are to be told (deletions.go). It is
// the hub's store (store.Store has all of it).
type Store interface {
	Node(ctx context.Context, name string) (*hub.Node, error)
	NodeByID(ctx context.Context, id int64) (*hub.Node, error)
	EventsAfter(ctx context.Context, nodeID int64, after int64, limit int) ([]hub.Event, error)
	SetXMPPSeq(ctx context.Context, nodeID int64, seq int64) error
	NodesBehindXMPP(ctx context.Context) ([]hub.Node, error)
	Subscriptions(ctx context.Context, f hub.SubscriptionFilter) ([]hub.Subscription, error)
	Prune(ctx context.Context, pingsBefore time.Time) error
	NodeDeletions(ctx context.Context, limit int) ([]hub.NodeDeletion, error)
	ForgetNodeDeletions(ctx context.Context, ids []int64) error
}

// Config configures a Component.
type Config struct {
	Hub       *hub.Hub
	Store     Store  // the hub's store
	Domain    string // component JID, e.g. "pubsub.localhost"
	Addr      string // XMPP server's component port, e.g. "127.0.0.1:5347"
	Secret    string
	PublicURL string // pingd's HTTP base URL (for links in chat answers)
	Logger    *slog.Logger
	// MinBackoff/MaxBackoff for reconnects; defaults DefaultMinBackoff
	// and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration

	// Leader, when set, makes this component one of several pingd
	// processes sharing a database: only the one holding the lease sends
	// notifications. It returns a held Lease, or nil and no error when
	// another process holds it; it is asked again every LeaderRetry. nil:
	// this process is the only one and always leads.
	Leader func(ctx context.Context) (Lease, error)
	// Shared says the XMPP server takes several connections under the
	// component's name and spreads the incoming stanzas over them
	// (ejabberd): every process connects and answers requests, and only
	// the leader sends notifications. Otherwise (Prosody) only the leader
	// connects.
	Shared bool
	// LeaderRetry is how often a standby asks for the lease; default
	// DefaultLeaderRetry.
	LeaderRetry time.Duration
	// AckTimeout is how long the server may take to route back an
	// acknowledgement marker before the connection is dropped and made
	// again (acks.go); default DefaultAckTimeout.
	AckTimeout time.Duration
	// SweepEvery is how often the leader looks for nodes whose log another
	// process grew; default DefaultSweepEvery.
	SweepEvery time.Duration

	// Multicast says whether notifications to many subscribers go out as
	// XEP-0033 multicast stanzas (see multicast.go): MulticastAuto (also
	// "") looks for the XMPP server's multicast service after each
	// connection and uses it when there is one; MulticastOff never does;
	// the JID of a service (such as multicast.example.org) uses that one
	// without looking.
	Multicast string
	// MulticastDomain is the XMPP server's domain: where the service is
	// looked for, and the domain whose users are addressed through it.
	// Default: the component's domain without its first label
	// (pubsub.example.org → example.org).
	MulticastDomain string
	// MulticastMaxAddresses caps the addresses of one multicast stanza,
	// never above a limit the service announces. 0: the service's limit
	// (500 when it announces "infinite"), or 20 when it announces none.
	MulticastMaxAddresses int
	// MulticastShare is the percentage (1–100) of the subscribers the
	// multicast service reaches that are addressed through it; the others
	// get one stanza each from pingd. Both of the server's paths then fan
	// out at once: its multicast service and its side of the component
	// connection are one process each in ejabberd (docs/benchmarks.md).
	// 0: DefaultMulticastShare.
	MulticastShare int

	// OpenSources lets any user have a node created for a feed no node
	// follows yet, by subscribing to its URL (chat or ad-hoc command).
	OpenSources bool
	// LocalSources lets the users of LocalDomains do the same (with
	// neither, only PINGD_ADMINS may; opensources.go).
	LocalSources bool
	// LocalDomains are the XMPP server's own domains, whose users are
	// local; default: the component's parent domain (pubsub.example.org
	// → example.org, pubsub.localhost → localhost).
	LocalDomains []string
	// NodesPerHour bounds the nodes one JID may have created that way
	// per hour; 0: DefaultNodesPerHour.
	NodesPerHour int
	// CheckHost, when set, is asked about the host of a feed's URL before
	// a node is created for it; netguard.ErrRefused refuses it with a
	// text saying why. nil: no early check (the fetcher's dial-time guard
	// still refuses the connection).
	CheckHost func(ctx context.Context, host string) error
	// Resolver finds the feed of a page URL a user subscribes to; nil: a
	// URL is taken as the feed itself. Its requests are counted through
	// the look-up's context (ratelimit.Spend: discovery.Client does).
	Resolver hub.SourceResolver

	// Each JID's share of the request side (limits.go); PINGD_ADMINS are
	// held to none of these per-JID bounds, only to the pool's and the
	// look-ups' concurrency and deadline. IQRate and IQBurst bound the IQ requests,
	// chat commands and presence requests taken per second from one bare
	// JID (0: DefaultIQRate, DefaultIQBurst; a negative IQRate: no
	// bound). PendingPerSender bounds those waiting or running (0:
	// DefaultPendingPerSender). LookupRequestsPerHour bounds the HTTP
	// requests made to find the feeds of pages one JID names (0:
	// ratelimit.DefaultLookupRequestsPerHour, in bursts of half that),
	// LookupTimeout one whole look-up (0: ratelimit.DefaultLookupTimeout).
	IQRate                float64
	IQBurst               int
	PendingPerSender      int
	LookupRequestsPerHour float64
	LookupTimeout         time.Duration
	// CompleteEntry gives an Atom entry an owner publishes the elements
	// every item carries, as the node's feeds show it (feed.CompleteEntry;
	// the component does not import feed). nil stores entries as published.
	CompleteEntry func(hub.Entry) hub.Entry
	// Patch renders a batch of a node's events as the RFC 7351 patch of
	// the node's Atom document that GetPingd patch subscribers get
	// (delivery.NodePatch; the component imports neither delivery nor
	// feed). Subscriptions asking for diffs get it beside their pubsub
	// events (diff.go). nil: no notification carries a patch.
	Patch func(n *hub.Node, events []hub.Event) ([]byte, error)
}

// Defaults of Config: what a zero (or negative) field is taken as.
const (
	// DefaultMinBackoff and DefaultMaxBackoff bound the wait before a
	// reconnect (with jitter): quick after a blip, once a minute while the
	// XMPP server stays away.
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 60 * time.Second
	// DefaultLeaderRetry is how often a standby asks for the lease.
	DefaultLeaderRetry = time.Second
	// DefaultSweepEvery is how often the leader looks for work another
	// process appended.
	DefaultSweepEvery = time.Second
	// DefaultAckTimeout is how long a marker may take to come back.
	DefaultAckTimeout = 30 * time.Second
)

// Component is pingd's XEP-0114 external component. It is safe for
// concurrent use; Run drives it.
type Component struct {
	*sharedState
	addr     string
	minDelay time.Duration
	maxDelay time.Duration

	connected atomic.Bool
	// connections counts the successful connections to the XMPP server
	// (Reconnections).
	connections atomic.Int64

	leader      func(ctx context.Context) (Lease, error)
	leaderRetry time.Duration
	sweepEvery  time.Duration
	// standbyAt is when the lease was last found held by another process
	// (Unix nanoseconds; 0 while leading or unable to ask).
	standbyAt atomic.Int64
	// leadingSince is when this process last took the lease (Unix
	// nanoseconds); takeoverGrace how long after that it is ready
	// without a connection (Ready).
	leadingSince  atomic.Int64
	takeoverGrace time.Duration

	// dispatcher sends the notifications (dispatcher.go); service carries
	// out and answers the requests (service.go).
	dispatcher *dispatcher
	service    *service
}

// sharedState is what the Component (the connection, the leadership and
// the stanza router), its dispatcher and its service each hold: the one
// value of each thing more than one of them reads or changes. Each is
// given the same *sharedState by New; nothing else is copied between them.
type sharedState struct {
	hub       *hub.Hub
	log       *slog.Logger
	domain    jid.JID
	domainStr string
	// secret is the component secret: the handshake's, and the key of a
	// shared connection's cursor markers (acks.go).
	secret []byte
	// shared says the XMPP server spreads the component's stanzas over
	// several processes' connections (Config.Shared).
	shared bool

	// leading is set while this process may send notifications.
	leading atomic.Bool
	// stanzaIDs numbers the messages the component sends on its own.
	stanzaIDs *stanzaIDs
	// limit is the stanza budget and what was shrunk to fit it
	// (budget.go).
	limit *stanzaLimit

	mu   sync.Mutex
	conn *connection // the live connection, nil while disconnected
}

// connection is the live connection; nil while disconnected.
func (s *sharedState) connection() *connection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn
}

// Timeouts of the connection.
const (
	dialTimeout      = 10 * time.Second
	handshakeTimeout = 15 * time.Second
	writeTimeout     = 30 * time.Second
	closeTimeout     = 3 * time.Second
	// stableAfter is how long a connection must have lasted for the next
	// failure to start the backoff from the beginning again.
	stableAfter = 10 * time.Second
)

// New checks the configuration and returns a component; Run connects it.
func New(cfg Config) (*Component, error) {
	if cfg.Hub == nil {
		return nil, errors.New("component: no hub")
	}
	if cfg.Store == nil {
		return nil, errors.New("component: no store")
	}
	if cfg.Secret == "" {
		return nil, errors.New("component: the component secret is empty")
	}
	if cfg.Addr == "" {
		return nil, errors.New("component: no XMPP server address")
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("component: XMPP server address %q: %w", cfg.Addr, err)
	}
	d, err := jid.Parse(cfg.Domain)
	if err != nil {
		return nil, fmt.Errorf("component: JID %q: %w", cfg.Domain, err)
	}
	if d.Localpart() != "" || d.Resourcepart() != "" {
		return nil, fmt.Errorf("component: JID %q must be a bare domain such as pubsub.example.org", cfg.Domain)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = cfg.MinBackoff
	}
	if cfg.LeaderRetry <= 0 {
		cfg.LeaderRetry = DefaultLeaderRetry
	}
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = DefaultSweepEvery
	}
	if cfg.AckTimeout <= 0 {
		cfg.AckTimeout = DefaultAckTimeout
	}
	mcMode, mcService, mcDomain, err := multicastConfig(cfg, d)
	if err != nil {
		return nil, err
	}
	localDomains, err := localDomainSet(cfg.LocalDomains, d)
	if err != nil {
		return nil, err
	}
	if cfg.NodesPerHour < 0 {
		return nil, fmt.Errorf("component: nodes per hour %d is negative", cfg.NodesPerHour)
	}
	nodesPerHour := cmp.Or(cfg.NodesPerHour, DefaultNodesPerHour)
	limits, err := newSharedLimits(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.LocalSources && !cfg.OpenSources && len(localDomains) == 0 {
		cfg.Logger.Warn("no local domain: the component's domain has no parent domain, so no user may have nodes created for new feeds; list the XMPP server's domains in PINGD_LOCAL_DOMAINS",
			"component", d.String())
	}
	st := &sharedState{
		hub:       cfg.Hub,
		log:       cfg.Logger.With("component", d.String()),
		domain:    d,
		domainStr: d.String(),
		secret:    []byte(cfg.Secret),
		shared:    cfg.Shared,
		stanzaIDs: newStanzaIDs(),
		limit:     &stanzaLimit{},
	}
	c := &Component{
		sharedState: st,
		addr:        cfg.Addr,
		minDelay:    cfg.MinBackoff,
		maxDelay:    cfg.MaxBackoff,

		leader:        cfg.Leader,
		leaderRetry:   cfg.LeaderRetry,
		takeoverGrace: takeoverGrace,
		sweepEvery:    cfg.SweepEvery,
	}
	c.dispatcher = &dispatcher{
		sharedState: st,
		store:       cfg.Store,
		ackTimeout:  cfg.AckTimeout,
		render: &renderer{
			log:       st.log,
			domainStr: st.domainStr,
			stanzaIDs: st.stanzaIDs,
			limit:     st.limit,
			patch:     cfg.Patch,
		},
		work: newWorkQueue(),

		multicastMode:    mcMode,
		multicastService: mcService,
		multicastDomain:  mcDomain,
		multicastMax:     cfg.MulticastMaxAddresses,
		multicastShare:   cmp.Or(cfg.MulticastShare, DefaultMulticastShare),
	}
	access := nodeAccess{hub: cfg.Hub}
	targets := &subscriptionTargets{
		nodeAccess: access,
		log:        st.log,
		resolver:   cfg.Resolver,
		lookups:    limits.lookups,
		creation: &nodeCreation{
			hub:          cfg.Hub,
			log:          st.log,
			openSources:  cfg.OpenSources,
			localSources: cfg.LocalSources,
			checkHost:    cfg.CheckHost,
			localDomains: localDomains,
			creations:    ratelimit.New(float64(nodesPerHour)/3600, nodesPerHour),
			nodesPerHour: nodesPerHour,
		},
	}
	chat := &chatCommands{subscriptionTargets: targets, domainStr: st.domainStr, publicURL: strings.TrimRight(cfg.PublicURL, "/")}
	c.service = &service{
		sharedState:   st,
		access:        access,
		owner:         &ownerRequests{nodeAccess: access, log: st.log},
		chat:          chat,
		commands:      &adhocService{chatCommands: chat},
		targets:       targets,
		completeEntry: cfg.CompleteEntry,
		limits:        limits,
		dispatcher:    c.dispatcher,
	}
	return c, nil
}

// Connected reports whether the component is attached to the XMPP server:
// true between a successful handshake and the loss of the stream.
func (c *Component) Connected() bool { return c.connected.Load() }

// Reconnections counts the successful connections to the XMPP server
// after the first (pingd_component_reconnects_total).
func (c *Component) Reconnections() int64 { return max(c.connections.Load()-1, 0) }

// NotificationCounts returns the notification stanzas this process wrote,
// one per subscriber and through the XEP-0033 multicast service, and the
// notifications answered with an error (bounces), for /metrics.
func (c *Component) NotificationCounts() (unicast, multicast, bounced int64) {
	return c.dispatcher.sentUnicast.Load(), c.dispatcher.sentMulticast.Load(), c.service.bounced.Load()
}

// Wake tells the dispatcher that the node's log grew (0: look at every
// node). It never blocks.
func (c *Component) Wake(nodeID int64) { c.dispatcher.work.add(nodeID) }

// Run connects to the XMPP server, serves the component's JID and
// reconnects with exponential backoff and jitter until ctx ends; then it
// closes the stream cleanly and returns nil. With a Leader it first waits
// for the lease (unless Shared) and sends notifications only while it
// holds it; see leader.go.
func (c *Component) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.dispatcher.dispatchLoop(ctx) })
	switch {
	case c.leader == nil:
		c.leading.Store(true)
		defer c.leading.Store(false)
		c.connectLoop(ctx)
	case c.shared:
		wg.Go(func() { c.sweepLoop(ctx) })
		wg.Go(func() { c.lead(ctx, nil) })
		c.connectLoop(ctx)
	default:
		wg.Go(func() { c.sweepLoop(ctx) })
		c.lead(ctx, c.connectLoop)
	}
	return nil
}

// connectLoop connects, serves and reconnects until ctx ends.
func (c *Component) connectLoop(ctx context.Context) {
	var (
		st  stage
		err error
	)
	policy := reconnect.Policy{Min: c.minDelay, Max: c.maxDelay, StableAfter: stableAfter}
	reconnect.Loop(ctx, policy, func(ctx context.Context) bool {
		st, err = c.connectAndServe(ctx)
		return st == stageServed
	}, func(wait time.Duration) { c.logFailure(st, err, wait) })
}

// stage says how far a connection attempt got.
type stage int

const (
	stageDial stage = iota
	stageHandshake
	stageServed
)

// logFailure writes one line per failed attempt, saying what failed, where,
// and when the next attempt comes.
func (c *Component) logFailure(st stage, err error, delay time.Duration) {
	retry := delay.Round(100 * time.Millisecond).String()
	if delay < 100*time.Millisecond {
		retry = delay.Round(time.Millisecond).String()
	}
	switch {
	case st == stageDial:
		c.log.Warn(fmt.Sprintf("XMPP server %s unreachable, retrying in %s", c.addr, retry),
			"addr", c.addr, "retry_in", delay, "err", err)
	case isNotAuthorized(err):
		c.log.Error(fmt.Sprintf("XMPP server %s refused the handshake of %s: wrong component secret (not-authorized), retrying in %s",
			c.addr, c.domainStr, retry), "addr", c.addr, "retry_in", delay, "err", err)
	case isStreamError(err, "host-unknown"):
		c.log.Error(fmt.Sprintf("XMPP server %s does not know the component %s (host-unknown): configure it as an external component there; retrying in %s",
			c.addr, c.domainStr, retry), "addr", c.addr, "retry_in", delay, "err", err)
	case st == stageHandshake:
		c.log.Warn(fmt.Sprintf("XMPP server %s refused the component %s, retrying in %s", c.addr, c.domainStr, retry),
			"addr", c.addr, "retry_in", delay, "err", err)
	default:
		c.log.Warn(fmt.Sprintf("lost the connection to XMPP server %s, reconnecting in %s", c.addr, retry),
			"addr", c.addr, "retry_in", delay, "err", err)
	}
}

// setConnection publishes the live connection (nil: none).
func (c *Component) setConnection(conn *connection) {
	c.mu.Lock()
	c.conn = conn
	c.mu.Unlock()
	c.connected.Store(conn != nil)
}
