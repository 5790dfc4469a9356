package httpapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/pingd/pingd/discovery"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/nodeurl"
)

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

func (a *Admin) nodeJSON(n *hub.Node) nodeJSON {
	// The public URL was validated by New, so neither call fails; if one
	// did, the answer would lack links rather than fail.
	links, _ := nodeurl.NodeLinks(a.publicURL, n.Name)
	var snippets discovery.PublisherSnippets
	if cloud, err := cloudOf(a.publicURL, a.cloud, links); err == nil {
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
func (a *Admin) patchNode(w http.ResponseWriter, r *http.Request) {
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

func (a *Admin) createNode(w http.ResponseWriter, r *http.Request) {
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

// The admin node list's page sizes: ?limit= is capped so that one answer
// stays a few MB (each node's JSON carries its links and snippets).
const (
	DefaultNodeListLimit = 100
	MaxNodeListLimit     = 1000
)

// listNodes is GET /api/nodes: one page of the nodes in name order, read
// through the index on the names (?after=NAME, ?limit=N). When more may
// follow, the answer's "next" and its Link header (rel="next") give the
// next page's path.
func (a *Admin) listNodes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := DefaultNodeListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			writeJSONError(w, http.StatusBadRequest, "limit is not a positive number")
			return
		}
		limit = min(n, MaxNodeListLimit)
	}
	after := q.Get("after")
	// One more than the page tells whether another follows.
	nodes, err := a.hub.NodesPage(r.Context(), hub.NodePage{After: after, Limit: limit + 1})
	if err != nil {
		a.writeHubError(w, r, err, "list nodes")
		return
	}
	next := ""
	if len(nodes) > limit {
		nodes = nodes[:limit]
		v := url.Values{"after": {nodes[limit-1].Name}, "limit": {strconv.Itoa(limit)}}
		next = "/api/nodes?" + v.Encode()
		w.Header().Set("Link", "<"+next+`>; rel="next"`)
	}
	// Streamed node by node, in the form writeJSON gives: each node's
	// JSON carries its links and snippets (a few KB).
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
	bw.WriteString("]")
	if next != "" {
		b, _ := json.Marshal(next) // a string always encodes
		bw.WriteString(",\n  \"next\": ")
		bw.Write(b)
	}
	bw.WriteString("\n}\n")
	bw.Flush()
}

// node loads the node named in the path, answering 400 or 404 itself.
func (a *Admin) node(w http.ResponseWriter, r *http.Request) (*hub.Node, bool) {
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

func (a *Admin) getNode(w http.ResponseWriter, r *http.Request) {
	n, ok := a.node(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, a.nodeJSON(n))
}

func (a *Admin) deleteNode(w http.ResponseWriter, r *http.Request) {
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

func (a *Admin) rotateToken(w http.ResponseWriter, r *http.Request) {
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
