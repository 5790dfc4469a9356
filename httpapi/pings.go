package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/rsscloud"
	"github.com/pingd/pingd/internal/weblogs"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// Dialects recorded with each ping (hub.Ping.Dialect): the weblog pings'
// are internal/weblogs', which the relay and the homepage look-ups (ping
// listeners) know them by.
const (
	DialectWeblogUpdates = weblogs.DialectWeblogUpdates
	DialectExtendedPing  = weblogs.DialectExtendedPing
	DialectRSSCloud      = weblogs.DialectRSSCloud
	DialectREST          = weblogs.DialectREST
	DialectForm          = weblogs.DialectForm
)

// PingsHub is what the weblog pings ask of the hub.
type PingsHub interface {
	Ping(ctx context.Context, p hub.Ping, urls []string, note *hub.ChangeNote) (int, error)
}

// PingsConfig configures the weblog pings.
type PingsConfig struct {
	Site
	Hub PingsHub
	// RPC is the XML-RPC endpoint the ping methods are added to; an XML
	// body posted to /ping is answered there too.
	RPC    *RPC
	Limits *PingLimits
	// ObservePing, when set, is told of every ping: its dialect and
	// outcome (PingAccepted, PingRefused, PingRateLimited, PingError),
	// for /metrics (pingmetrics.go).
	ObservePing func(dialect, outcome string)
}

// Pings are the weblog pings: weblogUpdates.ping, extendedPing and
// rssCloud.ping over XML-RPC (and rssCloud.ping over SOAP), the REST ping
// at POST /ping and the HTTP GET pings (/ping, /pingSiteForm).
type Pings struct {
	site
	hub     PingsHub
	rpc     *RPC
	limits  *PingLimits
	observe pingObserver
}

// NewPings returns the weblog pings and adds their methods to cfg.RPC.
func NewPings(cfg PingsConfig) (*Pings, error) {
	s, err := newSite("pings", cfg.Site)
	if err != nil {
		return nil, err
	}
	if cfg.Hub == nil || cfg.RPC == nil || cfg.Limits == nil {
		return nil, errors.New("httpapi: pings: no hub, XML-RPC endpoint or ping limits")
	}
	a := &Pings{site: s, hub: cfg.Hub, rpc: cfg.RPC, limits: cfg.Limits, observe: cfg.ObservePing}
	a.rpc.Handle(weblogs.MethodPing, a.rpcWeblogUpdatesPing)
	a.rpc.Handle(weblogs.MethodExtendedPing, a.rpcExtendedPing)
	a.rpc.Handle("rssCloud.ping", a.rpcRSSCloudPing)
	return a, nil
}

// Routes installs the REST and HTTP GET pings (the XML-RPC ones are on
// the RPC's /RPC2).
func (a *Pings) Routes(r *mux.Router) {
	r.HandleFunc("/ping", a.restPing).Methods(http.MethodPost)
	r.HandleFunc("/ping", a.getPing).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/pingSiteForm", a.formPing).Methods(http.MethodGet, http.MethodHead)
}

// pingQueueRetry is the Retry-After of a ping refused because the hub's
// queue of pings answered before their commit is full
// (hub.ErrPingQueueFull): the queue drains within milliseconds.
const pingQueueRetry = time.Second

// errPingNotStored marks a ping the hub could not record: it must not be
// acknowledged.
var errPingNotStored = errors.New("the ping could not be recorded")

