package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/ratelimit"
	"github.com/pingd/pingd/internal/weblogs"
)

// Store is what the API reads from the store itself rather than through
// the hub: the health check. The status page, the hourly ping archives,
// a node's upstream subscriptions and the relay targets' status are read
// when the store also provides them (statusStore, hub.PingArchive,
// hub.UpstreamStore, hub.RelayStore), as the store package's stores do.
type Store interface {
	Check(ctx context.Context) error
}

// Config configures the HTTP API.
type Config struct {
	Hub *hub.Hub
	// Store is the hub's store (see Store).
	Store Store
	// PublicURL is the base of every URL pingd writes into documents and
	// links, e.g. "http://localhost:8080".
	PublicURL string
	// ComponentJID is the XMPP address of pingd's pubsub service.
	ComponentJID string
	// Ready reports whether the component is connected (GET /readyz).
	Ready  func() bool
	Logger *slog.Logger
	// MaxBodyBytes caps every request body; default 1 MiB.
	MaxBodyBytes int64
	Version      string
	// Rate limits; zero values take the defaults: pings 1 per second per
	// pinged URL in bursts of 10, the admin API 20 per second per client
	// IP in bursts of 40.
	PingRate   float64
	PingBurst  int
	AdminRate  float64
	AdminBurst int
	// Pings are also limited per host (and port) of the pinged URL, so
	// that varying the path or the query does not multiply the pings one
	// origin draws; default 10 per second in bursts of 100.
	PingHostRate  float64
	PingHostBurst int
	// Subscription requests (WebSub subscribe and unsubscribe, GetPingd
	// subscribe, rssCloud pleaseNotify, CNWS subscribe), each of which
	// makes pingd call a URL the client chose, are limited per client IP;
	// default 10 per second in bursts of 100.
	SubscribeRate  float64
	SubscribeBurst int
	// A subscription request naming a URL no node follows creates an
	// implicit node, which costs a token of the client IP's bucket of new
	// implicit nodes; default 300 an hour, all at once if need be (the
	// burst, when zero, is an hour's worth).
	ImplicitNodesPerHour float64
	ImplicitNodeBurst    int
	// PollInterval is the poll interval of sources that give no hint,
	// shown on the status page with the fetch loop's other limits (the
	// scheduler's, not the hub's; zero: not shown).
	PollInterval time.Duration
	// GetPingd XMPP consumer (whitelist) requests take a token of the
	// client's subscription bucket and, unless they carry the node's or
	// the admin token, one of the node's own bucket; default 1 per second
	// in bursts of 20 per node.
	WhitelistNodeRate  float64
	WhitelistNodeBurst int
	// Readers of the ping lists (changes.xml, shortChanges.xml, the hourly
	// archives) are limited per client IP; default 1 per second in bursts
	// of 20.
	ListRate  float64
	ListBurst int
	// RelayTargets names the ping servers accepted pings are relayed to
	// (the relay is a ping listener of the hub), for GET /api/relay.
	RelayTargets []string
	// CloudProtocol is the protocol the node feeds' <cloud> element
	// advertises for registrations: "http-post" (the REST /pleaseNotify,
	// default), "xml-rpc" or "soap" (both on /RPC2).
	CloudProtocol string
	// Resolver, when set, turns a page URL given where a feed is expected
	// (a node's source) into the page's feed.
	Resolver hub.SourceResolver
	// CheckHost, when set, is asked about the host of each URL pingd is
	// asked to fetch or call back (node sources, topics, callbacks) before
	// the request is stored; when it answers netguard.ErrRefused the
	// request is refused with a message saying why. cmd/pingd sets it to
	// netguard.CheckHost unless private addresses are allowed. nil: no
	// early check (the dial-time guard still refuses the connection).
	CheckHost func(ctx context.Context, host string) error
	// WebSubLeases bounds WebSub leases; zero fields take the defaults
	// (10 days, clamped to 5 minutes … 30 days).
	WebSubLeases LeaseLimits
	// TrustedProxies are the reverse proxies whose forwarding headers
	// (Forwarded, X-Forwarded-For) name the client (clientaddr.go); none:
	// the client is always the TCP peer and the headers are ignored.
	TrustedProxies []netip.Prefix
	// ObservePing, when set, is told of every ping: its dialect and
	// outcome (PingAccepted, PingRefused, PingRateLimited, PingError),
	// for /metrics (pingmetrics.go).
	ObservePing func(dialect, outcome string)
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes   = 1 << 20
	DefaultPingRate       = 1
	DefaultPingBurst      = 10
	DefaultAdminRate      = 20
	DefaultAdminBurst     = 40
	DefaultSubscribeRate  = 10
	DefaultSubscribeBurst = 100
	DefaultPingHostRate   = 10
	DefaultPingHostBurst  = 100
	DefaultListRate       = 1
	// A feed reader moving its subscriptions to pingd brings hundreds of
	// URLs at once, and a hub test suite one new topic per test: 300 an
	// hour, an hour's worth at once. What bounds the database is the cap
	// on all implicit nodes (hub.DefaultMaxImplicitNodes), whoever asks.
	DefaultImplicitNodesPerHour = 300
	DefaultListBurst            = 20
	// A node's consumers ask one at a time; a burst of 20 lets a crowd
	// arriving together through.
	DefaultWhitelistNodeRate  = 1
	DefaultWhitelistNodeBurst = 20
)

