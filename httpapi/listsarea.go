package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/ratelimit"
)

// ListsHub is what the ping lists and the OPML list ask of the hub.
type ListsHub interface {
	Now() time.Time
	Pings(ctx context.Context, since time.Time, limit int) ([]hub.Ping, int64, error)
	PingRetention() time.Duration
	OpenNodes(ctx context.Context, limit int) ([]hub.ListedNode, int, error)
	Node(ctx context.Context, name string) (*hub.Node, error)
	NodeForURL(ctx context.Context, rawURL string, create bool) (*hub.Node, error)
	CreateNode(ctx context.Context, spec hub.NodeSpec) (*hub.Node, string, error)
}

// ListsConfig configures the lists.
type ListsConfig struct {
	Site
	Hub ListsHub
	// Archive reads the pings of an hour for the hourly archives (the
	// store's hub.PingArchive); nil: pingd keeps no archive, and every
	// hour answers 404 saying so. cmd/pingd always gives it.
	Archive hub.PingArchive
	// Gate is the admin gate of POST /api/opml.
	Gate *AdminGate
	// Readers of the ping lists (changes.xml, shortChanges.xml, the hourly
	// archives) and of the OPML list are limited per client IP, each kind
	// in buckets of its own; default 1 per second in bursts of 20.
	ListRate  float64
	ListBurst int
	// CheckHost: see checkOutbound (outbound.go); nil: no early check.
	CheckHost func(ctx context.Context, host string) error
}

// Lists are the lists pingd publishes: the ping lists (changes.xml,
// shortChanges.xml, the hourly archives) and the open nodes as OPML, with
// the OPML import of the admin API.
type Lists struct {
	site
	hub     ListsHub
	archive hub.PingArchive
	gate    *AdminGate
	limit   *ratelimit.Keyed
	// lists keeps the readings of the ping lists (lists.go).
	lists *listCache
	// opml keeps the rendering of GET /opml and its readers' buckets (opml.go).
	opml *opmlList
}

// NewLists returns the lists.
func NewLists(cfg ListsConfig) (*Lists, error) {
	s, err := newSite("lists", cfg.Site)
	if err != nil {
		return nil, err
	}
	if cfg.Hub == nil || cfg.Gate == nil {
		return nil, errors.New("httpapi: lists: no hub or no admin gate")
	}
	if cfg.ListRate <= 0 {
		cfg.ListRate = DefaultListRate
	}
	if cfg.ListBurst <= 0 {
		cfg.ListBurst = DefaultListBurst
	}
	s.checkHost = cfg.CheckHost
	return &Lists{site: s, hub: cfg.Hub, archive: cfg.Archive, gate: cfg.Gate,
		limit: ratelimit.New(cfg.ListRate, cfg.ListBurst),
		lists: newListCache(), opml: newOPMLList(cfg.ListRate, cfg.ListBurst)}, nil
}

// Routes installs the ping lists, the archives and the OPML list.
func (a *Lists) Routes(r *mux.Router) {
	r.HandleFunc("/changes.xml", a.changes("changes", changesWindow)).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/shortChanges.xml", a.changes("short", shortChangesWindow)).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/{year:[0-9]{4}}/{month:[0-9]{2}}/{day:[0-9]{2}}/{hour:[0-9]{2}}.xml", a.archivedHour).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/opml", a.getOPML).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/api/opml", a.gate.wrap(a.importOPML)).Methods(http.MethodPost)
}