// ping takes a token from the pinged URL's bucket and records the ping:
// p.URL is the URL recorded (urls[0] when empty), every one of urls is
// matched against the known sources. It returns how many sources will be
// fetched.
func (a *Pings) ping(ctx context.Context, p hub.Ping, urls []string) (n int, err error) {
	defer func() { a.observe.count(p.Dialect, err) }()
	if len(p.Name) > weblogs.MaxNameBytes {
		return 0, fmt.Errorf("%w: the weblog name is longer than %d bytes", hub.ErrInvalid, weblogs.MaxNameBytes)
	}
	if !utf8.ValidString(p.Name) {
		return 0, fmt.Errorf("%w: the weblog name is not valid UTF-8", hub.ErrInvalid)
	}
	key, err := hub.CanonicalURL(urls[0])
	if err != nil {
		return 0, err
	}
	if limited := a.limits.allowCanonical(key); limited != nil {
		return 0, limited
	}
	// A ping another pingd relayed is not relayed again (the loop guard).
	p.Relayed = ctx.Value(relayedKey{}) != nil
	n, err = a.hub.Ping(ctx, p, urls, nil)
	if err != nil {
		if errors.Is(err, hub.ErrInvalid) {
			return 0, err
		}
		if errors.Is(err, hub.ErrPingQueueFull) {
			return 0, &RateLimitError{RetryAfter: pingQueueRetry, Status: http.StatusServiceUnavailable, What: err.Error()}
		}
		a.log.ErrorContext(ctx, "ping not recorded", "dialect", p.Dialect, "url", urls[0], "err", err)
		return 0, fmt.Errorf("%w: %w", errPingNotStored, err)
	}
	a.log.InfoContext(ctx, "ping", "dialect", p.Dialect, "url", urls[0], "remote", p.Remote, "sources", n)
	return n, nil
}

func pingThanks(sources int) string {
	switch sources {
	case 0:
		return "Thanks for the ping."
	case 1:
		return "Thanks for the ping: 1 followed source will be fetched."
	}
	return fmt.Sprintf("Thanks for the ping: %d followed sources will be fetched.", sources)
}

// weblogUpdatesAnswer turns a ping's outcome into the {flerror, message}
// struct; only a rate limit stays an error (HTTP 429).
func weblogUpdatesAnswer(sources int, err error) (any, error) {
	var limited *RateLimitError
	switch {
	case err == nil && sources == 0:
		return thanksAnswer(), nil
	case err == nil:
		return weblogs.Answer(false, pingThanks(sources)), nil
	case errors.As(err, &limited):
		return nil, err
	case errors.Is(err, errPingNotStored):
		return weblogs.Answer(true, "The ping could not be recorded; please try again later."), nil
	}
	return weblogs.Answer(true, err.Error()), nil
}

// thanksAnswer is the answer of most weblogUpdates pings, those naming no
// followed source, encoded once.
var thanksAnswer = sync.OnceValue(func() any {
	answer := weblogs.Answer(false, pingThanks(0))
	b, err := xmlrpc.MarshalResponse(answer)
	if err != nil {
		return answer
	}
	return rpcEncoded(b)
})

// rpcWeblogUpdatesPing is weblogUpdates.ping(name, url): url is the site
// or the feed; both are matched against the known sources.
func (a *Pings) rpcWeblogUpdatesPing(ctx context.Context, req *RPCRequest) (any, error) {
	if err := wantParams(req, 2, 2, "(name, url)"); err != nil {
		return nil, err
	}
	name, err := stringParam(req, 0, "name")
	if err != nil {
		return nil, err
	}
	u, err := stringParam(req, 1, "url")
	if err != nil {
		return nil, err
	}
	n, err := a.ping(ctx, hub.Ping{Dialect: DialectWeblogUpdates, Name: name, Remote: req.Remote}, []string{strings.TrimSpace(u)})
	return weblogUpdatesAnswer(n, err)
}

