package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/httpout"
	"github.com/pingd/pingd/internal/weblogs"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// Ping relay (seed 003, "Who to ping?"): a ping pingd accepted is
// forwarded to each configured ping server, so a publisher pings pingd once
// and reaches the others. Relays are queued in the store (hub.RelayStore)
// when the ping is accepted and sent by Relayer.Run: durable, retried with
// backoff for a day, at most one per URL per target per minute, never to
// pingd itself, and never for a ping another pingd relayed (the loop
// guard: relays carry weblogs.RelayHeader, and pings carrying it are not
// relayed again). The hub tells the Relayer of each recorded ping: it is a
// ping listener (PingRecorded) that cmd/pingd registers.

// Relay timing.
const (
	relayDedupe     = time.Minute
	relayGiveUp     = 24 * time.Hour
	relayMaxBackoff = time.Hour
	relayLease      = 2 * time.Minute
	relayBatch      = 32
	relayKeep       = 7 * 24 * time.Hour
	relayMaxAnswer  = 64 << 10
)

// RelayTarget is one configured ping server.
type RelayTarget struct {
	// Spec is the target as configured ("xmlrpc:URL" or "get:URL").
	Spec string
	// XMLRPC is true for weblogUpdates pings over XML-RPC; otherwise a GET
	// of URL with {name}, {url} and {feed} replaced.
	XMLRPC bool
	URL    string
}

// ParseRelayTargets reads PINGD_RELAY_PINGS: targets separated by commas
// or white space, each "xmlrpc:URL" (weblogUpdates.ping, or extendedPing
// when the ping named a feed) or "get:URL" with {name}, {url} and {feed}
// placeholders. A target on one of selfHosts (pingd's own host:port) is
// refused: pingd never relays to itself.
func ParseRelayTargets(spec string, selfHosts []string) ([]RelayTarget, error) {
	var out []RelayTarget
	var errs []error
	for _, item := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		kind, raw, ok := strings.Cut(item, ":")
		t := RelayTarget{Spec: item, URL: raw}
		switch {
		case ok && kind == "xmlrpc":
			t.XMLRPC = true
		case ok && kind == "get":
		default:
			errs = append(errs, fmt.Errorf("%q: want xmlrpc:URL or get:URL", item))
			continue
		}
		probe := strings.NewReplacer("{name}", "x", "{url}", "x", "{feed}", "x").Replace(raw)
		u, err := url.Parse(probe)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%q: %q is not an absolute http(s) URL", item, raw))
			continue
		}
		for _, self := range selfHosts {
			if strings.EqualFold(u.Host, self) {
				errs = append(errs, fmt.Errorf("%q is pingd itself: pingd never relays to itself", item))
			}
		}
		out = append(out, t)
	}
	return out, errors.Join(errs...)
}

// RelayConfig configures a Relayer.
type RelayConfig struct {
	Store     hub.RelayStore
	Client    *http.Client
	Targets   []RelayTarget
	Instance  string
	UserAgent string
	Logger    *slog.Logger
	Now       func() time.Time
	// Every is how often due relays are looked for; default
	// DefaultRelayEvery.
	Every time.Duration
}

// DefaultRelayEvery is RelayConfig.Every's default.
const DefaultRelayEvery = 2 * time.Second

// Relayer queues and sends relayed pings.
type Relayer struct {
	cfg  RelayConfig
	log  *slog.Logger
	wake chan struct{}
}

// NewRelayer returns a Relayer; nil when there are no targets.
func NewRelayer(cfg RelayConfig) *Relayer {
	if len(cfg.Targets) == 0 {
		return nil
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultRelayEvery
	}
	return &Relayer{cfg: cfg, log: cfg.Logger.With("component", "relay"), wake: make(chan struct{}, 1)}
}

// PingRecorded queues a recorded weblog ping for every target (the hub
// calls it: cmd/pingd registers the Relayer as a ping listener), unless
// another pingd relayed it here. A ping is answered whether or not its
// relay could be queued: the relay is an extra, the ping is stored.
func (r *Relayer) PingRecorded(ctx context.Context, rec hub.PingRecord) {
	if r == nil || rec.Ping.Relayed || !weblogs.IsWeblogPing(rec.Ping.Dialect) {
		return
	}
	page, feedURL := weblogs.PingPages(rec.Ping.Dialect, rec.URLs)
	if err := r.Enqueue(ctx, rec.Ping, page, feedURL); err != nil {
		r.log.WarnContext(ctx, "ping not queued for relay", "url", page, "err", err)
	}
}

