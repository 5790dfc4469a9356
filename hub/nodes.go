package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// NodeSpec is what creating a node takes.
type NodeSpec struct {
	Name   string
	Source string // URL the node follows, optional
	Config NodeConfig
	// Implicit marks a node created for a URL subscription.
	Implicit bool
}

// CreateNode creates a node and returns it with its bearer token, which
// is shown only now (the store keeps its hash). If the node follows a
// source without a baseline, CreateNode returns once the baseline fetch
// is over (awaitBaseline).
func (u *NodeUseCases) CreateNode(ctx context.Context, spec NodeSpec) (*Node, string, error) {
	if err := ValidNewNodeName(spec.Name); err != nil {
		return nil, "", err
	}
	cfg := spec.Config
	if err := cfg.Validate(); err != nil {
		return nil, "", err
	}
	n := &Node{Name: spec.Name, NodeConfig: cfg, Implicit: spec.Implicit}
	var src *Source
	if spec.Source != "" {
		source, err := CanonicalURL(spec.Source)
		if err != nil {
			return nil, "", err
		}
		s, _, err := u.stores.Sources.EnsureSource(ctx, source)
		if err != nil {
			return nil, "", fmt.Errorf("create node %q: %w", spec.Name, err)
		}
		src = s
		n.SourceID = s.ID
		n.SourceURL = s.URL
		if n.Implicit && n.Title == "" && s.Baselined && s.IsFeed {
			// Titled as the feed, as its baseline titles the nodes made
			// before it (Store.ApplyFetch).
			n.Title = NodeTitleOf(s.Title)
		}
	}
	token := randomToken(24)
	n.TokenHash = HashToken(token)
	if err := u.stores.Nodes.CreateNode(ctx, n); err != nil {
		return nil, "", fmt.Errorf("create node %q: %w", spec.Name, err)
	}
	if src != nil && src.Gone {
		// A source found gone (410) before and asked for again by a new
		// node gets another chance: it is fetched now, and marked gone
		// again if it still is.
		revived, err := u.stores.Sources.ReviveSource(ctx, src.ID, u.now(), ReasonRevived)
		if err != nil {
			return nil, "", fmt.Errorf("create node %q: %w", spec.Name, err)
		}
		if revived {
			u.log.InfoContext(ctx, "source gone before is fetched again for a new node", "node", n.Name, "source", src.URL)
			u.wakeFetcher()
		}
	} else if src != nil && src.Baselined {
		u.keepCurrentEntries(ctx, n, src)
	} else if src != nil {
		if err := u.scheduleBaseline(ctx, src); err != nil {
			return nil, "", err
		}
	}
	if src != nil {
		// The baseline or the kept entries changed the node (its items,
		// its title): the caller gets it as it is now. The node exists
		// whatever this read does (the caller's context may have ended
		// the wait for the baseline): without it, the node as created.
		if cur, err := u.stores.Nodes.NodeByID(ctx, n.ID); err == nil {
			n = cur
		}
	}
	u.log.InfoContext(ctx, "node created", "node", n.Name, "source", n.SourceURL, "access_model", n.AccessModel)
	return n, token, nil
}

// keepCurrentEntries gives a node that starts following src, a source
// whose baseline was taken before (for another node), the feed's current
// entries as its items, told to no one (LogStore.KeepItems), as that
// baseline gave them to the nodes following it then: a new node is not
// empty while its feed has entries. They are read from the source's
// stored representation when it has one (it needs Config.Entries), and
// otherwise taken from the items of the node following the source that
// keeps the most (a feed's body is kept only where a later fetch needs it,
// KeepsBody): its newest items from the feed (not those an owner
// published to it), up to the new node's max_items. Without
// either the node starts empty and takes the feed's next new entries.
// Failing to read them is logged, not an error: the node exists.
func (u *NodeUseCases) keepCurrentEntries(ctx context.Context, n *Node, src *Source) {
	if !src.IsFeed {
		return
	}
	events, err := u.currentEntries(ctx, n, src)
	if err != nil {
		u.log.WarnContext(ctx, "read a source's current entries for a new node", "node", n.Name, "source", src.URL, "err", err)
		return
	}
	if len(events) == 0 {
		return
	}
	kept, err := u.stores.Log.KeepItems(ctx, n.ID, events)
	if err != nil {
		u.log.WarnContext(ctx, "keep a feed's entries as a new node's items", "node", n.Name, "source", src.URL, "err", err)
		return
	}
	u.log.DebugContext(ctx, "new node keeps its feed's entries", "node", n.Name, "source", src.URL, "items", kept)
}

