package httpapi

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/nodeurl"
	"github.com/pingd/pingd/internal/websub"
)

// The WebSub hub (W3C Recommendation, 23 January 2018) at POST /websub:
// subscribe and unsubscribe requests are checked, answered 202 Accepted
// and verified asynchronously by the delivery engine (or denied with a
// hub.mode=denied notice); publish requests are pings.

// DialectWebSub is recorded with pings that came as WebSub publish.
const DialectWebSub = "websub"

// LeaseLimits bounds WebSub leases: a subscriber's hub.lease_seconds is
// clamped to [Min, Max] and Default is used when it asks for none.
type LeaseLimits struct {
	Default, Min, Max time.Duration
}

// withDefaults fills zero fields with internal/websub's defaults and
// keeps Min ≤ Default ≤ Max.
func (l LeaseLimits) withDefaults() LeaseLimits {
	if l.Min <= 0 {
		l.Min = websub.MinLease * time.Second
	}
	if l.Max <= 0 {
		l.Max = websub.MaxLease * time.Second
	}
	if l.Max < l.Min {
		l.Max = l.Min
	}
	if l.Default <= 0 {
		l.Default = websub.DefaultLease * time.Second
	}
	l.Default = min(max(l.Default, l.Min), l.Max)
	return l
}

// clamp returns the lease in seconds for a requested one (0: none asked).
// It compares in seconds, so no request overflows a Duration.
func (l LeaseLimits) clamp(requested int) int {
	l = l.withDefaults()
	if requested <= 0 {
		return int(l.Default / time.Second)
	}
	return min(max(requested, int(l.Min/time.Second)), int(l.Max/time.Second))
}

// WebSubHub is what the WebSub hub asks of pingd's hub.
type WebSubHub interface {
	Ping(ctx context.Context, p hub.Ping, urls []string, note *hub.ChangeNote) (int, error)
	Serves(kind hub.Kind) bool
	Node(ctx context.Context, name string) (*hub.Node, error)
	NodeForURL(ctx context.Context, rawURL string, create bool) (*hub.Node, error)
	NodeForURLCreating(ctx context.Context, rawURL string, mayCreate func(context.Context) error) (*hub.Node, error)
	Authorize(node *hub.Node, token string) bool
	Subscriptions(ctx context.Context, f hub.SubscriptionFilter) ([]hub.Subscription, error)
	RequestSubscription(ctx context.Context, s hub.Subscription) (*hub.Subscription, hub.RequestOutcome, error)
	RequestUnsubscription(ctx context.Context, nodeName string, kind hub.Kind, address string) (*hub.Subscription, hub.RequestOutcome, error)
}

// WebSubConfig configures the WebSub hub.
type WebSubConfig struct {
	Site
	Hub WebSubHub
	// PingLimits bound publish requests, which are pings;
	// SubscribeLimits bound subscribe and unsubscribe.
	PingLimits      *PingLimits
	SubscribeLimits *SubscribeLimits
	// Leases bounds WebSub leases; zero fields take the defaults (10 days,
	// clamped to 5 minutes … 30 days).
	Leases LeaseLimits
	// CheckHost: see checkOutbound (outbound.go); nil: no early check.
	CheckHost func(ctx context.Context, host string) error
	// ObservePing: see PingsConfig.
	ObservePing func(dialect, outcome string)
}

// WebSub is the WebSub hub at POST /websub.
type WebSub struct {
	site
	hub       WebSubHub
	pings     *PingLimits
	subscribe *SubscribeLimits
	leases    LeaseLimits
	observe   pingObserver
}

// NewWebSub returns the WebSub hub.
func NewWebSub(cfg WebSubConfig) (*WebSub, error) {
	s, err := newSite("WebSub", cfg.Site)
	if err != nil {
		return nil, err
	}
	if cfg.Hub == nil || cfg.PingLimits == nil || cfg.SubscribeLimits == nil {
		return nil, errors.New("httpapi: WebSub: no hub, ping limits or subscription limits")
	}
	s.checkHost = cfg.CheckHost
	return &WebSub{site: s, hub: cfg.Hub, pings: cfg.PingLimits, subscribe: cfg.SubscribeLimits,
		leases: cfg.Leases, observe: cfg.ObservePing}, nil
}

// Routes installs POST /websub.
func (a *WebSub) Routes(r *mux.Router) {
	r.HandleFunc(nodeurl.PathWebSub, a.webSub).Methods(http.MethodPost)
}

