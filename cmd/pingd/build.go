package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/pingd/pingd/component"
	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/httpapi"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/hub/fetching"
	"github.com/pingd/pingd/internal/metrics"
	"github.com/pingd/pingd/internal/netguard"
	"github.com/pingd/pingd/store"
	"github.com/pingd/pingd/upstream"
	"github.com/pingd/pingd/whitelist"
)

// The build functions make the daemon's parts from the configuration,
// each from the parts built before it; serve calls them in order. The
// …Config functions are the part of each package's configuration that
// options decide, apart so that tests can see where each option goes.

// The one store is every port its users declare; the hub's are asserted in
// package store, which may not import the others.
var (
	_ fetching.Store        = store.Store(nil)
	_ delivery.Store        = store.Store(nil)
	_ delivery.SourceReader = store.Store(nil)
	_ component.Store       = store.Store(nil)
	_ upstream.Store        = store.Store(nil)
	_ hub.RelayStore        = store.Store(nil)
)

// parts is the running daemon: what serve starts and stops.
type parts struct {
	store      store.Store
	hub        *hub.Hub
	component  *component.Component
	deliveries *delivery.Engine
	wakeups    *store.Wakeups
	relayer    *delivery.Relayer // nil without relay targets
	upstreams  *upstream.Manager // nil without upstream push
	api        *httpapi.Router
	// pagePings' look-ups run beside the requests that start them; serve
	// joins them before the store closes.
	pagePings *discovery.PagePings
}

// outboundIdleConns is how many kept-alive connections the outbound client
// holds over all hosts. Deliveries reach the same receiver hosts at every
// publish, and the default pool (100 idle connections in all) would dial
// all but 100 of them anew each time. Go raises the process's open-file
// limit to its hard limit at start, so a thousand idle sockets fit.
const outboundIdleConns = 1024

// outbound is how pingd calls other servers: one SSRF-guarded client
// (netguard, unless private addresses are allowed), whose connection pool
// every fetch, delivery, relayed ping, upstream request and page look-up
// shares, and one User-Agent.
type outbound struct {
	// client follows redirects up to netguard's limit (page look-ups); the
	// fetcher follows them itself.
	client    *http.Client
	userAgent string
	// checkHost refuses private sources and callbacks when they are asked
	// for, not only when pingd dials them; nil when they are allowed.
	checkHost func(context.Context, string) error
	// resolver turns page URLs users give into the feeds they link to,
	// through the same client.
	resolver *discovery.Client
}

func newOutbound(cfg *Config) outbound {
	out := outbound{
		client:    netguard.NewClient(netguard.Options{AllowPrivate: cfg.AllowPrivate, MaxIdleConns: outboundIdleConns}),
		userAgent: userAgent(cfg.PublicURL),
	}
	if !cfg.AllowPrivate {
		out.checkHost = netguard.CheckHost
	}
	out.resolver = &discovery.Client{HTTP: out.client, UserAgent: out.userAgent}
	return out
}