// currentEntries are the item events a new node of src starts with, in
// publishing order: from the stored body, or from another node's items.
func (u *NodeUseCases) currentEntries(ctx context.Context, n *Node, src *Source) ([]Event, error) {
	body, err := u.stores.Sources.SourceBody(ctx, src.ID)
	if err != nil {
		return nil, err
	}
	if len(body) > 0 && u.entries != nil {
		at := src.LastChangeAt
		if at.IsZero() {
			at = src.LastFetchAt
		}
		entries, isFeed, err := u.entries.ReadEntries(body, src.URL, at)
		if err != nil || !isFeed {
			return nil, err
		}
		return NewestItems(ItemEvents(PublishOrder(DistinctEntries(entries))), n.MaxItems), nil
	}
	followers, err := u.stores.Nodes.NodesBySource(ctx, src.ID)
	if err != nil {
		return nil, err
	}
	var sibling *Node
	for i := range followers {
		if f := &followers[i]; f.ID != n.ID && (sibling == nil || f.MaxItems > sibling.MaxItems) {
			sibling = f
		}
	}
	if sibling == nil {
		return nil, nil
	}
	items, err := u.stores.Log.Items(ctx, sibling.ID, nil, n.MaxItems)
	if err != nil {
		return nil, err
	}
	// Newest first; kept in publishing order, as events of their own.
	// An item an owner published to that node (it has a publisher) is
	// that node's, not the feed's.
	events := make([]Event, 0, len(items))
	for i := len(items) - 1; i >= 0; i-- {
		ev := items[i]
		if ev.Kind != EventItem || ev.Publisher != "" {
			continue
		}
		ev.NodeID, ev.Seq, ev.Created = n.ID, 0, time.Time{}
		events = append(events, ev)
	}
	return events, nil
}

// Node returns a node by name.
func (u *NodeUseCases) Node(ctx context.Context, name string) (*Node, error) {
	return u.stores.Nodes.Node(ctx, name)
}

// Nodes lists every node.
func (u *NodeUseCases) Nodes(ctx context.Context) ([]Node, error) {
	return u.stores.Nodes.Nodes(ctx)
}

// NodesPage lists one page of the nodes in name order (Store.NodesPage):
// what anyone may ask for reads that page, not the whole list.
func (u *NodeUseCases) NodesPage(ctx context.Context, p NodePage) ([]Node, error) {
	return u.stores.Nodes.NodesPage(ctx, p)
}

// nodeCountFor is how long NodeCount trusts a count it read.
const nodeCountFor = 10 * time.Second

// nodeCountCache is the number of nodes NodeCount read last, and when.
type nodeCountCache struct {
	mu    sync.Mutex
	n     int
	at    time.Time
	valid bool
}

// NodeCount is the number of nodes as counted at most nodeCountFor ago:
// the size of the list shown a page at a time (XEP-0059 lets that count be
// approximate), read from the store once in that time however many ask.
func (u *NodeUseCases) NodeCount(ctx context.Context) (int, error) {
	c := &u.nodeCount
	c.mu.Lock()
	defer c.mu.Unlock()
	now := u.now()
	if c.valid && !now.Before(c.at) && now.Sub(c.at) < nodeCountFor {
		return c.n, nil
	}
	n, err := u.stores.Nodes.CountNodes(ctx)
	if err != nil {
		return 0, err
	}
	c.n, c.at, c.valid = n, now, true
	return n, nil
}

