package hub

import (
	"context"
	"fmt"
)

// ListedNode is an open node as pingd's public node list (GET /opml)
// shows it: no more than anyone may see of an open node.
type ListedNode struct {
	Name  string
	Title string
	// SourceURL is where the node's source is now; SourceTitle and SiteURL
	// are what its last fetch said of itself (the feed's title and the
	// page it is about). All empty for a node only its owners publish to.
	SourceURL, SourceTitle, SiteURL string
}

// OpenNodes lists up to limit open nodes, oldest first, and how many open
// nodes there are. Whitelist nodes are never listed: their existence is
// public (disco#items), their sources are not.
func (h *Hub) OpenNodes(ctx context.Context, limit int) ([]ListedNode, int, error) {
	if limit <= 0 {
		return nil, 0, fmt.Errorf("%w: list limit %d", ErrInvalid, limit)
	}
	return h.stores.Nodes.OpenNodes(ctx, limit)
}
