package hub

import (
	"context"
	"fmt"
)

// ConfigureNode replaces a node's configuration after validating it. It is
// the one way a node's configuration changes, whoever asks (an owner's
// XMPP configuration form or ad-hoc command, the admin API): when the
// access model becomes whitelist, the XMPP subscriptions of JIDs that may
// no longer read the node end here too, each with a revoke event that
// tells the subscriber (XEP-0060 §8.8.4), so no entry point can forget it.
func (u *AccessUseCases) ConfigureNode(ctx context.Context, name string, cfg NodeConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	before, err := u.stores.Nodes.Node(ctx, name)
	if err != nil {
		return err
	}
	if err := u.stores.Nodes.UpdateNodeConfig(ctx, name, cfg); err != nil {
		return err
	}
	if before.AccessModel == cfg.AccessModel {
		return nil
	}
	u.log.InfoContext(ctx, "access model changed", "node", name, "from", before.AccessModel, "to", cfg.AccessModel)
	if cfg.AccessModel != AccessWhitelist {
		return nil
	}
	after := *before
	after.NodeConfig = cfg
	if err := u.revokeNonMembers(ctx, &after); err != nil {
		return fmt.Errorf("node %q became whitelist-only: end non-members' subscriptions: %w", name, err)
	}
	return nil
}

// revokeNonMembers ends the XMPP subscriptions of every bare JID that may
// not read node under its access model (admins and those affiliated as
// member, publisher or owner may).
func (u *AccessUseCases) revokeNonMembers(ctx context.Context, node *Node) error {
	subs, err := u.stores.Subscriptions.Subscriptions(ctx, SubscriptionFilter{NodeID: node.ID, Kind: KindXMPP})
	if err != nil {
		return err
	}
	if len(subs) == 0 {
		return nil
	}
	// One read of the node's affiliations serves every subscriber; a JID
	// without one is "none", and admins may read whatever is stored.
	affs, err := u.stores.Affiliations.Affiliations(ctx, node.ID)
	if err != nil {
		return err
	}
	done := map[string]bool{}
	for _, s := range subs {
		if done[s.BareJID] {
			continue
		}
		done[s.BareJID] = true
		if u.IsAdmin(s.BareJID) || affs[s.BareJID].MayRead(node.AccessModel) {
			continue
		}
		if err := u.revoke(ctx, node, SubscriptionFilter{BareJID: s.BareJID}); err != nil {
			return err
		}
	}
	return nil
}
