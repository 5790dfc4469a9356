package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/nodeurl"
	"github.com/pingd/pingd/internal/rsscloud"
	"github.com/pingd/pingd/internal/xmlrpc"
)

// rssCloud registration (pleaseNotify): REST at /pleaseNotify and XML-RPC
// as rssCloud.pleaseNotify and xmlStorageSystem.rssPleaseNotify. Each
// resource is read first (hub.ReadResource): one that cannot be read is
// refused before anything is stored or anyone is called. The answer comes
// only after the registration is checked and stored: the delivery engine
// does the check (a challenge GET when an http-post registration names a
// domain, a test notification otherwise) and the handler waits for its
// outcome. REST answers are XML, or JSON for Accept: application/json.

// cloudVerifyWait bounds how long pleaseNotify waits for the check of its
// registrations; it exceeds the check's own timeout so that a slow
// callback is judged by the check, not by this wait.
const cloudVerifyWait = rsscloud.VerifyTimeout + 10*time.Second

// RSSCloudHub is what rssCloud's registrations ask of the hub.
type RSSCloudHub interface {
	Serves(kind hub.Kind) bool
	Node(ctx context.Context, name string) (*hub.Node, error)
	NodeForURL(ctx context.Context, rawURL string, create bool) (*hub.Node, error)
	NodeForURLCreating(ctx context.Context, rawURL string, mayCreate func(context.Context) error) (*hub.Node, error)
	ReadResource(ctx context.Context, rawURL string) error
	Authorize(node *hub.Node, token string) bool
	RequestSubscription(ctx context.Context, s hub.Subscription) (*hub.Subscription, hub.RequestOutcome, error)
	Subscriptions(ctx context.Context, f hub.SubscriptionFilter) ([]hub.Subscription, error)
}

// RSSCloudConfig configures rssCloud's registrations.
type RSSCloudConfig struct {
	Site
	Hub RSSCloudHub
	// RPC is the XML-RPC endpoint the registration methods are added to.
	RPC    *RPC
	Limits *SubscribeLimits
	// CheckHost: see checkOutbound (outbound.go); nil: no early check.
	CheckHost func(ctx context.Context, host string) error
}

// RSSCloud is rssCloud's registration (pleaseNotify) over REST, XML-RPC
// and SOAP. rssCloud.ping is one of the weblog pings (Pings).
type RSSCloud struct {
	site
	hub    RSSCloudHub
	limits *SubscribeLimits
}

// NewRSSCloud returns the registrations and adds their methods to cfg.RPC.
func NewRSSCloud(cfg RSSCloudConfig) (*RSSCloud, error) {
	s, err := newSite("rssCloud", cfg.Site)
	if err != nil {
		return nil, err
	}
	if cfg.Hub == nil || cfg.RPC == nil || cfg.Limits == nil {
		return nil, errors.New("httpapi: rssCloud: no hub, XML-RPC endpoint or subscription limits")
	}
	s.checkHost = cfg.CheckHost
	a := &RSSCloud{site: s, hub: cfg.Hub, limits: cfg.Limits}
	cfg.RPC.Handle("rssCloud.pleaseNotify", a.rpcPleaseNotify)
	cfg.RPC.Handle("xmlStorageSystem.rssPleaseNotify", a.rpcPleaseNotify)
	return a, nil
}

// Routes installs the REST registration (the XML-RPC and SOAP ones are
// on the RPC's /RPC2).
func (a *RSSCloud) Routes(r *mux.Router) {
	r.HandleFunc(nodeurl.PathPleaseNotify, a.restPleaseNotify).Methods(http.MethodPost)
}

// cloudOutcome is what a pleaseNotify call achieved.
type cloudOutcome struct {
	OK  bool
	Msg string
	// Unreadable: refused because a resource could not be read, which
	// XML-RPC callers are told with a fault, as rssCloud servers do.
	Unreadable bool
}

// cloudReadParallel bounds the resources of one registration read at once.
const cloudReadParallel = 8

