package component

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
)

// Publish options (XEP-0060 §7.1.5): a publisher names node configuration
// fields and the values it expects the node to have ("publish only if the
// node is whitelist-only"). pingd never creates or reconfigures a node on
// a publish, so every field is a precondition: when the node's value is
// the one given, the publish goes ahead; otherwise, or for a field pingd's
// nodes do not have, it is refused with conflict and precondition-not-met
// (type cancel), naming the field, and nothing is published.

const formPublishOptions = nsPubsub + "#publish-options"

// parsePublishOptions reads <publish-options/>: one data form of type
// submit (or none given) whose FORM_TYPE, when there, is pubsub#publish-options.
func parsePublishOptions(companion *element) (map[string][]string, *stanzaError) {
	x := companion.child(nsDataForms, "x")
	if x == nil || len(companion.Children) != 1 {
		return nil, badRequest("", "<publish-options/> holds one jabber:x:data form")
	}
	f, serr := parseForm(x)
	if serr != nil {
		return nil, serr
	}
	if f.Type != "" && f.Type != "submit" {
		return nil, badRequest("", "the publish-options form must be of type submit, not %q", f.Type)
	}
	if ft, ok := f.Values["FORM_TYPE"]; ok && (len(ft) != 1 || strings.TrimSpace(ft[0]) != formPublishOptions) {
		return nil, badRequest("", "FORM_TYPE of publish-options must be %s", formPublishOptions)
	}
	delete(f.Values, "FORM_TYPE")
	return f.Values, nil
}

// nodeConfigValues are the node's configuration fields as its
// configuration form shows them, and the registered fields whose value is
// fixed for every pingd node.
func nodeConfigValues(n *hub.Node) map[string]string {
	return map[string]string{
		fieldTitle:                     n.Title,
		fieldAccessModel:               string(n.AccessModel),
		fieldMaxItems:                  strconv.Itoa(n.MaxItems),
		fieldDeliverPayloads:           boolValue(n.DeliverPayloads),
		fieldNotificationType:          nodeMessageType(n),
		fieldSendLastItem:              cmp.Or(n.SendLastPublished, hub.SendLastOnSub),
		"pubsub#persist_items":         "1",
		"pubsub#publish_model":         "publishers",
		"pubsub#deliver_notifications": "1",
		"pubsub#notify_retract":        "1",
		"pubsub#notify_delete":         "1",
		"pubsub#type":                  nsAtom,
	}
}

// preconditionsMet checks a publish's preconditions against the node.
func preconditionsMet(n *hub.Node, pre map[string][]string) *stanzaError {
	if len(pre) == 0 {
		return nil
	}
	have := nodeConfigValues(n)
	fields := slices.Sorted(func(yield func(string) bool) {
		for k := range pre {
			if !yield(k) {
				return
			}
		}
	})
	for _, field := range fields {
		values := pre[field]
		current, known := have[field]
		if !known || len(values) != 1 || !sameConfigValue(field, strings.TrimSpace(values[0]), current) {
			return preconditionNotMet(field)
		}
	}
	return nil
}

// sameConfigValue compares a precondition's value with the node's, as
// the form's datatypes do: booleans as XML Schema booleans, max_items
// "max" as pingd's largest.
func sameConfigValue(field, want, have string) bool {
	if b, ok := parseXSDBool(want); ok && (have == "0" || have == "1") {
		return boolValue(b) == have
	}
	if field == fieldMaxItems && want == "max" {
		want = strconv.Itoa(hub.MaxItemsLimit)
	}
	return want == have
}

// preconditionNotMet is XEP-0060 §7.1.5's refusal.
func preconditionNotMet(field string) *stanzaError {
	return newError(stanza.Cancel, stanza.Conflict, "precondition-not-met",
		"Field does not match: "+strings.TrimPrefix(field, "pubsub#"))
}
