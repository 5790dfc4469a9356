package hub

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Bounds on what strangers can make pingd keep. Anyone may subscribe to
// any URL over HTTP (WebSub, rssCloud, CNWS), and a URL no node follows
// gets an implicit node and a source that pingd fetches from then on, so
// the number of implicit nodes is capped (Config.MaxImplicitNodes) and
// the adapters charge each creation to the client that asked for it
// (NodeForURLCreating).

// DefaultMaxImplicitNodes is Config.MaxImplicitNodes's default: room for
// every feed a large community follows, far below what one database
// keeps and polls comfortably.
const DefaultMaxImplicitNodes = 100_000

// implicitCountFor is how long a count of the implicit nodes read from the
// store is trusted; creations by this process are added to it meanwhile,
// so only other processes sharing the store can take the total a little
// past the cap.
const implicitCountFor = 30 * time.Second

// implicitNodeCount caches the number of implicit nodes.
type implicitNodeCount struct {
	mu    sync.Mutex
	n     int
	at    time.Time
	valid bool
}

// created counts an implicit node this process created.
func (c *implicitNodeCount) created() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
}

// forget drops the cached count (nodes were deleted).
func (c *implicitNodeCount) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.valid = false
}

// NodeForURLCreating is NodeForURL with create set, for requests from
// strangers: mayCreate is asked right before an implicit node would be
// created, and only then (a URL some node follows costs nothing), so an
// adapter can charge the creation to the client; its error is returned
// as it is.
func (h *Hub) NodeForURLCreating(ctx context.Context, rawURL string, mayCreate func(context.Context) error) (*Node, error) {
	return h.nodeForURL(ctx, rawURL, true, mayCreate)
}

// mayCreateImplicitNode answers ErrImplicitNodesFull when the implicit
// nodes have reached Config.MaxImplicitNodes.
func (h *Hub) mayCreateImplicitNode(ctx context.Context) error {
	limit := h.cfg.MaxImplicitNodes
	if limit < 0 {
		return fmt.Errorf("%w: this server creates no nodes for URLs it does not follow yet", ErrImplicitNodesFull)
	}
	c := &h.implicitNodes
	c.mu.Lock()
	defer c.mu.Unlock()
	now := h.now()
	if !c.valid || now.Before(c.at) || now.Sub(c.at) >= implicitCountFor {
		n, err := h.store.CountImplicitNodes(ctx)
		if err != nil {
			return fmt.Errorf("count implicit nodes: %w", err)
		}
		c.n, c.at, c.valid = n, now, true
	}
	if c.n >= limit {
		return fmt.Errorf("%w (%d nodes for URLs)", ErrImplicitNodesFull, limit)
	}
	return nil
}