// pleaseNotify registers the callback for every URL, waits for the checks
// and says how it went. Only a failure to store is returned as an error;
// everything the caller can act on is an outcome with a message.
func (a *RSSCloud) pleaseNotify(ctx context.Context, r *http.Request, reg rsscloud.Registration, remoteIP string) (cloudOutcome, error) {
	// Each URL is checked with a call of its own (a test notification or a
	// challenge): up to rsscloud.MaxURLs calls for one request, so each
	// takes a token.
	if limited := a.limits.allowN(remoteIP, len(reg.URLs)); limited != nil {
		return cloudOutcome{}, limited
	}
	if !a.hub.Serves(hub.KindRSSCloud) {
		return cloudOutcome{Msg: "This server does not send rssCloud notifications."}, nil
	}
	callback, err := reg.Callback(remoteIP)
	if err != nil {
		return cloudOutcome{Msg: err.Error()}, nil
	}
	if err := a.checkOutbound(ctx, "the callback", callback); err != nil {
		return cloudOutcome{Msg: err.Error()}, nil
	}
	for _, u := range reg.URLs {
		if err := a.checkOutbound(ctx, "the URL", u); err != nil {
			return cloudOutcome{Msg: fmt.Sprintf("Can't register for %s: %v.", u, err)}, nil
		}
	}
	// Reading a URL no node follows is a fetch of the caller's choosing,
	// as creating its node is: it takes the implicit-node token now (an
	// unreadable URL is never created, so nothing else would charge it),
	// and the creation below takes none.
	paid := map[string]bool{}
	for _, u := range reg.URLs {
		if _, own := a.ownNodeName(u); own || paid[u] {
			continue
		}
		if _, err := a.hub.NodeForURL(ctx, u, false); errors.Is(err, hub.ErrNotFound) {
			if limited := a.limits.allowImplicitNode(remoteIP); limited != nil {
				return cloudOutcome{}, limited
			}
			paid[u] = true
		}
	}
	log := a.log.With("callback", redactCallback(callback), "protocol", reg.Protocol, "urls", len(reg.URLs))
	if u, err := a.readResources(ctx, reg.URLs); err != nil {
		log.InfoContext(ctx, "rssCloud registration refused: a resource could not be read", "url", u, "err", err)
		return cloudOutcome{Msg: rsscloud.ReadResourceMessage(u), Unreadable: true}, nil
	}
	nodes := make([]*hub.Node, len(reg.URLs))
	for i, u := range reg.URLs {
		n, err := subscribedNode(ctx, &a.site, a.hub, a.limits, u, remoteIP, paid[u])
		var limited *RateLimitError
		switch {
		case errors.As(err, &limited):
			return cloudOutcome{}, limited
		case errors.Is(err, hub.ErrInvalid) || errors.Is(err, hub.ErrNotFound):
			return cloudOutcome{Msg: fmt.Sprintf("Can't register for %s: %v.", u, err)}, nil
		case err != nil:
			return cloudOutcome{}, fmt.Errorf("find node of %s: %w", u, err)
		}
		if ok, _ := mayRead(a.hub, r, n); !ok {
			return cloudOutcome{Msg: fmt.Sprintf("Can't register for %s: it belongs to a whitelist node; the request needs its bearer token.", u)}, nil
		}
		nodes[i] = n
	}
	opts := hub.Options{Protocol: reg.Protocol, Procedure: reg.Procedure}
	if reg.Domain != "" {
		opts.Verify = map[string]string{rsscloud.VerifyDomain: reg.Domain}
	}
	subs := make([]cloudRequest, len(reg.URLs))
	for i, u := range reg.URLs {
		o := opts
		o.Topic = u
		// A registration naming the callback of a verified one is its
		// pending change: the registration stays as it is unless the new
		// one passes its check.
		sub, outcome, err := a.hub.RequestSubscription(ctx, hub.Subscription{
			NodeName: nodes[i].Name, Kind: hub.KindRSSCloud, Address: subscriberAddress(callback, u), Options: o,
		})
		if limited := callbackHostLimit(err); limited != nil {
			return cloudOutcome{}, limited
		}
		if err != nil {
			return cloudOutcome{}, fmt.Errorf("register %s for %s: %w", redactCallback(callback), u, err)
		}
		subs[i] = cloudRequest{sub: sub, change: outcome == hub.RequestChangePending}
	}
	failed := a.awaitVerified(ctx, subs, cloudVerifyWait)
	if len(failed) > 0 {
		how := "the test notification to " + callback + " failed"
		if reg.Domain != "" {
			how = "the callback " + callback + " did not echo the challenge"
		}
		log.InfoContext(ctx, "rssCloud registration refused", "failed", len(failed))
		return cloudOutcome{Msg: fmt.Sprintf("The registration for %s was not accepted: %s.", strings.Join(failed, ", "), how)}, nil
	}
	log.InfoContext(ctx, "rssCloud registration stored")
	return cloudOutcome{OK: true, Msg: rsscloud.MsgRegistered}, nil
}

