package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/cnws"
)

// CNWS (change notification web service, 2003): POST /cnws takes a
// <notification> holding a <subscribe> (a subscriber asks to be told when
// a resource changes) or a <resourceChange> (a publisher says it changed).
// Every answer is a <notification><result><status>; a bad document gets
// status false with HTTP 400.

// DialectCNWS is recorded with pings that came as CNWS resourceChange.
const DialectCNWS = "cnws"

// cnwsBaselineWait bounds how long a subscribe waits for the resource's
// first fetch so that its answer can carry the title and description.
const cnwsBaselineWait = 3 * time.Second

// CNWSHub is what CNWS asks of the hub.
type CNWSHub interface {
	Ping(ctx context.Context, p hub.Ping, urls []string, note *hub.ChangeNote) (int, error)
	Serves(kind hub.Kind) bool
	Node(ctx context.Context, name string) (*hub.Node, error)
	NodeForURL(ctx context.Context, rawURL string, create bool) (*hub.Node, error)
	NodeForURLCreating(ctx context.Context, rawURL string, mayCreate func(context.Context) error) (*hub.Node, error)
	Authorize(node *hub.Node, token string) bool
	Subscribe(ctx context.Context, s hub.Subscription) (*hub.Subscription, bool, error)
	Source(ctx context.Context, id int64) (*hub.Source, error)
}

// CNWSConfig configures CNWS.
type CNWSConfig struct {
	Site
	Hub CNWSHub
	// PingLimits bound resourceChange, a ping; SubscribeLimits bound
	// subscribe.
	PingLimits      *PingLimits
	SubscribeLimits *SubscribeLimits
	// CheckHost: see checkOutbound (outbound.go); nil: no early check.
	CheckHost func(ctx context.Context, host string) error
	// ObservePing: see PingsConfig.
	ObservePing func(dialect, outcome string)
}

// CNWS is POST /cnws: subscribe and resourceChange.
type CNWS struct {
	site
	hub       CNWSHub
	pings     *PingLimits
	subscribe *SubscribeLimits
	observe   pingObserver
}

// NewCNWS returns the CNWS endpoint.
func NewCNWS(cfg CNWSConfig) (*CNWS, error) {
	s, err := newSite("CNWS", cfg.Site)
	if err != nil {
		return nil, err
	}
	if cfg.Hub == nil || cfg.PingLimits == nil || cfg.SubscribeLimits == nil {
		return nil, errors.New("httpapi: CNWS: no hub, ping limits or subscription limits")
	}
	s.checkHost = cfg.CheckHost
	return &CNWS{site: s, hub: cfg.Hub, pings: cfg.PingLimits, subscribe: cfg.SubscribeLimits, observe: cfg.ObservePing}, nil
}

// Routes installs POST /cnws.
func (a *CNWS) Routes(r *mux.Router) {
	r.HandleFunc("/cnws", a.cnws).Methods(http.MethodPost)
}

// cnws is POST /cnws.
func (a *CNWS) cnws(w http.ResponseWriter, r *http.Request) {
	if !a.limitBody(w, r, func(msg string) { writeCNWSResult(w, http.StatusRequestEntityTooLarge, false, "", "", msg) }) {
		return
	}
	req, err := cnws.Decode(r.Body, a.maxBody)
	switch {
	case err == nil:
	case isTooLarge(err):
		writeCNWSResult(w, http.StatusRequestEntityTooLarge, false, "", "", a.tooLargeMessage())
		return
	default:
		writeCNWSResult(w, http.StatusBadRequest, false, "", "", err.Error())
		return
	}
	if req.Change != nil {
		a.cnwsChange(w, r, req.Change)
		return
	}
	a.cnwsSubscribe(w, r, req.Subscribe)
}

// cnwsChange takes a publisher's resourceChange as a trusted ping: every
// source of the URL is fetched, and its URL-level subscribers are told
// (with the publisher's title and description) even if the fetch shows no
// difference.
func (a *CNWS) cnwsChange(w http.ResponseWriter, r *http.Request, ch *cnws.ReceivedChange) {
	ctx := r.Context()
	if limited := a.pings.allow(ch.ResourceID); limited != nil {
		a.observe.count(DialectCNWS, limited)
		setRetryAfter(w, limited.RetryAfter)
		writeCNWSResult(w, http.StatusTooManyRequests, false, "", "", limited.What)
		return
	}
	note := &hub.ChangeNote{Title: ch.Title, Description: ch.Description, Extensions: ch.Extensions}
	urls, err := ownNodeSource(ctx, &a.site, a.hub, ch.ResourceID)
	if err != nil {
		a.log.ErrorContext(ctx, "CNWS resourceChange not recorded", "url", ch.ResourceID, "err", err)
		writeCNWSResult(w, http.StatusInternalServerError, false, "", "", "the change could not be recorded; please try again later")
		return
	}
	// The resource is recorded as submitted, also when it names one of
	// pingd's own feeds: changes.xml lists what the publisher sent.
	n, err := a.hub.Ping(ctx, hub.Ping{Dialect: DialectCNWS, URL: ch.ResourceID, Remote: clientIP(r)}, urls, note)
	a.observe.count(DialectCNWS, err)
	if err != nil {
		if errors.Is(err, hub.ErrInvalid) {
			writeCNWSResult(w, http.StatusBadRequest, false, "", "", err.Error())
			return
		}
		if errors.Is(err, hub.ErrPingQueueFull) {
			setRetryAfter(w, pingQueueRetry)
			writeCNWSResult(w, http.StatusServiceUnavailable, false, "", "", err.Error()+"; please try again shortly")
			return
		}
		a.log.ErrorContext(ctx, "CNWS resourceChange not recorded", "url", ch.ResourceID, "err", err)
		writeCNWSResult(w, http.StatusInternalServerError, false, "", "", "the change could not be recorded; please try again later")
		return
	}
	a.log.InfoContext(ctx, "ping", "dialect", DialectCNWS, "url", ch.ResourceID, "remote", clientIP(r), "sources", n)
	writeCNWSResult(w, http.StatusOK, true, "", "", "")
}

