package httpapi

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/nodeurl"
	"github.com/pingd/pingd/internal/ratelimit"
	"github.com/pingd/pingd/whitelist"
)

// acceptedSubscribeTypes are the request types SUBSCRIBE takes, in the
// order the XRDS document lists them.
var acceptedSubscribeTypes = []string{getpingd.ContentTypeHTTPSubscribe, getpingd.ContentTypeXMPPSubscribe}

// GetPingdHub is what GetPingd's descriptors and subscription requests
// ask of the hub.
type GetPingdHub interface {
	Node(ctx context.Context, name string) (*hub.Node, error)
	Items(ctx context.Context, node *hub.Node, ids []string, max int) ([]hub.Event, error)
	Authorize(node *hub.Node, token string) bool
	RequestSubscription(ctx context.Context, s hub.Subscription) (*hub.Subscription, hub.RequestOutcome, error)
	RequestUnsubscription(ctx context.Context, nodeName string, kind hub.Kind, address string) (*hub.Subscription, hub.RequestOutcome, error)
}

// WhitelistService applies GetPingd XMPP consumer requests
// (*whitelist.Service).
type WhitelistService interface {
	Apply(ctx context.Context, nodeName string, req whitelist.Request, token string) ([]byte, error)
}

// GetPingdConfig configures GetPingd.
type GetPingdConfig struct {
	Site
	Hub GetPingdHub
	// ComponentJID is the XMPP address of pingd's pubsub service, which
	// the descriptors name.
	ComponentJID string
	// Whitelist applies XMPP consumer requests.
	Whitelist WhitelistService
	// Limits bound the subscription requests per client.
	Limits *SubscribeLimits
	// XMPP consumer (whitelist) requests take a token of the client's
	// subscription bucket and, unless they carry the node's or the admin
	// token, one of the node's own bucket; default 1 per second in bursts
	// of 20 per node.
	WhitelistNodeRate  float64
	WhitelistNodeBurst int
	// CheckHost: see checkOutbound (outbound.go); nil: no early check.
	CheckHost func(ctx context.Context, host string) error
}

// GetPingd is a node's GetPingd descriptor (/feeds/{node}: the page, its
// XRDS document at /xrds/{node}) and the subscription requests posted to
// it: webhooks and XMPP consumer (whitelist) requests.
type GetPingd struct {
	site
	hub          GetPingdHub
	componentJID string
	whitelist    WhitelistService
	limits       *SubscribeLimits
	// nodeLimit: XMPP consumer requests without a valid token, per node.
	nodeLimit *ratelimit.Keyed
}

// NewGetPingd returns GetPingd's descriptors and subscription requests.
func NewGetPingd(cfg GetPingdConfig) (*GetPingd, error) {
	s, err := newSite("GetPingd", cfg.Site)
	if err != nil {
		return nil, err
	}
	if cfg.Hub == nil || cfg.Whitelist == nil || cfg.Limits == nil {
		return nil, errors.New("httpapi: GetPingd: no hub, whitelist service or subscription limits")
	}
	if cfg.WhitelistNodeRate <= 0 {
		cfg.WhitelistNodeRate = DefaultWhitelistNodeRate
	}
	if cfg.WhitelistNodeBurst <= 0 {
		cfg.WhitelistNodeBurst = DefaultWhitelistNodeBurst
	}
	s.checkHost = cfg.CheckHost
	return &GetPingd{site: s, hub: cfg.Hub, componentJID: cfg.ComponentJID, whitelist: cfg.Whitelist,
		limits: cfg.Limits, nodeLimit: ratelimit.New(cfg.WhitelistNodeRate, cfg.WhitelistNodeBurst)}, nil
}

// Routes installs the descriptors and the subscription requests.
func (a *GetPingd) Routes(r *mux.Router) {
	r.HandleFunc("/feeds/{node}", a.descriptor).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/feeds/{node}", a.subscribeRequest).Methods(getpingd.MethodSubscribe, http.MethodPost)
	r.HandleFunc("/xrds/{node}", a.xrds).Methods(http.MethodGet, http.MethodHead)
}

