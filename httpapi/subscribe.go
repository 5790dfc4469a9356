package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
)

// What the dialects that name a URL (rssCloud, CNWS, WebSub) and the
// GetPingd requests share: which node a URL names, the subscriber address
// a subscription is stored under, and who may read a whitelist node.

// nodeGetter finds a node by name (*hub.Hub has it).
type nodeGetter interface {
	Node(ctx context.Context, name string) (*hub.Node, error)
}

// nodeFinder finds the node a URL names, creating an implicit one when
// asked (*hub.Hub has it).
type nodeFinder interface {
	Node(ctx context.Context, name string) (*hub.Node, error)
	NodeForURL(ctx context.Context, rawURL string, create bool) (*hub.Node, error)
	NodeForURLCreating(ctx context.Context, rawURL string, mayCreate func(context.Context) error) (*hub.Node, error)
}

// nodeAuthorizer checks a node's or the admin token (*hub.Hub has it).
type nodeAuthorizer interface {
	Authorize(node *hub.Node, token string) bool
}

// subscriberAddress is the address a URL-level subscription is stored
// under: the callback with the topic in its fragment. Subscriptions are
// keyed by node, kind and address, while these protocols key them by
// callback and topic, and several topics can name one node (a feed, its
// site, pingd's own feeds of it). HTTP clients never send a fragment, so
// deliveries go to the callback itself. Both are in canonical form
// (hub.CanonicalURL): the same callback and topic spelled another way are
// the same subscription.
func subscriberAddress(callback, topic string) string {
	callback, _, _ = strings.Cut(callback, "#")
	if c, err := hub.CanonicalURL(callback); err == nil {
		callback = c
	}
	if c, err := hub.CanonicalURL(topic); err == nil {
		topic = c
	}
	return callback + "#" + url.QueryEscape(topic)
}

// resourceNode returns the node a URL-level subscription (rssCloud, CNWS,
// WebSub) names: one of pingd's own node URLs (descriptor, XRDS, Atom,
// RSS) is that node; any other URL is the node following it. A request
// that may create the node goes through subscribedNode.
func resourceNode(ctx context.Context, s *site, h nodeFinder, raw string) (*hub.Node, error) {
	if name, ok := s.ownNodeName(raw); ok {
		n, err := h.Node(ctx, name)
		if errors.Is(err, hub.ErrNotFound) {
			return nil, fmt.Errorf("%w: pingd has no node %q", hub.ErrNotFound, name)
		}
		return n, err
	}
	return h.NodeForURL(ctx, raw, false)
}

// subscribedNode is resourceNode for a subscription request from
// clientIP, creating the implicit node when no node follows the URL. A
// creation costs a token of the client's bucket of new implicit nodes, and
// is refused when pingd follows as many URLs for subscribers as it may;
// both refusals are a *RateLimitError (429 and 503, with Retry-After).
// paid says the request took the implicit-node token for raw already, as
// an rssCloud read does.
func subscribedNode(ctx context.Context, s *site, h nodeFinder, limits *SubscribeLimits, raw, clientIP string, paid bool) (*hub.Node, error) {
	if _, ok := s.ownNodeName(raw); ok {
		return resourceNode(ctx, s, h, raw)
	}
	n, err := h.NodeForURLCreating(ctx, raw, func(context.Context) error {
		if paid {
			return nil
		}
		if limited := limits.allowImplicitNode(clientIP); limited != nil {
			return limited
		}
		return nil
	})
	if errors.Is(err, hub.ErrImplicitNodesFull) {
		return nil, &RateLimitError{RetryAfter: implicitNodesFullRetry, Status: http.StatusServiceUnavailable, What: err.Error()}
	}
	return n, err
}

// implicitNodesFullRetry is the Retry-After of a refusal because pingd
// follows as many URLs for subscribers as it may: room is made by the
// removal of unused implicit nodes, which takes hours, not seconds.
const implicitNodesFullRetry = time.Hour

// mayRead reports whether the request may read the node's content and
// subscribe to it over HTTP: always on an open node; on a whitelist node
// only with "Authorization: Bearer" and the node's or the admin token.
// tokenGiven says whether a bearer token was sent at all.
func mayRead(auth nodeAuthorizer, r *http.Request, n *hub.Node) (ok, tokenGiven bool) {
	if n.AccessModel != hub.AccessWhitelist {
		return true, false
	}
	token, given := bearerToken(r)
	return given && auth.Authorize(n, token), given
}

// requireReader answers 401 and returns false unless mayRead allows the
// request. The node feeds, GetPingd webhook subscriptions and WebSub
// subscriptions of whitelist nodes go through it.
func requireReader(auth nodeAuthorizer, w http.ResponseWriter, r *http.Request, n *hub.Node) bool {
	ok, given := mayRead(auth, r, n)
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

// redactCallback drops the query of a callback URL for logs: receivers
// often put secrets there.
func redactCallback(href string) string {
	base, query, found := strings.Cut(href, "?")
	if found && query != "" {
		return base + "?…"
	}
	return base
}

// ownNodeSource is what a ping of raw fetches: raw itself, or, when raw
// is one of pingd's own node feeds, its node's source (nothing for a node
// without a source, or no such node: owners publish to it over XMPP).
func ownNodeSource(ctx context.Context, s *site, nodes nodeGetter, raw string) ([]string, error) {
	name, ok := s.ownNodeName(raw)
	if !ok {
		return []string{raw}, nil
	}
	n, err := nodes.Node(ctx, name)
	switch {
	case errors.Is(err, hub.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("node of %s: %w", raw, err)
	case n.SourceURL == "":
		return nil, nil
	}
	return []string{n.SourceURL}, nil
}
