package component

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"mellium.im/xmpp/form"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
)

// XEP-0060 subscription options (§6.3): a subscriber reads and changes
// the options of its subscription with a pubsub#subscribe_options form, or
// gives them with the subscribe request itself (§6.3.7). pingd offers
// pubsub#include_body, a readable <body> beside each event for clients
// that show no pubsub events, and two fields of its own: the format of
// the notifications (the pubsub#event, or a plain message without one)
// and their message type. XEP-0060 registers no field for either, so they
// are implementation-specific and named with the "x-" prefix XEP-0068
// asks for; so is x-pingd#diff, the patches of diff.go.

const (
	formSubscribeOptions = nsPubsub + "#subscribe_options"
	fieldIncludeBody     = "pubsub#include_body"
	fieldMessageType     = "x-pingd#message_type"
	fieldFormat          = "x-pingd#format"
	fieldDigest          = "pubsub#digest"
	fieldDigestFrequency = "pubsub#digest_frequency"
)

// xep60SubscriptionOptions are the options of a subscription made by
// XEP-0060 (a subscribe request, an owner's change of subscriptions)
// before any form changes them: the pubsub#event, with a readable <body>
// beside it (pubsub#include_body, whose default XEP-0060 leaves to the
// service). A client that shows a headline's body but not the event then
// shows the entry; one that reads the event reads it as before. Clients
// that drop every message carrying a pubsub#event (Gajim, Profanity) show
// neither: their readers subscribe by chat (docs/clients.md).
var xep60SubscriptionOptions = hub.Options{IncludeBody: true}

// subOptionsForm is the options form filled with opts for a subscription
// to n (nil: any node), of type form, or result when answering a
// subscribe-and-configure.
func subOptionsForm(opts hub.Options, n *hub.Node, result bool) *form.Data {
	format := opts.Format
	if format == "" {
		format = hub.FormatPubsub
	}
	fields := []form.Field{
		form.Title("Subscription options"),
		form.Hidden("FORM_TYPE", form.Value(formSubscribeOptions)),
		formatField(format),
		form.Boolean(fieldIncludeBody, form.Label("Add a readable message body to each pubsub event"),
			form.Value(boolValue(opts.IncludeBody))),
		messageTypeField(hub.MessageTypeOf(n, opts)),
		form.Boolean(fieldDigest, form.Label("Gather the notifications into one digest per interval"),
			form.Value(boolValue(opts.Digest))),
		form.Text(fieldDigestFrequency, form.Label(fmt.Sprintf("Milliseconds between two digests (%d to %d)",
			hub.MinDigestFrequency.Milliseconds(), hub.MaxDigestFrequency.Milliseconds())),
			form.Value(strconv.FormatInt(opts.DigestFrequency().Milliseconds(), 10))),
		diffField(opts.Diff),
	}
	if result {
		fields = append([]form.Field{form.Result}, fields...)
	}
	return form.New(fields...)
}

// formatField offers the notification formats.
func formatField(value string) form.Field {
	return form.List(fieldFormat, form.Label("What a notification is"), form.Value(value),
		form.ListItem("A plain message every client shows (text and link)", hub.FormatMessage),
		form.ListItem("An XEP-0060 pubsub event (for clients that read pubsub)", hub.FormatPubsub))
}

// sameXMPPOptions reports whether two subscriptions' XMPP options are
// the same.
func sameXMPPOptions(a, b hub.Options) bool {
	return a.Format == b.Format && a.IncludeBody == b.IncludeBody && a.MessageType == b.MessageType &&
		a.Digest == b.Digest && a.DigestFrequencyMS == b.DigestFrequencyMS && a.Diff == b.Diff
}

// invalidOptions is the error for a subscription options form pingd
// cannot take (XEP-0060 §6.3.5.3).
func invalidOptions(format string, args ...any) *stanzaError {
	return badRequest("invalid-options", format, args...)
}

