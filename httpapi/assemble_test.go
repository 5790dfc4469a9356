package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/whitelist"
)

// Config is the whole HTTP side as the tests configure it: every handler
// on one hub and one store, wired as cmd/pingd/build.go wires them.
type Config struct {
	Hub *hub.Hub
	// Store is checked and reported on by the pages; when it also keeps
	// the ping archive, the upstream subscriptions and the relay queue
	// (the store package's stores do), the lists and the admin API are
	// given those too.
	Store        StatusStore
	PublicURL    string
	ComponentJID string
	Ready        func() bool
	Logger       *slog.Logger
	MaxBodyBytes int64
	Version      string

	PingRate, PingHostRate, AdminRate, SubscribeRate, ListRate, WhitelistNodeRate       float64
	PingBurst, PingHostBurst, AdminBurst, SubscribeBurst, ListBurst, WhitelistNodeBurst int
	ImplicitNodesPerHour                                                                float64
	ImplicitNodeBurst                                                                   int

	PollInterval   time.Duration
	RelayTargets   []string
	CloudProtocol  string
	Resolver       hub.SourceResolver
	CheckHost      func(ctx context.Context, host string) error
	WebSubLeases   LeaseLimits
	TrustedProxies []netip.Prefix
	ObservePing    func(dialect, outcome string)
}

// API is the router with its handlers, for the tests that reach into one.
type API struct {
	*Router
	rpc   *RPC
	admin *Admin
	lists *Lists
	pages *Pages
}

// HandleRPC adds an XML-RPC method.
func (a *API) HandleRPC(name string, fn RPCMethod) { a.rpc.Handle(name, fn) }

// nodeJSON is the admin API's rendering of a node.
func (a *API) nodeJSON(n *hub.Node) nodeJSON { return a.admin.nodeJSON(n) }

// New wires every handler from cfg.
func New(cfg Config) (*API, error) {
	if cfg.Hub == nil {
		return nil, errors.New("no hub")
	}
	site := Site{PublicURL: cfg.PublicURL, Logger: cfg.Logger, MaxBodyBytes: cfg.MaxBodyBytes}
	h := cfg.Hub
	gate, err := NewAdminGate(AdminGateConfig{Tokens: h, Rate: cfg.AdminRate, Burst: cfg.AdminBurst})
	if err != nil {
		return nil, err
	}
	pingLimits := NewPingLimits(PingLimitsConfig{Rate: cfg.PingRate, Burst: cfg.PingBurst, HostRate: cfg.PingHostRate, HostBurst: cfg.PingHostBurst})
	subLimits := NewSubscribeLimits(SubscribeLimitsConfig{Rate: cfg.SubscribeRate, Burst: cfg.SubscribeBurst,
		ImplicitNodesPerHour: cfg.ImplicitNodesPerHour, ImplicitNodeBurst: cfg.ImplicitNodeBurst})
	var (
		archive   hub.PingArchive
		upstreams UpstreamReader
		relays    RelayStatusReader
	)
	if full, ok := cfg.Store.(interface {
		hub.PingArchive
		UpstreamReader
		RelayStatusReader
	}); ok {
		archive, upstreams, relays = full, full, full
	}
	a := &API{}
	if a.rpc, err = NewRPC(RPCConfig{Site: site}); err != nil {
		return nil, err
	}
	pings, err := NewPings(PingsConfig{Site: site, Hub: h, RPC: a.rpc, Limits: pingLimits, ObservePing: cfg.ObservePing})
	if err != nil {
		return nil, err
	}
	cloud, err := NewRSSCloud(RSSCloudConfig{Site: site, Hub: h, RPC: a.rpc, Limits: subLimits, CheckHost: cfg.CheckHost})
	if err != nil {
		return nil, err
	}
	cnws, err := NewCNWS(CNWSConfig{Site: site, Hub: h, PingLimits: pingLimits, SubscribeLimits: subLimits,
		CheckHost: cfg.CheckHost, ObservePing: cfg.ObservePing})
	if err != nil {
		return nil, err
	}
	webSub, err := NewWebSub(WebSubConfig{Site: site, Hub: h, PingLimits: pingLimits, SubscribeLimits: subLimits,
		Leases: cfg.WebSubLeases, CheckHost: cfg.CheckHost, ObservePing: cfg.ObservePing})
	if err != nil {
		return nil, err
	}
	getPingd, err := NewGetPingd(GetPingdConfig{Site: site, Hub: h, ComponentJID: cfg.ComponentJID,
		Whitelist: whitelist.NewService(h, cfg.Logger), Limits: subLimits,
		WhitelistNodeRate: cfg.WhitelistNodeRate, WhitelistNodeBurst: cfg.WhitelistNodeBurst, CheckHost: cfg.CheckHost})
	if err != nil {
		return nil, err
	}
	if a.admin, err = NewAdmin(AdminConfig{Site: site, Hub: h, Gate: gate, Upstreams: upstreams, Relays: relays,
		RelayTargets: cfg.RelayTargets, Resolver: cfg.Resolver, CheckHost: cfg.CheckHost, CloudProtocol: cfg.CloudProtocol}); err != nil {
		return nil, err
	}
	if a.lists, err = NewLists(ListsConfig{Site: site, Hub: h, Archive: archive, Gate: gate,
		ListRate: cfg.ListRate, ListBurst: cfg.ListBurst, CheckHost: cfg.CheckHost}); err != nil {
		return nil, err
	}
	if a.pages, err = NewPages(PagesConfig{Site: site, Hub: h, Store: cfg.Store, Gate: gate, Ready: cfg.Ready,
		Version: cfg.Version, ComponentJID: cfg.ComponentJID, PollInterval: cfg.PollInterval, CloudProtocol: cfg.CloudProtocol}); err != nil {
		return nil, err
	}
	a.Router, err = NewRouter(RouterConfig{Logger: cfg.Logger, TrustedProxies: cfg.TrustedProxies, Admin: gate},
		a.rpc, pings, a.admin, a.lists, getPingd, cloud, cnws, webSub, a.pages)
	if err != nil {
		return nil, err
	}
	return a, nil
}
