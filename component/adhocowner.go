package component

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"mellium.im/xmpp/form"
	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
)

func accessField(value string) form.Field {
	return form.List(cmdFieldAccess, form.Label("Who may subscribe and read"), form.Value(value),
		form.ListItem("Anyone", string(hub.AccessOpen)),
		form.ListItem("Only those on the whitelist", string(hub.AccessWhitelist)))
}

func createNodeForm(ctx context.Context, a *adhocService, sender jid.JID) (*form.Data, error) {
	return form.New(
		form.Title("Create a node"),
		form.Text(cmdFieldNode, form.Label("Node name"), form.Required),
		form.Text(cmdFieldTitle, form.Label("Title")),
		form.Text(cmdFieldSource, form.Label("Source: a feed's URL (optional)")),
		accessField(string(hub.AccessOpen)),
	), nil
}

func runCreateNode(ctx context.Context, a *adhocService, sender jid.JID, f *submittedForm) (commandAnswer, error) {
	name := f.value(cmdFieldNode)
	if err := hub.ValidNodeName(name); err != nil {
		return errNote(fmt.Sprintf("%q cannot be a node name: %s.", name, invalidText(err))), nil
	}
	cfg := hub.DefaultNodeConfig()
	cfg.Title = f.value(cmdFieldTitle)
	if v := f.value(cmdFieldAccess); v != "" {
		cfg.AccessModel = hub.AccessModel(v)
	}
	if !cfg.AccessModel.Valid() {
		return errNote(fmt.Sprintf("%q is not an access model (open or whitelist).", cfg.AccessModel)), nil
	}
	n, _, err := a.hub.CreateNode(ctx, hub.NodeSpec{Name: name, Source: f.value(cmdFieldSource), Config: cfg})
	switch {
	case errors.Is(err, hub.ErrExists):
		return errNote(fmt.Sprintf("A node called %q exists already.", name)), nil
	case errors.Is(err, hub.ErrInvalid):
		return errNote(fmt.Sprintf("The node was not created: %s.", invalidText(err))), nil
	case err != nil:
		return commandAnswer{}, err
	}
	if err := a.hub.SetAffiliation(ctx, n, sender.Bare().String(), hub.AffOwner); err != nil {
		return commandAnswer{}, err
	}
	msg := fmt.Sprintf("Created the node %q (%s).", n.Name, n.AccessModel)
	if n.SourceURL != "" {
		msg += " It follows " + n.SourceURL + "."
	}
	return info(msg), nil
}

// ownedNode finds the node an owner command names.
func ownedNode(ctx context.Context, a *adhocService, name string) (*hub.Node, commandAnswer, error) {
	n, msg, err := a.chatNode(ctx, name)
	if n == nil {
		return nil, errNote(msg), err
	}
	return n, commandAnswer{}, nil
}

func nodeOnlyForm(title string) func(context.Context, *adhocService, jid.JID) (*form.Data, error) {
	return func(ctx context.Context, a *adhocService, sender jid.JID) (*form.Data, error) {
		names, err := allNodeNames(ctx, a)
		if err != nil {
			return nil, err
		}
		return form.New(form.Title(title), nodeList("Node", names)), nil
	}
}

func setSourceForm(ctx context.Context, a *adhocService, sender jid.JID) (*form.Data, error) {
	names, err := allNodeNames(ctx, a)
	if err != nil {
		return nil, err
	}
	return form.New(
		form.Title("Set a node's source"),
		nodeList("Node", names),
		form.Text(cmdFieldSource, form.Label("Source: a feed's URL (empty: none)")),
	), nil
}

func runSetSource(ctx context.Context, a *adhocService, sender jid.JID, f *submittedForm) (commandAnswer, error) {
	n, ans, err := ownedNode(ctx, a, f.value(cmdFieldNode))
	if n == nil {
		return ans, err
	}
	src := f.value(cmdFieldSource)
	updated, err := a.hub.SetNodeSourceURL(ctx, n.Name, src)
	switch {
	case errors.Is(err, hub.ErrInvalid):
		return errNote(fmt.Sprintf("The source was not changed: %s.", invalidText(err))), nil
	case err != nil:
		return commandAnswer{}, err
	}
	if updated.SourceURL == "" {
		return info(fmt.Sprintf("%q follows no source now.", n.Name)), nil
	}
	return info(fmt.Sprintf("%q follows %s now.", n.Name, updated.SourceURL)), nil
}

func setAccessForm(ctx context.Context, a *adhocService, sender jid.JID) (*form.Data, error) {
	names, err := allNodeNames(ctx, a)
	if err != nil {
		return nil, err
	}
	return form.New(form.Title("Set a node's access model"), nodeList("Node", names), accessField(string(hub.AccessOpen))), nil
}

