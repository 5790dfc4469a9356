package httpapi

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/nodeurl"
	"github.com/pingd/pingd/internal/xmppaddr"
)

func (a *API) adminRoutes(r *mux.Router) {
	const node = "/api/nodes/{node}"
	r.Handle("/api/nodes", a.admin(a.listNodes)).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/api/nodes", a.admin(a.createNode)).Methods(http.MethodPost)
	r.Handle(node, a.admin(a.getNode)).Methods(http.MethodGet, http.MethodHead)
	r.Handle(node, a.admin(a.deleteNode)).Methods(http.MethodDelete)
	r.Handle(node, a.admin(a.patchNode)).Methods(http.MethodPatch)
	r.Handle("/api/relay", a.admin(a.getRelay)).Methods(http.MethodGet, http.MethodHead)
	r.Handle(node+"/token", a.admin(a.rotateToken)).Methods(http.MethodPost)
	r.Handle(node+"/whitelist", a.admin(a.getWhitelist)).Methods(http.MethodGet, http.MethodHead)
	r.Handle(node+"/whitelist/{jid}", a.admin(a.putWhitelist)).Methods(http.MethodPut)
	r.Handle(node+"/whitelist/{jid}", a.admin(a.deleteWhitelist)).Methods(http.MethodDelete)
	r.Handle(node+"/subscribers", a.admin(a.getSubscribers)).Methods(http.MethodGet, http.MethodHead)
	r.Handle(node+"/status", a.admin(a.getStatus)).Methods(http.MethodGet, http.MethodHead)
}

// admin wraps an admin handler: the per-client rate limit first (so
// guessing tokens is slow too), then the bearer token.
func (a *API) admin(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, wait := a.adminLimit.Allow(clientIP(r), time.Now()); !ok {
			setRetryAfter(w, wait)
			writeJSONError(w, http.StatusTooManyRequests, "too many requests; retry later")
			return
		}
		token, ok := bearerToken(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pingd"`)
			writeJSONError(w, http.StatusUnauthorized, "missing bearer token")
			return
		}
		if !a.hub.IsAdminToken(token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pingd", error="invalid_token"`)
			writeJSONError(w, http.StatusUnauthorized, "wrong bearer token")
			return
		}
		h(w, r)
	})
}

// bearerToken returns the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// nodeJSON is a node as the admin API shows it.
type nodeJSON struct {
	Name             string          `json:"name"`
	Title            string          `json:"title"`
	Source           string          `json:"source"`
	AccessModel      hub.AccessModel `json:"access_model"`
	MaxItems         int             `json:"max_items"`
	DeliverPayloads  bool            `json:"deliver_payloads"`
	NotificationType string          `json:"notification_type"`
	SendLastItem     string          `json:"send_last_published_item"`
	Polling          hub.FeedPolling `json:"polling"`
	Implicit         bool            `json:"implicit"`
	Created          time.Time       `json:"created"`
	Updated          time.Time       `json:"updated"`
	LastSeq          int64           `json:"last_seq"`
	Links            nodeLinks       `json:"links"`
	// Snippets are what a publisher pastes into its pages and feeds.
	Snippets discovery.PublisherSnippets `json:"snippets"`
	// Token is set only in the answer that creates the node.
	Token string `json:"token,omitempty"`
	// Discovered says which feed was chosen when the source given was a
	// page (only in the answer that creates the node).
	Discovered *discoveredJSON `json:"discovered,omitempty"`
}

// discoveredJSON is what discovery found on a page given as a source.
type discoveredJSON struct {
	From         string   `json:"from"`
	Feed         string   `json:"feed"`
	Alternatives []string `json:"alternatives"`
}

// nodeLinks are the node's URLs: descriptor, subscribe, xrds, atom, rss,
// hub and please_notify.
type nodeLinks = nodeurl.Links

