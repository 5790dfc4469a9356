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
	"time"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/internal/ratelimit"
	"github.com/pingd/pingd/internal/weblogs"
)

// Defaults of the handlers' configs.
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

// Area is one handler's set of routes, mounted by the Router.
type Area interface {
	// Routes installs the area's routes on r.
	Routes(r *mux.Router)
}

// RouterConfig configures the Router.
type RouterConfig struct {
	Logger *slog.Logger
	// TrustedProxies are the reverse proxies whose forwarding headers
	// (Forwarded, X-Forwarded-For) name the client (clientaddr.go); none:
	// the client is always the TCP peer and the headers are ignored.
	TrustedProxies []netip.Prefix
	// Admin answers the misses under /api/ (404 and 405), which tell
	// strangers nothing without the admin token; required.
	Admin *AdminGate
}

// Router is pingd's HTTP handler: it finds each request's client, marks
// relayed pings, logs, and dispatches to the areas mounted on it.
type Router struct {
	log     *slog.Logger
	clients clientResolver
	admin   *AdminGate
	mux     *mux.Router
}

// NewRouter mounts the areas in the order given (gorilla/mux matches
// routes in order).
func NewRouter(cfg RouterConfig, areas ...Area) (*Router, error) {
	if cfg.Admin == nil {
		return nil, errors.New("httpapi: router: no admin gate")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	rt := &Router{
		log:     cfg.Logger.With("component", "http"),
		clients: clientResolver{proxies: cfg.TrustedProxies},
		admin:   cfg.Admin,
		mux:     mux.NewRouter(),
	}
	// Node names are one percent-encoded path segment ("feeds%2Fdemo"), so
	// routes match the encoded path and handlers unescape the variables.
	// Paths are not cleaned: "." and ".." are valid node names.
	rt.mux.UseEncodedPath()
	rt.mux.SkipClean(true)
	rt.mux.NotFoundHandler = http.HandlerFunc(rt.notFound)
	rt.mux.MethodNotAllowedHandler = http.HandlerFunc(rt.methodNotAllowed)
	for _, a := range areas {
		if a == nil {
			return nil, errors.New("httpapi: router: a nil area")
		}
		a.Routes(rt.mux)
	}
	return rt, nil
}

// Mux gives access to the router, to add routes from outside the package
// (/metrics, the upstream callbacks).
func (rt *Router) Mux() *mux.Router { return rt.mux }

// ServeHTTP logs every request at debug level and dispatches it.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	r = rt.clients.withClient(r)
	if r.Header.Get(weblogs.RelayHeader) != "" {
		// Relayed by a pingd: never relayed again (the loop guard).
		r = r.WithContext(context.WithValue(r.Context(), relayedKey{}, true))
	}
	rec := &statusRecorder{ResponseWriter: w}
	rt.mux.ServeHTTP(rec, r)
	if rt.log.Enabled(r.Context(), slog.LevelDebug) {
		// The query string is left out: it may carry secrets of protocols
		// added later; headers (Authorization) are never logged.
		rt.log.DebugContext(r.Context(), "http request",
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

func (rt *Router) notFound(w http.ResponseWriter, r *http.Request) {
	if isAdminPath(r) {
		rt.admin.wrap(func(w http.ResponseWriter, r *http.Request) {
			writeJSONError(w, http.StatusNotFound, "not found: "+r.URL.EscapedPath())
		}).ServeHTTP(w, r)
		return
	}
	writeText(w, http.StatusNotFound, "not found: "+r.URL.EscapedPath())
}

// methodNotAllowed answers 405 with the Allow header listing the methods
// the path's routes accept.
func (rt *Router) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	if isAdminPath(r) {
		rt.admin.wrap(rt.allowedMethods).ServeHTTP(w, r)
		return
	}
	rt.allowedMethods(w, r)
}

func (rt *Router) allowedMethods(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	_ = rt.mux.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
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

// relayedKey marks the context of a request another pingd relayed.
type relayedKey struct{}
