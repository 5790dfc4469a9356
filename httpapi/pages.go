package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/hub"
)

// PagesHub is what the pages ask of the hub.
type PagesHub interface {
	Now() time.Time
	FetchLimits() hub.FetchLimits
	FetchLoad() hub.FetchLoad
	Node(ctx context.Context, name string) (*hub.Node, error)
	Items(ctx context.Context, node *hub.Node, ids []string, max int) ([]hub.Event, error)
	EventsAfter(ctx context.Context, node *hub.Node, after int64, limit int) ([]hub.Event, error)
	Authorize(node *hub.Node, token string) bool
}

// StatusStore is what the pages read from the store itself rather than
// through the hub: the health check (Check) and the status page's figures
// (StatusReport, a fixed number of queries; status.go).
type StatusStore interface {
	Check(ctx context.Context) error
	Backend() string
	StatusReport(ctx context.Context, q hub.StatusQuery) (*hub.StatusReport, error)
}

// PagesConfig configures the pages.
type PagesConfig struct {
	Site
	Hub   PagesHub
	Store StatusStore
	// Gate is the admin gate: the status page shares its per-client limit,
	// and its admin view and GET /api/status need the admin token.
	Gate *AdminGate
	// Ready reports whether the component is connected (GET /readyz).
	Ready func() bool
	// Version is pingd's, shown on the status page and part of the node
	// feeds' entity tags.
	Version string
	// ComponentJID is the XMPP address of pingd's pubsub service.
	ComponentJID string
	// PollInterval is the poll interval of sources that give no hint,
	// shown on the status page with the fetch loop's other limits (the
	// scheduler's, not the hub's; zero: not shown).
	PollInterval time.Duration
	// CloudProtocol is the protocol the node feeds' <cloud> element
	// advertises for registrations: "http-post" (the REST /pleaseNotify,
	// default), "xml-rpc" or "soap" (both on /RPC2).
	CloudProtocol string
}

// Pages are what people and probes read: the status page at "/" (and its
// JSON, GET /api/status), the nodes' own Atom and RSS feeds, and the
// health and readiness probes.
type Pages struct {
	site
	cfg   PagesConfig
	hub   PagesHub
	store StatusStore
	gate  *AdminGate
	cloud string
	// status keeps the status page's readings of the store (status.go).
	status statusCache
}

// NewPages returns the pages.
func NewPages(cfg PagesConfig) (*Pages, error) {
	s, err := newSite("pages", cfg.Site)
	if err != nil {
		return nil, err
	}
	if cfg.Hub == nil || cfg.Gate == nil {
		return nil, errors.New("httpapi: pages: no hub or no admin gate")
	}
	if cfg.Store == nil {
		return nil, errors.New("httpapi: pages: no store to check and report on")
	}
	cloud, err := cloudProtocol(cfg.CloudProtocol)
	if err != nil {
		return nil, err
	}
	return &Pages{site: s, cfg: cfg, hub: cfg.Hub, store: cfg.Store, gate: cfg.Gate, cloud: cloud}, nil
}

// Routes installs the probes, the node feeds and the status page.
func (a *Pages) Routes(r *mux.Router) {
	r.HandleFunc("/healthz", a.healthz).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/readyz", a.readyz).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/atom/{node}", a.nodeFeed(formatAtom)).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/rss/{node}", a.nodeFeed(formatRSS)).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/api/status", a.gate.wrap(a.getAPIStatus)).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/", a.statusPage).Methods(http.MethodGet, http.MethodHead)
}
