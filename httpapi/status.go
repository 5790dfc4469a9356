package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/store"
)

// The status page at "/": one server-rendered HTML document with its CSS
// inline, for an operator wondering whether something is wrong. It needs no
// JavaScript and loads nothing else; its Content-Security-Policy allows
// exactly its own style sheet (by hash) and nothing more.
//
// It reads the store twice per view, whatever the number of nodes, sources
// and subscribers: Check (is the database answering) and StatusReport (a
// fixed set of queries, every list capped, the worst rows first).
//
// "/?admin=1" adds what only the operator may see: subscriber addresses,
// callback URLs, error messages (they quote URLs) and the addresses pings
// came from. It takes the admin token as a Bearer token or as the password
// of HTTP Basic (what a browser can send by itself) and answers 401 with a
// Basic challenge without it. The plain page never asks for credentials and
// ignores any it is sent.

//go:embed templates/status.html templates/status.css
var statusFiles embed.FS

var (
	statusTemplate = template.Must(template.New("status.html").ParseFS(statusFiles, "templates/status.html"))
	// statusCSS is inserted verbatim into the page's <style> element;
	// statusCSP allows that element by the hash of its content.
	statusCSS = mustRead(statusFiles, "templates/status.css")
	statusCSP = "default-src 'none'; style-src '" + cspHash(statusCSS) + "'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

// processStart approximates when pingd started, for the uptime.
var processStart = time.Now()

const (
	// statusListLimit caps each list of the page.
	statusListLimit = 100
	// statusPingWindow is how far back the page lists pings.
	statusPingWindow = time.Hour
	// statusLateAfter is how long past its due time a fetch must be to
	// count as late: the fetcher is not keeping up.
	statusLateAfter = 5 * time.Minute
	// statusTimeout bounds the database work of one view.
	statusTimeout = 10 * time.Second
	// statusMaxText caps error messages and titles on the page.
	statusMaxText = 300
)

// statusStore is what the page needs beyond Store; the store package's
// stores provide it.
type statusStore interface {
	Backend() string
	StatusReport(ctx context.Context, q store.StatusQuery) (*store.StatusReport, error)
}

func (a *API) statusRoutes(r *mux.Router) {
	r.HandleFunc("/", a.statusPage).Methods(http.MethodGet, http.MethodHead)
}

func (a *API) statusPage(w http.ResponseWriter, r *http.Request) {
	// Every view runs a few queries: the page shares the admin API's
	// per-client limit, taken before the admin token is looked at.
	if ok, wait := a.adminLimit.Allow(clientIP(r), time.Now()); !ok {
		setRetryAfter(w, wait)
		writeText(w, http.StatusTooManyRequests, "too many requests; retry later")
		return
	}
	admin := r.URL.Query().Get("admin") == "1"
	if admin && !a.statusAdmin(w, r) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
	defer cancel()
	view := a.statusView(ctx, admin)
	var body bytes.Buffer
	if err := statusTemplate.Execute(&body, view); err != nil {
		a.log.ErrorContext(r.Context(), "render status page", "err", err)
		writeText(w, http.StatusInternalServerError, "the status page cannot be rendered right now")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", statusCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Vary", "Authorization")
	h.Set("Content-Length", strconv.Itoa(body.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body.Bytes())
	}
}

// statusAdmin checks the admin token of "/?admin=1", answering 401 itself
// when the request may not see the admin view.
func (a *API) statusAdmin(w http.ResponseWriter, r *http.Request) bool {
	token, ok := bearerToken(r)
	if !ok {
		_, token, ok = r.BasicAuth()
	}
	if !ok || !a.hub.IsAdminToken(token) {
		w.Header().Set("WWW-Authenticate", `Basic realm="pingd"`)
		w.Header().Set("Cache-Control", "no-store")
		writeText(w, http.StatusUnauthorized, "the admin view of the status page needs the admin token, "+
			"as the password of HTTP Basic (any user name) or as a Bearer token")
		return false
	}
	return true
}

// statusView gathers what the page shows. Failures are shown on the page,
// not answered with an error status: the page is most needed when
// something is broken.
func (a *API) statusView(ctx context.Context, admin bool) *statusPageView {
	now := a.hub.Now()
	v := &statusPageView{
		Admin:        admin,
		CSS:          template.CSS(statusCSS),
		Now:          timeOf(now, now),
		Version:      a.cfg.Version,
		Uptime:       compactDuration(time.Since(processStart)),
		Started:      timeOf(processStart, now),
		ComponentJID: a.cfg.ComponentJID,
		Connected:    a.cfg.Ready != nil && a.cfg.Ready(),
		Kinds:        hub.Kinds,
		Limit:        statusListLimit,
		LateAfter:    compactDuration(statusLateAfter),
	}
	if v.Version == "" {
		v.Version = "dev"
	}
	st := a.cfg.Store
	ss, hasReport := st.(statusStore)
	if hasReport {
		v.Backend = ss.Backend()
	}
	checkCtx, cancel := context.WithTimeout(ctx, healthCheckTimeout)
	err := st.Check(checkCtx)
	cancel()
	switch {
	case err != nil:
		a.log.WarnContext(ctx, "status page: store does not answer", "err", err)
		v.StoreError = a.statusErr(admin, err)
	case !hasReport:
		v.ReportError = "this store does not report statistics"
	default:
		rep, err := ss.StatusReport(ctx, store.StatusQuery{
			Limit:       statusListLimit,
			PingsSince:  now.Add(-statusPingWindow),
			LateBefore:  now.Add(-statusLateAfter),
			Subscribers: admin,
			Now:         now,
		})
		if err != nil {
			a.log.ErrorContext(ctx, "status page: status report", "err", err)
			v.ReportError = a.statusErr(admin, err)
		} else {
			v.fill(rep, now)
		}
	}
	v.Fetch = a.fetchView()
	v.Problems = v.problems()
	return v
}

// fetchView is the fetch loop's limits and this process's share of its
// load, from the hub (no query).
func (a *API) fetchView() fetchLimitsView {
	lim, load := a.hub.FetchLimits(), a.hub.FetchLoad()
	v := fetchLimitsView{Workers: lim.Workers, PerHost: lim.PerHost, Spacing: "none",
		Running: load.Running, WaitingForHost: load.WaitingForHost, HostsPaused: load.HostsPaused}
	if lim.HostSpacing > 0 {
		v.Spacing = lim.HostSpacing.String()
	}
	if a.cfg.PollInterval > 0 {
		v.Interval = compactDuration(a.cfg.PollInterval)
	}
	return v
}

// statusErr is an error as the page shows it: in full to an admin, and
// only as "see the log" to everyone else.
func (a *API) statusErr(admin bool, err error) string {
	if admin {
		return clip(redactText(err.Error()))
	}
	return "details are in pingd's log and the admin view"
}

// redactURL hides the password of a URL with user information; other
// strings pass unchanged.
func redactURL(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return redactText(s)
	}
	return u.Redacted()
}

// userinfoPassword matches the password of "scheme://user:password@" in
// free text such as error messages.
var userinfoPassword = regexp.MustCompile(`(?i)([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^@\s/]*@`)

// redactText hides passwords of URLs quoted in s.
func redactText(s string) string {
	return userinfoPassword.ReplaceAllString(s, "${1}xxxxx@")
}

func mustRead(fsys embed.FS, name string) string {
	b, err := fsys.ReadFile(name)
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	return string(b)
}

// cspHash is the CSP source expression allowing an inline element whose
// content is s.
func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}
