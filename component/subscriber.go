package component

import (
	"context"
	"fmt"

	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
)

func (svc *service) subscribe(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	if !r.JID.Bare().Equal(sender.Bare()) {
		return badRequest("invalid-jid", "you may subscribe %s only, not %s", sender.Bare(), r.JID)
	}
	n, err := svc.access.node(ctx, r.Node)
	if err != nil {
		return err
	}
	opts := xep60SubscriptionOptions
	if r.Form != nil {
		var serr *stanzaError
		if opts, serr = applySubOptionsForm(opts, r.Form); serr != nil {
			return serr
		}
	}
	if wantsProbe(sender, r) {
		opts = svc.optionsForClient(ctx, sender, r.Node, opts)
	}
	sub, existed, err := svc.hub.Subscribe(ctx, hub.Subscription{
		NodeName: r.Node,
		Kind:     hub.KindXMPP,
		Address:  r.JID.String(),
		BareJID:  r.JID.Bare().String(),
		Options:  opts,
	})
	if err != nil {
		return err
	}
	if existed && r.Form != nil && !sameXMPPOptions(sub.Options, opts) {
		// Subscribing again with options changes them (§6.3.7).
		if sub, err = svc.hub.SetSubscriptionOptions(ctx, *sub, opts); err != nil {
			return err
		}
	}
	if !existed {
		svc.log.InfoContext(ctx, "XMPP subscription", "node", r.Node, "jid", sub.Address, "subid", sub.SubID)
		if _, err := svc.targets.sendLastAfterAnswer(ctx, n, sub); err != nil {
			return err
		}
	}
	b.open("pubsub", "xmlns", nsPubsub)
	b.empty("subscription", "node", r.Node, "jid", sub.Address, "subid", sub.SubID, "subscription", "subscribed")
	if r.Form != nil {
		b.open("options", "node", r.Node, "jid", sub.Address, "subid", sub.SubID)
		renderForm(b, subOptionsForm(sub.Options, n, true))
		b.close("options")
	}
	b.close("pubsub")
	return nil
}

func (svc *service) unsubscribe(ctx context.Context, sender jid.JID, r *request) error {
	if !r.JID.Bare().Equal(sender.Bare()) {
		return forbidden(fmt.Sprintf("you may unsubscribe %s only, not %s", sender.Bare(), r.JID))
	}
	n, err := svc.access.node(ctx, r.Node)
	if err != nil {
		return err
	}
	subs, err := svc.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP, Address: r.JID.String()})
	if err != nil {
		return err
	}
	if len(subs) == 0 {
		return newError(stanza.Cancel, stanza.UnexpectedRequest, "not-subscribed",
			fmt.Sprintf("%s is not subscribed to %q", r.JID, n.Name))
	}
	if r.SubID != "" && r.SubID != subs[0].SubID {
		return notAcceptable("invalid-subid", "no subscription %q", r.SubID)
	}
	if _, err := svc.hub.Unsubscribe(ctx, n.Name, hub.KindXMPP, r.JID.String()); err != nil {
		return err
	}
	svc.log.InfoContext(ctx, "XMPP unsubscription", "node", n.Name, "jid", r.JID.String())
	return nil
}

func (svc *service) ownSubscriptions(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	f := hub.SubscriptionFilter{Kind: hub.KindXMPP, BareJID: sender.Bare().String()}
	if r.HasNode && r.Node != "" {
		n, err := svc.access.node(ctx, r.Node)
		if err != nil {
			return err
		}
		f.NodeID = n.ID
	}
	subs, err := svc.hub.Subscriptions(ctx, f)
	if err != nil {
		return err
	}
	b.open("pubsub", "xmlns", nsPubsub).open("subscriptions", "node", r.Node)
	for _, s := range subs {
		b.empty("subscription", "node", s.NodeName, "jid", s.Address, "subid", s.SubID, "subscription", "subscribed")
	}
	b.close("subscriptions").close("pubsub")
	return nil
}

func (svc *service) ownAffiliations(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	bare := sender.Bare().String()
	var affs []hub.NodeAffiliation
	switch {
	case r.HasNode && r.Node != "":
		n, err := svc.access.node(ctx, r.Node)
		if err != nil {
			return err
		}
		aff, err := svc.hub.AffiliationOf(ctx, n, bare)
		if err != nil {
			return err
		}
		affs = []hub.NodeAffiliation{{Node: n.Name, Affiliation: aff}}
	case svc.hub.IsAdmin(bare):
		// Admins own every node; only they get the whole list.
		nodes, err := svc.hub.Nodes(ctx)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			affs = append(affs, hub.NodeAffiliation{Node: n.Name, Affiliation: hub.AffOwner})
		}
	default:
		// Anyone may ask: one query for the JID's own affiliations, never
		// one per node.
		var err error
		if affs, err = svc.hub.JIDAffiliations(ctx, bare); err != nil {
			return err
		}
	}
	b.open("pubsub", "xmlns", nsPubsub).open("affiliations", "node", r.Node)
	for _, a := range affs {
		if a.Affiliation != hub.AffNone {
			b.empty("affiliation", "node", a.Node, "affiliation", string(a.Affiliation))
		}
	}
	b.close("affiliations").close("pubsub")
	return nil
}

func (svc *service) items(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	n, err := svc.access.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := svc.access.requireReader(ctx, n, sender); err != nil {
		return err
	}
	limit := n.MaxItems
	if r.MaxItems > 0 {
		limit = min(limit, r.MaxItems)
	}
	items, err := svc.hub.Items(ctx, n, r.ItemIDs, limit)
	if err != nil {
		return err
	}
	// A result set request pages through what the request names (XEP-0059);
	// the node keeps at most max_items, so the page is cut in memory.
	page, first := items, 0
	if r.Page != nil {
		var serr *stanzaError
		if page, first, serr = pageOf(items, r.Page); serr != nil {
			return serr
		}
	}
	// The answer stays within the stanza budget: a page that would not
	// is cut, and says so with a result set (XEP-0060 §6.5.4, XEP-0059)
	// the client pages on from, whether it asked for one or not.
	whole := svc.limit.bytes() - envelopeBytes - b.Len() - 2*len(n.Name) - 1024
	room := whole
	cut := len(page)
	payloads := make([][]byte, 0, len(page))
	for i, it := range page {
		p := svc.dispatcher.render.payload(it)
		size := len(p) + escapedLen(it.ItemID) + 32
		if size > whole {
			// One item stored before the entry limit: its id alone.
			p, size = nil, escapedLen(it.ItemID)+32
			svc.limit.shrunk.Add(1)
		}
		if size > room {
			cut = i
			break
		}
		room -= size
		payloads = append(payloads, p)
	}
	b.open("pubsub", "xmlns", nsPubsub).open("items", "node", n.Name)
	for i, it := range page[:cut] {
		writeItem(b, it.ItemID, payloads[i], true)
	}
	b.close("items")
	if r.Page != nil || cut < len(page) {
		writePageResult(b, page[:cut], first, len(items))
	}
	b.close("pubsub")
	return nil
}

// writeItem writes <item id="…">payload</item>.
func writeItem(b *xmlBuf, id string, payload []byte, withPayload bool) {
	if !withPayload || len(payload) == 0 {
		b.empty("item", "id", id)
		return
	}
	b.open("item", "id", id)
	b.Write(payload)
	b.close("item")
}