// API is pingd's HTTP handler.
type API struct {
	cfg       Config
	hub       *hub.Hub
	log       *slog.Logger
	publicURL string
	router    *mux.Router

	pingLimit     *ratelimit.Keyed
	pingHostLimit *ratelimit.Keyed
	adminLimit    *ratelimit.Keyed
	subLimit      *ratelimit.Keyed
	listLimit     *ratelimit.Keyed
	// implicitLimit: new implicit nodes per client IP (ratelimit.go).
	implicitLimit *ratelimit.Keyed
	// nodeSubLimit: GetPingd XMPP consumer requests without a valid
	// token, per node (ratelimit.go).
	nodeSubLimit *ratelimit.Keyed

	// lists keeps the readings of the ping lists (lists.go).
	lists *listCache
	// opml keeps the rendering of GET /opml and its readers' buckets (opml.go).
	opml *opmlList
	// status keeps the status page's readings of the store (status.go).
	status statusCache

	rpcMu sync.RWMutex
	rpc   map[string]RPCMethod
}

// New returns the API with every route installed.
func New(cfg Config) (*API, error) {
	if cfg.Hub == nil {
		return nil, errors.New("httpapi: no hub")
	}
	if cfg.Store == nil {
		return nil, errors.New("httpapi: no store")
	}
	u, err := url.Parse(cfg.PublicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("httpapi: public URL %q is not an absolute http(s) URL", cfg.PublicURL)
	}
	switch cfg.CloudProtocol {
	case "":
		cfg.CloudProtocol = "http-post"
	case "http-post", "xml-rpc", "soap":
	default:
		return nil, fmt.Errorf("httpapi: rssCloud protocol %q: want http-post, xml-rpc or soap", cfg.CloudProtocol)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.PingRate <= 0 {
		cfg.PingRate = DefaultPingRate
	}
	if cfg.PingBurst <= 0 {
		cfg.PingBurst = DefaultPingBurst
	}
	if cfg.AdminRate <= 0 {
		cfg.AdminRate = DefaultAdminRate
	}
	if cfg.AdminBurst <= 0 {
		cfg.AdminBurst = DefaultAdminBurst
	}
	if cfg.SubscribeRate <= 0 {
		cfg.SubscribeRate = DefaultSubscribeRate
	}
	if cfg.SubscribeBurst <= 0 {
		cfg.SubscribeBurst = DefaultSubscribeBurst
	}
	if cfg.PingHostRate <= 0 {
		cfg.PingHostRate = DefaultPingHostRate
	}
	if cfg.PingHostBurst <= 0 {
		cfg.PingHostBurst = DefaultPingHostBurst
	}
	if cfg.WhitelistNodeRate <= 0 {
		cfg.WhitelistNodeRate = DefaultWhitelistNodeRate
	}
	if cfg.WhitelistNodeBurst <= 0 {
		cfg.WhitelistNodeBurst = DefaultWhitelistNodeBurst
	}
	if cfg.ImplicitNodesPerHour <= 0 {
		cfg.ImplicitNodesPerHour = DefaultImplicitNodesPerHour
	}
	if cfg.ImplicitNodeBurst <= 0 {
		cfg.ImplicitNodeBurst = max(1, int(cfg.ImplicitNodesPerHour))
	}
	if cfg.ListRate <= 0 {
		cfg.ListRate = DefaultListRate
	}
	if cfg.ListBurst <= 0 {
		cfg.ListBurst = DefaultListBurst
	}
	a := &API{
		cfg:           cfg,
		hub:           cfg.Hub,
		log:           cfg.Logger.With("component", "http"),
		publicURL:     strings.TrimRight(cfg.PublicURL, "/"),
		pingLimit:     ratelimit.New(cfg.PingRate, cfg.PingBurst),
		pingHostLimit: ratelimit.New(cfg.PingHostRate, cfg.PingHostBurst),
		adminLimit:    ratelimit.New(cfg.AdminRate, cfg.AdminBurst),
		subLimit:      ratelimit.New(cfg.SubscribeRate, cfg.SubscribeBurst),
		listLimit:     ratelimit.New(cfg.ListRate, cfg.ListBurst),
		nodeSubLimit:  ratelimit.New(cfg.WhitelistNodeRate, cfg.WhitelistNodeBurst),
		implicitLimit: ratelimit.New(cfg.ImplicitNodesPerHour/3600, cfg.ImplicitNodeBurst),
		lists:         newListCache(),
		opml:          newOPMLList(cfg.ListRate, cfg.ListBurst),
		rpc:           map[string]RPCMethod{},
	}
	a.router = mux.NewRouter()
	// Node names are one percent-encoded path segment ("feeds%2Fdemo"), so
	// routes match the encoded path and handlers unescape the variables.
	// Paths are not cleaned: "." and ".." are valid node names.
	a.router.UseEncodedPath()
	a.router.SkipClean(true)
	a.router.NotFoundHandler = http.HandlerFunc(a.notFound)
	a.router.MethodNotAllowedHandler = http.HandlerFunc(a.methodNotAllowed)
	a.routes()
	return a, nil
}

// routes installs every area's routes. Each area keeps its routes in its
// own file; add a line here for a new one. Routes are matched in order, so
// a catch-all (the status page "/") must come last.
func (a *API) routes() {
	r := a.router
	a.healthRoutes(r)
	a.adminRoutes(r)
	a.pingRoutes(r)
	a.rpcRoutes(r)
	a.changesRoutes(r)
	a.opmlRoutes(r)
	a.getPingdRoutes(r)
	a.nodeFeedRoutes(r)
	a.rssCloudRoutes(r)
	a.cnwsRoutes(r)
	a.webSubRoutes(r)
	a.statusRoutes(r)
}

// Router gives access to the router, to add routes from outside the package.
func (a *API) Router() *mux.Router { return a.router }

// ServeHTTP logs every request at debug level and dispatches it.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	r = a.withClient(r)
	if r.Header.Get(weblogs.RelayHeader) != "" {
		// Relayed by a pingd: never relayed again (the loop guard).
		r = r.WithContext(context.WithValue(r.Context(), relayedKey{}, true))
	}
	rec := &statusRecorder{ResponseWriter: w}
	a.router.ServeHTTP(rec, r)
	if a.log.Enabled(r.Context(), slog.LevelDebug) {
		// The query string is left out: it may carry secrets of protocols
		// added later; headers (Authorization) are never logged.
		a.log.DebugContext(r.Context(), "http request",
			"method", r.Method,
			"path", r.URL.EscapedPath(),
			"status", rec.status(),
			"bytes", rec.bytes,
			"duration", time.Since(start),
			"remote", clientIP(r),
			"user_agent", r.UserAgent())
	}
}

