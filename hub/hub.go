package hub

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config configures a Hub.
type Config struct {
	Store   Store
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
}

// Defaults of Config: what a zero (or negative) field is taken as.
const (
	// DefaultFetchWorkers fetches at once keep a few slow sources from
	// holding up the others without opening hundreds of connections.
	DefaultFetchWorkers = 8
	// DefaultFetchesPerHost is the most fetches of one origin at once, so
	// that a host with many feeds is not fetched by every worker together.
	DefaultFetchesPerHost = 2
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
	store     Store
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
	listeners  []NodeDeletedListener
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
}

// New returns a hub; Run starts its background work.
func New(cfg Config) (*Hub, error) {
	if cfg.Store == nil {
		return nil, errors.New("hub: no store")
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

	h := &Hub{
		store:      cfg.Store,
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
	if l, ok := t.(NodeDeletedListener); ok {
		h.listeners = append(h.listeners, l)
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

// IsAdmin reports whether the bare JID is one of the configured admins.
func (h *Hub) IsAdmin(bareJID string) bool { return h.admins[bareJID] }

// OwnerAffiliations is Affiliations with the admins, who own every node,
// listed as owners: the affiliations as XMPP owners see them.
func (h *Hub) OwnerAffiliations(ctx context.Context, n *Node) (map[string]Affiliation, error) {
	affs, err := h.Affiliations(ctx, n)
	if err != nil {
		return nil, err
	}
	if affs == nil {
		affs = map[string]Affiliation{}
	}
	for j := range h.admins {
		affs[j] = AffOwner
	}
	return affs, nil
}

// MaySubscribe reports whether the bare JID may have an XMPP subscription
// to the node: ErrForbidden for an outcast, ErrNotMember when the node is
// closed to it.
func (h *Hub) MaySubscribe(ctx context.Context, n *Node, bareJID string) error {
	aff, err := h.AffiliationOf(ctx, n, bareJID)
	if err != nil {
		return err
	}
	if aff == AffOutcast {
		return fmt.Errorf("%w: %s is banned from %q", ErrForbidden, bareJID, n.Name)
	}
	if !aff.MayRead(n.AccessModel) {
		return ErrNotMember
	}
	return nil
}

// IsOwner reports whether the bare JID owns the node: an admin, or a JID
// with the owner affiliation.
func (h *Hub) IsOwner(ctx context.Context, node *Node, bareJID string) (bool, error) {
	if h.IsAdmin(bareJID) {
		return true, nil
	}
	a, err := h.store.Affiliation(ctx, node.ID, bareJID)
	if err != nil {
		return false, err
	}
	return a == AffOwner, nil
}

// AffiliationOf returns the bare JID's affiliation, admins being owners.
func (h *Hub) AffiliationOf(ctx context.Context, node *Node, bareJID string) (Affiliation, error) {
	if h.IsAdmin(bareJID) {
		return AffOwner, nil
	}
	return h.store.Affiliation(ctx, node.ID, bareJID)
}

// NodeSpec is what creating a node takes.
type NodeSpec struct {
	Name   string
	Source string // URL the node follows, optional
	Config NodeConfig
	// Implicit marks a node created for a URL subscription.
	Implicit bool
}

// CreateNode creates a node and returns it with its bearer token, which
// is shown only now (the store keeps its hash). If the node follows a
// source without a baseline, CreateNode returns once the baseline fetch
// is over (awaitBaseline).
func (h *Hub) CreateNode(ctx context.Context, spec NodeSpec) (*Node, string, error) {
	if err := ValidNewNodeName(spec.Name); err != nil {
		return nil, "", err
	}
	cfg := spec.Config
	if err := cfg.Validate(); err != nil {
		return nil, "", err
	}
	n := &Node{Name: spec.Name, NodeConfig: cfg, Implicit: spec.Implicit}
	var src *Source
	if spec.Source != "" {
		source, err := CanonicalURL(spec.Source)
		if err != nil {
			return nil, "", err
		}
		s, _, err := h.store.EnsureSource(ctx, source)
		if err != nil {
			return nil, "", fmt.Errorf("create node %q: %w", spec.Name, err)
		}
		src = s
		n.SourceID = s.ID
		n.SourceURL = s.URL
	}
	token := randomToken(24)
	n.TokenHash = HashToken(token)
	if err := h.store.CreateNode(ctx, n); err != nil {
		return nil, "", fmt.Errorf("create node %q: %w", spec.Name, err)
	}
	if src != nil && src.Gone {
		// A source found gone (410) before and asked for again by a new
		// node gets another chance: it is fetched now, and marked gone
		// again if it still is.
		revived, err := h.store.ReviveSource(ctx, src.ID, h.now(), ReasonRevived)
		if err != nil {
			return nil, "", fmt.Errorf("create node %q: %w", spec.Name, err)
		}
		if revived {
			h.log.InfoContext(ctx, "source gone before is fetched again for a new node", "node", n.Name, "source", src.URL)
			h.WakeFetcher()
		}
	} else if src != nil {
		if err := h.scheduleBaseline(ctx, src); err != nil {
			return nil, "", err
		}
	}
	h.log.InfoContext(ctx, "node created", "node", n.Name, "source", n.SourceURL, "access_model", n.AccessModel)
	return n, token, nil
}

// Node returns a node by name.
func (h *Hub) Node(ctx context.Context, name string) (*Node, error) {
	return h.store.Node(ctx, name)
}

// Nodes lists every node.
func (h *Hub) Nodes(ctx context.Context) ([]Node, error) { return h.store.Nodes(ctx) }

// DeleteNode removes a node, its items and subscriptions, and tells the
// transports so they can notify the subscribers.
func (h *Hub) DeleteNode(ctx context.Context, name string) error {
	n, err := h.store.Node(ctx, name)
	if err != nil {
		return err
	}
	subs, err := h.store.Subscriptions(ctx, SubscriptionFilter{NodeID: n.ID})
	if err != nil {
		return err
	}
	if err := h.store.DeleteNode(ctx, name); err != nil {
		return err
	}
	h.mu.RLock()
	listeners := slices.Clone(h.listeners)
	h.mu.RUnlock()
	for _, l := range listeners {
		l.NodeDeleted(ctx, *n, subs)
	}
	h.log.InfoContext(ctx, "node deleted", "node", name, "subscriptions", len(subs))
	return nil
}

// RotateToken issues a new bearer token for the node.
func (h *Hub) RotateToken(ctx context.Context, name string) (string, error) {
	token := randomToken(24)
	if err := h.store.SetNodeToken(ctx, name, HashToken(token)); err != nil {
		return "", err
	}
	return token, nil
}

// IsAdminToken reports, in constant time, whether token is the admin token.
func (h *Hub) IsAdminToken(token string) bool {
	if !h.hasAdmin || token == "" {
		return false
	}
	sum := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(sum[:], h.adminHash[:]) == 1
}

// Authorize reports whether token is the node's token or the admin token.
func (h *Hub) Authorize(node *Node, token string) bool {
	if token == "" {
		return false
	}
	if h.IsAdminToken(token) {
		return true
	}
	if len(node.TokenHash) == 0 {
		return false
	}
	return subtle.ConstantTimeCompare(HashToken(token), node.TokenHash) == 1
}

// HashToken is how tokens are stored: SHA-256, enough for random tokens.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

func randomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// RandomID returns a random identifier (challenges, subscription ids).
func RandomID() string { return randomToken(16) }

// Publish appends entries to the node's log as items (an owner's XEP-0060
// publish) and wakes the transports. Entries without an ID get a random one.
func (h *Hub) Publish(ctx context.Context, nodeName, publisher string, entries []Entry) ([]Event, error) {
	n, err := h.store.Node(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	return h.PublishTo(ctx, n, publisher, entries)
}

// PublishTo is Publish to a node the caller has just read (to check the
// publisher's rights), without reading it again. A node deleted meanwhile
// gives ErrNotFound.
func (h *Hub) PublishTo(ctx context.Context, n *Node, publisher string, entries []Entry) ([]Event, error) {
	events := make([]Event, 0, len(entries))
	for _, e := range entries {
		if e.ID == "" {
			e.ID = RandomID()
		}
		events = append(events, Event{
			Kind: EventItem, ItemID: e.ID, Payload: e.Payload,
			Title: e.Title, Summary: e.Summary, Link: e.Link,
			Updated: e.Updated, Publisher: publisher,
		})
	}
	out, err := h.store.Append(ctx, n.ID, events)
	if err != nil {
		return nil, fmt.Errorf("publish to %q: %w", n.Name, err)
	}
	h.cfg.Observe.Published(len(out), 0)
	h.wake(n.ID)
	return out, nil
}

// Retract removes items; ErrNotFound if one of them does not exist (and
// then nothing is removed), ErrInvalid if ids is empty.
func (h *Hub) Retract(ctx context.Context, nodeName, publisher string, ids []string) ([]Event, error) {
	n, err := h.store.Node(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	return h.RetractFrom(ctx, n, publisher, ids)
}

// RetractFrom is Retract from a node the caller has just read (to check
// the publisher's rights), without reading it again.
func (h *Hub) RetractFrom(ctx context.Context, n *Node, publisher string, ids []string) ([]Event, error) {
	if len(ids) == 0 {
		// Items with no ids means every item: the check below would be wrong.
		return nil, fmt.Errorf("%w: retraction names no item", ErrInvalid)
	}
	have, err := h.store.Items(ctx, n.ID, ids, 0)
	if err != nil {
		return nil, err
	}
	if len(have) != len(uniq(ids)) {
		return nil, fmt.Errorf("retract from %q: %w: item", n.Name, ErrNotFound)
	}
	events := make([]Event, 0, len(ids))
	for _, id := range uniq(ids) {
		events = append(events, Event{Kind: EventRetract, ItemID: id, Publisher: publisher})
	}
	out, err := h.store.Append(ctx, n.ID, events)
	if err != nil {
		return nil, err
	}
	h.wake(n.ID)
	return out, nil
}

// Purge removes every item of the node.
func (h *Hub) Purge(ctx context.Context, nodeName, publisher string) error {
	n, err := h.store.Node(ctx, nodeName)
	if err != nil {
		return err
	}
	if _, err := h.store.Append(ctx, n.ID, []Event{{Kind: EventPurge, Publisher: publisher}}); err != nil {
		return err
	}
	h.wake(n.ID)
	return nil
}

func uniq(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// Items returns the node's current items, newest first (see Store.Items).
func (h *Hub) Items(ctx context.Context, node *Node, ids []string, max int) ([]Event, error) {
	return h.store.Items(ctx, node.ID, ids, max)
}

// Subscribe adds or renews a subscription. For an existing subscription
// of the same node, kind and address, it is returned unchanged if it is an
// active XMPP subscription (subscribing twice gives the same subscription)
// or a CNWS one (see below), and otherwise updated in place, keeping its
// cursor. Kinds whose subscribers verify their requests go through
// RequestSubscription instead. XMPP subscriptions to
// a whitelist node need an affiliation that allows reading (ErrNotMember).
// A new subscription starts at the node's newest event: it gets what comes
// after, not what came before. A subscription to a node whose source has
// no baseline yet returns once the baseline fetch is over.
func (h *Hub) Subscribe(ctx context.Context, s Subscription) (*Subscription, bool, error) {
	if !s.Kind.Valid() {
		return nil, false, fmt.Errorf("%w: subscription kind %q", ErrInvalid, s.Kind)
	}
	if s.Address == "" {
		return nil, false, fmt.Errorf("%w: empty subscriber address", ErrInvalid)
	}
	n, err := h.store.Node(ctx, s.NodeName)
	if err != nil {
		return nil, false, err
	}
	if s.Kind == KindXMPP {
		if s.BareJID == "" {
			return nil, false, fmt.Errorf("%w: XMPP subscription without a bare JID", ErrInvalid)
		}
		if !ValidFormat(s.Options.Format) || !ValidMessageType(s.Options.MessageType) || !ValidXMPPDiff(s.Options.Diff) {
			return nil, false, fmt.Errorf("%w: notification format %q, message type %q, diff %q", ErrInvalid,
				s.Options.Format, s.Options.MessageType, s.Options.Diff)
		}
		if err := validDigest(s.Options); err != nil {
			return nil, false, err
		}
		if err := h.MaySubscribe(ctx, n, s.BareJID); err != nil {
			return nil, false, err
		}
		existing, err := h.store.Subscriptions(ctx, SubscriptionFilter{NodeID: n.ID, Kind: KindXMPP, Address: s.Address})
		if err != nil {
			return nil, false, err
		}
		if len(existing) > 0 && existing[0].State == SubActive {
			// Subscribing again shows the subscriber is there.
			if err := h.clearBounces(ctx, existing[:1]); err != nil {
				return nil, false, err
			}
			existing[0].ConsecutiveErrors, existing[0].FirstFailureAt, existing[0].LastError = 0, time.Time{}, ""
			return &existing[0], true, nil
		}
		if s.SubID == "" {
			s.SubID = RandomID()
		}
	}
	if s.Kind == KindCNWS {
		// CNWS has no verification of intent: anyone may send a
		// <subscribe> naming any callback, so a repeated one proves
		// nothing. "If the subscriber is already on the list … the status
		// should be true", and nothing else: its delivery record stays.
		existing, err := h.store.Subscriptions(ctx, SubscriptionFilter{NodeID: n.ID, Kind: KindCNWS, Address: s.Address})
		if err != nil {
			return nil, false, err
		}
		if len(existing) > 0 {
			return &existing[0], true, nil
		}
	}
	if err := h.mayAddCallback(ctx, n, s.Kind, s.Address); err != nil {
		return nil, false, err
	}
	if s.State == "" {
		s.State = SubActive
	}
	s.NodeID = n.ID
	s.NodeName = n.Name
	s.Cursor = n.LastSeq
	if s.Kind == KindXMPP && s.Options.Digest {
		s.NextAttemptAt = h.now().Add(s.Options.DigestFrequency())
	}
	created, err := h.store.PutSubscription(ctx, &s)
	if err != nil {
		return nil, false, fmt.Errorf("subscribe %s to %q: %w", s.Kind, n.Name, err)
	}
	if n.SourceID != 0 {
		if err := h.ensureBaseline(ctx, n.SourceID); err != nil {
			return nil, false, err
		}
	}
	if s.Kind != KindXMPP {
		h.wake(n.ID, s.Kind)
	}
	return &s, !created, nil
}

// retryFailingSourceAfter is how long after a failed fetch a source
// without a baseline may be fetched again ahead of its backoff because a
// subscription or a URL names it (ensureBaseline).
const retryFailingSourceAfter = time.Minute

// ensureBaseline schedules the first fetch of a source not fetched yet,
// when a subscription or a URL names it again. After a failed fetch it does
// so only once retryFailingSourceAfter has passed: anyone may subscribe
// (and unsubscribe, and subscribe again), and hurrying the fetch each time
// would make pingd hammer an origin that is already failing. Within that
// minute the answer comes at once, before any baseline.
func (h *Hub) ensureBaseline(ctx context.Context, sourceID int64) error {
	src, err := h.store.Source(ctx, sourceID)
	if err != nil {
		return err
	}
	if src.ConsecutiveErrors > 0 && h.now().Sub(src.LastFetchAt) < retryFailingSourceAfter {
		return nil
	}
	return h.scheduleBaseline(ctx, src)
}

// ReasonNewSource is the NextFetchReason of a source waiting for its
// baseline fetch; ReasonRevived that of a source gone before that a new
// node follows.
const (
	ReasonNewSource = "new source"
	ReasonRevived   = "gone before; followed by a new node"
)

// scheduleBaseline makes a source that has no baseline yet due now and
// waits for that fetch (awaitBaseline). Learning of a source is not a
// ping: the scheduler polls sources that ping only at a safety-net
// interval, so this must not record one.
func (h *Hub) scheduleBaseline(ctx context.Context, src *Source) error {
	if src.Baselined || src.Gone {
		return nil
	}
	at := h.now()
	if err := h.store.ScheduleSource(ctx, src.ID, at, ReasonNewSource); err != nil {
		return fmt.Errorf("schedule first fetch of %s: %w", src.URL, err)
	}
	h.WakeFetcher()
	h.awaitBaseline(ctx, src, at)
	return nil
}

// awaitBaseline waits, up to Config.BaselineWait, until the fetch of src
// made due at `at` is over: the baseline is stored, or the fetch failed or
// was put off. Whoever learnt of the source answers only then: a change
// made between an earlier answer and the fetch went into the baseline, and
// the ping that announced it notified nothing. It returns at once when no
// fetch loop runs in this process (Run not started). A WaitObserver in
// parent's context hears of the wait.
func (h *Hub) awaitBaseline(parent context.Context, src *Source, at time.Time) {
	ctx, cancel := context.WithTimeout(parent, h.cfg.BaselineWait)
	defer cancel()
	// Another process sharing the store may claim the fetch, and this one
	// then hears nothing of it: look at the store now and then.
	var poll <-chan time.Time
	if !h.cfg.Exclusive {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		poll = t.C
	}
	var ended func()
	defer func() {
		if ended != nil {
			ended()
		}
	}()
	for {
		fetched, ok := h.fetchedSignal(src.ID)
		if !ok {
			return
		}
		s, err := h.store.Source(ctx, src.ID)
		if err != nil || s.Baselined || s.Gone || s.NextFetchAt.IsZero() || s.NextFetchAt.After(at) {
			// Not due any more without a baseline: the fetch failed or
			// was put off, and the status shows why.
			return
		}
		if ended == nil {
			ended = StartSlowWait(parent)
		}
		select {
		case <-fetched:
		case <-poll:
		case <-ctx.Done():
			if parent.Err() == nil {
				h.log.InfoContext(parent, "answering before the baseline fetch of a source is over",
					"source", src.URL, "waited", h.cfg.BaselineWait)
			}
			return
		}
	}
}

// fetchedSignal returns the channel closed when this process next stores
// a fetch outcome of the source; false when no fetch loop runs here.
func (h *Hub) fetchedSignal(sourceID int64) (<-chan struct{}, bool) {
	h.fetchedMu.Lock()
	defer h.fetchedMu.Unlock()
	if !h.fetchLoopOn {
		return nil, false
	}
	ch, ok := h.fetched[sourceID]
	if !ok {
		ch = make(chan struct{})
		h.fetched[sourceID] = ch
	}
	return ch, true
}

// signalFetched tells the waiters of the source that an outcome of its
// fetch is stored.
func (h *Hub) signalFetched(sourceID int64) {
	h.fetchedMu.Lock()
	defer h.fetchedMu.Unlock()
	if ch, ok := h.fetched[sourceID]; ok {
		close(ch)
		delete(h.fetched, sourceID)
	}
}

// setFetchLoopOn records whether the fetch loop runs; when it stops,
// every waiter is let go.
func (h *Hub) setFetchLoopOn(on bool) {
	h.fetchedMu.Lock()
	defer h.fetchedMu.Unlock()
	h.fetchLoopOn = on
	if !on {
		for id, ch := range h.fetched {
			close(ch)
			delete(h.fetched, id)
		}
	}
}

// Unsubscribe removes the subscriptions of the node matching kind and
// address; ErrNotFound if there were none.
func (h *Hub) Unsubscribe(ctx context.Context, nodeName string, kind Kind, address string) ([]Subscription, error) {
	n, err := h.store.Node(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	removed, err := h.store.DeleteSubscriptions(ctx, SubscriptionFilter{NodeID: n.ID, Kind: kind, Address: address})
	if err != nil {
		return nil, err
	}
	if len(removed) == 0 {
		return nil, fmt.Errorf("%w: no %s subscription of %s to %q", ErrNotFound, kind, address, nodeName)
	}
	return removed, nil
}

// Subscriptions lists subscriptions matching f.
func (h *Hub) Subscriptions(ctx context.Context, f SubscriptionFilter) ([]Subscription, error) {
	return h.store.Subscriptions(ctx, f)
}

// Affiliations lists a node's affiliations.
func (h *Hub) Affiliations(ctx context.Context, node *Node) (map[string]Affiliation, error) {
	return h.store.Affiliations(ctx, node.ID)
}

// SetAffiliation sets a bare JID's affiliation on a node. When the new
// affiliation no longer lets the JID read the node, its XMPP subscriptions
// are removed and a revoke event tells it so.
func (h *Hub) SetAffiliation(ctx context.Context, node *Node, bareJID string, a Affiliation) error {
	if !a.Valid() {
		return fmt.Errorf("%w: affiliation %q", ErrInvalid, a)
	}
	if bareJID == "" || strings.Contains(bareJID, "/") {
		return fmt.Errorf("%w: affiliations are set on bare JIDs, not %q", ErrInvalid, bareJID)
	}
	if err := h.store.SetAffiliation(ctx, node.ID, bareJID, a); err != nil {
		return err
	}
	if a.MayRead(node.AccessModel) || h.IsAdmin(bareJID) {
		return nil
	}
	return h.revoke(ctx, node, SubscriptionFilter{BareJID: bareJID})
}

// RevokeSubscriptions removes the bare JID's XMPP subscriptions to the node
// and appends a revoke event that tells it so, whatever its affiliation and
// the node's access model: a GetPingd unsubscribe request removes them on an
// open node too.
func (h *Hub) RevokeSubscriptions(ctx context.Context, node *Node, bareJID string) error {
	if bareJID == "" || strings.Contains(bareJID, "/") {
		return fmt.Errorf("%w: subscriptions are revoked for bare JIDs, not %q", ErrInvalid, bareJID)
	}
	return h.revoke(ctx, node, SubscriptionFilter{BareJID: bareJID})
}

// RevokeSubscription removes the XMPP subscription of the JID address (as
// it subscribed, full or bare) on an owner's word (XEP-0060 §8.8.2) and
// appends a revoke event that tells it so (§8.8.4). Without such a
// subscription nothing changes and nobody is told.
func (h *Hub) RevokeSubscription(ctx context.Context, node *Node, address string) error {
	if address == "" {
		return fmt.Errorf("%w: empty subscriber address", ErrInvalid)
	}
	return h.revoke(ctx, node, SubscriptionFilter{Address: address})
}

// revoke removes the node's XMPP subscriptions matching f (its address or
// bare JID) and appends one revoke event per subscription removed.
func (h *Hub) revoke(ctx context.Context, node *Node, f SubscriptionFilter) error {
	f.NodeID, f.Kind = node.ID, KindXMPP
	removed, err := h.store.DeleteSubscriptions(ctx, f)
	if err != nil {
		return err
	}
	if len(removed) == 0 {
		return nil
	}
	events := make([]Event, 0, len(removed))
	for _, s := range removed {
		events = append(events, Event{Kind: EventRevoke, Address: s.Address})
	}
	if _, err := h.store.Append(ctx, node.ID, events); err != nil {
		return err
	}
	h.wake(node.ID, KindXMPP)
	return nil
}

// GrantSubscription subscribes an XMPP JID on an owner's word (XEP-0060
// §8.8.2), with Subscribe's rules. A new subscription also appends a
// subscribed event that tells the JID (§8.8.4): like a revoke it is one
// event in the node's log, written to that one address, so subscribing
// costs no more than the subscription itself. An existing subscription is
// returned as it is, and nobody is told of a change that did not happen.
func (h *Hub) GrantSubscription(ctx context.Context, s Subscription) (*Subscription, bool, error) {
	if s.Kind != KindXMPP {
		return nil, false, fmt.Errorf("%w: owners grant XMPP subscriptions only, not %q", ErrInvalid, s.Kind)
	}
	sub, existed, err := h.Subscribe(ctx, s)
	if err != nil || existed {
		return sub, existed, err
	}
	events := []Event{{Kind: EventSubscribed, Address: sub.Address}}
	last, err := h.lastPublishedFor(ctx, sub)
	if err != nil {
		return nil, false, err
	}
	if last != nil {
		events = append(events, *last) // approval by an owner sends it too (§12.5)
	}
	if _, err := h.store.Append(ctx, sub.NodeID, events); err != nil {
		return nil, false, fmt.Errorf("tell %s of its subscription to %q: %w", sub.Address, sub.NodeName, err)
	}
	h.wake(sub.NodeID, KindXMPP)
	return sub, false, nil
}

// SendLastPublished sends the node's newest item to a new XMPP
// subscription alone, when the node's configuration says so (XEP-0060
// §12.5, on_sub): one event in the node's log, written to that address,
// so it is delivered like every notification (acknowledged, sent again
// after a lost connection). It reports whether there was an item to send.
// A subscription that existed already is not sent it again: the caller
// calls this for new ones only.
func (h *Hub) SendLastPublished(ctx context.Context, sub *Subscription) (bool, error) {
	last, err := h.lastPublishedFor(ctx, sub)
	if err != nil || last == nil {
		return false, err
	}
	if _, err := h.store.Append(ctx, sub.NodeID, []Event{*last}); err != nil {
		return false, fmt.Errorf("send the newest item of %q to %s: %w", sub.NodeName, sub.Address, err)
	}
	h.wake(sub.NodeID, KindXMPP)
	return true, nil
}

// lastPublishedFor is the EventLast that sends the node's newest item to
// the XMPP subscription, nil when there is none to send.
func (h *Hub) lastPublishedFor(ctx context.Context, sub *Subscription) (*Event, error) {
	if sub.Kind != KindXMPP {
		return nil, nil
	}
	n, err := h.store.NodeByID(ctx, sub.NodeID)
	if err != nil {
		return nil, err
	}
	if n.SendLastPublished == SendLastNever {
		return nil, nil
	}
	items, err := h.store.Items(ctx, n.ID, nil, 1)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	it := items[0]
	// Its Updated is the time the copy is stamped with: the entry's, else
	// when the item was published.
	updated := it.Updated
	if updated.IsZero() {
		updated = it.Created
	}
	return &Event{Kind: EventLast, Address: sub.Address, ItemID: it.ItemID, Payload: it.Payload,
		Title: it.Title, Summary: it.Summary, Link: it.Link, Updated: updated, Publisher: it.Publisher}, nil
}

// NodeForURL returns the node that follows url (in any spelling: it is
// looked up in canonical form), preferring one an owner created; when none
// does and create is set, it creates an implicit open node named after the
// canonical URL and returns once its source's baseline fetch is over.
func (h *Hub) NodeForURL(ctx context.Context, rawURL string, create bool) (*Node, error) {
	return h.nodeForURL(ctx, rawURL, create, nil)
}

// nodeForURL is NodeForURL; mayCreate, when set, is asked right before an
// implicit node is created (and only then), and its error is returned.
func (h *Hub) nodeForURL(ctx context.Context, rawURL string, create bool, mayCreate func(context.Context) error) (*Node, error) {
	rawURL, err := CanonicalURL(rawURL)
	if err != nil {
		return nil, err
	}
	srcs, err := h.store.SourcesMatching(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	var implicit *Node
	for _, s := range srcs {
		nodes, err := h.store.NodesBySource(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		for i := range nodes {
			if !nodes[i].Implicit {
				return &nodes[i], h.ensureBaseline(ctx, s.ID)
			}
			if implicit == nil {
				implicit = &nodes[i]
			}
		}
	}
	if implicit != nil {
		return implicit, h.ensureBaseline(ctx, implicit.SourceID)
	}
	if !create {
		return nil, fmt.Errorf("%w: no node follows %s", ErrNotFound, rawURL)
	}
	if err := h.mayCreateImplicitNode(ctx); err != nil {
		return nil, err
	}
	if mayCreate != nil {
		if err := mayCreate(ctx); err != nil {
			return nil, err
		}
	}
	// The URL names the node when it can; when an owner already gave that
	// name to a node following something else, the hashed name is used.
	names := []string{ImplicitNodeName(rawURL), hashedNodeName(rawURL)}
	for i, name := range names {
		if i > 0 && name == names[0] {
			break
		}
		n, _, err := h.CreateNode(ctx, NodeSpec{Name: name, Source: rawURL, Config: DefaultNodeConfig(), Implicit: true})
		if err == nil {
			h.implicitNodes.created()
		}
		if !errors.Is(err, ErrExists) {
			return n, err
		}
		// Taken: by a concurrent request for the same URL, or by another node.
		existing, err := h.store.Node(ctx, name)
		if err != nil {
			return nil, err
		}
		src, _, err := h.store.EnsureSource(ctx, rawURL)
		if err != nil {
			return nil, err
		}
		if existing.SourceID == src.ID {
			return existing, h.ensureBaseline(ctx, src.ID)
		}
	}
	return nil, fmt.Errorf("%w: the node names for %s are taken by nodes following other sources", ErrExists, rawURL)
}

// ImplicitNodeName is the name of the node pingd creates for a URL: the
// URL in canonical form when that is a valid node name, else "url:" and the
// SHA-256 of that form; every spelling of a URL gives one name.
func ImplicitNodeName(rawURL string) string {
	if c, err := CanonicalURL(rawURL); err == nil {
		rawURL = c
	}
	if ValidNodeName(rawURL) == nil {
		return rawURL
	}
	return hashedNodeName(rawURL)
}

// hashedNodeName is "url:" and the hex SHA-256 of the URL.
func hashedNodeName(rawURL string) string {
	sum := sha256.Sum256([]byte(rawURL))
	return "url:" + hex.EncodeToString(sum[:])
}

// Changed says the resource at rawURL changed: every source whose URL or
// site is rawURL is fetched as soon as possible. note, when set, is a
// trusted announcement (CNWS) that notifies even if the fetch shows no
// change. It returns how many sources were scheduled.
func (h *Hub) Changed(ctx context.Context, rawURL string, note *ChangeNote) (int, error) {
	return h.changed(ctx, rawURL, note, map[int64]bool{})
}

// changed is Changed skipping the sources in scheduled, which it adds to:
// URLs of one ping often name one source twice (a feed and its site).
func (h *Hub) changed(ctx context.Context, rawURL string, note *ChangeNote, scheduled map[int64]bool) (int, error) {
	if canon, err := CanonicalURL(rawURL); err == nil {
		rawURL = canon // sources are stored in canonical form
	}
	srcs, err := h.store.SourcesMatching(ctx, rawURL)
	if err != nil {
		return 0, fmt.Errorf("find sources of %s: %w", rawURL, err)
	}
	n := 0
	for _, s := range srcs {
		if s.Gone || scheduled[s.ID] {
			continue
		}
		if err := h.store.MarkSourceDue(ctx, s.ID, h.now(), note); err != nil {
			return n, fmt.Errorf("schedule fetch of %s: %w", s.URL, err)
		}
		scheduled[s.ID] = true
		n++
	}
	if n > 0 {
		h.WakeFetcher()
	}
	return n, nil
}

// Ping records a publisher's ping and schedules fetches of the sources
// matching any of urls; it returns how many sources, each counted once.
// p.URL is recorded as the URL the publisher submitted (changes.xml shows
// what was submitted), the first non-empty one of urls when it is empty;
// urls may then be empty, for a ping that names nothing pingd fetches. It
// fails only when the ping could not be stored, so a ping is never
// acknowledged and lost.
func (h *Hub) Ping(ctx context.Context, p Ping, urls []string, note *ChangeNote) (int, error) {
	canonical := make([]string, 0, len(urls))
	first := ""
	for _, u := range urls {
		if u == "" {
			continue
		}
		c, err := CanonicalURL(u)
		if err != nil {
			return 0, err
		}
		canonical = append(canonical, c)
		if first == "" {
			first = u
		}
	}
	if p.URL == "" {
		p.URL = first
	}
	if p.URL == "" {
		return 0, fmt.Errorf("%w: a ping names no URL", ErrInvalid)
	}
	for _, u := range []string{p.URL, p.FeedURL} {
		if u == "" {
			continue
		}
		if err := ValidURL(u); err != nil {
			return 0, err
		}
	}
	if p.ReceivedAt.IsZero() {
		p.ReceivedAt = h.now()
	}
	if err := h.store.RecordPing(ctx, &p); err != nil {
		return 0, fmt.Errorf("record ping: %w", err)
	}
	total := 0
	seen := map[string]bool{}
	scheduled := map[int64]bool{}
	for _, u := range canonical {
		if seen[u] {
			continue
		}
		seen[u] = true
		n, err := h.changed(ctx, u, note, scheduled)
		if err != nil {
			return total, err
		}
		total += n
	}
	h.pingRecorded(ctx, PingRecord{Ping: p, URLs: urls, Matched: total})
	return total, nil
}

// Pings returns recent pings and the total count (changes.xml).
func (h *Hub) Pings(ctx context.Context, since time.Time, limit int) ([]Ping, int64, error) {
	return h.store.Pings(ctx, since, limit)
}

// Source returns a source by id.
func (h *Hub) Source(ctx context.Context, id int64) (*Source, error) { return h.store.Source(ctx, id) }

// Sources lists the sources followed by nodes.
func (h *Hub) Sources(ctx context.Context) ([]Source, error) { return h.store.Sources(ctx) }

// WakeFetcher makes the fetch loop look for due sources now.
func (h *Hub) WakeFetcher() {
	select {
	case h.fetchWake <- struct{}{}:
	default:
	}
}
