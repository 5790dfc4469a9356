package component

import (
	"strconv"

	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
)

func parsePubsub(typ stanza.IQType, p *element) (*request, *stanzaError) {
	v, companion, others, serr := verbs(p)
	if serr != nil {
		return nil, serr
	}
	r := &request{}
	r.Node, r.HasNode = v.lookupAttr("node")
	switch v.Name.Local {
	case "subscribe", "unsubscribe", "items", "publish", "retract":
		if r.Node == "" {
			return nil, nodeIDRequired()
		}
	}
	switch v.Name.Local {
	case "subscribe":
		if err := wantType(typ, stanza.SetIQ, "subscribe"); err != nil {
			return nil, err
		}
		r.Op = opSubscribe
		if companion != nil && len(companion.Children) > 0 {
			r.Form = companion.child(nsDataForms, "x")
			if r.Form == nil || len(companion.Children) != 1 {
				return nil, invalidOptions("<options/> with a subscribe holds one jabber:x:data form")
			}
		}
		if err := parseSubscriberJID(v, r); err != nil {
			return nil, err
		}
	case "unsubscribe":
		if err := wantType(typ, stanza.SetIQ, "unsubscribe"); err != nil {
			return nil, err
		}
		r.Op = opUnsubscribe
		r.SubID = v.attr("subid")
		if err := parseSubscriberJID(v, r); err != nil {
			return nil, err
		}
	case "subscriptions":
		if err := wantType(typ, stanza.GetIQ, "subscriptions"); err != nil {
			return nil, err
		}
		r.Op = opSubscriptions
	case "affiliations":
		if err := wantType(typ, stanza.GetIQ, "affiliations"); err != nil {
			return nil, err
		}
		r.Op = opAffiliations
	case "items":
		if err := wantType(typ, stanza.GetIQ, "items"); err != nil {
			return nil, err
		}
		r.Op = opItems
		if s, ok := v.lookupAttr("max_items"); ok {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return nil, badRequest("", "max_items must be a positive number, not %q", s)
			}
			r.MaxItems = n
		}
		items := v.childrenNamed(nsPubsub, "item")
		if len(items) > maxItemIDsAsked {
			return nil, badRequest("", "at most %d items may be asked for at once", maxItemIDsAsked)
		}
		for _, it := range items {
			id, ok := it.lookupAttr("id")
			if !ok || id == "" {
				return nil, badRequest("item-required", "an <item/> asked for needs an id")
			}
			r.ItemIDs = append(r.ItemIDs, id)
		}
		for _, o := range others {
			if o.Name.Space == nsRSM && o.Name.Local == "set" {
				if r.Page, serr = parsePageRequest(o); serr != nil {
					return nil, serr
				}
				break
			}
		}
	case "publish":
		if err := wantType(typ, stanza.SetIQ, "publish"); err != nil {
			return nil, err
		}
		if companion != nil && len(companion.Children) > 0 {
			pre, serr := parsePublishOptions(companion)
			if serr != nil {
				return nil, serr
			}
			r.Preconditions = pre
		}
		r.Op = opPublish
		item, err := parsePublishItem(v)
		if err != nil {
			return nil, err
		}
		r.Item = item
	case "retract":
		if err := wantType(typ, stanza.SetIQ, "retract"); err != nil {
			return nil, err
		}
		r.Op = opRetract
		items := v.childrenNamed(nsPubsub, "item")
		if len(items) == 0 {
			return nil, badRequest("item-required", "a retraction names at least one <item id=\"…\"/>")
		}
		if len(items) > maxItemIDsAsked {
			return nil, badRequest("", "at most %d items may be retracted at once", maxItemIDsAsked)
		}
		for _, it := range items {
			id := it.attr("id")
			if id == "" {
				return nil, badRequest("item-required", "an <item/> to retract needs an id")
			}
			r.ItemIDs = append(r.ItemIDs, id)
		}
	case "create":
		if err := wantType(typ, stanza.SetIQ, "create"); err != nil {
			return nil, err
		}
		r.Op = opCreate
		if companion != nil {
			if _, has := companion.lookupAttr("node"); has {
				return nil, badRequest("", "<configure/> in a create request has no node attribute")
			}
			r.Configure = companion
		}
		if r.HasNode && r.Node == "" {
			return nil, badRequest("", "empty node name")
		}
		return r, nil
	case "options":
		if r.Node == "" {
			return nil, nodeIDRequired()
		}
		r.SubID = v.attr("subid")
		if err := parseSubscriberJID(v, r); err != nil {
			return nil, err
		}
		if typ == stanza.GetIQ {
			r.Op = opOptionsGet
			break
		}
		r.Op = opOptionsSet
		r.Form = v.child(nsDataForms, "x")
		if r.Form == nil {
			return nil, invalidOptions("an options request carries a jabber:x:data form")
		}
	case "default":
		if err := wantType(typ, stanza.GetIQ, "default"); err != nil {
			return nil, err
		}
		r.Op = opSubscriptionDefault
	case "configure":
		// <configure/> alone (without <create/>) belongs to the owner namespace.
		return nil, badRequest("", "<configure/> without <create/> is sent in the %s namespace", nsPubsubOwner)
	default:
		return nil, badRequest("", "unknown pubsub request <%s/>", v.Name.Local)
	}
	return r, nil
}

