package httpapi

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/nodeurl"
	"github.com/pingd/pingd/whitelist"
)

// acceptedSubscribeTypes are the request types SUBSCRIBE takes, in the
// order the XRDS document lists them.
var acceptedSubscribeTypes = []string{getpingd.ContentTypeHTTPSubscribe, getpingd.ContentTypeXMPPSubscribe}

func (a *API) getPingdRoutes(r *mux.Router) {
	r.HandleFunc("/feeds/{node}", a.descriptor).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/feeds/{node}", a.subscribeRequest).Methods(getpingd.MethodSubscribe, http.MethodPost)
	r.HandleFunc("/xrds/{node}", a.xrds).Methods(http.MethodGet, http.MethodHead)
}

// loadNode loads the node named in the path, answering 400 or 404 (plain
// text) itself.
func (a *API) loadNode(w http.ResponseWriter, r *http.Request) (*hub.Node, bool) {
	name, ok := pathVar(r, "node")
	if !ok {
		writeText(w, http.StatusBadRequest, "the node name is not validly percent-encoded")
		return nil, false
	}
	n, err := a.hub.Node(r.Context(), name)
	switch {
	case errors.Is(err, hub.ErrNotFound):
		writeText(w, http.StatusNotFound, fmt.Sprintf("no node %q", name))
		return nil, false
	case err != nil:
		a.log.ErrorContext(r.Context(), "load node", "node", name, "err", err)
		writeText(w, http.StatusInternalServerError, "load node: internal error")
		return nil, false
	}
	return n, true
}

// mayRead reports whether the request may read the node's content and
// subscribe to it over HTTP: always on an open node; on a whitelist node
// only with "Authorization: Bearer" and the node's or the admin token.
// tokenGiven says whether a bearer token was sent at all.
func (a *API) mayRead(r *http.Request, n *hub.Node) (ok, tokenGiven bool) {
	if n.AccessModel != hub.AccessWhitelist {
		return true, false
	}
	token, given := bearerToken(r)
	return given && a.hub.Authorize(n, token), given
}

// requireReader answers 401 and returns false unless mayRead allows the
// request. The node feeds, GetPingd webhook subscriptions and WebSub
// subscriptions of whitelist nodes go through it.
func (a *API) requireReader(w http.ResponseWriter, r *http.Request, n *hub.Node) bool {
	ok, given := a.mayRead(r, n)
	if !ok {
		unauthorized(w, given, fmt.Sprintf("%q is a whitelist node: its content needs the node's or the admin bearer token", n.Name))
	}
	return ok
}

// unauthorized answers 401 with a Bearer challenge; invalid says a token
// was sent but is not the right one.
func unauthorized(w http.ResponseWriter, invalid bool, msg string) {
	challenge := `Bearer realm="pingd"`
	if invalid {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	writeText(w, http.StatusUnauthorized, msg)
}

// descriptor serves the node's GetPingd descriptor: the XRDS document when
// the client prefers application/xrds+xml, else the HTML page pointing at
// it. Both carry X-XRDS-Location and say which request types SUBSCRIBE
// takes (Accept-Post).
func (a *API) descriptor(w http.ResponseWriter, r *http.Request) {
	n, ok := a.loadNode(w, r)
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
func (a *API) xrds(w http.ResponseWriter, r *http.Request) {
	n, ok := a.loadNode(w, r)
	if !ok {
		return
	}
	d, _, ok := a.descriptorOf(w, r, n)
	if !ok {
		return
	}
	writeBody(w, r, discovery.ContentTypeXRDS, discovery.XRDS(d))
}

func (a *API) descriptorOf(w http.ResponseWriter, r *http.Request, n *hub.Node) (discovery.Descriptor, nodeurl.Links, bool) {
	d, err := discovery.NewDescriptor(a.publicURL, a.cfg.ComponentJID, n)
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
func (a *API) subscribeRequest(w http.ResponseWriter, r *http.Request) {
	n, ok := a.loadNode(w, r)
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
	limit := min(a.cfg.MaxBodyBytes, getpingd.MaxRequestBytes)
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
func (a *API) whitelistRequest(w http.ResponseWriter, r *http.Request, n *hub.Node) {
	if limited := a.allowWhitelistRequest(r, n); limited != nil {
		setRetryAfter(w, limited.RetryAfter)
		writeText(w, http.StatusTooManyRequests, limited.What+"; please wait before asking again")
		return
	}
	req, err := whitelist.ParseConsumerRequest(r.Body)
	if err == nil {
		token, _ := bearerToken(r)
		var doc []byte
		if doc, err = whitelist.NewService(a.hub, a.log).Apply(r.Context(), n.Name, req, token); err == nil {
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
func (a *API) webhookRequest(w http.ResponseWriter, r *http.Request, n *hub.Node) {
	if limited := a.allowSubscribe(clientIP(r)); limited != nil {
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
	if !a.requireReader(w, r, n) {
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

func (a *API) writeSubscribeError(w http.ResponseWriter, r *http.Request, err error) {
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

// redactCallback drops the query of a callback URL for logs: receivers
// often put secrets there.
func redactCallback(href string) string {
	base, query, found := strings.Cut(href, "?")
	if found && query != "" {
		return base + "?…"
	}
	return base
}
