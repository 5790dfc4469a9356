package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pingd/pingd/hub"
)

// The status page at "/": one server-rendered HTML document with its CSS
// inline, for an operator wondering whether something is wrong. It needs no
// JavaScript and loads nothing else; its Content-Security-Policy allows
// exactly its own style sheet (by hash) and nothing more.
//
// It reads the store twice per reading, whatever the number of nodes,
// sources and subscribers: Check (is the database answering) and
// StatusReport (a fixed set of queries, every list capped, the worst rows
// first). A reading serves every view of its kind for statusCacheFor
// (statusCache), so a crowd of viewers costs what one does.
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

func (a *Pages) statusPage(w http.ResponseWriter, r *http.Request) {
	// Every view runs a few queries: the page shares the admin API's
	// per-client limit, taken before the admin token is looked at.
	if ok, wait := a.gate.allow(r); !ok {
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
func (a *Pages) statusAdmin(w http.ResponseWriter, r *http.Request) bool {
	token, ok := bearerToken(r)
	if !ok {
		_, token, ok = r.BasicAuth()
	}
	if !ok || !a.gate.tokens.IsAdminToken(token) {
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
func (a *Pages) statusView(ctx context.Context, admin bool) *statusPageView {
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
	v.Backend = a.store.Backend()
	rd, err := a.status.get(ctx, admin, a.hub.Now, a.readStatus)
	if err != nil {
		// This viewer gave up waiting for the reading under way.
		v.ReportError = a.statusErr(admin, err)
	} else {
		// The page shows the reading's time: up to statusCacheFor old.
		now = rd.at
		v.Now = timeOf(now, now)
		switch {
		case rd.checkErr != nil:
			v.StoreError = a.statusErr(admin, rd.checkErr)
		case rd.reportErr != nil:
			v.ReportError = a.statusErr(admin, rd.reportErr)
		default:
			v.fill(rd.report, now)
		}
	}
	v.Fetch = a.fetchView()
	v.Problems = v.problems()
	return v
}

// statusCacheFor is how long one reading of the store serves the page:
// the report runs about eight whole-table aggregates, so views in a burst
// (many viewers, one reloading in a loop from many addresses) share one
// reading, and the store does one report per statusCacheFor per view kind
// (public, admin) whatever the number of viewers. Five seconds of
// staleness go unnoticed on a page an operator reads.
const statusCacheFor = 5 * time.Second

// statusReading is what the store said for one view kind at one time.
type statusReading struct {
	at        time.Time
	checkErr  error
	report    *hub.StatusReport // nil after an error
	reportErr error
}

// statusCache keeps the latest reading of each view kind and lets one
// reading run at a time per kind: viewers arriving while one runs wait for
// it rather than starting their own.
type statusCache struct {
	mu    sync.Mutex
	kinds [2]statusCacheEntry // public, admin
}

type statusCacheEntry struct {
	last *statusReading
	// running is closed when the reading under way ends; nil when none is.
	running chan struct{}
}

// get returns a reading for the view kind no older than statusCacheFor by
// now(), running read when there is none. The reading runs on the
// first viewer's goroutine but not under its cancellation, since others
// may be waiting for it; read bounds it itself. A viewer whose context
// ends while it waits gets the context's error.
func (c *statusCache) get(ctx context.Context, admin bool, now func() time.Time,
	read func(ctx context.Context, admin bool, now time.Time) *statusReading) (*statusReading, error) {
	i := 0
	if admin {
		i = 1
	}
	c.mu.Lock()
	e := &c.kinds[i]
	t := now()
	if e.last != nil && !t.Before(e.last.at) && t.Sub(e.last.at) < statusCacheFor {
		rd := e.last
		c.mu.Unlock()
		return rd, nil
	}
	if wait := e.running; wait != nil {
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if e.last == nil {
			return nil, errors.New("the status reading did not finish")
		}
		return e.last, nil
	}
	done := make(chan struct{})
	e.running = done
	c.mu.Unlock()
	var rd *statusReading
	defer func() {
		c.mu.Lock()
		if rd != nil {
			e.last = rd
		}
		e.running = nil
		c.mu.Unlock()
		close(done)
	}()
	rd = read(context.WithoutCancel(ctx), admin, t)
	return rd, nil
}

// readStatus reads what the page shows from the store: Check, then the
// report (StatusStore.StatusReport).
func (a *Pages) readStatus(ctx context.Context, admin bool, now time.Time) *statusReading {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	rd := &statusReading{at: now}
	checkCtx, cancelCheck := context.WithTimeout(ctx, healthCheckTimeout)
	rd.checkErr = a.store.Check(checkCtx)
	cancelCheck()
	if rd.checkErr != nil {
		a.log.WarnContext(ctx, "status page: store does not answer", "err", rd.checkErr)
		return rd
	}
	rd.report, rd.reportErr = a.store.StatusReport(ctx, hub.StatusQuery{
		Limit:       statusListLimit,
		PingsSince:  now.Add(-statusPingWindow),
		LateBefore:  now.Add(-statusLateAfter),
		Subscribers: admin,
		Now:         now,
	})
	if rd.reportErr != nil {
		a.log.ErrorContext(ctx, "status page: status report", "err", rd.reportErr)
		rd.report = nil
	}
	return rd
}

// fetchView is the fetch loop's limits and this process's share of its
// load, from the hub (no query).
func (a *Pages) fetchView() fetchLimitsView {
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
func (a *Pages) statusErr(admin bool, err error) string {
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