// readResources reads every URL of a registration but pingd's own node
// URLs (their nodes were looked up already), a few at a time, all within
// rsscloud.VerifyTimeout, and returns the first URL (in the request's
// order) that could not be read, with why.
func (a *RSSCloud) readResources(ctx context.Context, urls []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, rsscloud.VerifyTimeout)
	defer cancel()
	errs := make([]error, len(urls))
	sem := make(chan struct{}, cloudReadParallel)
	var wg sync.WaitGroup
	for i, u := range urls {
		if _, own := a.ownNodeName(u); own {
			continue
		}
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			errs[i] = a.hub.ReadResource(ctx, u)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return urls[i], err
		}
	}
	return "", nil
}

// cloudRequest is one stored registration request: a subscription, new or
// not verified yet, or the pending change of a verified one.
type cloudRequest struct {
	sub    *hub.Subscription
	change bool
}

// awaitVerified waits until each request has been decided and returns the
// topics of those that did not succeed: a subscription removed by a failed
// check, a change refused or replaced by a newer request, or either still
// waiting when the wait ended.
func (a *RSSCloud) awaitVerified(ctx context.Context, reqs []cloudRequest, wait time.Duration) []string {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	waiting := slices.Clone(reqs)
	var failed []string
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for len(waiting) > 0 {
		select {
		case <-ctx.Done():
			for _, r := range waiting {
				failed = append(failed, r.sub.Options.Topic)
			}
			return failed
		case <-tick.C:
		}
		still := waiting[:0]
		for _, r := range waiting {
			s := r.sub
			now, err := a.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: s.NodeID, Kind: s.Kind, Address: s.Address})
			switch {
			case err != nil && ctx.Err() == nil:
				a.log.WarnContext(ctx, "read subscription state", "err", err)
				still = append(still, r)
			case err != nil:
				still = append(still, r)
			case len(now) == 0:
				failed = append(failed, s.Options.Topic)
			case r.change && now[0].Change.ID != s.Change.ID:
				failed = append(failed, s.Options.Topic) // replaced by a newer registration
			case r.change && now[0].Change.Pending():
				still = append(still, r)
			case r.change && now[0].Change.Outcome != hub.ChangeApplied:
				failed = append(failed, s.Options.Topic)
			case r.change:
			case now[0].State == hub.SubPending:
				still = append(still, r)
			case now[0].State != hub.SubActive:
				failed = append(failed, s.Options.Topic)
			}
		}
		waiting = still
	}
	return failed
}

// restPleaseNotify is POST /pleaseNotify: the REST form, answered with
// <notifyResult success="…" msg="…"/>, or {"success": …, "msg": "…"} for
// a client that prefers JSON.
func (a *RSSCloud) restPleaseNotify(w http.ResponseWriter, r *http.Request) {
	format := negotiateFormat(r.Header.Get("Accept"), formatXML, formatJSON)
	answer := func(code int, ok bool, msg string) {
		writeCloudResult(w, format, rsscloud.ElemNotifyResult, code, ok, msg)
	}
	if !a.limitBody(w, r, func(msg string) { answer(http.StatusRequestEntityTooLarge, false, msg) }) {
		return
	}
	if err := r.ParseForm(); err != nil {
		if isTooLarge(err) {
			answer(http.StatusRequestEntityTooLarge, false, a.tooLargeMessage())
		} else {
			answer(http.StatusBadRequest, false, "The form could not be read: "+err.Error())
		}
		return
	}
	// r.Form: the body's fields and, for lenience, the query's.
	reg, err := rsscloud.ParsePleaseNotifyForm(r.Form)
	if err != nil {
		answer(http.StatusBadRequest, false, err.Error())
		return
	}
	out, err := a.pleaseNotify(r.Context(), r, reg, clientIP(r))
	var limited *RateLimitError
	if errors.As(err, &limited) {
		setRetryAfter(w, limited.RetryAfter)
		answer(limited.status(), false, limited.Error())
		return
	}
	if err != nil {
		a.log.ErrorContext(r.Context(), "rssCloud registration not stored", "err", err)
		answer(http.StatusInternalServerError, false, "The registration could not be stored; please try again later.")
		return
	}
	answer(http.StatusOK, out.OK, out.Msg)
}

