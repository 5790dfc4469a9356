package hub

import (
	"context"
	"fmt"
)

// Publish appends entries to the node's log as items (an owner's XEP-0060
// publish) and wakes the transports. Entries without an ID get a random one.
func (u *NodeUseCases) Publish(ctx context.Context, nodeName, publisher string, entries []Entry) ([]Event, error) {
	n, err := u.stores.Nodes.Node(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	return u.PublishTo(ctx, n, publisher, entries)
}

// PublishTo is Publish to a node the caller has just read (to check the
// publisher's rights), without reading it again. A node deleted meanwhile
// gives ErrNotFound.
func (u *NodeUseCases) PublishTo(ctx context.Context, n *Node, publisher string, entries []Entry) ([]Event, error) {
	events := make([]Event, 0, len(entries))
	for _, e := range entries {
		if len(e.Payload) > MaxEntryPayloadBytes {
			// Every notification carries the payload: one too large for
			// the XMPP server's stanza limit would end the component's
			// stream.
			return nil, fmt.Errorf("publish item %q to %q: %w", e.ID, n.Name, ErrPayloadTooBig)
		}
		if e.ID == "" {
			e.ID = RandomID()
		}
		events = append(events, Event{
			Kind: EventItem, ItemID: e.ID, Payload: e.Payload,
			Title: e.Title, Summary: e.Summary, Link: e.Link,
			Updated: e.Updated, Publisher: publisher,
		})
	}
	out, err := u.stores.Log.Append(ctx, n.ID, events)
	if err != nil {
		return nil, fmt.Errorf("publish to %q: %w", n.Name, err)
	}
	u.observe.Published(len(out), 0)
	u.appended(n, out)
	return out, nil
}

// Retract removes items; ErrNotFound if one of them does not exist (and
// then nothing is removed), ErrInvalid if ids is empty.
func (u *NodeUseCases) Retract(ctx context.Context, nodeName, publisher string, ids []string) ([]Event, error) {
	n, err := u.stores.Nodes.Node(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	return u.RetractFrom(ctx, n, publisher, ids)
}

// RetractFrom is Retract from a node the caller has just read (to check
// the publisher's rights), without reading it again.
func (u *NodeUseCases) RetractFrom(ctx context.Context, n *Node, publisher string, ids []string) ([]Event, error) {
	if len(ids) == 0 {
		// Items with no ids means every item: the check below would be wrong.
		return nil, fmt.Errorf("%w: retraction names no item", ErrInvalid)
	}
	have, err := u.stores.Log.Items(ctx, n.ID, ids, 0)
	if err != nil {
		return nil, err
	}
	if len(have) != len(uniq(ids)) {
		return nil, fmt.Errorf("retract from %q: %w: item", n.Name, ErrNotFound)
	}
	events := make([]Event, 0, len(ids))
	for _, id := range uniq(ids) {
		events = append(events, Event{Kind: EventRetract, ItemID: id, Publisher: publisher})
	}
	out, err := u.stores.Log.Append(ctx, n.ID, events)
	if err != nil {
		return nil, err
	}
	u.wake(n.ID)
	return out, nil
}

// Purge removes every item of the node.
func (u *NodeUseCases) Purge(ctx context.Context, nodeName, publisher string) error {
	n, err := u.stores.Nodes.Node(ctx, nodeName)
	if err != nil {
		return err
	}
	if _, err := u.stores.Log.Append(ctx, n.ID, []Event{{Kind: EventPurge, Publisher: publisher}}); err != nil {
		return err
	}
	u.wake(n.ID)
	return nil
}

func uniq(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// Items returns the node's current items, newest first (see Store.Items).
func (u *NodeUseCases) Items(ctx context.Context, node *Node, ids []string, max int) ([]Event, error) {
	return u.stores.Log.Items(ctx, node.ID, ids, max)
}
