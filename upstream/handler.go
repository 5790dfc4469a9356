package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/ratelimit"
	"github.com/pingd/pingd/internal/soap"
	"github.com/pingd/pingd/internal/websub"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// maxPushBytes caps a content distribution or notification read.
const maxPushBytes = 4 << 20

// Ping dialects of pushes received from upstream.
const (
	DialectWebSubUpstream   = "websub-upstream"
	DialectRSSCloudUpstream = "rsscloud-upstream"
)

// Handler serves /upstream/websub/{id} and /upstream/rsscloud/{id}.
func (m *Manager) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/upstream/")
		kind, idText, ok2 := strings.Cut(rest, "/")
		id, err := strconv.ParseInt(idText, 10, 64)
		if !ok || !ok2 || err != nil || id <= 0 || (kind != hub.UpstreamWebSub && kind != hub.UpstreamRSSCloud) {
			http.NotFound(w, r)
			return
		}
		u, err := m.cfg.Store.Upstream(r.Context(), id)
		if errors.Is(err, hub.ErrNotFound) || (err == nil && u.Kind != kind) {
			// WebSub §7: 410 tells a hub to drop a subscription pingd has
			// no record of.
			http.Error(w, "no such subscription", http.StatusGone)
			return
		}
		if err != nil {
			m.log.ErrorContext(r.Context(), "read upstream subscription", "id", id, "err", err)
			http.Error(w, "try again later", http.StatusServiceUnavailable)
			return
		}
		switch {
		case kind == hub.UpstreamWebSub && r.Method == http.MethodGet:
			m.websubVerify(w, r, u)
		case kind == hub.UpstreamWebSub && r.Method == http.MethodPost:
			m.websubContent(w, r, u)
		case kind == hub.UpstreamRSSCloud && r.Method == http.MethodGet:
			m.cloudChallenge(w, r, u)
		case kind == hub.UpstreamRSSCloud && r.Method == http.MethodPost:
			m.cloudNotify(w, r, u)
		default:
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})
}

// websubVerify answers the hub's verification of intent (WebSub §5.3):
// the challenge is echoed only for the subscription pingd asked for, with
// its topic and mode.
func (m *Manager) websubVerify(w http.ResponseWriter, r *http.Request, u *hub.Upstream) {
	q := r.URL.Query()
	mode, topic, challenge := q.Get("hub.mode"), q.Get("hub.topic"), q.Get("hub.challenge")
	if topic != u.Topic {
		http.Error(w, "unknown topic", http.StatusNotFound)
		return
	}
	ctx := r.Context()
	now := m.now()
	switch mode {
	case "subscribe":
		if u.State != hub.UpstreamPending && u.State != hub.UpstreamActive || challenge == "" {
			http.Error(w, "no subscription is being asked for", http.StatusNotFound)
			return
		}
		lease, err := strconv.Atoi(q.Get("hub.lease_seconds"))
		if err != nil || lease <= 0 {
			lease = m.cfg.LeaseSeconds
		}
		u.State, u.LeaseSeconds, u.LastError = hub.UpstreamActive, lease, ""
		u.ExpiresAt = now.Add(time.Duration(lease) * time.Second)
		u.NextRenewAt = now.Add(time.Duration(lease) * time.Second * 8 / 10)
	case "unsubscribe":
		if u.State != StateUnsubscribing || challenge == "" {
			http.Error(w, "no unsubscription is being asked for", http.StatusNotFound)
			return
		}
		if err := m.cfg.Store.DeleteUpstream(ctx, u.ID); err != nil && !errors.Is(err, hub.ErrNotFound) {
			http.Error(w, "try again later", http.StatusServiceUnavailable)
			return
		}
		m.cfg.Tracker.forget(u.SourceID)
		m.log.InfoContext(ctx, "upstream unsubscription verified", "endpoint", u.Endpoint, "topic", u.Topic)
		writeChallenge(w, challenge)
		return
	case "denied":
		u.State, u.LastError, u.NextRenewAt = hub.UpstreamFailed, "denied by the hub: "+q.Get("hub.reason"), now.Add(retryAfterFailure)
		if err := m.cfg.Store.PutUpstream(ctx, u); err != nil {
			m.log.WarnContext(ctx, "store upstream subscription", "err", err)
		}
		w.WriteHeader(http.StatusOK)
		return
	default:
		http.Error(w, "unknown hub.mode", http.StatusBadRequest)
		return
	}
	if err := m.cfg.Store.PutUpstream(ctx, u); err != nil {
		m.log.WarnContext(ctx, "store upstream subscription", "err", err)
		http.Error(w, "try again later", http.StatusServiceUnavailable)
		return
	}
	m.cfg.Tracker.activate(u.SourceID)
	m.log.InfoContext(ctx, "upstream subscription verified", "endpoint", u.Endpoint, "topic", u.Topic, "lease_seconds", u.LeaseSeconds)
	writeChallenge(w, challenge)
}