// loadNode loads the node named in the path, answering 400 or 404 (plain
// text) itself.
func loadNode(s *site, nodes nodeGetter, w http.ResponseWriter, r *http.Request) (*hub.Node, bool) {
	name, ok := pathVar(r, "node")
	if !ok {
		writeText(w, http.StatusBadRequest, "the node name is not validly percent-encoded")
		return nil, false
	}
	n, err := nodes.Node(r.Context(), name)
	switch {
	case errors.Is(err, hub.ErrNotFound):
		writeText(w, http.StatusNotFound, fmt.Sprintf("no node %q", name))
		return nil, false
	case err != nil:
		s.log.ErrorContext(r.Context(), "load node", "node", name, "err", err)
		writeText(w, http.StatusInternalServerError, "load node: internal error")
		return nil, false
	}
	return n, true
}

// descriptor serves the node's GetPingd descriptor: the XRDS document when
// the client prefers application/xrds+xml, else the HTML page pointing at
// it. Both carry X-XRDS-Location and say which request types SUBSCRIBE
// takes (Accept-Post).
func (a *GetPingd) descriptor(w http.ResponseWriter, r *http.Request) {
	n, ok := loadNode(&a.site, a.hub, w, r)
	if !ok {
		return
	}
	d, links, ok := a.descriptorOf(w, r, n)
	if !ok {
		return
	}
	h := w.Header()
	h.Set("Vary", "Accept")
	h.Set(discovery.XRDSLocationHeader, links.XRDS)
	h.Set("Accept-Post", strings.Join(acceptedSubscribeTypes, ", "))
	if discovery.PreferXRDS(r.Header.Get("Accept")) {
		writeBody(w, r, discovery.ContentTypeXRDS, discovery.XRDS(d))
		return
	}
	page := discovery.Page{Title: n.Title, XRDSURL: links.XRDS, AtomURL: links.Atom, RSSURL: links.RSS}
	// A whitelist node's page is public and its entries are not: they are
	// not even read.
	if n.AccessModel != hub.AccessWhitelist {
		items, err := a.hub.Items(r.Context(), n, nil, discovery.PageEntries)
		if err != nil {
			a.log.ErrorContext(r.Context(), "descriptor page: items", "node", n.Name, "err", err)
			writeText(w, http.StatusInternalServerError, "load items: internal error")
			return
		}
		for _, it := range items {
			page.Entries = append(page.Entries, discovery.PageEntry{Title: it.Title, Link: hub.WebLink(it.Link), Updated: it.Updated})
		}
	}
	h.Set("Content-Security-Policy", discovery.DescriptorPageCSP)
	h.Set("Referrer-Policy", "no-referrer")
	writeBody(w, r, "text/html; charset=utf-8", discovery.DescriptorPage(d, page))
}

// xrds serves the node's XRDS document, with the media type exactly as
// Yadis clients compare it.
func (a *GetPingd) xrds(w http.ResponseWriter, r *http.Request) {
	n, ok := loadNode(&a.site, a.hub, w, r)
	if !ok {
		return
	}
	d, _, ok := a.descriptorOf(w, r, n)
	if !ok {
		return
	}
	writeBody(w, r, discovery.ContentTypeXRDS, discovery.XRDS(d))
}

func (a *GetPingd) descriptorOf(w http.ResponseWriter, r *http.Request, n *hub.Node) (discovery.Descriptor, nodeurl.Links, bool) {
	d, err := discovery.NewDescriptor(a.publicURL, a.componentJID, n)
	if err == nil {
		var links nodeurl.Links
		if links, err = nodeurl.NodeLinks(a.publicURL, n.Name); err == nil {
			return d, links, true
		}
	}
	a.log.ErrorContext(r.Context(), "render descriptor", "node", n.Name, "err", err)
	writeText(w, http.StatusInternalServerError, "render descriptor: internal error")
	return discovery.Descriptor{}, nodeurl.Links{}, false
}