func (a *API) nodeJSON(n *hub.Node) nodeJSON {
	// The public URL was validated by New, so neither call fails; if one
	// did, the answer would lack links rather than fail.
	links, _ := nodeurl.NodeLinks(a.publicURL, n.Name)
	var snippets discovery.PublisherSnippets
	if cloud, err := a.cloudOf(links); err == nil {
		snippets = discovery.SnippetsWith(links, cloud)
	}
	return nodeJSON{
		Name:             n.Name,
		Title:            n.Title,
		Source:           n.SourceURL,
		AccessModel:      n.AccessModel,
		MaxItems:         n.MaxItems,
		DeliverPayloads:  n.DeliverPayloads,
		NotificationType: n.NotificationType,
		SendLastItem:     n.SendLastPublished,
		Polling:          n.Polling,
		Implicit:         n.Implicit,
		Created:          n.CreatedAt,
		Updated:          n.UpdatedAt,
		LastSeq:          n.LastSeq,
		Links:            links,
		Snippets:         snippets,
	}
}

// createNodeRequest is the body of POST /api/nodes. The configuration
// fields beyond the contract's four are optional.
type createNodeRequest struct {
	Node             string          `json:"node"`
	Source           string          `json:"source"`
	Title            string          `json:"title"`
	AccessModel      hub.AccessModel `json:"access_model"`
	MaxItems         int             `json:"max_items"`
	DeliverPayloads  *bool           `json:"deliver_payloads"`
	NotificationType string          `json:"notification_type"`
	// SendLastItem is XEP-0060's send_last_published_item: on_sub or never.
	SendLastItem string `json:"send_last_published_item"`
	// Polling are the hints the node's own feeds give their readers.
	Polling *hub.FeedPolling `json:"polling"`
}

// patchNodeRequest changes a node's configuration; fields left out keep
// their values. Making a node whitelist-only ends the XMPP subscriptions of
// non-members, as over XMPP (the hub does it for every entry point).
type patchNodeRequest struct {
	Title            *string          `json:"title"`
	MaxItems         *int             `json:"max_items"`
	DeliverPayloads  *bool            `json:"deliver_payloads"`
	NotificationType *string          `json:"notification_type"`
	SendLastItem     *string          `json:"send_last_published_item"`
	Polling          *hub.FeedPolling `json:"polling"`
	AccessModel      *hub.AccessModel `json:"access_model"`
}

// patchNode is PATCH /api/nodes/{node}.
func (a *API) patchNode(w http.ResponseWriter, r *http.Request) {
	n, ok := a.node(w, r)
	if !ok {
		return
	}
	var req patchNodeRequest
	if !a.readJSON(w, r, &req) {
		return
	}
	cfg := n.NodeConfig
	if req.AccessModel != nil {
		cfg.AccessModel = *req.AccessModel
	}
	if req.Title != nil {
		cfg.Title = *req.Title
	}
	if req.MaxItems != nil {
		cfg.MaxItems = *req.MaxItems // 0: the default
	}
	if req.DeliverPayloads != nil {
		cfg.DeliverPayloads = *req.DeliverPayloads
	}
	if req.NotificationType != nil {
		cfg.NotificationType = *req.NotificationType // "": the default
	}
	if req.SendLastItem != nil {
		cfg.SendLastPublished = *req.SendLastItem // "": the default
	}
	if req.Polling != nil {
		cfg.Polling = *req.Polling
	}
	if err := a.hub.ConfigureNode(r.Context(), n.Name, cfg); err != nil {
		a.writeHubError(w, r, err, "configure node")
		return
	}
	updated, err := a.hub.Node(r.Context(), n.Name)
	if err != nil {
		a.writeHubError(w, r, err, "load node")
		return
	}
	writeJSON(w, http.StatusOK, a.nodeJSON(updated))
}

