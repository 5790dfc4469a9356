package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
)

// TestPingedIntervalOption: how often a source that pings is still polled
// is an option (flag, variable), defaults to the scheduler's own default,
// reaches the scheduler, and is refused outside the poll bounds.
func TestPingedIntervalOption(t *testing.T) {
	cfg, err := loadConfig(newFlagSet("serve", io.Discard), []string{"--xmpp-secret", "s"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PingedInterval != feed.DefaultPingedInterval {
		t.Errorf("--pinged-interval defaults to %s, the scheduler's default is %s", cfg.PingedInterval, feed.DefaultPingedInterval)
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
	}{
		{args: []string{"--pinged-interval", "1h"}},
		{env: map[string]string{"PINGD_PINGED_INTERVAL": "1h"}},
	} {
		cfg, err := loadConfig(newFlagSet("serve", io.Discard), append([]string{"--xmpp-secret", "s"}, c.args...), env(c.env))
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		sc := schedulerConfig(cfg)
		if sc.PingedInterval != time.Hour {
			t.Fatalf("%v %v: scheduler PingedInterval = %s, want 1h", c.args, c.env, sc.PingedInterval)
		}
		// A source that pinged an hour ago with no hints is polled an hour
		// after its fetch (±10%), not twelve.
		now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
		sc.Rand = func() float64 { return 0.5 }
		src := &hub.Source{SourceState: hub.SourceState{LastPingAt: now.Add(-time.Hour)}}
		sc.DefaultInterval = 10 * time.Minute
		next, reason := feed.NewScheduler(sc).Next(now, src, &hub.FetchResult{IsFeed: true}, nil)
		if next.Sub(now) != time.Hour || reason != feed.ReasonPinged {
			t.Errorf("a pinged source is next polled after %s (%s), want 1h (%s)", next.Sub(now), reason, feed.ReasonPinged)
		}
		var printed bytes.Buffer
		cfg.write(&printed)
		if !strings.Contains(printed.String(), "PINGD_PINGED_INTERVAL=1h0m0s\n") {
			t.Errorf("pingd config does not print the option:\n%s", printed.String())
		}
	}
	cfg, err = loadConfig(newFlagSet("serve", io.Discard), []string{"--xmpp-secret", "s", "--pinged-interval", "48h"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "PINGD_PINGED_INTERVAL (--pinged-interval) 48h0m0s: want from --poll-min-interval (5m0s) to --poll-max-interval (24h0m0s)") {
		t.Errorf("a pinged interval beyond --poll-max-interval: %v", err)
	}
}