// parseSubscriberJID reads the required jid attribute of subscribe,
// unsubscribe and options, normalised with PRECIS. Without one the answer
// is jid-required (XEP-0060 §6.3.4.3 says so for options; subscribe and
// unsubscribe name no condition for it, and invalid-jid means a JID that
// is not the sender's, §6.1.3.1); a JID that does not parse is invalid-jid.
func parseSubscriberJID(v *element, r *request) *stanzaError {
	s, ok := v.lookupAttr("jid")
	if !ok || s == "" {
		return badRequest("jid-required", "the jid attribute is required")
	}
	j, err := jid.Parse(s)
	if err != nil {
		return badRequest("invalid-jid", "invalid JID %q: %v", s, err)
	}
	r.JID = j
	return nil
}

// parsePublishItem reads the single <item/> of a publish (XEP-0060 §7.1.3).
func parsePublishItem(v *element) (*publishItem, *stanzaError) {
	items := v.childrenNamed(nsPubsub, "item")
	if len(v.Children) != len(items) {
		return nil, badRequest("", "<publish/> holds only <item/> elements")
	}
	switch {
	case len(items) == 0:
		return nil, badRequest("item-required", "a publish carries one <item/>")
	case len(items) > 1:
		return nil, badRequest("invalid-payload", "a publish carries one <item/>, not %d", len(items))
	}
	it := items[0]
	id, hasID := it.lookupAttr("id")
	if hasID && id == "" {
		return nil, badRequest("", "an item id may not be empty")
	}
	if len(id) > maxItemIDBytes {
		return nil, notAcceptable("", "item ids are at most %d bytes", maxItemIDBytes)
	}
	switch len(it.Children) {
	case 0:
		return nil, badRequest("payload-required", "the <item/> carries no payload")
	case 1:
	default:
		return nil, badRequest("invalid-payload", "the <item/> carries %d payload elements; one is allowed", len(it.Children))
	}
	// Every node's pubsub#type is Atom, and the contract promises Atom
	// entries to every subscriber (XEP-0060 §7.1.3.5).
	if p := it.Children[0]; !isAtomEntry(p) {
		return nil, badRequest("invalid-payload", "the nodes here carry Atom entries (<entry xmlns=%q/>), not <%s xmlns=%q/>",
			nsAtom, p.Name.Local, p.Name.Space)
	}
	return &publishItem{ID: id, Payload: it.Children[0]}, nil
}