// writeCloudResult answers a REST call of the rssCloud family as its
// clients expect: <element success="…" msg="…"/> in text/xml, or the same
// as a JSON object when format is formatJSON.
func writeCloudResult(w http.ResponseWriter, format, element string, code int, ok bool, msg string) {
	h := w.Header()
	h.Add("Vary", "Accept")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	var body []byte
	if format == formatJSON {
		h.Set("Content-Type", "application/json")
		body = rsscloud.EncodeJSONResult(ok, msg)
	} else {
		h.Set("Content-Type", "text/xml; charset=utf-8")
		body = rsscloud.EncodeResult(element, ok, msg)
	}
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// rpcPleaseNotify is rssCloud.pleaseNotify(procedure, port, path,
// protocol, urls[, domain]) and its xmlStorageSystem alias. It answers
// true once every URL is registered and false when a check failed; a
// resource that cannot be read is a fault (rsscloud.FaultCode) with the
// message rssCloud servers give, and malformed calls get invalid-params
// faults.
func (a *RSSCloud) rpcPleaseNotify(ctx context.Context, req *RPCRequest) (any, error) {
	const signature = "(notifyProcedure, port, path, protocol, urlList[, domain])"
	if err := wantParams(req, 5, 6, signature); err != nil {
		return nil, err
	}
	protocol, err := stringParam(req, 3, "protocol")
	if err != nil {
		return nil, err
	}
	// The procedure means something only to the protocols that call one;
	// for the others clients send whatever their library makes of "none":
	// false, "", a placeholder. It is ignored, whatever its type.
	var procedure string
	if protocol == rsscloud.XMLRPC || protocol == rsscloud.SOAP {
		if procedure, err = stringParam(req, 0, "notifyProcedure"); err != nil {
			return nil, err
		}
	}
	var port string
	switch p := req.Params[1].(type) {
	case int:
		port = strconv.Itoa(p)
	case string:
		port = p
	default:
		return nil, xmlrpc.Errorf(xmlrpc.FaultInvalidParams, "%s: parameter 2 (port) must be an int, not %s", req.Method, xmlrpc.TypeName(p))
	}
	path, err := stringParam(req, 2, "path")
	if err != nil {
		return nil, err
	}
	var urls []string
	switch list := req.Params[4].(type) {
	case []any:
		for i, v := range list {
			s, ok := v.(string)
			if !ok {
				return nil, xmlrpc.Errorf(xmlrpc.FaultInvalidParams, "%s: urlList item %d must be a string, not %s", req.Method, i+1, xmlrpc.TypeName(v))
			}
			urls = append(urls, s)
		}
	case string: // one URL, as some clients send it
		urls = []string{list}
	default:
		return nil, xmlrpc.Errorf(xmlrpc.FaultInvalidParams, "%s: parameter 5 (urlList) must be an array of URLs, not %s", req.Method, xmlrpc.TypeName(list))
	}
	var domain string
	if len(req.Params) == 6 {
		if domain, err = stringParam(req, 5, "domain"); err != nil {
			return nil, err
		}
	}
	reg, err := rsscloud.NewRegistration(procedure, port, path, protocol, urls, domain)
	if err != nil {
		return nil, xmlrpc.Errorf(xmlrpc.FaultInvalidParams, "%s: %v", req.Method, err)
	}
	out, err := a.pleaseNotify(ctx, req.HTTP, reg, req.Remote)
	if err != nil {
		return nil, err
	}
	if out.Unreadable {
		return nil, &xmlrpc.Fault{Code: rsscloud.FaultCode, Message: out.Msg}
	}
	if !out.OK {
		a.log.InfoContext(ctx, "rssCloud registration answered false", "method", req.Method, "why", out.Msg)
	}
	return out.OK, nil
}
