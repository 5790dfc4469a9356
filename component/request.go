package component

import (
	"fmt"
	"strconv"

	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
)

// op is one XEP-0030 or XEP-0060 request pingd answers.
type op int

const (
	opDiscoInfo op = iota + 1
	opDiscoItems
	// Entity and subscriber use cases (pubsub namespace).
	opSubscribe
	opUnsubscribe
	opSubscriptions
	opAffiliations
	opItems
	// Publisher and owner use cases in the pubsub namespace.
	opPublish
	opRetract
	opCreate
	// Owner use cases (pubsub#owner namespace).
	opConfigureGet
	opConfigureSet
	opDefault
	opDelete
	opPurge
	opOwnerSubscriptionsGet
	opOwnerSubscriptionsSet
	opOwnerAffiliationsGet
	opOwnerAffiliationsSet
	// Subscription options (pubsub namespace).
	opOptionsGet
	opOptionsSet
	opSubscriptionDefault
	// XEP-0050 ad-hoc commands.
	opCommand
)

// request is a parsed IQ payload; which fields are set depends on Op.
type request struct {
	Op op
	// Node is the node attribute; HasNode tells an absent one from "".
	Node    string
	HasNode bool
	// JID is the jid attribute of subscribe and unsubscribe, normalised.
	JID   jid.JID
	SubID string
	// MaxItems is items' max_items (0: not given).
	MaxItems int
	// Page is the XEP-0059 result set management of items retrieval and
	// of the service's disco#items; nil
	// when the request carries none.
	Page *pageRequest
	// ItemIDs are the ids of items (retrieve by id) and retract.
	ItemIDs []string
	// Item is the one item of a publish.
	Item *publishItem
	// Configure is create's <configure/> element (may be nil).
	Configure *element
	// Form is the submitted form of a configure set, an options set, or
	// the options given with a subscribe.
	Form *element
	// Affiliations and Subscriptions are an owner's changes.
	Affiliations  []affiliationChange
	Subscriptions []subscriptionChange
	// Command is an ad-hoc command request (XEP-0050).
	Command *commandRequest
}

type publishItem struct {
	ID      string
	Payload *element
}

type affiliationChange struct {
	JID         string // bare
	Affiliation hub.Affiliation
}

type subscriptionChange struct {
	JID          jid.JID
	Subscription string
	SubID        string
}

// Limits on request fields.
const (
	maxItemIDBytes  = 1024
	maxItemIDsAsked = 1000
)

// parseIQ turns an IQ get or set into a request. It returns a stanza error
// for every request pingd refuses: a payload namespace it does not serve
// (service-unavailable, RFC 6120 §8.4), a pubsub feature it does not
// implement (feature-not-implemented + unsupported), and anything
// malformed (bad-request).
func parseIQ(iq *element) (*request, *stanzaError) {
	typ := stanza.IQType(iq.attr("type"))
	if typ != stanza.GetIQ && typ != stanza.SetIQ {
		return nil, badRequest("", "an IQ request must be of type get or set, not %q", typ)
	}
	if len(iq.Children) != 1 {
		return nil, badRequest("", "an IQ request carries exactly one payload element, not %d", len(iq.Children))
	}
	p := iq.Children[0]
	switch p.Name.Space {
	case nsDiscoInfo:
		if p.Name.Local != "query" {
			return nil, serviceUnavailable()
		}
		if typ != stanza.GetIQ {
			return nil, badRequest("", "disco#info is queried with type get")
		}
		r := &request{Op: opDiscoInfo}
		r.Node, r.HasNode = p.lookupAttr("node")
		return r, nil
	case nsDiscoItems:
		if p.Name.Local != "query" {
			return nil, serviceUnavailable()
		}
		if typ != stanza.GetIQ {
			return nil, badRequest("", "disco#items is queried with type get")
		}
		r := &request{Op: opDiscoItems}
		r.Node, r.HasNode = p.lookupAttr("node")
		if set := p.child(nsRSM, "set"); set != nil {
			var serr *stanzaError
			if r.Page, serr = parsePageRequest(set); serr != nil {
				return nil, serr
			}
		}
		return r, nil
	case nsPubsub:
		if p.Name.Local != "pubsub" {
			return nil, serviceUnavailable()
		}
		return parsePubsub(typ, p)
	case nsPubsubOwner:
		if p.Name.Local != "pubsub" {
			return nil, serviceUnavailable()
		}
		return parseOwner(typ, p)
	case nsCommands:
		return parseCommand(typ, p)
	}
	return nil, serviceUnavailable()
}

// wantType checks the IQ type a verb needs.
func wantType(got, want stanza.IQType, verb string) *stanzaError {
	if got != want {
		return badRequest("", "<%s/> is sent with an IQ of type %s", verb, want)
	}
	return nil
}

// verbs splits a <pubsub/> element's children into the one main verb and
// its allowed companion (configure with create, options with subscribe,
// publish-options with publish). Children of other namespaces are not
// verbs: they are returned apart (others), for the verbs that take them
// (XEP-0059's <set/> beside <items/>), and otherwise ignored, as XEP-0059
// §8 asks of an entity that does not understand an extension.
func verbs(p *element) (main, companion *element, others []*element, err *stanzaError) {
	var own []*element
	for _, ch := range p.Children {
		if ch.Name.Space == p.Name.Space {
			own = append(own, ch)
		} else {
			others = append(others, ch)
		}
	}
	if len(own) == 0 {
		return nil, nil, nil, badRequest("", "empty <pubsub/> element")
	}
	main = own[0]
	if len(own) == 1 {
		return main, nil, others, nil
	}
	companion = own[1]
	ok := len(own) == 2 &&
		((main.Name.Local == "create" && companion.Name.Local == "configure") ||
			(main.Name.Local == "subscribe" && companion.Name.Local == "options") ||
			(main.Name.Local == "publish" && companion.Name.Local == "publish-options"))
	if !ok {
		return nil, nil, nil, badRequest("", "a <pubsub/> request holds one action, not %d elements", len(own))
	}
	return main, companion, others, nil
}

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
			return nil, unsupported("publish-options")
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
				// (service.go refuseSubscriptionStates).
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

// String names the operation in logs.
func (o op) String() string {
	names := map[op]string{
		opDiscoInfo: "disco#info", opDiscoItems: "disco#items", opSubscribe: "subscribe",
		opUnsubscribe: "unsubscribe", opSubscriptions: "subscriptions", opAffiliations: "affiliations",
		opItems: "items", opPublish: "publish", opRetract: "retract", opCreate: "create",
		opConfigureGet: "configure-get", opConfigureSet: "configure-set", opDefault: "default",
		opDelete: "delete", opPurge: "purge", opOwnerSubscriptionsGet: "owner-subscriptions-get",
		opOwnerSubscriptionsSet: "owner-subscriptions-set", opOwnerAffiliationsGet: "owner-affiliations-get",
		opOwnerAffiliationsSet: "owner-affiliations-set", opOptionsGet: "options-get", opOptionsSet: "options-set",
		opSubscriptionDefault: "subscription-default", opCommand: "command",
	}
	if n, ok := names[o]; ok {
		return n
	}
	return fmt.Sprintf("op(%d)", int(o))
}