// webSub is POST /websub.
func (a *WebSub) webSub(w http.ResponseWriter, r *http.Request) {
	if !a.limitBody(w, r, func(msg string) { writeText(w, http.StatusRequestEntityTooLarge, msg) }) {
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "" && mt != "application/x-www-form-urlencoded" {
		w.Header().Set("Accept-Post", "application/x-www-form-urlencoded")
		writeText(w, http.StatusUnsupportedMediaType, "a hub request is an application/x-www-form-urlencoded form")
		return
	}
	if err := r.ParseForm(); err != nil {
		if isTooLarge(err) {
			writeText(w, http.StatusRequestEntityTooLarge, a.tooLargeMessage())
		} else {
			writeText(w, http.StatusBadRequest, "the form could not be read: "+err.Error())
		}
		return
	}
	req, err := websub.ParseRequest(r.PostForm)
	if err != nil {
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	switch req.Mode {
	case websub.ModePublish:
		a.webSubPublish(w, r, req)
	case websub.ModeSubscribe:
		a.webSubSubscribe(w, r, req)
	default:
		a.webSubUnsubscribe(w, r, req)
	}
}

// webSubPublish takes a publish request as a ping of each topic: pingd
// fetches it and distributes what is new. pingd's own node feeds stand
// for their node's source. Each topic is recorded as submitted.
func (a *WebSub) webSubPublish(w http.ResponseWriter, r *http.Request, req websub.Request) {
	ctx := r.Context()
	type topic struct {
		submitted string
		fetch     []string // what the ping fetches: the topic, its node's source, or nothing
	}
	topics := make([]topic, 0, len(req.URLs))
	for _, u := range req.URLs {
		fetch, err := ownNodeSource(ctx, &a.site, a.hub, u)
		if err != nil {
			a.log.ErrorContext(ctx, "WebSub publish not recorded", "url", u, "err", err)
			writeText(w, http.StatusInternalServerError, "the publish request could not be recorded; please try again later")
			return
		}
		topics = append(topics, topic{submitted: u, fetch: fetch})
	}
	// The limits are those of what is fetched (the URL itself when nothing
	// is), each taken once.
	limitedKeys := map[string]bool{}
	for _, t := range topics {
		key := t.submitted
		if len(t.fetch) > 0 {
			key = t.fetch[0]
		}
		if limitedKeys[key] {
			continue
		}
		limitedKeys[key] = true
		if limited := a.pings.allow(key); limited != nil {
			a.observe.count(DialectWebSub, limited)
			setRetryAfter(w, limited.RetryAfter)
			writeText(w, http.StatusTooManyRequests, limited.What+"; please wait before publishing again")
			return
		}
	}
	// One ping per topic: each is its own entry of changes.xml.
	for _, t := range topics {
		n, err := a.hub.Ping(ctx, hub.Ping{Dialect: DialectWebSub, URL: t.submitted, Remote: clientIP(r)}, t.fetch, nil)
		a.observe.count(DialectWebSub, err)
		if err != nil {
			if errors.Is(err, hub.ErrInvalid) {
				writeText(w, http.StatusBadRequest, err.Error())
				return
			}
			if errors.Is(err, hub.ErrPingQueueFull) {
				setRetryAfter(w, pingQueueRetry)
				writeText(w, http.StatusServiceUnavailable, err.Error()+"; please try again shortly")
				return
			}
			a.log.ErrorContext(ctx, "WebSub publish not recorded", "url", t.submitted, "err", err)
			writeText(w, http.StatusInternalServerError, "the publish request could not be recorded; please try again later")
			return
		}
		a.log.InfoContext(ctx, "ping", "dialect", DialectWebSub, "url", t.submitted, "remote", clientIP(r), "sources", n)
	}
	// 204, as PubSubHubbub 0.3 answers an accepted publish.
	w.WriteHeader(http.StatusNoContent)
}

// webSubSubscribe stores the request as pending and answers 202; the
// delivery engine then verifies intent, or sends the denial notice for a
// whitelist node without its token and for a topic that cannot be fetched.
func (a *WebSub) webSubSubscribe(w http.ResponseWriter, r *http.Request, req websub.Request) {
	ctx := r.Context()
	if limited := a.subscribe.allow(clientIP(r)); limited != nil {
		setRetryAfter(w, limited.RetryAfter)
		writeText(w, http.StatusTooManyRequests, limited.What+"; please wait before subscribing again")
		return
	}
	if !a.hub.Serves(hub.KindWebSub) {
		writeText(w, http.StatusServiceUnavailable, "this hub does not distribute content to WebSub subscribers")
		return
	}
	for _, u := range [][2]string{{"hub.callback", req.Callback}, {"hub.topic", req.Topic}} {
		if err := a.checkOutbound(ctx, u[0], u[1]); err != nil {
			writeText(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	n, err := subscribedNode(ctx, &a.site, a.hub, a.subscribe, req.Topic, clientIP(r), false)
	var limited *RateLimitError
	switch {
	case errors.As(err, &limited):
		setRetryAfter(w, limited.RetryAfter)
		writeText(w, limited.status(), limited.What)
		return
	case errors.Is(err, hub.ErrNotFound):
		writeText(w, http.StatusNotFound, err.Error())
		return
	case errors.Is(err, hub.ErrInvalid):
		writeText(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		a.log.ErrorContext(ctx, "WebSub subscribe: find node", "topic", req.Topic, "err", err)
		writeText(w, http.StatusInternalServerError, "the subscription could not be stored; please try again later")
		return
	}
	opts := hub.Options{
		Topic:        req.Topic,
		LeaseSeconds: a.leases.clamp(req.LeaseSeconds),
		Secret:       req.Secret,
		SigAlgo:      req.SigAlgo,
	}
	log := a.log.With("node", n.Name, "callback", redactCallback(req.Callback))
	address := subscriberAddress(req.Callback, req.Topic)
	if ok, given := mayRead(a.hub, r, n); !ok {
		existing, err := a.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindWebSub, Address: address})
		if err != nil {
			a.log.ErrorContext(ctx, "WebSub subscribe: look up subscription", "err", err)
			writeText(w, http.StatusInternalServerError, "the subscription could not be stored; please try again later")
			return
		}
		if len(existing) > 0 {
			// Denying would end a subscription someone else made: refuse
			// the request and leave that subscription alone.
			unauthorized(w, given, fmt.Sprintf("%q is a whitelist node: subscribing needs the node's or the admin bearer token", n.Name))
			return
		}
		reason := "the topic belongs to a whitelist node; a subscription needs its bearer token"
		if given {
			reason = "the topic belongs to a whitelist node and the bearer token is not valid for it"
		}
		opts.Verify = map[string]string{websub.VerifyDenied: reason}
		opts.Secret = "" // nothing will be signed
		log.InfoContext(ctx, "WebSub subscription denied", "reason", reason)
	}
	// A request about a verified subscription is its pending change:
	// "If verification fails, the subscription state MUST be left
	// unchanged" (§5.1), and it is served as it is meanwhile.
	_, outcome, err := a.hub.RequestSubscription(ctx, hub.Subscription{
		NodeName: n.Name, Kind: hub.KindWebSub, Address: address, Options: opts,
	})
	if limited := callbackHostLimit(err); limited != nil {
		setRetryAfter(w, limited.RetryAfter)
		writeText(w, limited.status(), limited.What)
		return
	}
	if err != nil {
		log.ErrorContext(ctx, "WebSub subscribe", "err", err)
		writeText(w, http.StatusInternalServerError, "the subscription could not be stored; please try again later")
		return
	}
	if opts.Verify == nil {
		log.InfoContext(ctx, "WebSub subscription requested; verifying intent", "lease_seconds", opts.LeaseSeconds,
			"signed", opts.Secret != "", "request", outcome)
	}
	writeText(w, http.StatusAccepted, "Accepted: the hub will verify the request with the callback.")
}

// webSubUnsubscribe stores an unsubscription, which the engine verifies
// with the callback (202); the subscription is served as it is until then,
// and stays so if the callback does not confirm. A subscription that was
// never verified is cancelled at once, and a callback without a
// subscription has nothing to verify: both get 202 too, so the answer
// tells nobody which callbacks are subscribed.
func (a *WebSub) webSubUnsubscribe(w http.ResponseWriter, r *http.Request, req websub.Request) {
	ctx := r.Context()
	if limited := a.subscribe.allow(clientIP(r)); limited != nil {
		setRetryAfter(w, limited.RetryAfter)
		writeText(w, http.StatusTooManyRequests, limited.What+"; please wait before unsubscribing again")
		return
	}
	accepted := func() {
		writeText(w, http.StatusAccepted, "Accepted: the hub will verify the request with the callback.")
	}
	n, err := resourceNode(ctx, &a.site, a.hub, req.Topic)
	switch {
	case errors.Is(err, hub.ErrNotFound), errors.Is(err, hub.ErrInvalid):
		accepted()
		return
	case err != nil:
		a.log.ErrorContext(ctx, "WebSub unsubscribe: find node", "topic", req.Topic, "err", err)
		writeText(w, http.StatusInternalServerError, "the request could not be stored; please try again later")
		return
	}
	// A whitelist node's subscriptions are its members' business, as its
	// GetPingd webhooks are: without the token, whether or not the
	// callback is subscribed, the answer is the same 401.
	if ok, given := mayRead(a.hub, r, n); !ok {
		unauthorized(w, given, fmt.Sprintf("%q is a whitelist node: unsubscribing needs the node's or the admin bearer token", n.Name))
		return
	}
	address := subscriberAddress(req.Callback, req.Topic)
	log := a.log.With("node", n.Name, "callback", redactCallback(req.Callback))
	_, outcome, err := a.hub.RequestUnsubscription(ctx, n.Name, hub.KindWebSub, address)
	switch {
	case errors.Is(err, hub.ErrNotFound):
	case err != nil:
		log.ErrorContext(ctx, "WebSub unsubscribe", "err", err)
		writeText(w, http.StatusInternalServerError, "the request could not be stored; please try again later")
		return
	case outcome == hub.RequestCancelled:
		log.InfoContext(ctx, "unverified WebSub subscription cancelled")
	default:
		log.InfoContext(ctx, "WebSub unsubscription requested; verifying intent")
	}
	accepted()
}