// rpcExtendedPing is weblogUpdates.extendedPing(name, url, changesUrl,
// feedUrl[, tags]). feedUrl is the source; url and changesUrl are only
// matched against the known sources and their sites, and are skipped when
// they are not URLs. The ping is recorded as weblogs.com listed it: url
// (feedUrl when url is not a URL) with feedUrl as its rssUrl. The tags
// ('|'-separated) are stored with the ping: changes.xml and the archives
// filter by them.
// The three-parameter form (name, url, feedUrl) that WordPress sends is
// taken too, so that it need not fall back to weblogUpdates.ping.
func (a *Pings) rpcExtendedPing(ctx context.Context, req *RPCRequest) (any, error) {
	if err := wantParams(req, 3, 5, "(name, url, changesUrl, feedUrl[, tags]) or (name, url, feedUrl)"); err != nil {
		return nil, err
	}
	names := []string{"name", "url", "changesUrl", "feedUrl", "tags"}
	if len(req.Params) == 3 {
		names = []string{"name", "url", "feedUrl"}
	}
	var s [5]string
	for i, name := range names[:len(req.Params)] {
		v, err := stringParam(req, i, name)
		if err != nil {
			return nil, err
		}
		s[i] = strings.TrimSpace(v)
	}
	if len(req.Params) == 3 {
		s[3], s[2] = s[2], ""
	}
	name, site, changes, feed := s[0], s[1], s[2], s[3]
	if err := hub.ValidURL(feed); err != nil {
		return weblogUpdatesAnswer(0, fmt.Errorf("feedUrl: %w", err))
	}
	p := hub.Ping{Dialect: DialectExtendedPing, Name: name, Remote: req.Remote, FeedURL: feed}
	urls := []string{feed}
	for _, u := range []string{site, changes} {
		if u != "" && hub.ValidURL(u) == nil {
			urls = append(urls, u)
		}
	}
	if hub.ValidURL(site) == nil {
		p.URL = site
	}
	tags, err := weblogs.ParseTags(s[4])
	if err != nil {
		return weblogUpdatesAnswer(0, err)
	}
	p.Tags = tags
	n, err := a.ping(ctx, p, urls)
	return weblogUpdatesAnswer(n, err)
}

// rpcRSSCloudPing is rssCloud.ping(url); it answers true once the ping is
// recorded.
func (a *Pings) rpcRSSCloudPing(ctx context.Context, req *RPCRequest) (any, error) {
	if err := wantParams(req, 1, 1, "(url)"); err != nil {
		return nil, err
	}
	u, err := stringParam(req, 0, "url")
	if err != nil {
		return nil, err
	}
	_, err = a.ping(ctx, hub.Ping{Dialect: DialectRSSCloud, Remote: req.Remote}, []string{strings.TrimSpace(u)})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, hub.ErrInvalid):
		return nil, xmlrpc.Errorf(xmlrpc.FaultInvalidParams, "rssCloud.ping: %v", err)
	case errors.Is(err, errPingNotStored):
		return nil, xmlrpc.Errorf(xmlrpc.FaultApplication, "rssCloud.ping: the ping could not be recorded; please try again later")
	}
	return nil, err
}

// restPing is POST /ping with the form fields url and (optional) name.
// An XML body is an XML-RPC call: several ping services took XML-RPC at
// /ping, and clients configured for them post there. The answer is the
// rssCloud REST one, <result success="…" msg="…"/> (or its JSON form for
// Accept: application/json), which the rssCloud clients that post here
// read; a browser, which prefers text/html, gets a page.
func (a *Pings) restPing(w http.ResponseWriter, r *http.Request) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "text/xml" || mt == "application/xml" {
		a.rpc.serveRPC(w, r)
		return
	}
	format := negotiateFormat(r.Header.Get("Accept"), formatXML, formatJSON, formatHTML)
	fail := func(code int, title, msg string) {
		if format == formatHTML {
			w.Header().Add("Vary", "Accept")
			writePingPage(w, code, title, msg, "")
			return
		}
		writeCloudResult(w, format, rsscloud.ElemResult, code, false, msg)
	}
	if !a.limitBody(w, r, func(msg string) { fail(http.StatusRequestEntityTooLarge, "Request too large", msg) }) {
		return
	}
	var err error
	if mt == "multipart/form-data" {
		err = r.ParseMultipartForm(a.maxBody)
	} else {
		err = r.ParseForm()
	}
	if err != nil {
		if isTooLarge(err) {
			fail(http.StatusRequestEntityTooLarge, "Request too large", a.tooLargeMessage())
		} else {
			fail(http.StatusBadRequest, "Bad request", "The form could not be read: "+err.Error())
		}
		return
	}
	if format == formatHTML {
		w.Header().Add("Vary", "Accept")
		a.htmlPing(w, r, DialectREST, r.Form.Get("name"), r.Form.Get("url"))
		return
	}
	a.cloudPing(w, r, format, r.Form.Get("name"), r.Form.Get("url"))
}