// Enqueue queues a ping for every target. pageURL is the weblog's URL;
// feedURL is set when the ping named its feed.
func (r *Relayer) Enqueue(ctx context.Context, p hub.Ping, pageURL, feedURL string) error {
	if r == nil {
		return nil
	}
	var errs []error
	for _, t := range r.cfg.Targets {
		rel := &hub.Relay{Target: t.Spec, Name: p.Name, URL: pageURL, FeedURL: feedURL, Tags: p.Tags, CreatedAt: r.cfg.Now().UTC()}
		if _, err := r.cfg.Store.EnqueueRelay(ctx, rel, relayDedupe); err != nil {
			errs = append(errs, err)
		}
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return errors.Join(errs...)
}

// Run sends due relays until ctx ends.
func (r *Relayer) Run(ctx context.Context) error {
	if r == nil {
		return nil
	}
	t := time.NewTicker(r.cfg.Every)
	defer t.Stop()
	lastPrune := time.Time{}
	for {
		r.sendDue(ctx)
		if now := r.cfg.Now(); now.Sub(lastPrune) > time.Hour {
			if err := r.cfg.Store.PruneRelays(ctx, now.Add(-relayKeep)); err != nil && ctx.Err() == nil {
				r.log.WarnContext(ctx, "prune relays", "err", err)
			}
			lastPrune = now
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-r.wake:
		}
	}
}

func (r *Relayer) sendDue(ctx context.Context) {
	for ctx.Err() == nil {
		now := r.cfg.Now().UTC()
		due, err := r.cfg.Store.ClaimRelays(ctx, now, relayBatch, r.cfg.Instance, now.Add(relayLease))
		if err != nil {
			if ctx.Err() == nil {
				r.log.WarnContext(ctx, "claim relays", "err", err)
			}
			return
		}
		if len(due) == 0 {
			return
		}
		for i := range due {
			r.send(ctx, &due[i])
		}
	}
}

// send makes one attempt and records it.
func (r *Relayer) send(ctx context.Context, rel *hub.Relay) {
	var target *RelayTarget
	for i := range r.cfg.Targets {
		if r.cfg.Targets[i].Spec == rel.Target {
			target = &r.cfg.Targets[i]
		}
	}
	now := r.cfg.Now().UTC()
	rel.Attempts++
	var err error
	permanent := false
	if target == nil {
		err, permanent = errors.New("no longer a configured target"), true
	} else {
		permanent, err = r.attempt(ctx, target, rel)
	}
	switch {
	case err == nil:
		rel.State, rel.SentAt, rel.LastError = hub.RelaySent, now, ""
		r.log.InfoContext(ctx, "ping relayed", "target", rel.Target, "url", rel.URL)
	case permanent || now.Sub(rel.CreatedAt) >= relayGiveUp:
		rel.State, rel.LastError = hub.RelayFailed, err.Error()
		rel.NextAttemptAt = now
		r.log.WarnContext(ctx, "ping relay failed", "target", rel.Target, "url", rel.URL, "attempts", rel.Attempts, "err", err)
	default:
		backoff := min(time.Minute<<min(rel.Attempts-1, 10), relayMaxBackoff)
		rel.State, rel.LastError, rel.NextAttemptAt = hub.RelayPending, err.Error(), now.Add(backoff)
		r.log.InfoContext(ctx, "ping relay will be retried", "target", rel.Target, "url", rel.URL, "in", backoff, "err", err)
	}
	// Recorded even when shutting down, so the attempt is not lost.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.cfg.Store.FinishRelay(fctx, rel); err != nil {
		r.log.WarnContext(ctx, "record relay", "id", rel.ID, "err", err)
	}
}

// attempt sends one relay; permanent says a failure is not worth retrying.
func (r *Relayer) attempt(ctx context.Context, t *RelayTarget, rel *hub.Relay) (permanent bool, err error) {
	req := request{Method: http.MethodGet, Header: http.Header{weblogs.RelayHeader: {"1"}}}
	if t.XMLRPC {
		req.Body, err = weblogs.MarshalPing(rel.Name, rel.URL, rel.FeedURL, rel.Tags)
		if err != nil {
			return true, err
		}
		req.Method, req.URL, req.ContentType = http.MethodPost, t.URL, "text/xml"
	} else {
		req.URL = strings.NewReplacer("{name}", url.QueryEscape(rel.Name), "{url}", url.QueryEscape(rel.URL),
			"{feed}", url.QueryEscape(rel.FeedURL)).Replace(t.URL)
	}
	resp, err := httpout.Do(ctx, r.cfg.Client, r.cfg.UserAgent, relayMaxAnswer, req)
	if err != nil {
		// A malformed URL stays malformed; a transport error or an answer
		// cut short is worth another try.
		return errors.Is(err, httpout.ErrRequest), err
	}
	switch {
	case resp.Status == http.StatusTooManyRequests || resp.Status == http.StatusRequestTimeout || resp.Status >= 500:
		return false, fmt.Errorf("HTTP %d", resp.Status)
	case resp.Status < 200 || resp.Status > 299:
		return true, fmt.Errorf("HTTP %d", resp.Status)
	}
	if !t.XMLRPC {
		return false, nil
	}
	v, err := xmlrpc.DecodeResponse(bytes.NewReader(resp.Body), xmlrpc.Limits{MaxBytes: relayMaxAnswer})
	if err != nil {
		return true, fmt.Errorf("answer: %w", err)
	}
	if refused, msg := weblogs.Refused(v); refused {
		return true, fmt.Errorf("the ping server refused: %s", msg)
	}
	return false, nil
}
