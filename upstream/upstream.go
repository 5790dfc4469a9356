package upstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/nodeurl"
	"github.com/pingd/pingd/internal/ratelimit"
)

// Store is what the Manager reads and writes itself: its upstream
// subscriptions, and whether anyone still follows a source.
type Store interface {
	hub.UpstreamStore
	// SubscriberCount counts a source's subscribers of every kind
	// (store.Store's).
	SubscriberCount(ctx context.Context, sourceID int64) (int, error)
}

// Config configures the Manager.
type Config struct {
	Hub   *hub.Hub
	Store Store
	// HTTP is the SSRF-guarded client for requests to hubs and clouds.
	HTTP *http.Client
	// PublicURL is pingd's base URL: callbacks live under it.
	PublicURL string
	Tracker   *Tracker
	Logger    *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Leading reports whether this process sends upstream requests; nil:
	// always.
	Leading func() bool
	// CheckEvery is how often renewals and departures are looked at;
	// default DefaultCheckEvery.
	CheckEvery time.Duration
	// LeaseSeconds is the WebSub lease asked for; default
	// DefaultLeaseSeconds.
	LeaseSeconds int
	// CloudRenew is how often a cloud registration is renewed; default
	// DefaultCloudRenew (registrations expire after 25 hours).
	CloudRenew time.Duration
	// UserAgent is sent with every request.
	UserAgent string
	// NotifyRate and NotifyBurst limit the rssCloud notifications taken
	// per callback; zero values take the defaults (DefaultNotifyRate a
	// second in bursts of DefaultNotifyBurst), the API's limit on pings of
	// one URL. A notification is not
	// signed and callback ids are counters, so anyone who knows a feed's
	// URL can send one: each would record a ping and fetch the feed.
	// Signed WebSub content is not limited (only the hub knows the
	// secret).
	NotifyRate  float64
	NotifyBurst int
}

// Defaults of Config: what a zero (or negative) field is taken as.
const (
	DefaultCheckEvery = time.Minute
	// DefaultLeaseSeconds is the WebSub lease asked for: 5 days.
	DefaultLeaseSeconds = 5 * 24 * 3600
	// DefaultCloudRenew renews cloud registrations a day apart, within
	// the 25 hours they last.
	DefaultCloudRenew = 24 * time.Hour
	// DefaultNotifyRate and DefaultNotifyBurst limit the rssCloud
	// notifications taken per callback as the HTTP API limits pings of one
	// URL.
	DefaultNotifyRate  = 1
	DefaultNotifyBurst = 10
)

// Timing limits.
const (
	retryAfterFailure = time.Hour
	// pendingTimeout is how long a subscription waits for the hub's
	// verification before it is asked for again.
	pendingTimeout = 10 * time.Minute
	maxAnswerBytes = 64 << 10
)

// StateUnsubscribing marks a WebSub subscription pingd asked the hub to
// end; the record stays until the hub verifies it (or a day passes).
const StateUnsubscribing = "unsubscribing"

// Manager subscribes upstream and serves the callbacks.
type Manager struct {
	cfg  Config
	log  *slog.Logger
	base *url.URL
	wake chan struct{}
	mu   sync.Mutex // serialises passes
	// notifyLimit has a bucket per rssCloud callback.
	notifyLimit *ratelimit.Keyed
}

// New checks cfg and returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Hub == nil || cfg.Store == nil || cfg.HTTP == nil || cfg.Tracker == nil {
		return nil, errors.New("upstream: hub, store, HTTP client and tracker are required")
	}
	base, err := url.Parse(strings.TrimRight(cfg.PublicURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("upstream: public URL %q is not an absolute http(s) URL", cfg.PublicURL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = DefaultCheckEvery
	}
	if cfg.LeaseSeconds <= 0 {
		cfg.LeaseSeconds = DefaultLeaseSeconds
	}
	if cfg.CloudRenew <= 0 {
		cfg.CloudRenew = DefaultCloudRenew
	}
	if cfg.NotifyRate <= 0 {
		cfg.NotifyRate = DefaultNotifyRate
	}
	if cfg.NotifyBurst <= 0 {
		cfg.NotifyBurst = DefaultNotifyBurst
	}
	m := &Manager{cfg: cfg, log: cfg.Logger.With("component", "upstream"), base: base, wake: make(chan struct{}, 1),
		notifyLimit: ratelimit.New(cfg.NotifyRate, cfg.NotifyBurst)}
	cfg.Tracker.onAdvert = m.poke
	return m, nil
}

func (m *Manager) now() time.Time { return m.cfg.Now().UTC() }

// poke wakes the loop without blocking.
func (m *Manager) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run checks at start, after each fetch that found an advertisement and
// every CheckEvery, until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.CheckEvery)
	defer t.Stop()
	for {
		m.Check(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-m.wake:
		}
	}
}

