package fetching

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/pingd/pingd/hub"
)

// Config configures an Engine.
type Config struct {
	Store   Store
	Fetcher hub.Fetcher
	// Scheduler decides the next fetch of each source; nil means a plain
	// hourly schedule with exponential backoff on errors.
	Scheduler hub.Scheduler
	Logger    *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Instance names this process in fetch leases (several instances may
	// share one database): the hub's Config.Instance.
	Instance string
	// FetchWorkers bounds concurrent fetches; FetchesPerHost bounds them
	// per origin host. Defaults DefaultFetchWorkers and
	// DefaultFetchesPerHost.
	FetchWorkers   int
	FetchesPerHost int
	// FetchHostSpacing is the least time between the starts of two
	// fetches of one host (hub.HostKey), on the engine's clock. Zero means
	// none; pingd serve gives DefaultFetchHostSpacing unless told
	// otherwise.
	FetchHostSpacing time.Duration
	// FetchTimeout bounds one fetch; default DefaultFetchTimeout.
	FetchTimeout time.Duration
	// BaselineWait bounds how long learning of a source (node creation,
	// a subscription) waits for the source's baseline fetch before it
	// returns (AwaitFetch); default DefaultBaselineWait.
	BaselineWait time.Duration
	// Observe, if set, is told of every fetch and of the items fetches
	// published (metrics).
	Observe hub.Observer
	// Exclusive says this process is the only one using the store (an
	// SQLite file, which one pingd process serves at a time): fetch leases
	// found when Run starts were left by a process that died, and are
	// taken back at once instead of delaying those sources until they run
	// out; and a baseline wait need not look at the store for another
	// process's fetch. Never set it on a store that several processes
	// share.
	Exclusive bool
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
	// DefaultBaselineWait is how long a request that made pingd learn of a
	// source waits for its first fetch before it answers.
	DefaultBaselineWait = 10 * time.Second
)

// Engine is the fetch loop with its host queues, its unchanged writer and
// the baseline waits; it is the hub's hub.FetchEngine. Its methods are
// safe for concurrent use.
type Engine struct {
	store     Store
	fetcher   hub.Fetcher
	scheduler hub.Scheduler
	log       *slog.Logger
	now       func() time.Time
	instance  string
	cfg       Config

	fetchWake chan struct{}
	// published is Run's: told the nodes a stored fetch grew.
	published func(nodeID int64)

	// fetchedMu guards fetchLoopOn and fetched: per source, a channel
	// closed when this process next stores a fetch outcome for it, which
	// AwaitFetch waits on.
	fetchedMu   sync.Mutex
	fetchLoopOn bool
	fetched     map[int64]chan struct{}

	// load is what the fetch loop holds (Load).
	load fetchLoad
}

var _ hub.FetchEngine = (*Engine)(nil)

// New returns an engine; Run starts it.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil {
		return nil, errors.New("fetching: no store")
	}
	if cfg.Fetcher == nil {
		return nil, errors.New("fetching: no fetcher")
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
		cfg.Instance = randomName()
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
	if cfg.BaselineWait <= 0 {
		cfg.BaselineWait = DefaultBaselineWait
	}
	if cfg.Observe == nil {
		cfg.Observe = nopObserver{}
	}
	return &Engine{
		store:     cfg.Store,
		fetcher:   cfg.Fetcher,
		scheduler: cfg.Scheduler,
		log:       cfg.Logger,
		now:       func() time.Time { return cfg.Now().UTC() },
		instance:  cfg.Instance,
		cfg:       cfg,
		fetchWake: make(chan struct{}, 1),
		published: func(int64) {},
		fetched:   map[int64]chan struct{}{},
	}, nil
}

// Run fetches due sources until ctx ends (pinged, new, or scheduled
// polls), telling published of every node whose log a stored fetch grew.
// It returns after its fetches have stopped and what they left to store
// is stored.
func (e *Engine) Run(ctx context.Context, published func(nodeID int64)) error {
	if published != nil {
		e.published = published
	}
	// From now until the fetch loop ends, learning of a source waits for
	// its baseline fetch (AwaitFetch).
	e.setFetchLoopOn(true)
	defer e.setFetchLoopOn(false)
	e.reclaimOwnSourceLeases(ctx)
	if e.cfg.Exclusive {
		e.reclaimSourceLeases(ctx)
	}
	w := newUnchangedWriter(e)
	go w.run(ctx)
	e.fetchLoop(ctx, w)
	w.close() // stores what the fetches that ended queued
	return nil
}

// Wake makes the fetch loop look for due sources now.
func (e *Engine) Wake() {
	select {
	case e.fetchWake <- struct{}{}:
	default:
	}
}

// Running reports whether Run has started and its fetch loop has not
// ended: from then on, learning of a source waits for its baseline.
func (e *Engine) Running() bool {
	e.fetchedMu.Lock()
	defer e.fetchedMu.Unlock()
	return e.fetchLoopOn
}

type nopObserver struct{}

func (nopObserver) Fetched(int, error, time.Duration) {}
func (nopObserver) Published(int, time.Duration)      {}

// randomName names an instance that was given no name.
func randomName() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