func (a *API) createNode(w http.ResponseWriter, r *http.Request) {
	var req createNodeRequest
	if !a.readJSON(w, r, &req) {
		return
	}
	if req.Node == "" {
		writeJSONError(w, http.StatusBadRequest, `"node" is required`)
		return
	}
	// The hub checks the name again; checked here, a refused name costs
	// no look at the source.
	if err := hub.ValidNewNodeName(req.Node); err != nil {
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	cfg := hub.DefaultNodeConfig()
	cfg.Title = req.Title
	if req.AccessModel != "" {
		cfg.AccessModel = req.AccessModel
	}
	if req.MaxItems != 0 {
		cfg.MaxItems = req.MaxItems
	}
	if req.DeliverPayloads != nil {
		cfg.DeliverPayloads = *req.DeliverPayloads
	}
	if req.NotificationType != "" {
		cfg.NotificationType = req.NotificationType
	}
	if req.SendLastItem != "" {
		cfg.SendLastPublished = req.SendLastItem
	}
	if req.Polling != nil {
		cfg.Polling = *req.Polling
	}
	if req.Source != "" {
		if err := a.checkOutbound(r.Context(), "the source", req.Source); err != nil {
			writeJSONError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	var discovered *discoveredJSON
	if req.Source != "" && a.cfg.Resolver != nil {
		// A page given as the source stands for the feed it links to. A
		// source that cannot be fetched yet is kept as given (201, shown
		// in the status); a reachable page without any feed is refused.
		res, err := a.cfg.Resolver.ResolveSource(r.Context(), req.Source)
		switch {
		case errors.Is(err, discovery.ErrNoFeed):
			writeJSONError(w, http.StatusUnprocessableEntity, fmt.Sprintf("%s is a web page that links to no RSS or Atom feed; give the feed's URL", req.Source))
			return
		case err != nil:
			a.log.InfoContext(r.Context(), "source not reachable yet; kept as given", "source", req.Source, "err", err)
		case res.FromPage:
			if err := a.checkOutbound(r.Context(), "the feed found on the page", res.FeedURL); err != nil {
				writeJSONError(w, http.StatusBadRequest, err.Error())
				return
			}
			discovered = &discoveredJSON{From: req.Source, Feed: res.FeedURL, Alternatives: res.Alternatives}
			if discovered.Alternatives == nil {
				discovered.Alternatives = []string{}
			}
			req.Source = res.FeedURL
		}
	}
	n, token, err := a.hub.CreateNode(r.Context(), hub.NodeSpec{Name: req.Node, Source: req.Source, Config: cfg})
	if err != nil {
		a.writeHubError(w, r, err, "create node")
		return
	}
	out := a.nodeJSON(n)
	out.Token = token
	out.Discovered = discovered
	w.Header().Set("Location", "/api/nodes/"+url.PathEscape(n.Name))
	w.Header().Set("Cache-Control", "no-store") // the token is in it
	writeJSON(w, http.StatusCreated, out)
}

func (a *API) listNodes(w http.ResponseWriter, r *http.Request) {
	nodes, err := a.hub.Nodes(r.Context())
	if err != nil {
		a.writeHubError(w, r, err, "list nodes")
		return
	}
	// Streamed node by node, in the form writeJSON gives: each node's
	// JSON carries its links and snippets (a few KB), so building the
	// whole answer first cost 85 MB at 10,000 nodes.
	setJSONHeaders(w)
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteString("{\n  \"nodes\": [")
	for i := range nodes {
		b, err := json.MarshalIndent(a.nodeJSON(&nodes[i]), "    ", "  ")
		if err != nil {
			// Nothing in a node fails to encode; if it did, the client
			// gets a truncated document rather than a wrong one.
			a.log.ErrorContext(r.Context(), "list nodes: encode", "node", nodes[i].Name, "err", err)
			bw.Flush()
			panic(http.ErrAbortHandler)
		}
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n    ")
		bw.Write(b)
	}
	if len(nodes) > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("]\n}\n")
	bw.Flush()
}

// node loads the node named in the path, answering 400 or 404 itself.
func (a *API) node(w http.ResponseWriter, r *http.Request) (*hub.Node, bool) {
	name, ok := pathVar(r, "node")
	if !ok {
		writeJSONError(w, http.StatusBadRequest, "the node name is not validly percent-encoded")
		return nil, false
	}
	n, err := a.hub.Node(r.Context(), name)
	if err != nil {
		a.writeHubError(w, r, err, "load node")
		return nil, false
	}
	return n, true
}

func (a *API) getNode(w http.ResponseWriter, r *http.Request) {
	n, ok := a.node(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, a.nodeJSON(n))
}

func (a *API) deleteNode(w http.ResponseWriter, r *http.Request) {
	name, ok := pathVar(r, "node")
	if !ok {
		writeJSONError(w, http.StatusBadRequest, "the node name is not validly percent-encoded")
		return
	}
	if err := a.hub.DeleteNode(r.Context(), name); err != nil {
		a.writeHubError(w, r, err, "delete node")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) rotateToken(w http.ResponseWriter, r *http.Request) {
	name, ok := pathVar(r, "node")
	if !ok {
		writeJSONError(w, http.StatusBadRequest, "the node name is not validly percent-encoded")
		return
	}
	token, err := a.hub.RotateToken(r.Context(), name)
	if err != nil {
		a.writeHubError(w, r, err, "rotate token")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]string{"token": token})
}

// whitelistEntry is one JID and its affiliation.
type whitelistEntry struct {
	JID         string          `json:"jid"`
	Affiliation hub.Affiliation `json:"affiliation"`
}

func (a *API) getWhitelist(w http.ResponseWriter, r *http.Request) {
	n, ok := a.node(w, r)
	if !ok {
		return
	}
	affs, err := a.hub.Affiliations(r.Context(), n)
	if err != nil {
		a.writeHubError(w, r, err, "list affiliations")
		return
	}
	list := make([]whitelistEntry, 0, len(affs))
	for j, aff := range affs {
		list = append(list, whitelistEntry{JID: j, Affiliation: aff})
	}
	slices.SortFunc(list, func(x, y whitelistEntry) int { return strings.Compare(x.JID, y.JID) })
	writeJSON(w, http.StatusOK, map[string]any{"node": n.Name, "whitelist": list})
}

// bareJID parses the {jid} path variable and reduces it to a normalised
// bare JID, answering 400 itself when it is not a JID.
func bareJID(w http.ResponseWriter, r *http.Request) (string, bool) {
	raw, ok := pathVar(r, "jid")
	if !ok {
		writeJSONError(w, http.StatusBadRequest, "the JID is not validly percent-encoded")
		return "", false
	}
	bare, err := xmppaddr.Bare(raw)
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("invalid JID %q: %v", raw, err))
		return "", false
	}
	return bare, true
}

func (a *API) putWhitelist(w http.ResponseWriter, r *http.Request) {
	n, ok := a.node(w, r)
	if !ok {
		return
	}
	bare, ok := bareJID(w, r)
	if !ok {
		return
	}
	if err := a.hub.SetAffiliation(r.Context(), n, bare, hub.AffMember); err != nil {
		a.writeHubError(w, r, err, "add to whitelist")
		return
	}
	a.log.InfoContext(r.Context(), "whitelist: member added", "node", n.Name, "jid", bare)
	writeJSON(w, http.StatusOK, map[string]any{"node": n.Name, "jid": bare, "affiliation": hub.AffMember})
}

func (a *API) deleteWhitelist(w http.ResponseWriter, r *http.Request) {
	n, ok := a.node(w, r)
	if !ok {
		return
	}
	bare, ok := bareJID(w, r)
	if !ok {
		return
	}
	if err := a.hub.SetAffiliation(r.Context(), n, bare, hub.AffNone); err != nil {
		a.writeHubError(w, r, err, "remove from whitelist")
		return
	}
	a.log.InfoContext(r.Context(), "whitelist: JID removed", "node", n.Name, "jid", bare)
	w.WriteHeader(http.StatusNoContent)
}

// subscriberJSON is a subscription as the admin API shows it: everything
// but secrets (the signing secret and pending verification tokens).
type subscriberJSON struct {
	ID        int64        `json:"id"`
	Kind      hub.Kind     `json:"kind"`
	Address   string       `json:"address"`
	BareJID   string       `json:"bare_jid,omitempty"`
	SubID     string       `json:"subid,omitempty"`
	State     hub.SubState `json:"state"`
	Created   time.Time    `json:"created"`
	Updated   time.Time    `json:"updated"`
	Expires   time.Time    `json:"expires,omitzero"`
	Method    string       `json:"method,omitempty"`
	Diff      string       `json:"diff,omitempty"`
	Topic     string       `json:"topic,omitempty"`
	Lease     int          `json:"lease_seconds,omitempty"`
	SigAlgo   string       `json:"sig_algo,omitempty"`
	HasSecret bool         `json:"has_secret,omitempty"`
	Protocol  string       `json:"protocol,omitempty"`
	Procedure string       `json:"procedure,omitempty"`
	// XMPP: the notifications' format (pubsub or message), message type
	// and readable body. For XMPP the delivery's consecutive_errors,
	// first_failure and last_error count and explain bounced notifications.
	Format      string       `json:"format,omitempty"`
	MessageType string       `json:"message_type,omitempty"`
	IncludeBody bool         `json:"include_body,omitempty"`
	Delivery    deliveryJSON `json:"delivery"`
	// PendingChange is a request about the subscription waiting for its
	// subscriber to verify it; the subscription is served as it is until
	// then.
	PendingChange *changeJSON `json:"pending_change,omitempty"`
}

// changeJSON is a pending change as the admin API shows it: the settings
// asked for, but not the secret.
type changeJSON struct {
	Mode      string    `json:"mode"`
	Requested time.Time `json:"requested"`
	Method    string    `json:"method,omitempty"`
	Diff      string    `json:"diff,omitempty"`
	Lease     int       `json:"lease_seconds,omitempty"`
	HasSecret bool      `json:"has_secret,omitempty"`
	Protocol  string    `json:"protocol,omitempty"`
	Procedure string    `json:"procedure,omitempty"`
}

// changeFrom shows a subscription's pending change; nil when none waits.
func changeFrom(c hub.SubChange) *changeJSON {
	if !c.Pending() {
		return nil
	}
	return &changeJSON{Mode: c.Mode, Requested: c.RequestedAt, Method: c.Options.Method, Diff: c.Options.Diff,
		Lease: c.Options.LeaseSeconds, HasSecret: c.Options.Secret != "", Protocol: c.Options.Protocol,
		Procedure: c.Options.Procedure}
}

type deliveryJSON struct {
	Cursor            int64     `json:"cursor"`
	Attempts          int       `json:"attempts"`
	ConsecutiveErrors int       `json:"consecutive_errors"`
	FirstFailure      time.Time `json:"first_failure,omitzero"`
	NextAttempt       time.Time `json:"next_attempt,omitzero"`
	LastError         string    `json:"last_error,omitempty"`
	LastDelivered     time.Time `json:"last_delivered,omitzero"`
	LastStatus        int       `json:"last_status,omitempty"`
}

func subscriberFrom(s *hub.Subscription) subscriberJSON {
	out := subscriberJSON{
		ID:        s.ID,
		Kind:      s.Kind,
		Address:   s.Address,
		BareJID:   s.BareJID,
		SubID:     s.SubID,
		State:     s.State,
		Created:   s.CreatedAt,
		Updated:   s.UpdatedAt,
		Expires:   s.ExpiresAt,
		Method:    s.Options.Method,
		Diff:      s.Options.Diff,
		Topic:     s.Options.Topic,
		Lease:     s.Options.LeaseSeconds,
		SigAlgo:   s.Options.SigAlgo,
		HasSecret: s.Options.Secret != "",
		Protocol:  s.Options.Protocol,
		Procedure: s.Options.Procedure,
		Delivery: deliveryJSON{
			Cursor:            s.Cursor,
			Attempts:          s.Attempts,
			ConsecutiveErrors: s.ConsecutiveErrors,
			FirstFailure:      s.FirstFailureAt,
			NextAttempt:       s.NextAttemptAt,
			LastError:         s.LastError,
			LastDelivered:     s.LastDeliveredAt,
			LastStatus:        s.LastStatus,
		},
		PendingChange: changeFrom(s.Change),
	}
	if s.Kind == hub.KindXMPP {
		out.Format = cmp.Or(s.Options.Format, hub.FormatPubsub)
		out.MessageType, out.IncludeBody = s.Options.MessageType, s.Options.IncludeBody
	}
	return out
}

func (a *API) getSubscribers(w http.ResponseWriter, r *http.Request) {
	n, ok := a.node(w, r)
	if !ok {
		return
	}
	subs, err := a.hub.Subscriptions(r.Context(), hub.SubscriptionFilter{NodeID: n.ID})
	if err != nil {
		a.writeHubError(w, r, err, "list subscriptions")
		return
	}
	out := make([]subscriberJSON, 0, len(subs))
	for i := range subs {
		out = append(out, subscriberFrom(&subs[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"node": n.Name, "subscribers": out})
}

// sourceJSON is a source's fetch state in the node status.
type sourceJSON struct {
	URL               string    `json:"url"`
	OriginalURL       string    `json:"original_url"`
	MovedFrom         string    `json:"moved_from,omitempty"`
	MovedAt           time.Time `json:"moved_at,omitzero"`
	Gone              bool      `json:"gone"`
	Baselined         bool      `json:"baselined"`
	IsFeed            bool      `json:"is_feed"`
	Title             string    `json:"title,omitempty"`
	SiteURL           string    `json:"site_url,omitempty"`
	ContentType       string    `json:"content_type,omitempty"`
	LastFetch         time.Time `json:"last_fetch,omitzero"`
	LastStatus        int       `json:"last_status,omitempty"`
	LastBytes         int64     `json:"last_bytes"`
	LastNewItems      int       `json:"last_new_items"`
	LastError         string    `json:"last_error,omitempty"`
	ConsecutiveErrors int       `json:"consecutive_errors"`
	LastChange        time.Time `json:"last_change,omitzero"`
	LastPing          time.Time `json:"last_ping,omitzero"`
	NextFetch         time.Time `json:"next_fetch,omitzero"`
	NextFetchReason   string    `json:"next_fetch_reason,omitempty"`
}

func sourceFrom(s *hub.Source) *sourceJSON {
	return &sourceJSON{
		URL:               s.URL,
		OriginalURL:       s.OriginalURL,
		MovedFrom:         s.MovedFrom,
		MovedAt:           s.MovedAt,
		Gone:              s.Gone,
		Baselined:         s.Baselined,
		IsFeed:            s.IsFeed,
		Title:             s.Title,
		SiteURL:           s.SiteURL,
		ContentType:       s.ContentType,
		LastFetch:         s.LastFetchAt,
		LastStatus:        s.LastStatus,
		LastBytes:         s.LastBytes,
		LastNewItems:      s.LastNewItems,
		LastError:         s.LastError,
		ConsecutiveErrors: s.ConsecutiveErrors,
		LastChange:        s.LastChangeAt,
		LastPing:          s.LastPingAt,
		NextFetch:         s.NextFetchAt,
		NextFetchReason:   s.NextFetchReason,
	}
}

type statusJSON struct {
	Node        nodeJSON         `json:"node"`
	Source      *sourceJSON      `json:"source"`
	Subscribers map[hub.Kind]int `json:"subscribers"`
	LastSeq     int64            `json:"last_seq"`
	XMPPSeq     int64            `json:"xmpp_seq"`
	// Upstream lists the push subscriptions pingd holds at the source's
	// own WebSub hub or rssCloud cloud (secrets left out).
	Upstream []upstreamJSON `json:"upstream"`
}

func (a *API) getStatus(w http.ResponseWriter, r *http.Request) {
	n, ok := a.node(w, r)
	if !ok {
		return
	}
	st := statusJSON{
		Node:        a.nodeJSON(n),
		Subscribers: make(map[hub.Kind]int, len(hub.Kinds)),
		LastSeq:     n.LastSeq,
		XMPPSeq:     n.XMPPSeq,
	}
	for _, k := range hub.Kinds {
		st.Subscribers[k] = 0
	}
	subs, err := a.hub.Subscriptions(r.Context(), hub.SubscriptionFilter{NodeID: n.ID})
	if err != nil {
		a.writeHubError(w, r, err, "count subscriptions")
		return
	}
	for _, s := range subs {
		st.Subscribers[s.Kind]++
	}
	if n.SourceID != 0 {
		src, err := a.hub.Source(r.Context(), n.SourceID)
		if err != nil {
			a.writeHubError(w, r, err, "load source")
			return
		}
		st.Source = sourceFrom(src)
		if us, ok := a.hub.Store().(hub.UpstreamStore); ok {
			ups, err := us.UpstreamsOfSource(r.Context(), n.SourceID)
			if err != nil {
				a.writeHubError(w, r, err, "load upstream subscriptions")
				return
			}
			for _, u := range ups {
				st.Upstream = append(st.Upstream, upstreamFrom(u))
			}
		}
	}
	if st.Upstream == nil {
		st.Upstream = []upstreamJSON{}
	}
	writeJSON(w, http.StatusOK, st)
}

// readJSON decodes a capped JSON object body into v, answering 400 or
// 413 itself when it cannot.
func (a *API) readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if !a.limitBody(w, r, func(msg string) { writeJSONError(w, http.StatusRequestEntityTooLarge, msg) }) {
		return false
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if isTooLarge(err) {
			writeJSONError(w, http.StatusRequestEntityTooLarge, a.tooLargeMessage())
		} else {
			writeJSONError(w, http.StatusBadRequest, "could not read the request body")
		}
		return false
	}
	if !utf8.Valid(body) {
		// encoding/json would quietly turn the bad bytes into U+FFFD.
		writeJSONError(w, http.StatusBadRequest, "invalid JSON: the body is not valid UTF-8")
		return false
	}
	if err := checkSurrogateEscapes(body); err != nil {
		writeJSONError(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSONError(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeJSONError(w, http.StatusBadRequest, "invalid JSON: more than one value in the body")
		return false
	}
	return true
}

// checkSurrogateEscapes refuses a \u escape of a UTF-16 surrogate that is
// not half of a pair: encoding/json would quietly decode it as U+FFFD, as
// it would invalid bytes. It walks escapes only; json.Unmarshal judges
// the rest of the syntax.
func checkSurrogateEscapes(body []byte) error {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // a one-character escape, such as \\ or \"
			continue
		}
		if utf16.IsSurrogate(r) {
			// Only a high half followed by a low one makes a character.
			if low, ok := hex4(i + 6); ok && utf16.DecodeRune(r, low) != utf8.RuneError {
				i += 11
				continue
			}
			return fmt.Errorf("%s at byte %d is half of a UTF-16 surrogate pair", body[i:i+6], i)
		}
		i += 5
	}
	return nil
}

// writeHubError maps a hub error to its status: ErrInvalid 400,
// ErrNotFound 404, ErrExists 409, ErrForbidden 403, anything else 500
// (logged, and not shown to the client).
func (a *API) writeHubError(w http.ResponseWriter, r *http.Request, err error, what string) {
	switch {
	case errors.Is(err, hub.ErrInvalid):
		writeJSONError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, hub.ErrNotFound):
		writeJSONError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, hub.ErrExists):
		writeJSONError(w, http.StatusConflict, err.Error())
	case errors.Is(err, hub.ErrForbidden):
		writeJSONError(w, http.StatusForbidden, err.Error())
	default:
		a.log.ErrorContext(r.Context(), what, "err", err)
		writeJSONError(w, http.StatusInternalServerError, what+": internal error")
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		writeText(w, http.StatusInternalServerError, "internal error: cannot encode the answer")
		return
	}
	setJSONHeaders(w)
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// setJSONHeaders marks an answer as the admin API's JSON.
func setJSONHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// upstreamJSON is one upstream push subscription in a node's status.
type upstreamJSON struct {
	Kind      string     `json:"kind"`
	Endpoint  string     `json:"endpoint"`
	Topic     string     `json:"topic"`
	State     string     `json:"state"`
	Expires   *time.Time `json:"expires,omitempty"`
	NextRenew *time.Time `json:"next_renew,omitempty"`
	LastPush  *time.Time `json:"last_push,omitempty"`
	LastError string     `json:"last_error,omitempty"`
}

func upstreamFrom(u hub.Upstream) upstreamJSON {
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	return upstreamJSON{Kind: u.Kind, Endpoint: u.Endpoint, Topic: u.Topic, State: u.State,
		Expires: opt(u.ExpiresAt), NextRenew: opt(u.NextRenewAt), LastPush: opt(u.LastPushAt), LastError: u.LastError}
}

// getRelay is GET /api/relay: each configured relay target's counts, last
// success and last error.
func (a *API) getRelay(w http.ResponseWriter, r *http.Request) {
	out := []hub.RelayTargetStatus{}
	byTarget := map[string]hub.RelayTargetStatus{}
	if rs, ok := a.hub.Store().(hub.RelayStore); ok {
		st, err := rs.RelayStatus(r.Context())
		if err != nil {
			a.writeHubError(w, r, err, "relay status")
			return
		}
		for _, s := range st {
			byTarget[s.Target] = s
		}
	}
	for _, t := range a.cfg.RelayTargets {
		s, ok := byTarget[t]
		if !ok {
			s = hub.RelayTargetStatus{Target: t}
		}
		out = append(out, s)
	}
	writeJSON(w, http.StatusOK, map[string]any{"targets": out})
}
