package bench

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingd/pingd/component"
	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/httpapi"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/hub/fetching"
	"github.com/pingd/pingd/internal/netguard"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
)

// pingdOptions says which parts of pingd a measurement needs. They are
// wired as cmd/pingd wires them; the knobs cmd/pingd does not expose
// (rate limits, delivery workers) keep their defaults unless a
// measurement says why it changes one.
type pingdOptions struct {
	// DB is the SQLite file; empty means a fresh one in a temp dir.
	DB string
	// XMPPAddr, Domain and Secret connect the component; empty Addr: no
	// component.
	XMPPAddr, Domain, Secret string
	Admins                   []string
	// HTTP starts the HTTP API on a loopback port.
	HTTP bool
	// Fetch gives the hub the feed fetcher and scheduler (pings fetch),
	// with the connection pool cmd/pingd gives them; FetchWorkers and
	// FetchesPerHost are the hub's limits (0: its defaults, as the
	// options' defaults are), FetchHostSpacing its spacing between two
	// fetches of one host (0: none; pingd serve's default is
	// fetching.DefaultFetchHostSpacing).
	Fetch            bool
	FetchWorkers     int
	FetchesPerHost   int
	FetchHostSpacing time.Duration
	// Delivery starts the webhook delivery engine.
	Delivery       bool
	DeliveryConfig delivery.Config
	// PingCommitDelay is hub.Config.PingCommitDelay (0: a ping is
	// answered after its commit, the default).
	PingCommitDelay time.Duration
	// PingRate overrides the per-URL ping rate limit (0: default), and
	// PingHostRate the per-host one.
	PingRate      float64
	PingBurst     int
	PingHostRate  float64
	PingHostBurst int
	// Multicast is component.Config.Multicast ("": the default, auto),
	// MulticastShare component.Config.MulticastShare (0: its default).
	Multicast      string
	MulticastShare int
}

// pingdIdleConns is cmd/pingd's outbound pool size (outboundIdleConns):
// fetches return to the same origin hosts poll after poll.
const pingdIdleConns = 1024

// pingdSide is a pingd assembled in this process. Its goroutines carry
// the pprof label side=pingd, so a CPU profile of a run can be narrowed
// to pingd's own work with -tagfocus side=pingd.
type pingdSide struct {
	Store   *countingStore
	Hub     *hub.Hub
	Comp    *component.Component
	Engine  *delivery.Engine
	HTTPURL string
	DBPath  string

	cancel context.CancelFunc
	wg     sync.WaitGroup
	srv    *http.Server
	closed atomic.Bool
}

// benchLogger formats pingd's log at info level, as a deployment does,
// so its cost is measured, but shows only warnings and errors.
func benchLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(warningsOnly{}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// warningsOnly passes the text handler's WARN and ERROR records (one per
// Write) to stderr and drops the rest.
type warningsOnly struct{}

func (warningsOnly) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(" level=WARN ")) || bytes.Contains(p, []byte(" level=ERROR ")) {
		return os.Stderr.Write(p)
	}
	return len(p), nil
}

func startPingd(t testing.TB, opts pingdOptions) *pingdSide {
	t.Helper()
	if opts.DB == "" {
		opts.DB = filepath.Join(t.TempDir(), "pingd.db")
	}
	log := benchLogger()
	ctx, cancel := context.WithCancel(context.Background())
	p := &pingdSide{cancel: cancel, DBPath: opts.DB}
	t.Cleanup(p.Stop)
	var startErr error
	pprof.Do(ctx, pprof.Labels("side", "pingd"), func(ctx context.Context) {
		startErr = p.start(ctx, opts, log)
	})
	if startErr != nil {
		t.Fatalf("start pingd: %v", startErr)
	}
	if p.Comp != nil {
		testenv.WaitFor(t, 20*time.Second, "pingd's component to connect", p.Comp.Connected)
	}
	return p
}

