package component

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
)

// ownerRequests carries out the XEP-0060 owner use cases (create,
// configure, delete, purge, and the management of a node's
// subscriptions and affiliations), for the pubsub#owner IQs.
type ownerRequests struct {
	nodeAccess
	log *slog.Logger
}

func (o *ownerRequests) create(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	bare := sender.Bare().String()
	if !o.hub.IsAdmin(bare) {
		return forbidden("only pingd's administrators may create nodes")
	}
	cfg, serr := configFromRequest(r.Configure)
	if serr != nil {
		return serr
	}
	name := r.Node
	if !r.HasNode {
		name = hub.RandomID() // an instant node (XEP-0060 §8.1.2)
	}
	if err := hub.ValidNodeName(name); err != nil {
		return badRequest("", "%v", err)
	}
	n, _, err := o.hub.CreateNode(ctx, hub.NodeSpec{Name: name, Config: cfg})
	if err != nil {
		return err
	}
	// The creator is the node's owner on record, whatever the admin list
	// says later.
	if err := o.hub.SetAffiliation(ctx, n, bare, hub.AffOwner); err != nil {
		return err
	}
	b.open("pubsub", "xmlns", nsPubsub).empty("create", "node", n.Name).close("pubsub")
	return nil
}

func (o *ownerRequests) configureGet(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	n, err := o.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := o.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	b.open("pubsub", "xmlns", nsPubsubOwner).open("configure", "node", n.Name)
	renderForm(b, configForm(n.NodeConfig))
	b.close("configure").close("pubsub")
	return nil
}

func (o *ownerRequests) configureSet(ctx context.Context, sender jid.JID, r *request) error {
	n, err := o.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := o.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	f, serr := parseForm(r.Form)
	if serr != nil {
		return serr
	}
	switch f.Type {
	case "cancel":
		return nil // XEP-0060 §8.2.4: the configuration stays as it is
	case "submit":
	default:
		return badRequest("", "the configuration form must be of type submit or cancel, not %q", f.Type)
	}
	cfg, serr := applyConfigForm(n.NodeConfig, f)
	if serr != nil {
		return serr
	}
	// A node made whitelist-only loses its non-members' subscriptions in
	// the hub, which tells them.
	if err := o.hub.ConfigureNode(ctx, n.Name, cfg); err != nil {
		return err
	}
	o.log.InfoContext(ctx, "node configured over XMPP", "node", n.Name, "by", sender.Bare().String(),
		"access_model", cfg.AccessModel, "max_items", cfg.MaxItems)
	return nil
}

func (o *ownerRequests) deleteNode(ctx context.Context, sender jid.JID, r *request) error {
	n, err := o.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := o.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	return o.hub.DeleteNode(ctx, n.Name)
}

func (o *ownerRequests) purge(ctx context.Context, sender jid.JID, r *request) error {
	n, err := o.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := o.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	if err := o.hub.Purge(ctx, n.Name, sender.Bare().String()); err != nil {
		return err
	}
	o.log.InfoContext(ctx, "node purged over XMPP", "node", n.Name, "by", sender.Bare().String())
	return nil
}

func (o *ownerRequests) ownerSubscriptions(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	n, err := o.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := o.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	subs, err := o.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP})
	if err != nil {
		return err
	}
	b.open("pubsub", "xmlns", nsPubsubOwner).open("subscriptions", "node", n.Name)
	for _, s := range subs {
		b.empty("subscription", "jid", s.Address, "subscription", "subscribed", "subid", s.SubID)
	}
	b.close("subscriptions").close("pubsub")
	return nil
}

func (o *ownerRequests) ownerSetSubscriptions(ctx context.Context, sender jid.JID, r *request) error {
	n, err := o.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := o.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	refused, err := o.refuseSubscriptionChanges(ctx, n, r.Subscriptions)
	if err != nil {
		return err
	}
	if refused != nil {
		return refused
	}
	// Each change goes through the hub's revoke and grant, which tell the
	// subscriber with an event in the node's log (XEP-0060 §8.8.4).
	for _, ch := range r.Subscriptions {
		switch ch.Subscription {
		case "none":
			if err := o.hub.RevokeSubscription(ctx, n, ch.JID.String()); err != nil {
				return err
			}
		case "subscribed":
			if _, _, err := o.hub.GrantSubscription(ctx, hub.Subscription{
				NodeName: n.Name, Kind: hub.KindXMPP, Address: ch.JID.String(), BareJID: ch.JID.Bare().String(),
				Options: xep60SubscriptionOptions,
			}); err != nil {
				return err
			}
		}
	}
	o.log.InfoContext(ctx, "subscriptions changed over XMPP", "node", n.Name, "by", sender.Bare().String(), "changes", len(r.Subscriptions))
	return nil
}

