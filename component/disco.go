package component

import (
	"context"
	"slices"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
)

// pubsubFeatures are the XEP-0060 features pingd implements (§10).
var pubsubFeatures = []string{
	"access-open",
	"access-whitelist",
	"config-node",
	"config-node-max",
	"create-and-configure",
	"create-nodes",
	"delete-items",
	"delete-nodes",
	"instant-nodes",
	"item-ids",
	"manage-subscriptions",
	"member-affiliation",
	"meta-data",
	"modify-affiliations",
	"outcast-affiliation",
	"persistent-items",
	"publish",
	"publish-options",
	"publisher-affiliation",
	"purge-nodes",
	"retract-items",
	"retrieve-affiliations",
	"retrieve-default",
	"retrieve-default-sub",
	"retrieve-items",
	"retrieve-subscriptions",
	"rsm",
	"subscribe",
	"subscription-notifications",
	"subscription-options",
}

func (svc *service) discoInfo(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	if r.Node == nsCommands {
		// XEP-0050 §2.2: the command list's own identity.
		b.open("query", "xmlns", nsDiscoInfo, "node", nsCommands)
		b.empty("identity", "category", "automation", "type", "command-list", "name", "pingd commands")
		b.empty("feature", "var", nsCommands)
		b.close("query")
		return nil
	}
	if cmd := commandByNode(r.Node); cmd != nil {
		if cmd.owner && !svc.hub.IsAdmin(sender.Bare().String()) {
			// XEP-0050 §2.3: a command the requester may not run is not shown.
			return forbidden("only pingd's administrators may run " + cmd.name)
		}
		svc.commands.commandInfo(b, cmd)
		return nil
	}
	if !r.HasNode || r.Node == "" {
		b.open("query", "xmlns", nsDiscoInfo)
		b.empty("identity", "category", "pubsub", "type", "service", "name", "pingd")
		b.empty("feature", "var", nsDiscoInfo)
		b.empty("feature", "var", nsDiscoItems)
		b.empty("feature", "var", nsCommands)
		b.empty("feature", "var", nsPubsub)
		for _, f := range pubsubFeatures {
			b.empty("feature", "var", nsPubsub+"#"+f)
		}
		// XEP-0059 on items retrieval; XEP-0060 §6.5.4 asks for pubsub#rsm
		// too, so it is not taken for another protocol's result sets.
		b.empty("feature", "var", nsRSM)
		b.close("query")
		return nil
	}
	n, err := svc.access.node(ctx, r.Node)
	if err != nil {
		return err
	}
	subs, err := svc.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID})
	if err != nil {
		return err
	}
	affs, err := svc.hub.OwnerAffiliations(ctx, n)
	if err != nil {
		return err
	}
	var owners []string
	for j, a := range affs {
		if a == hub.AffOwner {
			owners = append(owners, j)
		}
	}
	slices.Sort(owners)
	b.open("query", "xmlns", nsDiscoInfo, "node", n.Name)
	b.empty("identity", "category", "pubsub", "type", "leaf", "name", n.Title)
	b.empty("feature", "var", nsPubsub)
	b.empty("feature", "var", nsDiscoInfo)
	b.empty("feature", "var", nsDiscoItems)
	// A whitelist node's source may be a private feed, and anyone could
	// read it here and follow it elsewhere: only its members and owners
	// (admins included) see it.
	showSource := n.AccessModel != hub.AccessWhitelist || affs[sender.Bare().String()].MayRead(n.AccessModel)
	renderForm(b, metaDataForm(n, len(subs), owners, showSource))
	b.close("query")
	return nil
}

func (svc *service) discoItems(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	if r.Node == nsCommands {
		svc.commands.commandItems(b, sender)
		return nil
	}
	if !r.HasNode || r.Node == "" {
		return svc.nodeItems(ctx, b, r.Page)
	}
	// A leaf node's items are listed by id (XEP-0060 §5.5), to those who
	// may read them.
	n, err := svc.access.node(ctx, r.Node)
	if err != nil {
		return err
	}
	b.open("query", "xmlns", nsDiscoItems, "node", n.Name)
	if svc.access.requireReader(ctx, n, sender) == nil {
		items, err := svc.hub.Items(ctx, n, nil, n.MaxItems)
		if err != nil {
			return err
		}
		for _, it := range items {
			b.empty("item", "jid", svc.domainStr, "name", it.ItemID)
		}
	}
	b.close("query")
	return nil
}
