package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/pingd/pingd/component"
	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/httpapi"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/metrics"
	"github.com/pingd/pingd/internal/netguard"
	"github.com/pingd/pingd/store"
	"github.com/pingd/pingd/upstream"
)

// deliveryIdleConns is how many kept-alive connections the delivery
// client holds over all receiver hosts (see where it is built).
const deliveryIdleConns = 1024

func newLogger(cfg *Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func serveCommand(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string) error {
	cfg, err := loadConfig(newFlagSet("serve", stderr), args, getenv)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("cannot start:\n%w", err)
	}
	log := newLogger(cfg, stderr)
	slog.SetDefault(log)
	return serve(ctx, cfg, log)
}

// serve runs pingd until ctx ends, then shuts down in order: stop taking
// requests, stop the background work (deliveries persist their state),
// close the XMPP stream, close the database.
func serve(ctx context.Context, cfg *Config, log *slog.Logger) error {
	st, err := store.Open(ctx, cfg.DB, store.Options{Logger: log, MaxConns: cfg.DBMaxConns})
	if err != nil {
		return err
	}
	defer st.Close()
	leader, err := xmppLeadership(ctx, st, cfg, log)
	if err != nil {
		return err
	}

	exclusive := st.Backend() != "postgres"
	// Refuse private sources and callbacks when they are asked for, not
	// only when pingd dials them.
	var checkHost func(context.Context, string) error
	if !cfg.AllowPrivate {
		checkHost = netguard.CheckHost
	}

	fetcher := feed.NewFetcher(feed.FetcherConfig{
		Version:      version,
		PublicURL:    cfg.PublicURL,
		AllowPrivate: cfg.AllowPrivate,
	})
	// With upstream push on, the scheduler notes the hubs and clouds each
	// fetched feed advertises, and polls sources whose push is active only
	// as a safety net.
	var scheduler hub.Scheduler = feed.NewScheduler(feed.SchedulerConfig{})
	var tracker *upstream.Tracker
	if cfg.UpstreamPush {
		tracker = upstream.NewTracker(scheduler, cfg.UpstreamSafetyPoll)
		scheduler = tracker
	}
	h, err := hub.New(hub.Config{
		Store:     st,
		Fetcher:   fetcher,
		Scheduler: scheduler,
		// Pings are kept for the hourly archives.
		PingRetention: cfg.PingArchive,
		Logger:        log,
		AdminToken:    cfg.AdminToken,
		Admins:        cfg.AdminJIDs(),
		Observe:       hubMetrics{},
		// An SQLite file serves one process (its lock is held): leases
		// left by a killed predecessor are taken back at once.
		Exclusive: exclusive,
	})
	if err != nil {
		return err
	}
	// Discovery turns page URLs users give into the feeds they link to,
	// through the same guarded client as every fetch.
	resolver := &discovery.Client{
		HTTP:      netguard.NewClient(netguard.Options{AllowPrivate: cfg.AllowPrivate}),
		UserAgent: fmt.Sprintf("pingd/%s (+%s)", version, cfg.PublicURL),
	}
	openSources, localSources, err := cfg.SourcePolicy()
	if err != nil {
		return err
	}
	comp, err := component.New(component.Config{
		Hub:       h,
		Domain:    cfg.XMPPDomain,
		Addr:      cfg.XMPPAddr,
		Secret:    cfg.XMPPSecret,
		PublicURL: cfg.PublicURL,
		Logger:    log,
		Leader:    leader,
		Shared:    cfg.XMPPShared && leader != nil,

		Multicast:             cfg.XMPPMulticast,
		MulticastMaxAddresses: cfg.XMPPMulticastMax,
		MulticastShare:        cfg.XMPPMulticastShare,

		OpenSources:  openSources,
		LocalSources: localSources,
		LocalDomains: cfg.LocalDomainList(),
		CheckHost:    checkHost,
		Resolver:     resolver,
		// An owner's published entry reads as the node's feeds show it.
		CompleteEntry: feed.CompleteEntry,
		// XMPP subscriptions asking for diffs get the patches webhooks get.
		Patch: func(n *hub.Node, events []hub.Event) ([]byte, error) {
			return delivery.NodePatch(cfg.PublicURL, n, events)
		},
	})
	if err != nil {
		return err
	}
	h.Register(comp, hub.KindXMPP)

	// Deliveries do not follow redirects: a callback that moved answers
	// 3xx, which is retried and shows in its delivery state. They keep
	// connections alive to many receiver hosts: a fan-out reaches the same
	// hosts at every publish, and the default pool (100 idle connections
	// in all) would dial all but 100 of them anew each time. Go raises the
	// process's open-file limit to its hard limit at start, so a thousand
	// idle sockets fit.
	deliveryClient := netguard.NewClient(netguard.Options{AllowPrivate: cfg.AllowPrivate, MaxIdleConns: deliveryIdleConns})
	deliveryClient.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	httpSender := delivery.HTTPSender{
		Client:    deliveryClient,
		PublicURL: cfg.PublicURL,
		UserAgent: fmt.Sprintf("pingd/%s (+%s)", version, cfg.PublicURL),
	}
	deliveries, err := delivery.New(delivery.Config{
		Store:     st,
		Instance:  h.Instance(),
		Logger:    log,
		Observe:   observeDelivery,
		Exclusive: exclusive,
		Senders:   deliverySenders(cfg, httpSender, st),
	})
	if err != nil {
		return err
	}
	h.Register(deliveries, deliveries.Kinds()...)
	// What this process appends, the others sharing the database hear of
	// at once (PostgreSQL LISTEN/NOTIFY); their one-second polls are the
	// fallback.
	wakeups := st.Wakeups()
	h.Register(wakeups, hub.Kinds...)

	relayTargets, err := cfg.RelayTargets()
	if err != nil {
		return fmt.Errorf("PINGD_RELAY_PINGS: %w", err)
	}
	relayClient := netguard.NewClient(netguard.Options{AllowPrivate: cfg.AllowPrivate})
	relayClient.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	relayer := delivery.NewRelayer(delivery.RelayConfig{
		Store: st, Client: relayClient, Targets: relayTargets, Instance: h.Instance(), Logger: log,
		UserAgent: fmt.Sprintf("pingd/%s (+%s)", version, cfg.PublicURL),
	})
	var pingRelay httpapi.PingRelay
	var relayNames []string
	if relayer != nil {
		pingRelay = relayer
		for _, t := range relayTargets {
			relayNames = append(relayNames, t.Spec)
		}
	}
	api, err := httpapi.New(httpapi.Config{
		Hub:           h,
		PublicURL:     cfg.PublicURL,
		ComponentJID:  cfg.XMPPDomain,
		Ready:         comp.Ready,
		CheckHost:     checkHost,
		Resolver:      resolver,
		CloudProtocol: cfg.RSSCloudProtocol,
		Relay:         pingRelay,
		RelayTargets:  relayNames,
		Logger:        log,
		Version:       version,
	})
	if err != nil {
		return err
	}
	api.Router().Handle("/metrics", metrics.Handler()).Methods(http.MethodGet, http.MethodHead)
	var upstreams *upstream.Manager
	if tracker != nil {
		upClient := netguard.NewClient(netguard.Options{AllowPrivate: cfg.AllowPrivate})
		upClient.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		upstreams, err = upstream.New(upstream.Config{
			Hub: h, Store: st, HTTP: upClient, PublicURL: cfg.PublicURL, Tracker: tracker, Logger: log,
			Leading:    comp.Leading,
			CheckEvery: cfg.UpstreamCheck,
			UserAgent:  fmt.Sprintf("pingd/%s (+%s)", version, cfg.PublicURL),
		})
		if err != nil {
			return err
		}
		api.Router().PathPrefix("/upstream/").Handler(upstreams.Handler())
	}
	metrics.SetComponentState(comp.Connected)
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (PINGD_HTTP_ADDR): %w", cfg.HTTPAddr, err)
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("pingd starting", "version", version, "http", ln.Addr().String(), "public_url", cfg.PublicURL,
		"xmpp_server", cfg.XMPPAddr, "component", cfg.XMPPDomain, "db_backend", st.Backend(),
		"instance", h.Instance(), "xmpp_mode", xmppMode(leader != nil, cfg.XMPPShared))

	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := h.Run(workCtx); err != nil {
			log.Error("hub stopped", "err", err)
		}
	})
	if relayer != nil {
		wg.Go(func() {
			if err := relayer.Run(workCtx); err != nil {
				log.Error("ping relay stopped", "err", err)
			}
		})
	}
	if upstreams != nil {
		wg.Go(func() {
			if err := upstreams.Run(workCtx); err != nil {
				log.Error("upstream subscriptions stopped", "err", err)
			}
		})
	}
	wg.Go(func() {
		if err := deliveries.Run(workCtx); err != nil {
			log.Error("deliveries stopped", "err", err)
		}
	})
	wg.Go(func() {
		if err := comp.Run(workCtx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("component stopped", "err", err)
		}
	})
	wg.Go(func() {
		err := wakeups.Run(workCtx, func(nodeID int64) {
			comp.Wake(nodeID)
			deliveries.Wake(nodeID)
		})
		if err != nil && workCtx.Err() == nil {
			log.Error("wake-ups from other pingd processes stopped; relying on polls", "err", err)
		}
	})
	httpErr := make(chan error, 1)
	go func() { httpErr <- srv.Serve(ln) }()

	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err = <-httpErr:
		log.Error("HTTP server failed", "err", err)
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownWait)
	defer cancel()
	if serr := srv.Shutdown(shutdownCtx); serr != nil {
		log.Warn("HTTP shutdown", "err", serr)
	}
	stopWork()
	wg.Wait()
	log.Info("pingd stopped")
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// xmppLeadership decides who may hold the XMPP component. On SQLite the
// process that serves the file is the only one: it takes the file's lock
// or refuses to start. On PostgreSQL it returns the lease the component
// asks for: several processes share the database and one at a time leads.
func xmppLeadership(ctx context.Context, st store.Store, cfg *Config, log *slog.Logger) (func(context.Context) (component.Lease, error), error) {
	if st.Backend() != "postgres" {
		lock, err := st.TryLeader(ctx, "serve")
		if errors.Is(err, store.ErrLeaderHeld) {
			return nil, fmt.Errorf("the SQLite database %s is in use by another pingd process (%w); "+
				"an SQLite file serves one pingd process: stop the other one, or move to PostgreSQL "+
				"(pingd migrate-db) to run several", cfg.DB, err)
		}
		if err != nil {
			return nil, fmt.Errorf("lock the SQLite database %s: %w", cfg.DB, err)
		}
		// Held until the process exits; the store releases it on Close.
		_ = lock
		if cfg.XMPPShared {
			log.Warn("PINGD_XMPP_SHARED has no effect on SQLite: one pingd process serves an SQLite file")
		}
		return nil, nil
	}
	name := "xmpp:" + cfg.XMPPDomain
	return func(ctx context.Context) (component.Lease, error) {
		l, err := st.TryLeader(ctx, name)
		if errors.Is(err, store.ErrLeaderHeld) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return l, nil
	}, nil
}

// xmppMode names how this process attaches to the XMPP server, for the log.
func xmppMode(multi, shared bool) string {
	switch {
	case !multi:
		return "single"
	case shared:
		return "shared"
	}
	return "leader-only"
}

// deliverySenders are the senders of every HTTP subscriber kind.
func deliverySenders(cfg *Config, s delivery.HTTPSender, st hub.Store) map[hub.Kind]delivery.Sender {
	return map[hub.Kind]delivery.Sender{
		hub.KindWebhook:  &delivery.Webhook{HTTPSender: s},
		hub.KindWebSub:   &delivery.WebSub{HTTPSender: s, Store: st},
		hub.KindRSSCloud: &delivery.RSSCloud{HTTPSender: s},
		hub.KindCNWS:     &delivery.CNWS{HTTPSender: s, RetryLimit: cfg.CNWSRetryLimit},
	}
}