// Check makes one pass: it loads which pushes are active (for the
// tracker), subscribes where a source with subscribers advertises a push,
// renews what is due, and leaves where no one is subscribed any more.
func (m *Manager) Check(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ups, err := m.cfg.Store.Upstreams(ctx)
	if err != nil {
		if ctx.Err() == nil {
			m.log.WarnContext(ctx, "read upstream subscriptions", "err", err)
		}
		return
	}
	m.cfg.Tracker.setActive(ups)
	if m.cfg.Leading != nil && !m.cfg.Leading() {
		return
	}
	now := m.now()
	bySource := map[int64]map[string]*hub.Upstream{}
	for i := range ups {
		u := &ups[i]
		if bySource[u.SourceID] == nil {
			bySource[u.SourceID] = map[string]*hub.Upstream{}
		}
		bySource[u.SourceID][u.Kind] = u
	}
	// New or changed advertisements, and sources that advertised a push
	// before anyone subscribed to them.
	ads := m.cfg.Tracker.takeAdverts()
	taken := map[int64]bool{}
	for _, ad := range ads {
		taken[ad.sourceID] = true
	}
	for id := range bySource {
		taken[id] = true
	}
	ads = append(ads, m.cfg.Tracker.knownAdverts(taken)...)
	for _, ad := range ads {
		if ctx.Err() != nil {
			return
		}
		m.consider(ctx, now, ad, bySource[ad.sourceID])
	}
	// Renewals and departures.
	for i := range ups {
		if ctx.Err() != nil {
			return
		}
		u := &ups[i]
		if m.own(u.Endpoint) {
			// Made before pingd recognised itself: dropped, never renewed.
			m.delete(ctx, u)
			continue
		}
		subscribed, err := m.hasSubscribers(ctx, u.SourceID)
		if err != nil {
			m.log.WarnContext(ctx, "count subscribers", "source", u.SourceID, "err", err)
			continue
		}
		switch {
		case u.State == StateUnsubscribing:
			if now.Sub(u.UpdatedAt) > 24*time.Hour {
				m.delete(ctx, u)
			}
		case !subscribed:
			m.leave(ctx, u)
		case !u.NextRenewAt.IsZero() && !now.Before(u.NextRenewAt):
			m.subscribe(ctx, now, u)
		case u.State == hub.UpstreamPending && now.Sub(u.UpdatedAt) > pendingTimeout:
			m.subscribe(ctx, now, u)
		}
	}
}

// hasSubscribers reports whether anyone follows the source.
func (m *Manager) hasSubscribers(ctx context.Context, sourceID int64) (bool, error) {
	n, err := m.cfg.Store.SubscriberCount(ctx, sourceID)
	return n > 0, err
}

// consider acts on what a fetched feed advertises: a WebSub hub is
// preferred to a cloud (it carries content and is signed).
func (m *Manager) consider(ctx context.Context, now time.Time, ad advert, have map[string]*hub.Upstream) {
	subscribed, err := m.hasSubscribers(ctx, ad.sourceID)
	if err != nil || !subscribed {
		return
	}
	// A publisher that uses pingd as its hub or cloud names pingd: its
	// pings and publishes reach pingd directly, and a subscription there
	// would only send every change back to pingd as a push.
	if ad.hub != "" && m.own(ad.hub) {
		m.log.DebugContext(ctx, "a source names pingd itself as its hub: not subscribing to it", "source", ad.feedURL, "hub", ad.hub)
		ad.hub = ""
	}
	if ad.cloud != "" && m.own(ad.cloud) {
		m.log.DebugContext(ctx, "a source names pingd itself as its cloud: not registering with it", "source", ad.feedURL, "cloud", parseCloud(ad.cloud).url)
		ad.cloud = ""
	}
	switch {
	case ad.hub != "":
		topic := ad.self
		if topic == "" {
			topic = ad.feedURL
		}
		u := have[hub.UpstreamWebSub]
		if u != nil && u.Endpoint == ad.hub && u.Topic == topic && u.State != hub.UpstreamFailed {
			return // as it is
		}
		if u == nil {
			u = &hub.Upstream{SourceID: ad.sourceID, Kind: hub.UpstreamWebSub}
		}
		u.Endpoint, u.Topic = ad.hub, topic
		m.subscribe(ctx, now, u)
		if c := have[hub.UpstreamRSSCloud]; c != nil {
			m.delete(ctx, c) // the hub replaces the cloud
		}
	case ad.cloud != "":
		if have[hub.UpstreamWebSub] != nil {
			return
		}
		u := have[hub.UpstreamRSSCloud]
		if u != nil && u.Endpoint == ad.cloud && u.State != hub.UpstreamFailed {
			return
		}
		if u == nil {
			u = &hub.Upstream{SourceID: ad.sourceID, Kind: hub.UpstreamRSSCloud}
		}
		u.Endpoint, u.Topic = ad.cloud, ad.feedURL
		m.subscribe(ctx, now, u)
	}
}

