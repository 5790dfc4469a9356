package hub

import (
	"context"
)

// EventsAfter returns up to limit events of the node's log with Seq > after,
// oldest first (see Store.EventsAfter). Request handlers use it to tell
// what changed since a version of the node's content they served (RFC 3229
// deltas of the node's own feeds); the log may have been pruned, so callers
// check that the first event follows after.
func (u *NodeUseCases) EventsAfter(ctx context.Context, node *Node, after int64, limit int) ([]Event, error) {
	return u.stores.Log.EventsAfter(ctx, node.ID, after, limit)
}
