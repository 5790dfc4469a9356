package hub

import (
	"context"
	"fmt"
)

// SetNodeSourceURL points a node at the source rawURL ("" for none) and
// schedules the source's first fetch when it has none yet.
func (u *NodeUseCases) SetNodeSourceURL(ctx context.Context, name, rawURL string) (*Node, error) {
	h := u.hub
	var src *Source
	if rawURL != "" {
		canon, err := CanonicalURL(rawURL)
		if err != nil {
			return nil, err
		}
		rawURL = canon
		s, _, err := h.stores.Sources.EnsureSource(ctx, rawURL)
		if err != nil {
			return nil, fmt.Errorf("set the source of %q: %w", name, err)
		}
		src = s
	}
	var id int64
	if src != nil {
		id = src.ID
	}
	if err := h.stores.Nodes.SetNodeSource(ctx, name, id); err != nil {
		return nil, fmt.Errorf("set the source of %q: %w", name, err)
	}
	if src != nil && src.Baselined && !src.Gone {
		n, err := h.stores.Nodes.Node(ctx, name)
		if err != nil {
			return nil, err
		}
		h.keepCurrentEntries(ctx, n, src)
	} else if src != nil {
		if err := h.scheduleBaseline(ctx, src); err != nil {
			return nil, err
		}
	}
	h.log.InfoContext(ctx, "node source set", "node", name, "source", rawURL)
	return h.stores.Nodes.Node(ctx, name)
}