func writeChallenge(w http.ResponseWriter, challenge string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, challenge)
}

// websubContent takes a content distribution (WebSub §7). Only a body
// signed with the subscription's secret counts; anything else is answered
// 2xx and ignored (§8), so that a forger learns nothing.
func (m *Manager) websubContent(w http.ResponseWriter, r *http.Request, u *hub.Upstream) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPushBytes+1))
	if err != nil {
		http.Error(w, "could not read the body", http.StatusBadRequest)
		return
	}
	if len(body) > maxPushBytes {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	if u.State != hub.UpstreamActive || !websub.ValidSignature(r.Header.Get("X-Hub-Signature"), u.Secret, body) {
		m.log.WarnContext(r.Context(), "upstream content without a valid signature ignored", "endpoint", u.Endpoint, "topic", u.Topic,
			"remote", r.RemoteAddr)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if !m.enter(r.Context(), u, DialectWebSubUpstream) {
		http.Error(w, "try again later", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// cloudChallenge answers the cloud's check of a registration naming
// pingd's domain (rssCloud: a GET with url and challenge to echo).
func (m *Manager) cloudChallenge(w http.ResponseWriter, r *http.Request, u *hub.Upstream) {
	q := r.URL.Query()
	if q.Get("url") != u.Topic || q.Get("challenge") == "" {
		http.Error(w, "unknown url", http.StatusNotFound)
		return
	}
	writeChallenge(w, q.Get("challenge"))
}

// cloudNotify takes an rssCloud notification for the URL pingd
// registered for, in any of the protocols: an http-post form (url=…), an
// XML-RPC call of NotifyProcedure with the URL, or its SOAP 1.1 form. A
// cloud may also send one as its test of a registration that names no
// domain.
func (m *Manager) cloudNotify(w http.ResponseWriter, r *http.Request, u *hub.Upstream) {
	r.Body = http.MaxBytesReader(w, r.Body, maxNotifyBytes)
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case mt == "application/x-www-form-urlencoded":
		m.cloudNotifyForm(w, r, u)
	case soap.IsCall(r.Header):
		m.cloudNotifySOAP(w, r, u)
	default:
		m.cloudNotifyXMLRPC(w, r, u)
	}
}

// maxNotifyBytes caps a notification: one URL and its envelope.
const maxNotifyBytes = 64 << 10

// notifyOutcome is what became of a notification.
type notifyOutcome struct {
	status     int
	retryAfter string
	msg        string
}

// takeNotification applies the checks every notification gets, whatever
// its protocol: only the registered URL counts, and at most NotifyRate
// per callback, since a notification is not signed and callback ids are
// counters. One let through enters as a ping of the source.
func (m *Manager) takeNotification(r *http.Request, u *hub.Upstream, notified string) notifyOutcome {
	if notified != u.Topic {
		return notifyOutcome{status: http.StatusNotFound, msg: "pingd did not register for that url"}
	}
	if ok, wait := m.notifyLimit.Allow(strconv.FormatInt(u.ID, 10), m.now()); !ok {
		m.log.WarnContext(r.Context(), "rssCloud notifications over the limit refused", "topic", u.Topic, "remote", r.RemoteAddr)
		return notifyOutcome{status: http.StatusTooManyRequests, retryAfter: ratelimit.RetryAfter(wait), msg: "too many notifications for " + u.Topic}
	}
	if !m.enter(r.Context(), u, DialectRSSCloudUpstream) {
		return notifyOutcome{status: http.StatusServiceUnavailable, msg: "try again later"}
	}
	return notifyOutcome{status: http.StatusOK}
}

// cloudNotifyForm takes the http-post form: url=….
func (m *Manager) cloudNotifyForm(w http.ResponseWriter, r *http.Request, u *hub.Upstream) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed form", http.StatusBadRequest)
		return
	}
	out := m.takeNotification(r, u, r.PostForm.Get("url"))
	if out.status != http.StatusOK {
		if out.retryAfter != "" {
			w.Header().Set("Retry-After", out.retryAfter)
		}
		http.Error(w, out.msg, out.status)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// cloudNotifyXMLRPC takes NotifyProcedure(url) and answers true; a
// refusal is a fault (with HTTP 429 and Retry-After for the rate limit,
// as pingd's own XML-RPC endpoint answers one).
func (m *Manager) cloudNotifyXMLRPC(w http.ResponseWriter, r *http.Request, u *hub.Upstream) {
	fault := func(status, code int, msg string) {
		w.Header().Set("Content-Type", "text/xml; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write(xmlrpc.MarshalFault(&xmlrpc.Fault{Code: code, Message: msg}))
	}
	call, err := xmlrpc.DecodeCall(r.Body, xmlrpc.Limits{MaxBytes: maxNotifyBytes})
	if err != nil {
		fault(http.StatusOK, xmlrpc.FaultParse, "not an XML-RPC call: "+err.Error())
		return
	}
	if call.Method != NotifyProcedure {
		fault(http.StatusOK, xmlrpc.FaultMethodNotFound, fmt.Sprintf("unknown method %q: pingd registered for %s(url)", call.Method, NotifyProcedure))
		return
	}
	notified, ok := "", len(call.Params) == 1
	if ok {
		notified, ok = call.Params[0].(string)
	}
	if !ok {
		fault(http.StatusOK, xmlrpc.FaultInvalidParams, NotifyProcedure+" takes one parameter, the url that changed")
		return
	}
	out := m.takeNotification(r, u, strings.TrimSpace(notified))
	switch out.status {
	case http.StatusOK:
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", out.retryAfter)
		fault(http.StatusTooManyRequests, xmlrpc.FaultApplication, out.msg)
		return
	case http.StatusNotFound:
		fault(http.StatusOK, xmlrpc.FaultInvalidParams, out.msg)
		return
	default:
		fault(http.StatusOK, xmlrpc.FaultApplication, out.msg)
		return
	}
	answer, err := xmlrpc.MarshalResponse(true)
	if err != nil {
		fault(http.StatusOK, xmlrpc.FaultInternal, "cannot encode the answer")
		return
	}
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	_, _ = w.Write(answer)
}

// cloudNotifySOAP takes the SOAP form of NotifyProcedure(url) and answers
// a <…Response> whose Result is true. A refusal is a SOAP Fault: Client
// with HTTP 400 for what the caller got wrong (400 rather than SOAP 1.1's
// 500, so that what any stranger can send does not look like pingd
// failing), 429 with Retry-After for the rate limit, Server with 500 for
// pingd's own failures.
func (m *Manager) cloudNotifySOAP(w http.ResponseWriter, r *http.Request, u *hub.Upstream) {
	fault := func(status int, code, msg string) {
		w.Header().Set("Content-Type", soap.ContentType)
		w.WriteHeader(status)
		_, _ = w.Write(soap.MarshalFault(code, msg))
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		fault(http.StatusRequestEntityTooLarge, soap.FaultClient, "the notification is too large")
		return
	}
	call, err := soap.DecodeCall(body)
	if err != nil {
		fault(http.StatusBadRequest, soap.FaultClient, err.Error())
		return
	}
	if call.Method != NotifyProcedure {
		fault(http.StatusBadRequest, soap.FaultClient, fmt.Sprintf("unknown procedure %q: pingd registered for %s(url)", call.Method, NotifyProcedure))
		return
	}
	notified, ok := "", len(call.Params) == 1
	if ok {
		notified, ok = call.Params[0].(string)
	}
	if !ok {
		fault(http.StatusBadRequest, soap.FaultClient, NotifyProcedure+" takes one parameter, the url that changed")
		return
	}
	out := m.takeNotification(r, u, notified)
	switch out.status {
	case http.StatusOK:
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", out.retryAfter)
		fault(http.StatusTooManyRequests, soap.FaultClient, out.msg)
		return
	case http.StatusNotFound:
		fault(http.StatusBadRequest, soap.FaultClient, out.msg)
		return
	default:
		fault(http.StatusInternalServerError, soap.FaultServer, out.msg)
		return
	}
	w.Header().Set("Content-Type", soap.ContentType)
	_, _ = w.Write(soap.MarshalResponse(call.Method, true))
}

// enter turns a push into a ping of the source.
func (m *Manager) enter(ctx context.Context, u *hub.Upstream, dialect string) bool {
	src, err := m.cfg.Hub.Source(ctx, u.SourceID)
	if err != nil {
		m.log.WarnContext(ctx, "upstream push for a source pingd cannot read", "source", u.SourceID, "err", err)
		return false
	}
	if _, err := m.cfg.Hub.Ping(ctx, hub.Ping{Dialect: dialect, URL: src.URL}, []string{src.URL}, nil); err != nil {
		m.log.WarnContext(ctx, "record an upstream push", "source", src.URL, "err", err)
		return false
	}
	if err := m.cfg.Store.MarkUpstreamPush(ctx, u.ID, m.now()); err != nil {
		m.log.WarnContext(ctx, "record an upstream push", "id", u.ID, "err", err)
	}
	m.log.InfoContext(ctx, "upstream push", "kind", u.Kind, "source", src.URL)
	return true
}