// refuseSubscriptionChanges refuses changes pingd cannot make: to a state
// it does not have (a subscription is subscribed or none, never pending or
// unconfigured: pingd approves every subscription it allows at once and
// requires no configuration), or a subscription for a JID that may not
// have one (an outcast, or not on a whitelist node's whitelist: the owner
// changes its affiliation first). XEP-0060 §8.8.2.4 answers an invalid
// entry with not-acceptable and returns the entries that were not changed,
// each with its current state; pingd then changes none of them, so every
// entry is returned. nil when every change can be made.
func (o *ownerRequests) refuseSubscriptionChanges(ctx context.Context, n *hub.Node, changes []subscriptionChange) (*stanzaError, error) {
	why := ""
	for _, ch := range changes {
		var err error
		if why, err = o.subscriptionRefusal(ctx, n, ch); err != nil {
			return nil, err
		}
		if why != "" {
			break
		}
	}
	if why == "" {
		return nil, nil
	}
	var b xmlBuf
	b.open("pubsub", "xmlns", nsPubsubOwner).open("subscriptions", "node", n.Name)
	for _, ch := range changes {
		subs, err := o.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP, Address: ch.JID.String()})
		if err != nil {
			return nil, err
		}
		if len(subs) == 0 {
			b.empty("subscription", "jid", ch.JID.String(), "subscription", "none")
		} else {
			b.empty("subscription", "jid", subs[0].Address, "subscription", "subscribed", "subid", subs[0].SubID)
		}
	}
	b.close("subscriptions").close("pubsub")
	serr := notAcceptable("", "%s; nothing was changed", why)
	serr.Payload = b.Bytes()
	return serr, nil
}

// subscriptionRefusal says why pingd cannot make one owner's change of a
// subscription, or "" when it can.
func (o *ownerRequests) subscriptionRefusal(ctx context.Context, n *hub.Node, ch subscriptionChange) (string, error) {
	switch ch.Subscription {
	case "none":
		return "", nil
	case "subscribed":
	default:
		return "pingd has no pending or unconfigured subscriptions: a subscription is subscribed or none", nil
	}
	bare := ch.JID.Bare()
	switch err := o.hub.MaySubscribe(ctx, n, bare.String()); {
	case errors.Is(err, hub.ErrNotMember): // before ErrForbidden, which it wraps
		return fmt.Sprintf("%q is a whitelist node and %s is not on its whitelist: make it a member before subscribing it", n.Name, bare), nil
	case errors.Is(err, hub.ErrForbidden):
		return fmt.Sprintf("%s is banned from %q: make it a member before subscribing it", bare, n.Name), nil
	case err != nil:
		return "", err
	}
	switch err := o.hub.MayAddXMPPSubscription(ctx, n, ch.JID.String(), bare.String()); {
	case errors.Is(err, hub.ErrLimit):
		return fmt.Sprintf("%s cannot have one more subscription: %v", ch.JID, err), nil
	default:
		return "", err
	}
}

func (o *ownerRequests) ownerAffiliations(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	n, err := o.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := o.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	// The admins own every node (XEP-0060 §8.9.1.2 lists every owner).
	affs, err := o.hub.OwnerAffiliations(ctx, n)
	if err != nil {
		return err
	}
	jids := make([]string, 0, len(affs))
	for j := range affs {
		jids = append(jids, j)
	}
	slices.Sort(jids)
	b.open("pubsub", "xmlns", nsPubsubOwner).open("affiliations", "node", n.Name)
	for _, j := range jids {
		b.empty("affiliation", "jid", j, "affiliation", string(affs[j]))
	}
	b.close("affiliations").close("pubsub")
	return nil
}

func (o *ownerRequests) ownerSetAffiliations(ctx context.Context, sender jid.JID, r *request) error {
	n, err := o.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := o.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	bare := sender.Bare().String()
	affs, err := o.hub.OwnerAffiliations(ctx, n)
	if err != nil {
		return err
	}
	// XEP-0060 §8.9.2.4: a change that cannot be made is refused with the
	// entries as they stand, and pingd then makes none of them.
	for _, ch := range r.Affiliations {
		if o.hub.IsAdmin(ch.JID) && ch.Affiliation != hub.AffOwner {
			return refusedAffiliations(n, r.Affiliations, affs,
				ch.JID+" owns every node by the operator's configuration (PINGD_ADMINS); nothing was changed")
		}
	}
	if !o.hub.IsAdmin(bare) {
		// The last owner may not give up ownership.
		owners := 0
		for _, a := range affs {
			if a == hub.AffOwner {
				owners++
			}
		}
		for _, ch := range r.Affiliations {
			if affs[ch.JID] == hub.AffOwner && ch.Affiliation != hub.AffOwner {
				owners--
			} else if affs[ch.JID] != hub.AffOwner && ch.Affiliation == hub.AffOwner {
				owners++
			}
		}
		if owners < 1 {
			return refusedAffiliations(n, r.Affiliations, affs, "the node would be left without an owner; nothing was changed")
		}
	}
	for _, ch := range r.Affiliations {
		if err := o.hub.SetAffiliation(ctx, n, ch.JID, ch.Affiliation); err != nil {
			return err
		}
		o.log.InfoContext(ctx, "affiliation set over XMPP", "node", n.Name, "jid", ch.JID,
			"affiliation", string(ch.Affiliation), "by", bare)
	}
	return nil
}

// refusedAffiliations is the not-acceptable of XEP-0060 §8.9.2.4: every
// entry of the request with its affiliation as it stands.
func refusedAffiliations(n *hub.Node, changes []affiliationChange, affs map[string]hub.Affiliation, why string) *stanzaError {
	var b xmlBuf
	b.open("pubsub", "xmlns", nsPubsubOwner).open("affiliations", "node", n.Name)
	for _, ch := range changes {
		a := affs[ch.JID]
		if a == "" {
			a = hub.AffNone
		}
		b.empty("affiliation", "jid", ch.JID, "affiliation", string(a))
	}
	b.close("affiliations").close("pubsub")
	serr := notAcceptable("", "%s", why)
	serr.Payload = b.Bytes()
	return serr
}