// applySubOptionsForm applies a submitted options form to opts. Fields
// left out keep their values. A registered pubsub#subscribe_options field
// pingd does not offer is taken when it asks for what pingd does anyway
// (pubsub#deliver 1, every pubsub#show-values state, …) or has no value,
// so clients that send every field they know keep working; asking for anything else, or
// giving an unknown pubsub# or x-pingd# field a value, is invalid-options
// (XEP-0060 §6.3.5.3), and nothing is applied. Fields of other namespaces
// are not the form type's and are ignored.
func applySubOptionsForm(opts hub.Options, x *element) (hub.Options, *stanzaError) {
	orig := opts // what a refusal returns: nothing is applied
	f, serr := parseForm(x)
	if serr != nil {
		return orig, invalidOptions("%s", serr.Text)
	}
	switch f.Type {
	case string(form.TypeSubmit):
	case string(form.TypeCancel):
		return opts, nil
	default:
		return orig, invalidOptions("the options form must be of type submit, not %q", f.Type)
	}
	if ft, ok := f.Values["FORM_TYPE"]; ok && (len(ft) != 1 || strings.TrimSpace(ft[0]) != formSubscribeOptions) {
		return orig, invalidOptions("FORM_TYPE must be %s", formSubscribeOptions)
	}
	if serr := checkUnofferedSubOptions(f); serr != nil {
		return orig, serr
	}
	if v, ok, serr := f.single(fieldIncludeBody); serr != nil {
		return orig, invalidOptions("%s", serr.Text)
	} else if ok {
		b, valid := parseXSDBool(v)
		if !valid {
			return orig, invalidOptions("%s must be a boolean, not %q", fieldIncludeBody, v)
		}
		opts.IncludeBody = b
	}
	if v, ok, serr := f.single(fieldMessageType); serr != nil {
		return orig, invalidOptions("%s", serr.Text)
	} else if ok {
		if v == "" || !hub.ValidMessageType(v) {
			return orig, invalidOptions("%s must be headline, normal or chat, not %q", fieldMessageType, v)
		}
		opts.MessageType = v
	}
	if v, ok, serr := f.single(fieldDigest); serr != nil {
		return orig, invalidOptions("%s", serr.Text)
	} else if ok && v != "" {
		b, valid := parseXSDBool(v)
		if !valid {
			return orig, invalidOptions("%s must be a boolean, not %q", fieldDigest, v)
		}
		opts.Digest = b
	}
	if v, ok, serr := f.single(fieldDigestFrequency); serr != nil {
		return orig, invalidOptions("%s", serr.Text)
	} else if ok && v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if lo, hi := hub.MinDigestFrequency.Milliseconds(), hub.MaxDigestFrequency.Milliseconds(); err != nil || ms < lo || ms > hi {
			return orig, invalidOptions("%s must be a number of milliseconds from %d to %d, not %q", fieldDigestFrequency, lo, hi, v)
		}
		opts.DigestFrequencyMS = ms
	}
	if v, ok, serr := f.single(fieldFormat); serr != nil {
		return orig, invalidOptions("%s", serr.Text)
	} else if ok {
		if v == "" || !hub.ValidFormat(v) {
			return orig, invalidOptions("%s must be %s or %s, not %q", fieldFormat, hub.FormatMessage, hub.FormatPubsub, v)
		}
		opts.Format = v
	}
	if v, ok, serr := f.single(fieldDiff); serr != nil {
		return orig, invalidOptions("%s", serr.Text)
	} else if ok {
		diff, valid := parseDiff(v)
		if !valid {
			return orig, invalidOptions("%s must be %s or %s, not %q", fieldDiff, diffNone, hub.DiffPatchOps, v)
		}
		opts.Diff = diff
	}
	return opts, nil
}

// allShowValues are the presence states pubsub#show-values names: pingd
// notifies in every one of them, whatever the subscriber's presence.
var allShowValues = []string{"away", "chat", "dnd", "online", "xa"}

