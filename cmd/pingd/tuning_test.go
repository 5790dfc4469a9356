package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/component"
	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/httpapi"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/hub/fetching"
	"github.com/pingd/pingd/internal/cnws"
	"github.com/pingd/pingd/internal/ratelimit"
	"github.com/pingd/pingd/internal/testenv"
	"github.com/pingd/pingd/store"
	"github.com/pingd/pingd/upstream"
)

// TestOptionDefaultsAreThePackages: an option's default is the default of
// the package it tunes, so setting no option changes nothing.
func TestOptionDefaultsAreThePackages(t *testing.T) {
	cfg, err := loadConfig(newFlagSet("serve", io.Discard), nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		option    string
		got, want any
	}{
		{"fetch-workers", cfg.FetchWorkers, fetching.DefaultFetchWorkers},
		{"fetches-per-host", cfg.FetchesPerHost, fetching.DefaultFetchesPerHost},
		{"fetch-host-spacing", cfg.FetchHostSpacing, time.Duration(fetching.DefaultFetchHostSpacing)},
		{"ping-archive", cfg.PingArchive, time.Duration(hub.DefaultPingRetention)},
		{"poll-interval", cfg.PollInterval, time.Duration(feed.DefaultPollInterval)},
		{"poll-min-interval", cfg.PollMinInterval, time.Duration(feed.DefaultMinInterval)},
		{"poll-max-interval", cfg.PollMaxInterval, time.Duration(feed.DefaultMaxInterval)},
		{"delivery-workers", cfg.DeliveryWorkers, delivery.DefaultWorkers},
		{"deliveries-per-host", cfg.DeliveriesPerHost, delivery.DefaultPerHost},
		{"cnws-retry-limit", cfg.CNWSRetryLimit, time.Duration(cnws.MinRetryLimit)},
		{"ping-rate", cfg.PingRate, float64(httpapi.DefaultPingRate)},
		{"ping-burst", cfg.PingBurst, httpapi.DefaultPingBurst},
		{"ping-host-rate", cfg.PingHostRate, float64(httpapi.DefaultPingHostRate)},
		{"ping-host-burst", cfg.PingHostBurst, httpapi.DefaultPingHostBurst},
		{"subscribe-rate", cfg.SubscribeRate, float64(httpapi.DefaultSubscribeRate)},
		{"subscribe-burst", cfg.SubscribeBurst, httpapi.DefaultSubscribeBurst},
		{"whitelist-node-rate", cfg.WhitelistNodeRate, float64(httpapi.DefaultWhitelistNodeRate)},
		{"whitelist-node-burst", cfg.WhitelistNodeBurst, httpapi.DefaultWhitelistNodeBurst},
		{"admin-rate", cfg.AdminRate, float64(httpapi.DefaultAdminRate)},
		{"admin-burst", cfg.AdminBurst, httpapi.DefaultAdminBurst},
		{"list-rate", cfg.ListRate, float64(httpapi.DefaultListRate)},
		{"list-burst", cfg.ListBurst, httpapi.DefaultListBurst},
		{"nodes-per-hour", cfg.NodesPerHour, component.DefaultNodesPerHour},
		{"xmpp-iq-rate", cfg.XMPPIQRate, float64(component.DefaultIQRate)},
		{"xmpp-iq-burst", cfg.XMPPIQBurst, component.DefaultIQBurst},
		{"xmpp-pending-per-jid", cfg.XMPPPendingPerJID, component.DefaultPendingPerSender},
		{"lookup-requests-per-hour", cfg.LookupRequestsPerHour, ratelimit.DefaultLookupRequestsPerHour},
		{"lookup-timeout", cfg.LookupTimeout, time.Duration(ratelimit.DefaultLookupTimeout)},
		{"implicit-nodes-per-hour", float64(cfg.ImplicitNodesPerHour), float64(httpapi.DefaultImplicitNodesPerHour)},
		{"max-implicit-nodes", cfg.MaxImplicitNodes, hub.DefaultMaxImplicitNodes},
		{"max-callback-host-subscriptions", cfg.MaxCallbackHostSubscriptions, hub.DefaultMaxCallbackHostSubscriptions},
		{"max-account-subscriptions", cfg.MaxAccountSubscriptions, hub.DefaultMaxAccountSubscriptions},
		{"max-node-resources", cfg.MaxNodeResources, hub.DefaultMaxNodeResources},
		{"xmpp-multicast-share", cfg.XMPPMulticastShare, component.DefaultMulticastShare},
		{"upstream-check", cfg.UpstreamCheck, time.Duration(upstream.DefaultCheckEvery)},
		{"db-max-conns", cfg.DBMaxConns, store.DefaultMaxConns},
	} {
		if c.got != c.want {
			t.Errorf("--%s defaults to %v; its package's default is %v", c.option, c.got, c.want)
		}
	}
	if err := (&Config{}).validateTuning(); err == nil {
		t.Error("a zero configuration passes validation")
	}
	cfg.XMPPSecret = "s"
	if err := cfg.Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

// TestTuningOptionsReachTheirPackages: each tuning option, as a flag, a
// variable or a config file line, ends up in the configuration of the
// package it tunes.
func TestTuningOptionsReachTheirPackages(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pingd.conf")
	if err := os.WriteFile(file, []byte("PINGD_LIST_RATE=0.25\nlist-burst=7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(newFlagSet("serve", io.Discard), []string{
		"--config", file, "--xmpp-secret", "s",
		"--fetch-workers", "3", "--fetches-per-host", "1", "--delivery-workers", "5", "--deliveries-per-host", "2",
		"--fetch-host-spacing", "250ms", "--poll-interval", "2h", "--poll-min-interval", "10m", "--poll-max-interval", "48h",
		"--ping-rate", "0.5", "--ping-burst", "4", "--ping-host-rate", "6", "--ping-host-burst", "60",
		"--subscribe-rate", "3", "--subscribe-burst", "30", "--whitelist-node-rate", "0.1", "--whitelist-node-burst", "2",
		"--nodes-per-hour", "9", "--xmpp-iq-rate", "4", "--xmpp-iq-burst", "12", "--xmpp-pending-per-jid", "16",
		"--lookup-requests-per-hour", "30",
	}, env(map[string]string{"PINGD_ADMIN_RATE": "2.5", "PINGD_ADMIN_BURST": "8", "PINGD_LOOKUP_TIMEOUT": "5s"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	fc := fetchingConfig(cfg, log)
	sc := schedulerConfig(cfg)
	dc := deliveryConfig(cfg, log)
	ac := apiConfig(cfg, log)
	cc, err := componentConfig(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"fetching FetchWorkers", fc.FetchWorkers, 3},
		{"fetching FetchesPerHost", fc.FetchesPerHost, 1},
		{"fetching FetchHostSpacing", fc.FetchHostSpacing, 250 * time.Millisecond},
		{"API PollInterval", ac.PollInterval, 2 * time.Hour},
		{"scheduler DefaultInterval", sc.DefaultInterval, 2 * time.Hour},
		{"scheduler MinInterval", sc.MinInterval, 10 * time.Minute},
		{"scheduler MaxInterval", sc.MaxInterval, 48 * time.Hour},
		{"delivery Workers", dc.Workers, 5},
		{"delivery PerHost", dc.PerHost, 2},
		{"API PingRate", ac.PingRate, 0.5},
		{"API PingBurst", ac.PingBurst, 4},
		{"API PingHostRate", ac.PingHostRate, 6.0},
		{"API PingHostBurst", ac.PingHostBurst, 60},
		{"API SubscribeRate", ac.SubscribeRate, 3.0},
		{"API SubscribeBurst", ac.SubscribeBurst, 30},
		{"API WhitelistNodeRate", ac.WhitelistNodeRate, 0.1},
		{"API WhitelistNodeBurst", ac.WhitelistNodeBurst, 2},
		{"API AdminRate", ac.AdminRate, 2.5},
		{"API AdminBurst", ac.AdminBurst, 8},
		{"API ListRate", ac.ListRate, 0.25},
		{"API ListBurst", ac.ListBurst, 7},
		{"component NodesPerHour", cc.NodesPerHour, 9},
		{"component IQRate", cc.IQRate, 4.0},
		{"component IQBurst", cc.IQBurst, 12},
		{"component PendingPerSender", cc.PendingPerSender, 16},
		{"component LookupRequestsPerHour", cc.LookupRequestsPerHour, 30.0},
		{"component LookupTimeout", cc.LookupTimeout, 5 * time.Second},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	var printed bytes.Buffer
	cfg.write(&printed)
	for _, line := range []string{"PINGD_PING_RATE=0.5\n", "PINGD_LIST_RATE=0.25\n", "PINGD_FETCH_WORKERS=3\n", "PINGD_POLL_INTERVAL=2h0m0s\n"} {
		if !strings.Contains(printed.String(), line) {
			t.Errorf("pingd config does not print %q:\n%s", line, printed.String())
		}
	}
}

// TestTuningOptionsRefuseNonsense: counts below one, rates that are not
// positive numbers and poll intervals out of order are refused at start,
// each with its own line naming the variable and the flag.
func TestTuningOptionsRefuseNonsense(t *testing.T) {
	cfg, err := loadConfig(newFlagSet("serve", io.Discard), []string{
		"--xmpp-secret", "s",
		"--fetch-workers", "0", "--fetches-per-host", "-1", "--delivery-workers", "20000", "--deliveries-per-host", "0",
		"--fetch-host-spacing", "11m", "--nodes-per-hour", "0",
		"--ping-rate", "0", "--ping-burst", "0", "--ping-host-rate", "-2", "--subscribe-burst", "-5",
		"--whitelist-node-rate", "0", "--admin-burst", "0", "--list-rate", "-0.5",
		"--poll-min-interval", "30s", "--poll-interval", "48h", "--poll-max-interval", "24h",
		"--xmpp-iq-rate", "0", "--xmpp-pending-per-jid", "2000", "--lookup-requests-per-hour", "0", "--lookup-timeout", "1h",
	}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		"PINGD_FETCH_WORKERS (--fetch-workers) 0: want 1 to 10000",
		"PINGD_FETCHES_PER_HOST (--fetches-per-host) -1: want 1 to 10000",
		"PINGD_FETCH_HOST_SPACING (--fetch-host-spacing) 11m0s: want 0 to 10m0s",
		"PINGD_DELIVERY_WORKERS (--delivery-workers) 20000: want 1 to 10000",
		"PINGD_DELIVERIES_PER_HOST (--deliveries-per-host) 0: want 1 to 10000",
		"PINGD_NODES_PER_HOUR (--nodes-per-hour) 0: want 1 to",
		"PINGD_PING_RATE (--ping-rate) 0: want more than 0 a second",
		"PINGD_PING_BURST (--ping-burst) 0: want 1 or more",
		"PINGD_PING_HOST_RATE (--ping-host-rate) -2: want more than 0 a second",
		"PINGD_SUBSCRIBE_BURST (--subscribe-burst) -5: want 1 or more",
		"PINGD_WHITELIST_NODE_RATE (--whitelist-node-rate) 0:",
		"PINGD_ADMIN_BURST (--admin-burst) 0:",
		"PINGD_LIST_RATE (--list-rate) -0.5:",
		"PINGD_XMPP_IQ_RATE (--xmpp-iq-rate) 0: want more than 0 a second",
		"PINGD_XMPP_PENDING_PER_JID (--xmpp-pending-per-jid) 2000: want 1 to 1024",
		"PINGD_LOOKUP_REQUESTS_PER_HOUR (--lookup-requests-per-hour) 0: want 1 to",
		"PINGD_LOOKUP_TIMEOUT (--lookup-timeout) 1h0m0s: want 1s to 2m0s",
		"PINGD_POLL_MIN_INTERVAL (--poll-min-interval) 30s: want at least 1m0s",
		"PINGD_POLL_INTERVAL (--poll-interval) 48h0m0s: want from --poll-min-interval (30s) to --poll-max-interval (24h0m0s)",
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q:\n%v", w, err)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != len(want) {
		t.Errorf("want %d problems, one per line; got %d:\n%v", len(want), n, err)
	}

	for _, bad := range []string{"NaN", "Inf", "fast", ""} {
		_, err := loadConfig(newFlagSet("serve", io.Discard), []string{"--ping-rate", bad}, env(nil))
		if err == nil || !strings.Contains(err.Error(), "is not a number") {
			t.Errorf("--ping-rate %q: %v", bad, err)
		}
	}
}

// TestPingLimitOptionsTakeEffect: pingd serve with --ping-burst 2 and a
// slow --ping-rate takes two pings of a URL and answers the third 429 with
// Retry-After (with the defaults the third is taken).
func TestPingLimitOptionsTakeEffect(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pingd serve in the test process")
	}
	feedURL := httptest.NewServer(http.NotFoundHandler())
	defer feedURL.Close()
	statuses := func(extra ...string) []int {
		addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		args := append([]string{
			"--xmpp-secret", "s", "--xmpp-addr", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)),
			"--http-addr", addr, "--public-url", "http://" + addr,
			"--db", filepath.Join(t.TempDir(), "pingd.db"), "--allow-private", "--upstream-push=0",
		}, extra...)
		cfg, err := loadConfig(newFlagSet("serve", io.Discard), args, env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serve(ctx, cfg, slog.New(slog.DiscardHandler)) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		}()
		testenv.WaitFor(t, 20*time.Second, "/healthz", func() bool {
			resp, err := http.Get("http://" + addr + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		var out []int
		for range 3 {
			resp, err := http.PostForm("http://"+addr+"/ping", url.Values{"url": {feedURL.URL + "/feed.xml"}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
			out = append(out, resp.StatusCode)
		}
		return out
	}
	if got := statuses(); got[2] == http.StatusTooManyRequests {
		t.Fatalf("with the defaults: %v; want the third ping taken", got)
	}
	if got := statuses("--ping-burst", "2", "--ping-rate", "0.001"); got[0] != http.StatusOK || got[1] != http.StatusOK || got[2] != http.StatusTooManyRequests {
		t.Errorf("with --ping-burst 2: %v; want 200, 200, 429", got)
	}
}
