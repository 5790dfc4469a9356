package component

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
)

// maxPayloadBytes is the largest payload an owner may publish, as
// stored: the limit on every entry's payload (hub.MaxEntryPayloadBytes),
// which keeps every notification within the stanza budget.
const maxPayloadBytes = hub.MaxEntryPayloadBytes

// publish carries out publish requests of one sender to one node (one, or
// several that waited together) as one append to the node's log, in their
// order, and returns each one's result payload or error. A request refused
// on its own (too big) leaves the others to be published.
func (svc *service) publish(ctx context.Context, sender jid.JID, node string, reqs []*request) ([][]byte, []*stanzaError) {
	payloads := make([][]byte, len(reqs))
	errs := make([]*stanzaError, len(reqs))
	failAll := func(err error) ([][]byte, []*stanzaError) {
		for i, r := range reqs {
			if errs[i] == nil {
				errs[i] = svc.stanzaErrorOf(ctx, err, r, sender)
			}
		}
		return payloads, errs
	}
	n, err := svc.access.node(ctx, node)
	if err != nil {
		return failAll(err)
	}
	if err := svc.access.requirePublisher(ctx, n, sender); err != nil {
		return failAll(err)
	}
	entries := make([]hub.Entry, 0, len(reqs))
	index := make([]int, 0, len(reqs)) // request of each entry
	for i, r := range reqs {
		if serr := preconditionsMet(n, r.Preconditions); serr != nil {
			errs[i] = serr
			continue
		}
		entry, err := svc.publishedEntry(n, r.Item)
		if err != nil {
			return failAll(err)
		}
		if len(entry.Payload) > maxPayloadBytes {
			// Checked on the completed entry, the one stored and sent.
			errs[i] = payloadTooBig()
			continue
		}
		entries = append(entries, entry)
		index = append(index, i)
		svc.dispatcher.render.published.add(entry.Payload)
	}
	if len(entries) == 0 {
		return payloads, errs
	}
	publisher := sender.Bare().String()
	events, err := svc.hub.PublishTo(ctx, n, publisher, entries)
	if err != nil {
		return failAll(err)
	}
	lastID := ""
	for k, i := range index {
		id := entries[k].ID
		if k < len(events) {
			id = events[k].ItemID
		}
		lastID = id
		var b xmlBuf
		b.open("pubsub", "xmlns", nsPubsub).open("publish", "node", n.Name)
		b.empty("item", "id", id)
		b.close("publish").close("pubsub")
		payloads[i] = b.Bytes()
		if len(entries) > 1 {
			svc.log.DebugContext(ctx, "item published over XMPP", "node", n.Name, "item", id, "publisher", publisher)
		}
	}
	if len(entries) == 1 {
		svc.log.InfoContext(ctx, "item published over XMPP", "node", n.Name, "item", lastID, "publisher", publisher)
	} else {
		svc.log.InfoContext(ctx, "items published over XMPP", "node", n.Name, "items", len(entries), "publisher", publisher)
	}
	return payloads, errs
}

// publishedEntry is the entry a publish of item to n stores: the Atom
// entry completed as the node's feeds show it (Config.CompleteEntry), so
// notifications, items retrieval and the feeds carry the same entry. An
// item without an id takes the entry's Atom id, else a random one; an
// entry without a link gets one to what the node follows, else to the
// node's page; one without a time, the time of publishing.
func (svc *service) publishedEntry(n *hub.Node, item *publishItem) (hub.Entry, error) {
	entry := entryFromPayload(item.ID, item.Payload)
	if entry.ID == "" {
		entry.ID = hub.RandomID()
	}
	if svc.completeEntry == nil || len(entry.Payload) > maxPayloadBytes {
		return entry, nil
	}
	if entry.Link == "" {
		entry.Link = cmp.Or(n.SourceURL, svc.chat.nodeLink(n.Name))
	}
	if entry.Updated.IsZero() {
		entry.Updated = svc.hub.Now()
	}
	done := svc.completeEntry(entry)
	// Read back, so what is stored is what standalone writes and the
	// plain fields are the completed entry's.
	el, err := parseDocument(done.Payload)
	if err != nil {
		return hub.Entry{}, fmt.Errorf("complete the entry of item %q: %w", entry.ID, err)
	}
	return entryFromPayload(entry.ID, el), nil
}

func (svc *service) retract(ctx context.Context, sender jid.JID, r *request) error {
	n, err := svc.access.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := svc.access.requirePublisher(ctx, n, sender); err != nil {
		return err
	}
	if _, err := svc.hub.RetractFrom(ctx, n, sender.Bare().String(), r.ItemIDs); err != nil {
		if errors.Is(err, hub.ErrNotFound) {
			return itemNotFound("no such item")
		}
		return err
	}
	svc.log.InfoContext(ctx, "items retracted over XMPP", "node", n.Name, "items", len(r.ItemIDs), "publisher", sender.Bare().String())
	return nil
}
