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
	"github.com/pingd/pingd/internal/metrics"
	"github.com/pingd/pingd/store"
)

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
	p, multi, err := buildParts(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer p.store.Close()
	metrics.SetComponentState(p.component.Connected)
	metrics.SetComponentReconnects(p.component.Reconnections)
	metrics.SetComponentBudget(p.component.StanzaBudget)
	metrics.SetXMPPCounts(p.component.NotificationCounts)
	metrics.SetStateReader(metricsState(p.store))
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (PINGD_HTTP_ADDR): %w", cfg.HTTPAddr, err)
	}
	handlers := &joinedHandler{h: p.api}
	srv := &http.Server{
		Handler:           handlers,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("pingd starting", "version", version, "http", ln.Addr().String(), "public_url", cfg.PublicURL,
		"xmpp_server", cfg.XMPPAddr, "component", cfg.XMPPDomain, "db_backend", p.store.Backend(),
		"instance", p.hub.Instance(), "xmpp_mode", xmppMode(multi, cfg.XMPPShared))

	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	var wg sync.WaitGroup
	p.runBackground(workCtx, &wg, log)
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
		// Requests still running past the wait: closing their
		// connections ends their contexts.
		log.Warn("HTTP shutdown", "err", serr)
		_ = srv.Close()
	}
	stopWork()
	wg.Wait()
	// Nothing may use the store once it closes: the requests still
	// running and the page look-ups pings started are joined first.
	handlers.close()
	p.pagePings.Close()
	log.Info("pingd stopped")
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// joinedHandler serves HTTP requests until close, which waits for those
// under way: http.Server.Shutdown stops waiting for them at its deadline,
// and they use the store, which closes next.
type joinedHandler struct {
	h       http.Handler
	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup
}

func (j *joinedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	j.running.Add(1)
	j.mu.Unlock()
	defer j.running.Done()
	j.h.ServeHTTP(w, r)
}

// close refuses further requests and waits for those under way.
func (j *joinedHandler) close() {
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	j.running.Wait()
}

// runBackground starts the background work of every part in wg; it stops
// when ctx ends.
func (p *parts) runBackground(ctx context.Context, wg *sync.WaitGroup, log *slog.Logger) {
	wg.Go(func() {
		if err := p.hub.Run(ctx); err != nil {
			log.Error("hub stopped", "err", err)
		}
	})
	if p.relayer != nil {
		wg.Go(func() {
			if err := p.relayer.Run(ctx); err != nil {
				log.Error("ping relay stopped", "err", err)
			}
		})
	}
	if p.upstreams != nil {
		wg.Go(func() {
			if err := p.upstreams.Run(ctx); err != nil {
				log.Error("upstream subscriptions stopped", "err", err)
			}
		})
	}
	wg.Go(func() {
		if err := p.deliveries.Run(ctx); err != nil {
			log.Error("deliveries stopped", "err", err)
		}
	})
	wg.Go(func() {
		if err := p.component.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("component stopped", "err", err)
		}
	})
	wg.Go(func() {
		err := p.wakeups.Run(ctx, func(nodeID int64) {
			p.component.Wake(nodeID)
			p.deliveries.Wake(nodeID)
		})
		if err != nil && ctx.Err() == nil {
			log.Error("wake-ups from other pingd processes stopped; relying on polls", "err", err)
		}
	})
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