// cnwsSubscribe adds a subscriber and answers with the resource's title
// and description. A repeated subscribe is the re-confirmation the draft
// asks subscribers to send after 30 days without notification: the
// subscriber is on the list, so the status is true.
func (a *CNWS) cnwsSubscribe(w http.ResponseWriter, r *http.Request, s *cnws.Subscribe) {
	ctx := r.Context()
	if limited := a.subscribe.allow(clientIP(r)); limited != nil {
		setRetryAfter(w, limited.RetryAfter)
		writeCNWSResult(w, http.StatusTooManyRequests, false, "", "", limited.What)
		return
	}
	if !a.hub.Serves(hub.KindCNWS) {
		writeCNWSResult(w, http.StatusServiceUnavailable, false, "", "", "this server does not send CNWS notifications")
		return
	}
	for _, u := range [][2]string{{"the notificationURL", s.NotificationURL}, {"the resourceID", s.ResourceID}} {
		if err := a.checkOutbound(ctx, u[0], u[1]); err != nil {
			writeCNWSResult(w, http.StatusBadRequest, false, "", "", err.Error())
			return
		}
	}
	n, err := subscribedNode(ctx, &a.site, a.hub, a.subscribe, s.ResourceID, clientIP(r), false)
	var limited *RateLimitError
	switch {
	case errors.As(err, &limited):
		setRetryAfter(w, limited.RetryAfter)
		writeCNWSResult(w, limited.status(), false, "", "", limited.What)
		return
	case errors.Is(err, hub.ErrInvalid), errors.Is(err, hub.ErrNotFound):
		writeCNWSResult(w, http.StatusBadRequest, false, "", "", err.Error())
		return
	case err != nil:
		a.log.ErrorContext(ctx, "CNWS subscribe: find node", "url", s.ResourceID, "err", err)
		writeCNWSResult(w, http.StatusInternalServerError, false, "", "", "the subscription could not be stored; please try again later")
		return
	}
	if ok, _ := mayRead(a.hub, r, n); !ok {
		writeCNWSResult(w, http.StatusUnauthorized, false, "", "",
			fmt.Sprintf("%s belongs to a whitelist node: subscribing needs its bearer token", s.ResourceID))
		return
	}
	// CNWS has no verification of intent, so a repeated <subscribe> (which
	// anyone may send) leaves the subscription as it is: true, and nothing
	// else (hub.Subscribe).
	_, renewed, err := a.hub.Subscribe(ctx, hub.Subscription{
		NodeName: n.Name, Kind: hub.KindCNWS, Address: subscriberAddress(s.NotificationURL, s.ResourceID),
		State: hub.SubActive, Options: hub.Options{Topic: s.ResourceID},
	})
	if limited := callbackHostLimit(err); limited != nil {
		setRetryAfter(w, limited.RetryAfter)
		writeCNWSResult(w, limited.status(), false, "", "", limited.What)
		return
	}
	if err != nil {
		a.log.ErrorContext(ctx, "CNWS subscribe", "url", s.ResourceID, "err", err)
		writeCNWSResult(w, http.StatusInternalServerError, false, "", "", "the subscription could not be stored; please try again later")
		return
	}
	title, desc := a.describe(ctx, n)
	a.log.InfoContext(ctx, "CNWS subscription stored", "node", n.Name, "subscriber", redactCallback(s.NotificationURL), "renewed", renewed)
	writeCNWSResult(w, http.StatusOK, true, title, desc, "")
}

// describe returns the title and description of a node's resource: its
// source's once fetched (waiting briefly for a first fetch), else the
// node's own title.
func (a *CNWS) describe(ctx context.Context, n *hub.Node) (title, desc string) {
	if n.SourceID != 0 {
		deadline := time.Now().Add(cnwsBaselineWait)
		for {
			src, err := a.hub.Source(ctx, n.SourceID)
			if err != nil {
				break
			}
			if src.Baselined || src.Gone || src.LastError != "" || time.Now().After(deadline) {
				title, desc = src.Title, src.Description
				break
			}
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return n.Title, ""
			case <-t.C:
			}
		}
	}
	if title == "" {
		title = n.Title
	}
	return cnws.Text(title, cnws.MaxTitleRunes), cnws.Text(desc, 0)
}

// writeCNWSResult answers with a CNWS <result> (cnws.EncodeResult).
func writeCNWSResult(w http.ResponseWriter, code int, status bool, title, desc, msg string) {
	w.Header().Set("Content-Type", cnws.ContentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(cnws.EncodeResult(status, title, desc, msg))
}
