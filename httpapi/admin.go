package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/ratelimit"
)

// AdminTokens is the hub's check of the admin token (*hub.Hub has it).
type AdminTokens interface {
	IsAdminToken(token string) bool
}

// AdminGateConfig configures the AdminGate.
type AdminGateConfig struct {
	Tokens AdminTokens
	// Rate and Burst limit the admin API and the status page per client
	// IP; zero values take the defaults (DefaultAdminRate, DefaultAdminBurst).
	Rate  float64
	Burst int
}

// AdminGate is what stands before the admin API, the status page and the
// misses under /api/: one per-client rate limit, which all of them share,
// and the admin token.
type AdminGate struct {
	tokens AdminTokens
	limit  *ratelimit.Keyed
}

// NewAdminGate returns the gate.
func NewAdminGate(cfg AdminGateConfig) (*AdminGate, error) {
	if cfg.Tokens == nil {
		return nil, errors.New("httpapi: admin gate: no token check")
	}
	if cfg.Rate <= 0 {
		cfg.Rate = DefaultAdminRate
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultAdminBurst
	}
	return &AdminGate{tokens: cfg.Tokens, limit: ratelimit.New(cfg.Rate, cfg.Burst)}, nil
}

// allow takes a token of the request's client's bucket.
func (g *AdminGate) allow(r *http.Request) (bool, time.Duration) {
	return g.limit.Allow(clientKey(r), time.Now())
}

// wrap wraps an admin handler: the per-client rate limit first (so
// guessing tokens is slow too), then the bearer token.
func (g *AdminGate) wrap(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, wait := g.allow(r); !ok {
			setRetryAfter(w, wait)
			writeJSONError(w, http.StatusTooManyRequests, "too many requests; retry later")
			return
		}
		// Reads also take the token as the password of HTTP Basic, as the
		// status page's admin view does, so a browser that logged in there
		// reads the API too. Changes take only the Bearer header, which a
		// browser never sends by itself (no cross-site requests ride on a
		// remembered Basic login).
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		token, ok := bearerToken(r)
		if !ok && read {
			_, token, ok = r.BasicAuth()
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pingd"`)
			if read {
				w.Header().Add("WWW-Authenticate", `Basic realm="pingd"`)
			}
			writeJSONError(w, http.StatusUnauthorized, "missing bearer token")
			return
		}
		if !g.tokens.IsAdminToken(token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pingd", error="invalid_token"`)
			if read {
				w.Header().Add("WWW-Authenticate", `Basic realm="pingd"`)
			}
			writeJSONError(w, http.StatusUnauthorized, "wrong bearer token")
			return
		}
		h(w, r)
	})
}

// bearerToken returns the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// AdminHub is what the admin API asks of the hub.
type AdminHub interface {
	NodesPage(ctx context.Context, p hub.NodePage) ([]hub.Node, error)
	Node(ctx context.Context, name string) (*hub.Node, error)
	CreateNode(ctx context.Context, spec hub.NodeSpec) (*hub.Node, string, error)
	ConfigureNode(ctx context.Context, name string, cfg hub.NodeConfig) error
	DeleteNode(ctx context.Context, name string) error
	RotateToken(ctx context.Context, name string) (string, error)
	Subscriptions(ctx context.Context, f hub.SubscriptionFilter) ([]hub.Subscription, error)
	Source(ctx context.Context, id int64) (*hub.Source, error)
	Affiliations(ctx context.Context, node *hub.Node) (map[string]hub.Affiliation, error)
	SetAffiliation(ctx context.Context, node *hub.Node, bareJID string, a hub.Affiliation) error
}

// UpstreamReader lists a source's upstream subscriptions (the store's
// hub.UpstreamStore has it), for a node's status.
type UpstreamReader interface {
	UpstreamsOfSource(ctx context.Context, sourceID int64) ([]hub.Upstream, error)
}

// RelayStatusReader reports the relay queue per target (the store's
// hub.RelayStore has it), for GET /api/relay.
type RelayStatusReader interface {
	RelayStatus(ctx context.Context) ([]hub.RelayTargetStatus, error)
}

// AdminConfig configures the admin API.
type AdminConfig struct {
	Site
	Hub  AdminHub
	Gate *AdminGate
	// Upstreams, when set, lists a node's upstream subscriptions in its
	// status; nil: pingd subscribes upstream nowhere, and the status says
	// so with an empty list. cmd/pingd always gives it.
	Upstreams UpstreamReader
	// Relays reports the relay queue of each of RelayTargets; it may be
	// nil only without targets. cmd/pingd always gives it.
	Relays RelayStatusReader
	// RelayTargets names the ping servers accepted pings are relayed to
	// (the relay is a ping listener of the hub), for GET /api/relay.
	RelayTargets []string
	// Resolver, when set, turns a page URL given where a feed is expected
	// (a node's source) into the page's feed.
	Resolver hub.SourceResolver
	// CheckHost: see checkOutbound (outbound.go); nil: no early check.
	CheckHost func(ctx context.Context, host string) error
	// CloudProtocol is the rssCloud protocol of the publisher snippets
	// (see PagesConfig.CloudProtocol).
	CloudProtocol string
}

// Admin is the admin API under /api/: nodes, their settings, tokens,
// whitelists, subscribers and status, and the relay targets.
type Admin struct {
	site
	cfg   AdminConfig
	hub   AdminHub
	cloud string
}

// NewAdmin returns the admin API.
func NewAdmin(cfg AdminConfig) (*Admin, error) {
	s, err := newSite("admin", cfg.Site)
	if err != nil {
		return nil, err
	}
	if cfg.Hub == nil || cfg.Gate == nil {
		return nil, errors.New("httpapi: admin: no hub or no admin gate")
	}
	if len(cfg.RelayTargets) > 0 && cfg.Relays == nil {
		return nil, errors.New("httpapi: admin: relay targets without the relay queue to report on")
	}
	cloud, err := cloudProtocol(cfg.CloudProtocol)
	if err != nil {
		return nil, err
	}
	s.checkHost = cfg.CheckHost
	return &Admin{site: s, cfg: cfg, hub: cfg.Hub, cloud: cloud}, nil
}

// Routes installs the admin API's routes.
func (a *Admin) Routes(r *mux.Router) {
	const node = "/api/nodes/{node}"
	g := a.cfg.Gate
	r.Handle("/api/nodes", g.wrap(a.listNodes)).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/api/nodes", g.wrap(a.createNode)).Methods(http.MethodPost)
	r.Handle(node, g.wrap(a.getNode)).Methods(http.MethodGet, http.MethodHead)
	r.Handle(node, g.wrap(a.deleteNode)).Methods(http.MethodDelete)
	r.Handle(node, g.wrap(a.patchNode)).Methods(http.MethodPatch)
	r.Handle("/api/relay", g.wrap(a.getRelay)).Methods(http.MethodGet, http.MethodHead)
	r.Handle(node+"/token", g.wrap(a.rotateToken)).Methods(http.MethodPost)
	r.Handle(node+"/whitelist", g.wrap(a.getWhitelist)).Methods(http.MethodGet, http.MethodHead)
	r.Handle(node+"/whitelist/{jid}", g.wrap(a.putWhitelist)).Methods(http.MethodPut)
	r.Handle(node+"/whitelist/{jid}", g.wrap(a.deleteWhitelist)).Methods(http.MethodDelete)
	r.Handle(node+"/subscribers", g.wrap(a.getSubscribers)).Methods(http.MethodGet, http.MethodHead)
	r.Handle(node+"/status", g.wrap(a.getStatus)).Methods(http.MethodGet, http.MethodHead)
}
