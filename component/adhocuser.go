package component

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"mellium.im/xmpp/form"
	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
)

func subscribeForm(ctx context.Context, a *adhocService, sender jid.JID) (*form.Data, error) {
	return form.New(
		form.Title("Subscribe"),
		form.Instructions("Name a node, a feed's URL or a web page's URL. New entries come to you as messages."),
		form.Text(cmdFieldTarget, form.Label("Node, feed URL or page URL"), form.Required),
		formatField(hub.FormatMessage),
		messageTypeField(hub.NotifyChat),
		form.Boolean(fieldIncludeBody, form.Label("With pubsub events: add a readable text to each"), form.Value("1")),
		diffField(""),
	), nil
}

// runSubscribe subscribes with the options of the form: by default plain
// messages of type chat, like a subscription by chat. An existing
// subscription takes the fields the form carries and keeps the others.
func runSubscribe(ctx context.Context, a *adhocService, sender jid.JID, f *submittedForm) (commandAnswer, error) {
	var problem string
	apply := func(opts hub.Options) hub.Options {
		if v := f.value(fieldFormat); v != "" {
			if !hub.ValidFormat(v) {
				problem = fmt.Sprintf("%q is not a format (%s or %s).", v, hub.FormatMessage, hub.FormatPubsub)
			}
			opts.Format = v
		}
		if v := f.value(fieldIncludeBody); v != "" {
			b, ok := parseXSDBool(v)
			if !ok {
				problem = fmt.Sprintf("%q is not a yes or no.", v)
			}
			opts.IncludeBody = b
		}
		if v := f.value(fieldMessageType); v != "" {
			if !hub.ValidMessageType(v) {
				problem = fmt.Sprintf("%q is not a message type (headline, normal or chat).", v)
			}
			opts.MessageType = v
		}
		if v := f.value(fieldDiff); v != "" {
			diff, ok := parseDiff(v)
			if !ok {
				problem = fmt.Sprintf("%q is not a diff (%s or %s).", v, diffNone, hub.DiffPatchOps)
			}
			opts.Diff = diff
		}
		return opts
	}
	opts := apply(hub.Options{Format: hub.FormatMessage, IncludeBody: true})
	if problem != "" {
		return errNote(problem), nil
	}
	ans, err := a.subscribeTarget(ctx, sender.Bare().String(), f.value(cmdFieldTarget), opts, apply, "ad-hoc command")
	return infoOrError(ans), err
}

func unsubscribeForm(ctx context.Context, a *adhocService, sender jid.JID) (*form.Data, error) {
	subs, err := a.hub.Subscriptions(ctx, hub.SubscriptionFilter{Kind: hub.KindXMPP, BareJID: sender.Bare().String()})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range subs {
		if !slices.Contains(names, s.NodeName) {
			names = append(names, s.NodeName)
		}
	}
	return form.New(
		form.Title("Unsubscribe"),
		form.Instructions("Pick the node to stop receiving."),
		nodeList("Your subscriptions", names),
	), nil
}

func runUnsubscribe(ctx context.Context, a *adhocService, sender jid.JID, f *submittedForm) (commandAnswer, error) {
	ans, err := a.unsubscribeTarget(ctx, sender.Bare().String(), f.value(cmdFieldNode), "ad-hoc command")
	return infoOrError(ans), err
}

func runList(ctx context.Context, a *adhocService, sender jid.JID, _ *submittedForm) (commandAnswer, error) {
	ans, err := a.chatList(ctx, sender.Bare().String())
	return info(ans), err
}

func runNodes(ctx context.Context, a *adhocService, _ jid.JID, _ *submittedForm) (commandAnswer, error) {
	ans, err := a.chatNodes(ctx)
	return info(ans), err
}

func lastForm(ctx context.Context, a *adhocService, sender jid.JID) (*form.Data, error) {
	names, err := allNodeNames(ctx, a)
	if err != nil {
		return nil, err
	}
	return form.New(
		form.Title("Newest items"),
		nodeList("Node", names),
		form.Text(cmdFieldCount, form.Label(fmt.Sprintf("How many (1 to %d)", maxLastItems)), form.Value(strconv.Itoa(defaultLastItems))),
	), nil
}

func runLast(ctx context.Context, a *adhocService, sender jid.JID, f *submittedForm) (commandAnswer, error) {
	cmd := chatCommand{Name: "last", Arg: f.value(cmdFieldNode)}
	if v := f.value(cmdFieldCount); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return errNote(fmt.Sprintf("%q is not a number.", v)), nil
		}
		cmd.Count, cmd.HasCount = n, true
		cmd.Arg += " " + v
	}
	ans, err := a.chatLast(ctx, sender.Bare().String(), cmd)
	if err == nil && (strings.HasPrefix(ans, "The newest") || strings.Contains(ans, "has no items yet")) {
		return info(ans), nil
	}
	return errNote(ans), err
}
