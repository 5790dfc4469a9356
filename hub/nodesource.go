package hub

import (
	"context"
	"fmt"
)

// SetNodeSourceURL points a node at the source rawURL ("" for none) and
// schedules the source's first fetch when it has none yet.
func (u *NodeUseCases) SetNodeSourceURL(ctx context.Context, name, rawURL string) (*Node, error) {
	var src *Source
	if rawURL != "" {
		canon, err := CanonicalURL(rawURL)
		if err != nil {
			return nil, err
		}
		rawURL = canon
		s, _, err := u.stores.Sources.EnsureSource(ctx, rawURL)
		if err != nil {
			return nil, fmt.Errorf("set the source of %q: %w", name, err)
		}
		src = s
	}
	var id int64
	if src != nil {
		id = src.ID
	}
	if err := u.stores.Nodes.SetNodeSource(ctx, name, id); err != nil {
		return nil, fmt.Errorf("set the source of %q: %w", name, err)
	}
	if src != nil && src.Baselined && !src.Gone {
		n, err := u.stores.Nodes.Node(ctx, name)
		if err != nil {
			return nil, err
		}
		u.keepCurrentEntries(ctx, n, src)
	} else if src != nil {
		if err := u.scheduleBaseline(ctx, src); err != nil {
			return nil, err
		}
	}
	u.log.InfoContext(ctx, "node source set", "node", name, "source", rawURL)
	return u.stores.Nodes.Node(ctx, name)
}