// cloudPing records a REST ping and answers it as rssCloud clients
// expect: HTTP 200 with success="true", or with success="false" when the
// url is missing (what rssCloud servers answer); a url that is not one is
// 400, 429 with Retry-After when rate limited, 500 when the ping could not
// be recorded, each with success="false" and why.
func (a *Pings) cloudPing(w http.ResponseWriter, r *http.Request, format, name, rawURL string) {
	answer := func(code int, ok bool, msg string) {
		writeCloudResult(w, format, rsscloud.ElemResult, code, ok, msg)
	}
	rawURL = strings.TrimSpace(rawURL)
	if rawURL == "" {
		answer(http.StatusOK, false, rsscloud.MissingParamsMessage("url"))
		return
	}
	_, err := a.ping(r.Context(), hub.Ping{Dialect: DialectREST, Name: name, Remote: clientIP(r)}, []string{rawURL})
	var limited *RateLimitError
	switch {
	case err == nil:
		answer(http.StatusOK, true, rsscloud.MsgPinged)
	case errors.As(err, &limited):
		setRetryAfter(w, limited.RetryAfter)
		answer(limited.status(), false, "Too many pings: "+limited.What+"; please wait before pinging again.")
	case errors.Is(err, hub.ErrInvalid):
		answer(http.StatusBadRequest, false, err.Error())
	default:
		answer(http.StatusInternalServerError, false, "The ping could not be recorded; please try again later.")
	}
}

// getPing is GET /ping?url=…[&name=…], the HTTP GET ping of the ping
// sinks the RSS Feed State seed lists (/ping?url={0}); it is answered as
// /pingSiteForm is, under the same limits.
func (a *Pings) getPing(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.htmlPing(w, r, DialectREST, q.Get("name"), q.Get("url"))
}

// formPing is GET /pingSiteForm?name=…&url=…, weblogs.com's HTTP ping.
func (a *Pings) formPing(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.htmlPing(w, r, DialectForm, q.Get("name"), q.Get("url"))
}

func (a *Pings) htmlPing(w http.ResponseWriter, r *http.Request, dialect, name, rawURL string) {
	rawURL = strings.TrimSpace(rawURL)
	if rawURL == "" {
		writePingPage(w, http.StatusBadRequest, "Ping refused", "The ping needs a url parameter naming the changed site or feed.", "")
		return
	}
	n, err := a.ping(r.Context(), hub.Ping{Dialect: dialect, Name: name, Remote: clientIP(r)}, []string{rawURL})
	var limited *RateLimitError
	switch {
	case err == nil:
		writePingPage(w, http.StatusOK, "Ping received", pingThanks(n), rawURL)
	case errors.As(err, &limited):
		setRetryAfter(w, limited.RetryAfter)
		writePingPage(w, limited.status(), "Too many pings", "Too many pings: "+limited.What+"; please wait before pinging again.", rawURL)
	case errors.Is(err, hub.ErrInvalid):
		writePingPage(w, http.StatusBadRequest, "Ping refused", err.Error(), rawURL)
	default:
		writePingPage(w, http.StatusInternalServerError, "Ping not recorded", "The ping could not be recorded; please try again later.", rawURL)
	}
}

var pingPage = template.Must(template.New("ping").Parse(`<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>{{.Title}} – pingd</title></head>
<body>
<h1>{{.Title}}</h1>
<p>{{.Message}}</p>
{{- if .URL}}
<p>URL: <code>{{.URL}}</code></p>
{{- end}}
</body>
</html>
`))

func writePingPage(w http.ResponseWriter, code int, title, message, rawURL string) {
	var b bytes.Buffer
	if err := pingPage.Execute(&b, struct{ Title, Message, URL string }{title, message, rawURL}); err != nil {
		writeText(w, http.StatusInternalServerError, "internal error: cannot render the page")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}