// statusRecorder remembers the status and size of a response for the
// access log.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	bytes int64
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

func (s *statusRecorder) status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}

// Unwrap lets http.ResponseController reach the real writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// isAdminPath says whether r is under /api/, where every answer but the
// rate limit's needs the admin token, misses included: a 404 or 405
// without it would tell strangers which admin routes exist.
func isAdminPath(r *http.Request) bool {
	return r.URL.Path == "/api" || strings.HasPrefix(r.URL.Path, "/api/")
}

func (a *API) notFound(w http.ResponseWriter, r *http.Request) {
	if isAdminPath(r) {
		a.admin(func(w http.ResponseWriter, r *http.Request) {
			writeJSONError(w, http.StatusNotFound, "not found: "+r.URL.EscapedPath())
		}).ServeHTTP(w, r)
		return
	}
	writeText(w, http.StatusNotFound, "not found: "+r.URL.EscapedPath())
}

// methodNotAllowed answers 405 with the Allow header listing the methods
// the path's routes accept.
func (a *API) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	if isAdminPath(r) {
		a.admin(a.allowedMethods).ServeHTTP(w, r)
		return
	}
	a.allowedMethods(w, r)
}

func (a *API) allowedMethods(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	_ = a.router.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		var m mux.RouteMatch
		if route.Match(r, &m) || errors.Is(m.MatchErr, mux.ErrMethodMismatch) {
			if methods, err := route.GetMethods(); err == nil {
				allowed = append(allowed, methods...)
			}
		}
		return nil
	})
	slices.Sort(allowed)
	allowed = slices.Compact(allowed)
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	msg := "method " + r.Method + " not allowed; allowed: " + strings.Join(allowed, ", ")
	if isAdminPath(r) {
		writeJSONError(w, http.StatusMethodNotAllowed, msg)
		return
	}
	writeText(w, http.StatusMethodNotAllowed, msg)
}

// pathVar returns the unescaped route variable; ok is false when it is not
// a valid percent-encoding.
func pathVar(r *http.Request, name string) (string, bool) {
	v, err := url.PathUnescape(mux.Vars(r)[name])
	return v, err == nil
}

// limitBody caps the request body at MaxBodyBytes. It reports false, after
// answering 413 with the given writer, when the declared length is already
// too large.
func (a *API) limitBody(w http.ResponseWriter, r *http.Request, tooLarge func(msg string)) bool {
	if r.ContentLength > a.cfg.MaxBodyBytes {
		tooLarge(a.tooLargeMessage())
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes)
	return true
}

func (a *API) tooLargeMessage() string {
	return fmt.Sprintf("request body larger than %d bytes", a.cfg.MaxBodyBytes)
}

// isTooLarge reports whether err came from reading past the body cap.
func isTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

func writeText(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, msg)
}

// setRetryAfter sets Retry-After in whole seconds, at least one.
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", ratelimit.RetryAfter(d))
}

// nodeURL is the public URL of a node's resource under prefix ("feeds",
// "xrds", "atom", "rss").
func (a *API) nodeURL(prefix, node string) string {
	return a.publicURL + "/" + prefix + "/" + url.PathEscape(node)
}

// relayedKey marks the context of a request another pingd relayed.
type relayedKey struct{}