// DeleteNode removes a node, its items and subscriptions. Its XMPP
// subscribers are told by the component from the NodeDeletion the store
// records with the deletion, so they are told after a restart too, or
// when another process deleted it; the transports are woken for the node.
func (u *NodeUseCases) DeleteNode(ctx context.Context, name string) error {
	n, err := u.stores.Nodes.Node(ctx, name)
	if err != nil {
		return err
	}
	if err := u.stores.Nodes.DeleteNode(ctx, name); err != nil {
		return err
	}
	u.wake(n.ID, KindXMPP)
	u.log.InfoContext(ctx, "node deleted", "node", name)
	return nil
}

// NodeForURL returns the node that follows url (in any spelling: it is
// looked up in canonical form), preferring one an owner created; when none
// does and create is set, it creates an implicit open node named after the
// canonical URL and returns once its source's baseline fetch is over.
func (u *NodeUseCases) NodeForURL(ctx context.Context, rawURL string, create bool) (*Node, error) {
	return u.nodeForURL(ctx, rawURL, create, nil)
}

// nodeForURL is NodeForURL; mayCreate, when set, is asked right before an
// implicit node is created (and only then), and its error is returned.
func (u *NodeUseCases) nodeForURL(ctx context.Context, rawURL string, create bool, mayCreate func(context.Context) error) (*Node, error) {
	rawURL, err := CanonicalURL(rawURL)
	if err != nil {
		return nil, err
	}
	srcs, err := u.stores.Sources.SourcesMatching(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	var implicit *Node
	for _, s := range srcs {
		nodes, err := u.stores.Nodes.NodesBySource(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		for i := range nodes {
			if !nodes[i].Implicit {
				return &nodes[i], u.ensureBaseline(ctx, s.ID)
			}
			if implicit == nil {
				implicit = &nodes[i]
			}
		}
	}
	if implicit != nil {
		return implicit, u.ensureBaseline(ctx, implicit.SourceID)
	}
	if !create {
		return nil, fmt.Errorf("%w: no node follows %s", ErrNotFound, rawURL)
	}
	if err := u.mayCreateImplicitNode(ctx); err != nil {
		return nil, err
	}
	if mayCreate != nil {
		if err := mayCreate(ctx); err != nil {
			return nil, err
		}
	}
	// The URL names the node when it can; when an owner already gave that
	// name to a node following something else, the hashed name is used.
	names := []string{ImplicitNodeName(rawURL), hashedNodeName(rawURL)}
	for i, name := range names {
		if i > 0 && name == names[0] {
			break
		}
		n, _, err := u.CreateNode(ctx, NodeSpec{Name: name, Source: rawURL, Config: DefaultNodeConfig(), Implicit: true})
		if err == nil {
			u.implicitNodes.created()
		}
		if !errors.Is(err, ErrExists) {
			return n, err
		}
		// Taken: by a concurrent request for the same URL, or by another node.
		existing, err := u.stores.Nodes.Node(ctx, name)
		if err != nil {
			return nil, err
		}
		src, _, err := u.stores.Sources.EnsureSource(ctx, rawURL)
		if err != nil {
			return nil, err
		}
		if existing.SourceID == src.ID {
			return existing, u.ensureBaseline(ctx, src.ID)
		}
	}
	return nil, fmt.Errorf("%w: the node names for %s are taken by nodes following other sources", ErrExists, rawURL)
}

// ImplicitNodeName is the name of the node pingd creates for a URL: the
// URL in canonical form when that is a valid node name, else "url:" and the
// SHA-256 of that form; every spelling of a URL gives one name.
func ImplicitNodeName(rawURL string) string {
	if c, err := CanonicalURL(rawURL); err == nil {
		rawURL = c
	}
	if ValidNodeName(rawURL) == nil {
		return rawURL
	}
	return hashedNodeName(rawURL)
}

// hashedNodeName is "url:" and the hex SHA-256 of the URL.
func hashedNodeName(rawURL string) string {
	sum := sha256.Sum256([]byte(rawURL))
	return "url:" + hex.EncodeToString(sum[:])
}