// own reports whether endpoint (a hub, or a stored cloud endpoint) is one
// of pingd's own, in any spelling.
func (m *Manager) own(endpoint string) bool {
	return nodeurl.IsOwnEndpoint(m.cfg.PublicURL, parseCloud(endpoint).url)
}

// subscribe asks for (or renews) u, storing it first so the callback that
// may come at once finds it.
func (m *Manager) subscribe(ctx context.Context, now time.Time, u *hub.Upstream) {
	if u.Kind == hub.UpstreamWebSub && u.Secret == "" {
		u.Secret = randomHex(24)
	}
	if u.State == "" || u.State == hub.UpstreamFailed {
		u.State = hub.UpstreamPending
	}
	// Asked again later unless the hub's verification sets the renewal.
	u.NextRenewAt = now.Add(retryAfterFailure)
	u.LastError = ""
	if err := m.cfg.Store.PutUpstream(ctx, u); err != nil {
		m.log.WarnContext(ctx, "store upstream subscription", "endpoint", u.Endpoint, "err", err)
		return
	}
	var err error
	switch u.Kind {
	case hub.UpstreamWebSub:
		err = m.websubRequest(ctx, u, "subscribe")
	case hub.UpstreamRSSCloud:
		err = m.pleaseNotify(ctx, u)
		if err == nil {
			u.State = hub.UpstreamActive
			u.ExpiresAt = now.Add(25 * time.Hour)
			u.NextRenewAt = now.Add(m.cfg.CloudRenew)
		}
	}
	if err != nil {
		u.State, u.LastError, u.NextRenewAt = hub.UpstreamFailed, err.Error(), now.Add(retryAfterFailure)
		m.cfg.Tracker.forget(u.SourceID)
		m.log.WarnContext(ctx, "upstream subscription refused", "kind", u.Kind, "endpoint", u.Endpoint, "topic", u.Topic, "err", err)
	} else {
		m.log.InfoContext(ctx, "upstream subscription requested", "kind", u.Kind, "endpoint", u.Endpoint, "topic", u.Topic, "state", u.State)
		if u.Kind == hub.UpstreamWebSub {
			// Nothing to add to what was stored before the request: the
			// hub's verification, which may already have come, makes it
			// active, and writing u again would undo that.
			return
		}
	}
	if err := m.cfg.Store.PutUpstream(ctx, u); err != nil {
		m.log.WarnContext(ctx, "store upstream subscription", "endpoint", u.Endpoint, "err", err)
	}
}

// leave ends u because its source has no subscriber left.
func (m *Manager) leave(ctx context.Context, u *hub.Upstream) {
	if u.Kind != hub.UpstreamWebSub || u.State != hub.UpstreamActive {
		m.delete(ctx, u) // a cloud registration lapses by itself
		return
	}
	// Stored first: the hub's verification may come before its answer.
	state := u.State
	u.State = StateUnsubscribing
	if err := m.cfg.Store.PutUpstream(ctx, u); err != nil {
		m.log.WarnContext(ctx, "store upstream subscription", "endpoint", u.Endpoint, "err", err)
		u.State = state
		return
	}
	if err := m.websubRequest(ctx, u, "unsubscribe"); err != nil {
		m.log.WarnContext(ctx, "upstream unsubscription refused; forgetting it anyway", "endpoint", u.Endpoint, "err", err)
		m.delete(ctx, u)
		return
	}
	m.log.InfoContext(ctx, "upstream unsubscription requested: no subscriber left", "endpoint", u.Endpoint, "topic", u.Topic)
}

func (m *Manager) delete(ctx context.Context, u *hub.Upstream) {
	m.cfg.Tracker.forget(u.SourceID)
	if err := m.cfg.Store.DeleteUpstream(ctx, u.ID); err != nil && !errors.Is(err, hub.ErrNotFound) {
		m.log.WarnContext(ctx, "delete upstream subscription", "id", u.ID, "err", err)
	}
}

// callback is the URL of u's callback.
func (m *Manager) callback(u *hub.Upstream) string {
	return m.base.String() + "/upstream/" + u.Kind + "/" + strconv.FormatInt(u.ID, 10)
}

// websubRequest sends a subscribe or unsubscribe request to u's hub
// (WebSub §5.1); the hub answers 202 and verifies later.
func (m *Manager) websubRequest(ctx context.Context, u *hub.Upstream, mode string) error {
	form := url.Values{
		"hub.mode":     {mode},
		"hub.callback": {m.callback(u)},
		"hub.topic":    {u.Topic},
	}
	if mode == "subscribe" {
		form.Set("hub.lease_seconds", strconv.Itoa(m.cfg.LeaseSeconds))
		form.Set("hub.secret", u.Secret)
	}
	status, body, err := m.send(ctx, u.Endpoint, "application/x-www-form-urlencoded", []byte(form.Encode()), nil)
	if err != nil {
		return err
	}
	if status < 200 || status > 299 {
		return fmt.Errorf("the hub answered HTTP %d: %s", status, strings.TrimSpace(body))
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand does not fail on supported platforms
	return hex.EncodeToString(b)
}