// writeBody answers 200 with a complete body (none for HEAD).
func writeBody(w http.ResponseWriter, r *http.Request, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// writeAnswer answers a subscription request with a small XML document.
func writeAnswer(w http.ResponseWriter, code int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/xml; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// subscribeRequest takes a GetPingd subscription request, SUBSCRIBE
// /feeds/{node} or POST /feeds/{node}?method=subscribe, dispatched on its
// Content-Type (parameters such as charset are ignored).
func (a *GetPingd) subscribeRequest(w http.ResponseWriter, r *http.Request) {
	n, ok := loadNode(&a.site, a.hub, w, r)
	if !ok {
		return
	}
	if r.Method == http.MethodPost && !strings.EqualFold(r.URL.Query().Get("method"), "subscribe") {
		writeText(w, http.StatusBadRequest, "a POST to a descriptor is a subscription request and needs ?method=subscribe")
		return
	}
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mediaType {
	case getpingd.ContentTypeXMPPSubscribe, getpingd.ContentTypeHTTPSubscribe:
	default:
		w.Header().Set("Accept-Post", strings.Join(acceptedSubscribeTypes, ", "))
		got := r.Header.Get("Content-Type")
		if got == "" {
			got = "none"
		}
		writeText(w, http.StatusUnsupportedMediaType, fmt.Sprintf("unsupported Content-Type %q; this resource accepts %s",
			got, strings.Join(acceptedSubscribeTypes, " and ")))
		return
	}
	limit := min(a.maxBody, getpingd.MaxRequestBytes)
	if r.ContentLength > limit {
		writeText(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", limit))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if mediaType == getpingd.ContentTypeXMPPSubscribe {
		a.whitelistRequest(w, r, n)
		return
	}
	a.webhookRequest(w, r, n)
}

// whitelistRequest applies an XMPP consumer (whitelist) request.
func (a *GetPingd) whitelistRequest(w http.ResponseWriter, r *http.Request, n *hub.Node) {
	if limited := a.allowWhitelistRequest(r, n); limited != nil {
		setRetryAfter(w, limited.RetryAfter)
		writeText(w, http.StatusTooManyRequests, limited.What+"; please wait before asking again")
		return
	}
	req, err := whitelist.ParseConsumerRequest(r.Body)
	if err == nil {
		token, _ := bearerToken(r)
		var doc []byte
		if doc, err = a.whitelist.Apply(r.Context(), n.Name, req, token); err == nil {
			writeAnswer(w, http.StatusOK, doc)
			return
		}
	}
	switch {
	case errors.Is(err, whitelist.ErrTooLarge), isTooLarge(err):
		writeText(w, http.StatusRequestEntityTooLarge, err.Error())
	case errors.Is(err, whitelist.ErrMalformed), errors.Is(err, whitelist.ErrBadJID), errors.Is(err, hub.ErrInvalid):
		writeText(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, whitelist.ErrUnauthorized):
		_, given := bearerToken(r)
		unauthorized(w, given, err.Error())
	case errors.Is(err, hub.ErrNotFound):
		writeText(w, http.StatusNotFound, err.Error())
	default:
		a.log.ErrorContext(r.Context(), "whitelist request", "node", n.Name, "err", err)
		writeText(w, http.StatusInternalServerError, "whitelist request: internal error")
	}
}

// webhookRequest stores a webhook subscribe or unsubscribe request and
// leaves the verification of intent to the delivery engine: 202. A
// request naming the href of a verified subscription changes nothing
// until the callback verifies it (hub.RequestSubscription): anyone may
// send one, and the subscription, its method, secret and deliveries stay
// as they are meanwhile and after a refusal. A subscription that was never
// verified is cancelled at once by an unsubscribe request (200):
// verifying the unsubscription would let a failed check activate a
// subscription no one confirmed.
func (a *GetPingd) webhookRequest(w http.ResponseWriter, r *http.Request, n *hub.Node) {
	if limited := a.limits.allow(clientIP(r)); limited != nil {
		setRetryAfter(w, limited.RetryAfter)
		writeText(w, http.StatusTooManyRequests, limited.What+"; please wait before subscribing again")
		return
	}
	req, err := getpingd.ParseWebhookRequest(r.Body)
	switch {
	case errors.Is(err, getpingd.ErrWebhookTooLarge), isTooLarge(err):
		writeText(w, http.StatusRequestEntityTooLarge, getpingd.ErrWebhookTooLarge.Error())
		return
	case err != nil:
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	if !requireReader(a.hub, w, r, n) {
		return
	}
	ctx := r.Context()
	log := a.log.With("node", n.Name, "callback", redactCallback(req.Href))
	if req.Action == getpingd.Subscribe {
		if err := a.checkOutbound(ctx, "the callback", req.Href); err != nil {
			writeText(w, http.StatusBadRequest, err.Error())
			return
		}
		_, outcome, err := a.hub.RequestSubscription(ctx, hub.Subscription{
			NodeName: n.Name,
			Kind:     hub.KindWebhook,
			Address:  req.Href,
			Options:  hub.Options{Method: req.Method, Diff: req.Diff, Secret: req.Secret},
		})
		if err != nil {
			a.writeSubscribeError(w, r, err)
			return
		}
		log.InfoContext(ctx, "webhook subscription requested; verifying intent", "method", req.Method, "diff", req.Diff,
			"signed", req.Secret != "", "request", outcome)
		writeAnswer(w, http.StatusAccepted, getpingd.WebhookAnswer("pending", getpingd.Subscribe, n.Name, req.Href))
		return
	}
	_, outcome, err := a.hub.RequestUnsubscription(ctx, n.Name, hub.KindWebhook, req.Href)
	switch {
	case errors.Is(err, hub.ErrNotFound):
		writeText(w, http.StatusNotFound, fmt.Sprintf("no webhook subscription of that URL to %q", n.Name))
		return
	case err != nil:
		a.writeSubscribeError(w, r, err)
		return
	case outcome == hub.RequestCancelled:
		log.InfoContext(ctx, "unverified webhook subscription cancelled")
		writeAnswer(w, http.StatusOK, getpingd.WebhookAnswer("unsubscribed", getpingd.Unsubscribe, n.Name, req.Href))
		return
	}
	log.InfoContext(ctx, "webhook unsubscription requested; verifying intent")
	writeAnswer(w, http.StatusAccepted, getpingd.WebhookAnswer("pending", getpingd.Unsubscribe, n.Name, req.Href))
}

func (a *GetPingd) writeSubscribeError(w http.ResponseWriter, r *http.Request, err error) {
	if limited := callbackHostLimit(err); limited != nil {
		setRetryAfter(w, limited.RetryAfter)
		writeText(w, limited.status(), limited.What)
		return
	}
	switch {
	case errors.Is(err, hub.ErrInvalid):
		writeText(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, hub.ErrNotFound):
		writeText(w, http.StatusNotFound, "the node or the subscription no longer exists")
	default:
		a.log.ErrorContext(r.Context(), "webhook subscription", "err", err)
		writeText(w, http.StatusInternalServerError, "subscription: internal error")
	}
}

// allowWhitelistRequest takes tokens for a GetPingd XMPP consumer request
// (application/getpingd+xmpp+subscribe+xml) to n: one from the client's
// subscription bucket and, unless the request carries the node's or the
// admin token, one from the node's bucket. The node's bucket bounds what
// strangers can ask of one node from many addresses (and guesses of its
// token); its owner is not held up by them.
func (a *GetPingd) allowWhitelistRequest(r *http.Request, n *hub.Node) *RateLimitError {
	if limited := a.limits.allow(clientIP(r)); limited != nil {
		return limited
	}
	if token, ok := bearerToken(r); ok && a.hub.Authorize(n, token) {
		return nil
	}
	if ok, wait := a.nodeLimit.Allow(strconv.FormatInt(n.ID, 10), time.Now()); !ok {
		return &RateLimitError{RetryAfter: wait, What: fmt.Sprintf("too many requests for the node %q without its token", n.Name)}
	}
	return nil
}