// checkUnofferedSubOptions checks the fields of a submitted options form
// that pingd does not offer (see applySubOptionsForm).
func checkUnofferedSubOptions(f *submittedForm) *stanzaError {
	names := slices.Sorted(maps.Keys(f.Values)) // the first refusal is the same every time
	for _, name := range names {
		var values []string
		for _, v := range f.Values[name] {
			if v = strings.TrimSpace(v); v != "" {
				values = append(values, v)
			}
		}
		if len(values) == 0 {
			continue // no value asks for nothing
		}
		single := len(values) == 1
		// ok: the value asks for what pingd does anyway; why: what it
		// does instead, for the refusal.
		var ok bool
		var why string
		switch name {
		case "FORM_TYPE", fieldIncludeBody, fieldMessageType, fieldFormat, fieldDigest, fieldDigestFrequency, fieldDiff:
			continue // checked and applied by applySubOptionsForm
		case "pubsub#deliver":
			b, valid := parseXSDBool(values[0])
			ok, why = single && valid && b, "it always delivers notifications (unsubscribe to stop them)"
		case "pubsub#subscription_type":
			ok, why = single && values[0] == "items", "it notifies items" // not new nodes
		case "pubsub#subscription_depth":
			ok, why = single && (values[0] == "1" || values[0] == "all"), "its nodes are leaf nodes (1 or all)"
		case "pubsub#show-values":
			// Presence does not hold notifications back: only every state is true.
			slices.Sort(values)
			ok = slices.Equal(slices.Compact(values), allShowValues)
			why = "it notifies whatever the subscriber's presence (all of away, chat, dnd, online, xa)"
		case "pubsub#expire":
			why = "its subscriptions do not expire"
		default:
			if !strings.HasPrefix(name, "pubsub#") && !strings.HasPrefix(name, "x-pingd#") {
				continue // not this form type's field
			}
			why = "it offers " + fieldIncludeBody + ", " + fieldDigest + ", " + fieldDigestFrequency + ", " +
				fieldFormat + ", " + fieldMessageType + " and " + fieldDiff + " only" // a field pingd does not know
		}
		if !ok {
			return invalidOptions("pingd cannot honour %s = %q: %s", name, strings.Join(values, " "), why)
		}
	}
	return nil
}

// subscriptionFor finds the subscription an options request is about.
func (svc *service) subscriptionFor(ctx context.Context, sender jid.JID, r *request) (*hub.Node, *hub.Subscription, error) {
	n, err := svc.access.node(ctx, r.Node)
	if err != nil {
		return nil, nil, err
	}
	if !r.JID.Bare().Equal(sender.Bare()) {
		return nil, nil, forbidden(fmt.Sprintf("you may see and change the options of %s only, not %s", sender.Bare(), r.JID))
	}
	subs, err := svc.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP, Address: r.JID.String()})
	if err != nil {
		return nil, nil, err
	}
	if len(subs) == 0 {
		return nil, nil, newError(stanza.Cancel, stanza.UnexpectedRequest, "not-subscribed",
			fmt.Sprintf("%s is not subscribed to %q", r.JID, n.Name))
	}
	if r.SubID != "" && r.SubID != subs[0].SubID {
		return nil, nil, notAcceptable("invalid-subid", "no subscription %q", r.SubID)
	}
	return n, &subs[0], nil
}

// optionsGet answers a request for a subscription's options (§6.3.2).
func (svc *service) optionsGet(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	n, sub, err := svc.subscriptionFor(ctx, sender, r)
	if err != nil {
		return err
	}
	b.open("pubsub", "xmlns", nsPubsub)
	b.open("options", "node", n.Name, "jid", sub.Address, "subid", sub.SubID)
	renderForm(b, subOptionsForm(sub.Options, n, false))
	b.close("options").close("pubsub")
	return nil
}

// optionsSet changes a subscription's options (§6.3.5).
func (svc *service) optionsSet(ctx context.Context, sender jid.JID, r *request) error {
	_, sub, err := svc.subscriptionFor(ctx, sender, r)
	if err != nil {
		return err
	}
	opts, serr := applySubOptionsForm(sub.Options, r.Form)
	if serr != nil {
		return serr
	}
	if sameXMPPOptions(opts, sub.Options) {
		return nil
	}
	if _, err := svc.hub.SetSubscriptionOptions(ctx, *sub, opts); err != nil {
		return err
	}
	svc.log.InfoContext(ctx, "XMPP subscription options changed", "node", sub.NodeName, "jid", sub.Address,
		"format", opts.Format, "include_body", opts.IncludeBody, "message_type", opts.MessageType,
		"digest", opts.Digest, "digest_frequency_ms", opts.DigestFrequencyMS, "diff", opts.Diff)
	return nil
}

// subscriptionDefaults answers a request for the default subscription
// options (§6.4).
func (svc *service) subscriptionDefaults(ctx context.Context, b *xmlBuf, r *request) error {
	var n *hub.Node
	if r.HasNode && r.Node != "" {
		var err error
		if n, err = svc.access.node(ctx, r.Node); err != nil {
			return err
		}
	}
	b.open("pubsub", "xmlns", nsPubsub)
	if n != nil {
		b.open("default", "node", r.Node)
	} else {
		b.open("default")
	}
	renderForm(b, subOptionsForm(xep60SubscriptionOptions, n, false))
	b.close("default").close("pubsub")
	return nil
}