// noRedirects is the client for requests whose redirects are answers:
// a callback, ping server, hub or cloud that moved answers 3xx, which is
// retried or reported, never followed to wherever it points.
func (o outbound) noRedirects() *http.Client {
	c := *o.client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// userAgent is how pingd names itself to the servers it calls. Fetches add
// their subscriber count (feed.Fetcher.UserAgent) to the same name.
func userAgent(publicURL string) string {
	return fmt.Sprintf("pingd/%s (+%s)", version, publicURL)
}

// buildStore opens the database and decides who may hold the XMPP
// component (xmppLeadership).
func buildStore(ctx context.Context, cfg *Config, log *slog.Logger) (store.Store, func(context.Context) (component.Lease, error), error) {
	st, err := store.Open(ctx, cfg.DB, store.Options{Logger: log, MaxConns: cfg.DBMaxConns})
	if err != nil {
		return nil, nil, err
	}
	leader, err := xmppLeadership(ctx, st, cfg, log)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, leader, nil
}

// schedulerConfig is the poll schedule the options set.
func schedulerConfig(cfg *Config) feed.SchedulerConfig {
	return feed.SchedulerConfig{
		MinInterval:     cfg.PollMinInterval,
		DefaultInterval: cfg.PollInterval,
		MaxInterval:     cfg.PollMaxInterval,
		PingedInterval:  cfg.PingedInterval,
	}
}

// hubConfig is the hub's configuration but for the parts it is given.
func hubConfig(cfg *Config, log *slog.Logger) hub.Config {
	return hub.Config{
		Logger:     log,
		Instance:   cfg.InstanceName(),
		AdminToken: cfg.AdminToken,
		Admins:     cfg.AdminJIDs(),
		// Pings are kept for the hourly archives.
		PingRetention:   cfg.PingArchive,
		PingCommitDelay: cfg.PingCommitDelay,
		Observe:         hubMetrics{},

		// 0 in the option means no implicit nodes; in hub.Config, the default.
		MaxImplicitNodes:             cmp.Or(cfg.MaxImplicitNodes, -1),
		MaxCallbackHostSubscriptions: cfg.MaxCallbackHostSubscriptions,
		MaxAccountSubscriptions:      cfg.MaxAccountSubscriptions,
		MaxNodeResources:             cfg.MaxNodeResources,
	}
}

// fetchingConfig is the fetch engine's configuration but for the parts it
// is given.
func fetchingConfig(cfg *Config, log *slog.Logger) fetching.Config {
	return fetching.Config{
		Logger:           log,
		Instance:         cfg.InstanceName(),
		FetchWorkers:     cfg.FetchWorkers,
		FetchesPerHost:   cfg.FetchesPerHost,
		FetchHostSpacing: cfg.FetchHostSpacing,
		Observe:          hubMetrics{},
	}
}

// buildHub makes the fetcher, the poll scheduler, the fetch engine and the
// hub. With
// upstream push on, the scheduler notes the hubs and clouds each fetched
// feed advertises and polls sources whose push is active only as a safety
// net: the tracker it returns (nil otherwise) is what upstream works from.
func buildHub(cfg *Config, st store.Store, out outbound, log *slog.Logger) (*hub.Hub, *upstream.Tracker, error) {
	fetcher := feed.NewFetcher(feed.FetcherConfig{
		Version:   version,
		PublicURL: cfg.PublicURL,
		Client:    out.client,
	})
	var scheduler hub.Scheduler = feed.NewScheduler(schedulerConfig(cfg))
	var tracker *upstream.Tracker
	if cfg.UpstreamPush {
		tracker = upstream.NewTracker(scheduler, cfg.UpstreamSafetyPoll)
		scheduler = tracker
	}
	fc := fetchingConfig(cfg, log)
	fc.Store = st
	fc.Fetcher = fetcher
	fc.Scheduler = scheduler
	// An SQLite file serves one process (its lock is held): leases left by
	// a killed predecessor are taken back at once.
	fc.Exclusive = st.Backend() != "postgres"
	engine, err := fetching.New(fc)
	if err != nil {
		return nil, nil, err
	}
	hc := hubConfig(cfg, log)
	hc.Stores = store.HubStores(st)
	hc.Fetches = engine
	hc.Fetcher = fetcher
	hc.Entries = fetcher
	h, err := hub.New(hc)
	if err != nil {
		return nil, nil, err
	}
	return h, tracker, nil
}

// componentConfig is the component's configuration but for the parts it
// is given.
func componentConfig(cfg *Config, log *slog.Logger) (component.Config, error) {
	openSources, localSources, err := cfg.SourcePolicy()
	if err != nil {
		return component.Config{}, err
	}
	return component.Config{
		Domain:    cfg.XMPPDomain,
		Addr:      cfg.XMPPAddr,
		Secret:    cfg.XMPPSecret,
		PublicURL: cfg.PublicURL,
		Logger:    log,

		Multicast:             cfg.XMPPMulticast,
		MulticastMaxAddresses: cfg.XMPPMulticastMax,
		MulticastShare:        cfg.XMPPMulticastShare,

		OpenSources:  openSources,
		LocalSources: localSources,
		LocalDomains: cfg.LocalDomainList(),
		NodesPerHour: cfg.NodesPerHour,

		IQRate:                cfg.XMPPIQRate,
		IQBurst:               cfg.XMPPIQBurst,
		PendingPerSender:      cfg.XMPPPendingPerJID,
		LookupRequestsPerHour: float64(cfg.LookupRequestsPerHour),
		LookupTimeout:         cfg.LookupTimeout,
		// An owner's published entry reads as the node's feeds show it.
		CompleteEntry: feed.CompleteEntry,
		// XMPP subscriptions asking for diffs get the patches webhooks get.
		Patch: func(n *hub.Node, events []hub.Event) ([]byte, error) {
			return delivery.NodePatch(cfg.PublicURL, n, events)
		},
	}, nil
}

// buildComponent makes the XMPP component and registers it for the XMPP
// subscribers.
func buildComponent(cfg *Config, st store.Store, h *hub.Hub, leader func(context.Context) (component.Lease, error), out outbound, log *slog.Logger) (*component.Component, error) {
	cc, err := componentConfig(cfg, log)
	if err != nil {
		return nil, err
	}
	cc.Hub = h
	cc.Store = st
	cc.Leader = leader
	cc.Shared = cfg.XMPPShared && leader != nil
	cc.CheckHost = out.checkHost
	cc.Resolver = out.resolver
	comp, err := component.New(cc)
	if err != nil {
		return nil, err
	}
	h.Register(comp, hub.KindXMPP)
	return comp, nil
}

// deliveryConfig is the delivery engine's configuration but for the parts
// it is given.
func deliveryConfig(cfg *Config, log *slog.Logger) delivery.Config {
	return delivery.Config{
		Logger:  log,
		Observe: observeDelivery,
		Workers: cfg.DeliveryWorkers,
		PerHost: cfg.DeliveriesPerHost,
	}
}

// buildDelivery makes the engine of the HTTP subscriber kinds and
// registers it for them.
func buildDelivery(cfg *Config, st store.Store, h *hub.Hub, out outbound, log *slog.Logger) (*delivery.Engine, error) {
	dc := deliveryConfig(cfg, log)
	dc.Store = st
	dc.Instance = h.Instance()
	dc.Exclusive = st.Backend() != "postgres"
	dc.Senders = deliverySenders(cfg, delivery.HTTPSender{
		Client:    out.noRedirects(),
		PublicURL: cfg.PublicURL,
		UserAgent: out.userAgent,
	}, st)
	if missing := kindsWithoutSender(dc.Senders); len(missing) > 0 {
		return nil, fmt.Errorf("no delivery sender for the HTTP subscription kinds %v (deliverySenders)", missing)
	}
	deliveries, err := delivery.New(dc)
	if err != nil {
		return nil, err
	}
	h.Register(deliveries, deliveries.Kinds()...)
	return deliveries, nil
}

// deliverySenders are the senders of every HTTP subscriber kind (hub's
// kind registry), one line each.
func deliverySenders(cfg *Config, s delivery.HTTPSender, st delivery.SourceReader) map[hub.Kind]delivery.Sender {
	return map[hub.Kind]delivery.Sender{
		hub.KindWebhook:  &delivery.Webhook{HTTPSender: s},
		hub.KindWebSub:   &delivery.WebSub{HTTPSender: s, Store: st},
		hub.KindRSSCloud: &delivery.RSSCloud{HTTPSender: s},
		hub.KindCNWS:     &delivery.CNWS{HTTPSender: s, RetryLimit: cfg.CNWSRetryLimit},
	}
}

// kindsWithoutSender lists the HTTP kinds of hub's registry that have no
// sender: their subscriptions would be accepted and never delivered.
func kindsWithoutSender(senders map[hub.Kind]delivery.Sender) []hub.Kind {
	var missing []hub.Kind
	for _, k := range hub.HTTPKinds() {
		if senders[k] == nil {
			missing = append(missing, k)
		}
	}
	return missing
}

// buildRelay makes the relayer of accepted pings to PINGD_RELAY_PINGS, nil
// without targets, registered as a ping listener of the hub, and the
// targets' names for the API.
func buildRelay(cfg *Config, st store.Store, h *hub.Hub, out outbound, log *slog.Logger) (*delivery.Relayer, []string, error) {
	targets, err := cfg.RelayTargets()
	if err != nil {
		return nil, nil, fmt.Errorf("PINGD_RELAY_PINGS: %w", err)
	}
	relayer := delivery.NewRelayer(delivery.RelayConfig{
		Store: st, Client: out.noRedirects(), Targets: targets, Instance: h.Instance(), Logger: log,
		UserAgent: out.userAgent,
	})
	if relayer == nil {
		return nil, nil, nil
	}
	h.AddPingListener(relayer)
	names := make([]string, 0, len(targets))
	for _, t := range targets {
		names = append(names, t.Spec)
	}
	return relayer, names, nil
}

// apiOptions are the HTTP handlers' settings that options decide.
type apiOptions struct {
	TrustedProxies []netip.Prefix

	PublicURL     string
	ComponentJID  string
	CloudProtocol string
	Logger        *slog.Logger
	Version       string

	PingRate           float64
	PingBurst          int
	PingHostRate       float64
	PingHostBurst      int
	SubscribeRate      float64
	SubscribeBurst     int
	WhitelistNodeRate  float64
	WhitelistNodeBurst int
	AdminRate          float64
	AdminBurst         int
	ListRate           float64
	ListBurst          int

	ImplicitNodesPerHour float64
	PollInterval         time.Duration
}

// apiConfig is the HTTP handlers' configuration but for the parts they
// are given.
func apiConfig(cfg *Config, log *slog.Logger) apiOptions {
	// Validate has refused a list that does not parse.
	proxies, _ := httpapi.ParseTrustedProxies(cfg.TrustedProxies)
	return apiOptions{
		TrustedProxies: proxies,

		PublicURL:     cfg.PublicURL,
		ComponentJID:  cfg.XMPPDomain,
		CloudProtocol: cfg.RSSCloudProtocol,
		Logger:        log,
		Version:       version,

		PingRate:           cfg.PingRate,
		PingBurst:          cfg.PingBurst,
		PingHostRate:       cfg.PingHostRate,
		PingHostBurst:      cfg.PingHostBurst,
		SubscribeRate:      cfg.SubscribeRate,
		SubscribeBurst:     cfg.SubscribeBurst,
		WhitelistNodeRate:  cfg.WhitelistNodeRate,
		WhitelistNodeBurst: cfg.WhitelistNodeBurst,
		AdminRate:          cfg.AdminRate,
		AdminBurst:         cfg.AdminBurst,
		ListRate:           cfg.ListRate,
		ListBurst:          cfg.ListBurst,

		ImplicitNodesPerHour: float64(cfg.ImplicitNodesPerHour),
		PollInterval:         cfg.PollInterval,
	}
}

// buildAPI makes the HTTP handlers, each given what it uses, and the
// router that mounts them, with /metrics on it.
func buildAPI(cfg *Config, st store.Store, h *hub.Hub, comp *component.Component, relayNames []string, out outbound, log *slog.Logger) (*httpapi.Router, error) {
	o := apiConfig(cfg, log)
	site := httpapi.Site{PublicURL: o.PublicURL, Logger: o.Logger}
	gate, err := httpapi.NewAdminGate(httpapi.AdminGateConfig{Tokens: h, Rate: o.AdminRate, Burst: o.AdminBurst})
	if err != nil {
		return nil, err
	}
	// Every ping dialect draws on the same buckets, and so does every
	// subscription dialect.
	pingLimits := httpapi.NewPingLimits(httpapi.PingLimitsConfig{
		Rate: o.PingRate, Burst: o.PingBurst, HostRate: o.PingHostRate, HostBurst: o.PingHostBurst,
	})
	subLimits := httpapi.NewSubscribeLimits(httpapi.SubscribeLimitsConfig{
		Rate: o.SubscribeRate, Burst: o.SubscribeBurst, ImplicitNodesPerHour: o.ImplicitNodesPerHour,
	})
	rpc, err := httpapi.NewRPC(httpapi.RPCConfig{Site: site})
	if err != nil {
		return nil, err
	}
	pings, err := httpapi.NewPings(httpapi.PingsConfig{Site: site, Hub: h, RPC: rpc, Limits: pingLimits, ObservePing: observePing})
	if err != nil {
		return nil, err
	}
	cloud, err := httpapi.NewRSSCloud(httpapi.RSSCloudConfig{Site: site, Hub: h, RPC: rpc, Limits: subLimits, CheckHost: out.checkHost})
	if err != nil {
		return nil, err
	}
	cnws, err := httpapi.NewCNWS(httpapi.CNWSConfig{Site: site, Hub: h, PingLimits: pingLimits, SubscribeLimits: subLimits,
		CheckHost: out.checkHost, ObservePing: observePing})
	if err != nil {
		return nil, err
	}
	webSub, err := httpapi.NewWebSub(httpapi.WebSubConfig{Site: site, Hub: h, PingLimits: pingLimits, SubscribeLimits: subLimits,
		CheckHost: out.checkHost, ObservePing: observePing})
	if err != nil {
		return nil, err
	}
	getPingd, err := httpapi.NewGetPingd(httpapi.GetPingdConfig{Site: site, Hub: h, ComponentJID: o.ComponentJID,
		Whitelist: whitelist.NewService(h, log.With("component", "http")), Limits: subLimits,
		WhitelistNodeRate: o.WhitelistNodeRate, WhitelistNodeBurst: o.WhitelistNodeBurst, CheckHost: out.checkHost})
	if err != nil {
		return nil, err
	}
	admin, err := httpapi.NewAdmin(httpapi.AdminConfig{Site: site, Hub: h, Gate: gate, Upstreams: st, Relays: st,
		RelayTargets: relayNames, Resolver: out.resolver, CheckHost: out.checkHost, CloudProtocol: o.CloudProtocol})
	if err != nil {
		return nil, err
	}
	lists, err := httpapi.NewLists(httpapi.ListsConfig{Site: site, Hub: h, Archive: st, Gate: gate,
		ListRate: o.ListRate, ListBurst: o.ListBurst, CheckHost: out.checkHost})
	if err != nil {
		return nil, err
	}
	pages, err := httpapi.NewPages(httpapi.PagesConfig{Site: site, Hub: h, Store: st, Gate: gate, Ready: comp.Ready,
		Version: o.Version, ComponentJID: o.ComponentJID, PollInterval: o.PollInterval, CloudProtocol: o.CloudProtocol})
	if err != nil {
		return nil, err
	}
	router, err := httpapi.NewRouter(httpapi.RouterConfig{Logger: log, TrustedProxies: o.TrustedProxies, Admin: gate},
		rpc, pings, admin, lists, getPingd, cloud, cnws, webSub, pages)
	if err != nil {
		return nil, err
	}
	router.Mux().Handle("/metrics", metrics.Handler()).Methods(http.MethodGet, http.MethodHead)
	return router, nil
}

// buildUpstream makes the upstream subscriptions (nil without upstream
// push) and mounts their callbacks on the API.
func buildUpstream(cfg *Config, st store.Store, h *hub.Hub, tracker *upstream.Tracker, comp *component.Component, api *httpapi.Router, out outbound, log *slog.Logger) (*upstream.Manager, error) {
	if tracker == nil {
		return nil, nil
	}
	m, err := upstream.New(upstream.Config{
		Hub: h, Store: st, HTTP: out.noRedirects(), PublicURL: cfg.PublicURL, Tracker: tracker, Logger: log,
		Leading:    comp.Leading,
		CheckEvery: cfg.UpstreamCheck,
		UserAgent:  out.userAgent,
	})
	if err != nil {
		return nil, err
	}
	api.Mux().PathPrefix("/upstream/").Handler(m.Handler())
	return m, nil
}

// buildParts builds every part; the store is open when it returns without
// error, and the caller closes it.
func buildParts(ctx context.Context, cfg *Config, log *slog.Logger) (p *parts, leading bool, err error) {
	st, leader, err := buildStore(ctx, cfg, log)
	if err != nil {
		return nil, false, err
	}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	p = &parts{store: st}
	out := newOutbound(cfg)
	h, tracker, err := buildHub(cfg, st, out, log)
	if err != nil {
		return nil, false, err
	}
	p.hub = h
	if p.component, err = buildComponent(cfg, st, h, leader, out, log); err != nil {
		return nil, false, err
	}
	if p.deliveries, err = buildDelivery(cfg, st, h, out, log); err != nil {
		return nil, false, err
	}
	// What this process appends, the others sharing the database hear of
	// at once (PostgreSQL LISTEN/NOTIFY); their one-second polls are the
	// fallback.
	p.wakeups = st.Wakeups()
	h.Register(p.wakeups, hub.Kinds...)
	relayer, relayNames, err := buildRelay(cfg, st, h, out, log)
	if err != nil {
		return nil, false, err
	}
	p.relayer = relayer
	// Weblog pings that name a homepage followed by no node reach the
	// feed the page links to.
	p.pagePings = discovery.NewPagePings(ctx, h, out.resolver, log)
	h.AddPingListener(p.pagePings)
	if p.api, err = buildAPI(cfg, st, h, p.component, relayNames, out, log); err != nil {
		return nil, false, err
	}
	if p.upstreams, err = buildUpstream(cfg, st, h, tracker, p.component, p.api, out, log); err != nil {
		return nil, false, err
	}
	return p, leader != nil, nil
}