func parseOwner(typ stanza.IQType, p *element) (*request, *stanzaError) {
	// Children of other namespaces are ignored, as in the pubsub namespace.
	var own []*element
	for _, ch := range p.Children {
		if ch.Name.Space == nsPubsubOwner {
			own = append(own, ch)
		}
	}
	if len(own) != 1 {
		return nil, badRequest("", "a <pubsub xmlns=%q/> request holds one action, not %d elements", nsPubsubOwner, len(own))
	}
	v := own[0]
	r := &request{}
	r.Node, r.HasNode = v.lookupAttr("node")
	switch v.Name.Local {
	case "configure":
		if typ == stanza.GetIQ {
			r.Op = opConfigureGet
		} else {
			r.Op = opConfigureSet
			r.Form = v.child(nsDataForms, "x")
			if r.Form == nil {
				return nil, badRequest("", "a configuration request carries a jabber:x:data form")
			}
		}
	case "default":
		if err := wantType(typ, stanza.GetIQ, "default"); err != nil {
			return nil, err
		}
		r.Op = opDefault
		return r, nil
	case "delete":
		if err := wantType(typ, stanza.SetIQ, "delete"); err != nil {
			return nil, err
		}
		r.Op = opDelete
	case "purge":
		if err := wantType(typ, stanza.SetIQ, "purge"); err != nil {
			return nil, err
		}
		r.Op = opPurge
	case "subscriptions":
		if typ == stanza.GetIQ {
			r.Op = opOwnerSubscriptionsGet
			break
		}
		r.Op = opOwnerSubscriptionsSet
		for _, s := range v.childrenNamed(nsPubsubOwner, "subscription") {
			j, err := jid.Parse(s.attr("jid"))
			if err != nil {
				return nil, badRequest("invalid-jid", "invalid JID %q", s.attr("jid"))
			}
			state := s.attr("subscription")
			switch state {
			case "none", "subscribed":
			case "pending", "unconfigured":
				// States XEP-0060 has and pingd does not: refused by the
				// owner use case, with the entries' current states
				// (owner.go refuseSubscriptionChanges).
			default:
				return nil, badRequest("", "subscription must be none or subscribed, not %q", state)
			}
			r.Subscriptions = append(r.Subscriptions, subscriptionChange{JID: j, Subscription: state, SubID: s.attr("subid")})
		}
		if len(r.Subscriptions) == 0 {
			return nil, badRequest("", "no <subscription/> to change")
		}
	case "affiliations":
		if typ == stanza.GetIQ {
			r.Op = opOwnerAffiliationsGet
			break
		}
		r.Op = opOwnerAffiliationsSet
		seen := map[string]bool{}
		for _, a := range v.childrenNamed(nsPubsubOwner, "affiliation") {
			j, err := jid.Parse(a.attr("jid"))
			if err != nil {
				return nil, badRequest("invalid-jid", "invalid JID %q", a.attr("jid"))
			}
			bare := j.Bare().String()
			if seen[bare] {
				return nil, badRequest("", "%s is named twice", bare)
			}
			seen[bare] = true
			value, ok := a.lookupAttr("affiliation")
			if !ok {
				continue // XEP-0060 §8.9.2.1: no attribute, no change
			}
			aff := hub.Affiliation(value)
			if value == "publish-only" {
				return nil, unsupported("publish-only-affiliation")
			}
			if !aff.Valid() {
				return nil, badRequest("", "unknown affiliation %q", value)
			}
			r.Affiliations = append(r.Affiliations, affiliationChange{JID: bare, Affiliation: aff})
		}
		if len(seen) == 0 {
			return nil, badRequest("", "no <affiliation/> to change")
		}
	default:
		return nil, badRequest("", "unknown pubsub owner request <%s/>", v.Name.Local)
	}
	if !r.HasNode || r.Node == "" {
		return nil, nodeIDRequired()
	}
	return r, nil
}