func (p *pingdSide) start(ctx context.Context, opts pingdOptions, log *slog.Logger) error {
	st, err := store.Open(ctx, opts.DB, store.Options{Logger: log})
	if err != nil {
		return err
	}
	p.Store = newCountingStore(st)
	// The fan-out's subscribers share accounts (fanoutPlan.PerAccount
	// resources each), as the native services they are compared with
	// allow: the per-account bounds, which keep one hostile account from
	// multiplying every item, are not what is measured here.
	cfg := hub.Config{Stores: store.HubStores(p.Store), Logger: log, Admins: opts.Admins,
		MaxAccountSubscriptions: -1, MaxNodeResources: -1, PingCommitDelay: opts.PingCommitDelay}
	if opts.Fetch {
		fetcher := feed.NewFetcher(feed.FetcherConfig{Version: "bench", PublicURL: "http://localhost",
			Client: netguard.NewClient(netguard.Options{AllowPrivate: true, MaxIdleConns: pingdIdleConns})})
		cfg.Fetcher, cfg.Entries = fetcher, fetcher
		engine, err := fetching.New(fetching.Config{Store: p.Store, Fetcher: fetcher, Logger: log,
			Scheduler:    feed.NewScheduler(feed.SchedulerConfig{}),
			FetchWorkers: opts.FetchWorkers, FetchesPerHost: opts.FetchesPerHost, FetchHostSpacing: opts.FetchHostSpacing,
			// One process on an SQLite file, as cmd/pingd says for SQLite.
			Exclusive: true})
		if err != nil {
			return err
		}
		cfg.Fetches = engine
	}
	h, err := hub.New(cfg)
	if err != nil {
		return err
	}
	p.Hub = h
	p.wg.Go(func() { _ = h.Run(ctx) })
	if opts.XMPPAddr != "" {
		comp, err := component.New(component.Config{
			Hub: h, Store: p.Store, Domain: opts.Domain, Addr: opts.XMPPAddr, Secret: opts.Secret,
			PublicURL: "http://localhost", Logger: log, Multicast: opts.Multicast, MulticastShare: opts.MulticastShare,
		})
		if err != nil {
			return err
		}
		h.Register(comp, hub.KindXMPP)
		p.Comp = comp
		p.wg.Go(func() { _ = comp.Run(ctx) })
	}
	if opts.Delivery {
		dc := opts.DeliveryConfig
		dc.Store = p.Store
		dc.Logger = log
		eng, err := delivery.New(dc)
		if err != nil {
			return err
		}
		h.Register(eng, eng.Kinds()...)
		p.Engine = eng
		p.wg.Go(func() { _ = eng.Run(ctx) })
	}
	if opts.HTTP {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		base := "http://" + ln.Addr().String()
		api, err := benchAPI(h, base, log, opts)
		if err != nil {
			ln.Close()
			return err
		}
		p.srv = &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
		p.HTTPURL = base
		p.wg.Go(func() {
			if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("bench HTTP server", "err", err)
			}
		})
	}
	return nil
}

// Stop shuts pingd down in cmd/pingd's order and closes the database.
func (p *pingdSide) Stop() {
	if !p.closed.CompareAndSwap(false, true) {
		return
	}
	if p.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = p.srv.Shutdown(ctx)
		cancel()
	}
	p.cancel()
	p.wg.Wait()
	if p.Store != nil {
		_ = p.Store.Close()
	}
}

// benchAPI is the part of the HTTP side the benchmarks drive: the pings
// on /RPC2, under the options' ping limits.
func benchAPI(h *hub.Hub, base string, log *slog.Logger, opts pingdOptions) (*httpapi.Router, error) {
	site := httpapi.Site{PublicURL: base, Logger: log}
	gate, err := httpapi.NewAdminGate(httpapi.AdminGateConfig{Tokens: h})
	if err != nil {
		return nil, err
	}
	rpc, err := httpapi.NewRPC(httpapi.RPCConfig{Site: site})
	if err != nil {
		return nil, err
	}
	pings, err := httpapi.NewPings(httpapi.PingsConfig{Site: site, Hub: h, RPC: rpc,
		Limits: httpapi.NewPingLimits(httpapi.PingLimitsConfig{
			Rate: opts.PingRate, Burst: opts.PingBurst, HostRate: opts.PingHostRate, HostBurst: opts.PingHostBurst,
		})})
	if err != nil {
		return nil, err
	}
	return httpapi.NewRouter(httpapi.RouterConfig{Logger: log, Admin: gate}, rpc, pings)
}
