package component

import (
	"fmt"

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
	// Preconditions are a publish's publish-options (XEP-0060 §7.1.5):
	// node configuration fields and the values the node must have.
	Preconditions map[string][]string
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