func runSetAccess(ctx context.Context, a *adhocService, sender jid.JID, f *submittedForm) (commandAnswer, error) {
	n, ans, err := ownedNode(ctx, a, f.value(cmdFieldNode))
	if n == nil {
		return ans, err
	}
	model := hub.AccessModel(f.value(cmdFieldAccess))
	if !model.Valid() {
		return errNote(fmt.Sprintf("%q is not an access model (open or whitelist).", model)), nil
	}
	cfg := n.NodeConfig
	cfg.AccessModel = model
	// Subscribers not on the list go when the node becomes whitelist-only:
	// the hub ends their subscriptions and tells them.
	if err := a.hub.ConfigureNode(ctx, n.Name, cfg); err != nil {
		return commandAnswer{}, err
	}
	return info(fmt.Sprintf("%q is %s now.", n.Name, model)), nil
}

func whitelistForm(title string) func(context.Context, *adhocService, jid.JID) (*form.Data, error) {
	return func(ctx context.Context, a *adhocService, sender jid.JID) (*form.Data, error) {
		names, err := allNodeNames(ctx, a)
		if err != nil {
			return nil, err
		}
		return form.New(form.Title(title), nodeList("Node", names),
			form.JID(cmdFieldJID, form.Label("The member's address (user@example.org)"), form.Required)), nil
	}
}

func runWhitelist(aff hub.Affiliation) func(context.Context, *adhocService, jid.JID, *submittedForm) (commandAnswer, error) {
	return func(ctx context.Context, a *adhocService, sender jid.JID, f *submittedForm) (commandAnswer, error) {
		n, ans, err := ownedNode(ctx, a, f.value(cmdFieldNode))
		if n == nil {
			return ans, err
		}
		j, perr := jid.Parse(f.value(cmdFieldJID))
		if perr != nil || j.Localpart() == "" {
			return errNote(fmt.Sprintf("%q is not an address like user@example.org.", f.value(cmdFieldJID))), nil
		}
		bare := j.Bare().String()
		if aff == hub.AffNone {
			current, err := a.hub.AffiliationOf(ctx, n, bare)
			if err != nil {
				return commandAnswer{}, err
			}
			if current != hub.AffMember {
				return errNote(fmt.Sprintf("%s is not a member of %q.", bare, n.Name)), nil
			}
		}
		if err := a.hub.SetAffiliation(ctx, n, bare, aff); err != nil {
			return commandAnswer{}, err
		}
		if aff == hub.AffNone {
			if n.AccessModel == hub.AccessWhitelist {
				if err := a.hub.RevokeSubscriptions(ctx, n, bare); err != nil {
					return commandAnswer{}, err
				}
			}
			return info(fmt.Sprintf("%s is no longer on the whitelist of %q.", bare, n.Name)), nil
		}
		return info(fmt.Sprintf("%s is on the whitelist of %q now.", bare, n.Name)), nil
	}
}

func runSourceStatus(ctx context.Context, a *adhocService, sender jid.JID, f *submittedForm) (commandAnswer, error) {
	n, ans, err := ownedNode(ctx, a, f.value(cmdFieldNode))
	if n == nil {
		return ans, err
	}
	if n.SourceID == 0 {
		return info(fmt.Sprintf("%q follows no source: items come from its publishers.", n.Name)), nil
	}
	src, err := a.hub.Source(ctx, n.SourceID)
	if err != nil {
		return commandAnswer{}, err
	}
	return info(sourceStatusText(n, src)), nil
}

// sourceStatusText describes a source's fetch state for its owner.
func sourceStatusText(n *hub.Node, src *hub.Source) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q follows %s", n.Name, src.URL)
	if src.MovedFrom != "" {
		fmt.Fprintf(&b, " (moved from %s)", src.MovedFrom)
	}
	b.WriteString(".")
	const layout = "2006-01-02 15:04:05 UTC"
	switch {
	case src.Gone:
		b.WriteString("\nThe source is gone (HTTP 410 or an empty redirect): pingd no longer fetches it.")
	case src.LastFetchAt.IsZero():
		b.WriteString("\nNot fetched yet.")
	default:
		fmt.Fprintf(&b, "\nLast fetch: %s, HTTP %d, %d new item(s).", src.LastFetchAt.UTC().Format(layout), src.LastStatus, src.LastNewItems)
	}
	if src.LastError != "" {
		fmt.Fprintf(&b, "\nLast error: %s (%d in a row).", src.LastError, src.ConsecutiveErrors)
	}
	if !src.LastChangeAt.IsZero() {
		fmt.Fprintf(&b, "\nLast change: %s.", src.LastChangeAt.UTC().Format(layout))
	}
	if !src.LastPingAt.IsZero() {
		fmt.Fprintf(&b, "\nLast ping: %s.", src.LastPingAt.UTC().Format(layout))
	}
	if !src.Gone && !src.NextFetchAt.IsZero() {
		fmt.Fprintf(&b, "\nNext fetch: %s (%s).", src.NextFetchAt.UTC().Format(layout), src.NextFetchReason)
	}
	return b.String()
}
