package component

import (
	"strings"

	"mellium.im/xmpp/form"

	"github.com/pingd/pingd/hub"
)

// Diffs. The XRDS document promises patch-ops diffs for XMPP subscriptions
// as for webhooks; an XMPP subscription asks for them with the
// x-pingd#diff option. Its pubsub events then carry, beside the
// <event/> (XEP-0060 gives an item one payload, the Atom entry), the
// RFC 7351 patch a GetPingd webhook with diff="application/patch-ops+xml"
// gets (Config.Patch), against the node's previous Atom document:
//
//	<Diff xmlns="http://getpingd.com/extensions/xmpp/getpingd-1.0"
//	      type="application/patch-ops+xml">&lt;?xml …?&gt;&lt;p:patch …</Diff>
//
// The patch document is the element's text, not a child element: its
// selectors ("/a:feed/a:updated") name elements through prefixes declared
// on <p:patch>, and XMPP servers do not keep prefix declarations
// (Prosody re-serialises every element with a default namespace, so the
// "a" of a selector would arrive unbound, and client libraries built on
// ElementTree do the same). As text the document arrives byte for byte.
// The element is in the GetPingd XMPP namespace the XRDS document
// describes the XMPP subscription in, named like its SupportsDiff.
//
// Plain messages (the message format) carry no patch: their readers are
// not told of retractions and purges, so patches of theirs could not keep
// a document in step. The option stays set and applies when the
// subscription takes pubsub events again, as pubsub#include_body does.

const (
	fieldDiff = "x-pingd#diff"
	// diffNone is the option's value for no diff ("" in hub.Options).
	diffNone = "none"
	// diffXMLPatch is RFC 7351's name of the patch format, taken as an
	// alias as GetPingd webhooks take it.
	diffXMLPatch   = "application/xml-patch+xml"
	nsGetPingdXMPP = "http://getpingd.com/extensions/xmpp/getpingd-1.0"
)

// parseDiff reads an x-pingd#diff value (media types without regard to
// case) into what hub.Options.Diff stores: "" for none, hub.DiffPatchOps
// for it or its alias.
func parseDiff(v string) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case diffNone:
		return "", true
	case hub.DiffPatchOps, diffXMLPatch:
		return hub.DiffPatchOps, true
	}
	return "", false
}

// diffField offers the diffs, with diff (hub.Options.Diff) chosen.
func diffField(diff string) form.Field {
	if diff == "" {
		diff = diffNone
	}
	return form.List(fieldDiff, form.Label("With pubsub events: the change as an XML patch of the node's Atom feed"),
		form.Value(diff),
		form.ListItem("No patch", diffNone),
		form.ListItem("An RFC 7351 patch (RFC 5261 operations) of the node's previous Atom document", hub.DiffPatchOps))
}

// renderDiff renders the <Diff/> element of a batch of the node's events
// (one item, a retraction or a purge; a digest's events) for a
// notification of at most size bytes without it. It is nil when the
// component has no patches (Config.Patch), when the patch cannot be made
// or when the notification would outgrow the stanza budget (budget.go): the
// notification then goes without it rather than not at all, and its
// subscriber, missing the patch it asked for, reads the node's document
// again.
func (rd *renderer) renderDiff(n *hub.Node, events []hub.Event, size int) []byte {
	if rd.patch == nil {
		return nil
	}
	patch, err := rd.patch(n, events)
	if err != nil || len(patch) == 0 {
		rd.log.Error("render a notification's patch; sending it without one", "node", n.Name, "err", err)
		return nil
	}
	var b xmlBuf
	b.element("Diff", string(patch), "xmlns", nsGetPingdXMPP, "type", hub.DiffPatchOps)
	if limit := rd.suffixBudget(); size+b.Len() > limit {
		// The patch repeats the entries the event carries.
		rd.log.Warn("a notification's patch is left out: the notification would be too large with it",
			"node", n.Name, "events", len(events), "bytes", size+b.Len(), "max_bytes", limit)
		return nil
	}
	return b.Bytes()
}
