package component

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"mellium.im/xmpp/form"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
)

// XEP-0050 ad-hoc commands: the chat commands as dialogs (Gajim,
// Conversations, Dino and others show them), plus owner commands for the
// JIDs in PINGD_ADMINS. Every command takes at most one form, so a
// session holds no state on pingd's side: a session id is handed out with
// the form and echoed when it is submitted, and any process sharing the
// component (ejabberd) can complete it. A submission with a session id
// pingd never issued is therefore accepted as long as it names the
// command and carries its form; nothing is kept between the stages.

const (
	nsCommands = "http://jabber.org/protocol/commands"
	// commandPrefix starts the disco node of each command. The hub
	// creates no pubsub node with it, which would be hidden behind the
	// command in disco#info.
	commandPrefix = hub.ReservedNodePrefix
)

// Form fields of the commands.
const (
	cmdFieldTarget  = "target"
	cmdFieldNode    = "node"
	cmdFieldCount   = "count"
	cmdFieldTitle   = "title"
	cmdFieldSource  = "source"
	cmdFieldAccess  = "access_model"
	cmdFieldJID     = "jid"
	maxCommandNodes = 200 // list-single options offered in one form
)

// adhocCommand is one command.
type adhocCommand struct {
	node, name string
	// owner commands are listed for and run by PINGD_ADMINS only.
	owner bool
	// form returns the command's form; nil for commands without input.
	form func(ctx context.Context, c *Component, sender jid.JID) (*form.Data, error)
	// run carries the command out; the answer is the completed note. A
	// user's mistake is an answer with errNote set, not an error.
	run func(ctx context.Context, c *Component, sender jid.JID, f *submittedForm) (commandAnswer, error)
}

// commandAnswer is a completed command's note.
type commandAnswer struct {
	text    string
	isError bool
}

func info(text string) commandAnswer    { return commandAnswer{text: text} }
func errNote(text string) commandAnswer { return commandAnswer{text: text, isError: true} }
func infoOrError(text string) commandAnswer {
	// The shared chat answers say what went wrong in words; they are
	// errors when nothing was done.
	for _, ok := range []string{"Subscribed", "Unsubscribed", "already subscribed", "settings are updated"} {
		if strings.Contains(text, ok) {
			return info(text)
		}
	}
	return errNote(text)
}

// adhocCommands lists the commands in the order disco shows them.
var adhocCommands = []*adhocCommand{
	{node: "subscribe", name: "Subscribe to a node or feed", form: subscribeForm, run: runSubscribe},
	{node: "unsubscribe", name: "Unsubscribe", form: unsubscribeForm, run: runUnsubscribe},
	{node: "list", name: "My subscriptions", run: runList},
	{node: "nodes", name: "List the nodes", run: runNodes},
	{node: "last", name: "Newest items of a node", form: lastForm, run: runLast},
	{node: "create-node", name: "Create a node (owner)", owner: true, form: createNodeForm, run: runCreateNode},
	{node: "set-source", name: "Set a node's source (owner)", owner: true, form: setSourceForm, run: runSetSource},
	{node: "set-access", name: "Set a node's access model (owner)", owner: true, form: setAccessForm, run: runSetAccess},
	{node: "whitelist-add", name: "Add a whitelist member (owner)", owner: true, form: whitelistForm("Add a member"), run: runWhitelist(hub.AffMember)},
	{node: "whitelist-remove", name: "Remove a whitelist member (owner)", owner: true, form: whitelistForm("Remove a member"), run: runWhitelist(hub.AffNone)},
	{node: "source-status", name: "A node's source status (owner)", owner: true, form: nodeOnlyForm("Source status"), run: runSourceStatus},
}

// commandByNode finds a command by its disco node.
func commandByNode(node string) *adhocCommand {
	name, ok := strings.CutPrefix(node, commandPrefix)
	if !ok {
		return nil
	}
	for _, cmd := range adhocCommands {
		if cmd.node == name {
			return cmd
		}
	}
	return nil
}

// commandRequest is a parsed <command/>.
type commandRequest struct {
	Action    string
	SessionID string
	Form      *element
}

// Limits of a command request.
const maxSessionIDBytes = 128

// parseCommand reads an XEP-0050 <command/> request.
func parseCommand(typ stanza.IQType, p *element) (*request, *stanzaError) {
	if p.Name.Local != "command" {
		return nil, serviceUnavailable()
	}
	if typ != stanza.SetIQ {
		return nil, badRequest("", "commands are executed with an IQ of type set")
	}
	r := &request{Op: opCommand, Command: &commandRequest{}}
	r.Node, r.HasNode = p.lookupAttr("node")
	if r.Node == "" {
		return nil, commandError(stanza.Modify, stanza.BadRequest, "malformed-action", "the command names no node")
	}
	action := p.attr("action")
	switch action {
	case "", "execute", "next", "complete", "cancel", "prev":
	default:
		return nil, commandError(stanza.Modify, stanza.BadRequest, "malformed-action", fmt.Sprintf("unknown action %q", action))
	}
	r.Command.Action = action
	r.Command.SessionID = p.attr("sessionid")
	if len(r.Command.SessionID) > maxSessionIDBytes {
		return nil, commandError(stanza.Modify, stanza.BadRequest, "bad-sessionid", "session id too long")
	}
	r.Command.Form = p.child(nsDataForms, "x")
	return r, nil
}

// commandError is a stanza error with an XEP-0050 condition.
func commandError(typ stanza.ErrorType, cond stanza.Condition, app, text string) *stanzaError {
	return &stanzaError{Type: typ, Condition: cond, App: app, AppNS: nsCommands, Text: text}
}

// visibleCommands are the commands sender may run.
func (c *Component) visibleCommands(sender jid.JID) []*adhocCommand {
	admin := c.hub.IsAdmin(sender.Bare().String())
	var out []*adhocCommand
	for _, cmd := range adhocCommands {
		if !cmd.owner || admin {
			out = append(out, cmd)
		}
	}
	return out
}

// commandItems answers disco#items on the commands node (XEP-0050 §2.2).
func (c *Component) commandItems(b *xmlBuf, sender jid.JID) {
	b.open("query", "xmlns", nsDiscoItems, "node", nsCommands)
	for _, cmd := range c.visibleCommands(sender) {
		b.empty("item", "jid", c.domainStr, "node", commandPrefix+cmd.node, "name", cmd.name)
	}
	b.close("query")
}

// commandInfo answers disco#info on a command's node (XEP-0050 §2.3).
func (c *Component) commandInfo(b *xmlBuf, cmd *adhocCommand) {
	b.open("query", "xmlns", nsDiscoInfo, "node", commandPrefix+cmd.node)
	b.empty("identity", "category", "automation", "type", "command-node", "name", cmd.name)
	b.empty("feature", "var", nsCommands)
	b.empty("feature", "var", nsDataForms)
	b.close("query")
}

// runCommand executes one stage of a command.
func (c *Component) runCommand(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	cmd := commandByNode(r.Node)
	if cmd == nil {
		return itemNotFound(fmt.Sprintf("no command %q", r.Node))
	}
	if cmd.owner && !c.hub.IsAdmin(sender.Bare().String()) {
		return forbidden("only pingd's administrators may run " + cmd.name)
	}
	cr := r.Command
	session := cr.SessionID
	switch cr.Action {
	case "cancel":
		if session == "" {
			return commandError(stanza.Modify, stanza.BadRequest, "bad-sessionid", "cancel names no session")
		}
		b.empty("command", "xmlns", nsCommands, "node", r.Node, "sessionid", session, "status", "canceled")
		return nil
	case "prev":
		return commandError(stanza.Modify, stanza.BadRequest, "bad-action", "these commands have one stage: there is no previous one")
	}
	if session == "" {
		session = hub.RandomID()
	}
	var submitted *submittedForm
	if cr.Form != nil && cmd.form != nil {
		f, serr := parseForm(cr.Form)
		if serr != nil {
			return commandError(stanza.Modify, stanza.BadRequest, "bad-payload", serr.Text)
		}
		switch f.Type {
		case string(form.TypeSubmit):
			submitted = f
		case string(form.TypeCancel):
			b.empty("command", "xmlns", nsCommands, "node", r.Node, "sessionid", session, "status", "canceled")
			return nil
		default:
			return commandError(stanza.Modify, stanza.BadRequest, "bad-payload", fmt.Sprintf("the form must be of type submit, not %q", f.Type))
		}
	}
	if cmd.form != nil && submitted == nil {
		if cr.Action == "complete" || cr.Action == "next" {
			return commandError(stanza.Modify, stanza.BadRequest, "bad-payload", "submit the command's form with this action")
		}
		d, err := cmd.form(ctx, c, sender)
		if err != nil {
			return err
		}
		b.open("command", "xmlns", nsCommands, "node", r.Node, "sessionid", session, "status", "executing")
		b.open("actions", "execute", "complete").empty("complete").close("actions")
		renderForm(b, d)
		b.close("command")
		return nil
	}
	if submitted == nil {
		submitted = &submittedForm{Values: map[string][]string{}}
	}
	ans, err := cmd.run(ctx, c, sender, submitted)
	if err != nil {
		return err
	}
	noteType := "info"
	if ans.isError {
		noteType = "error"
	}
	c.log.InfoContext(ctx, "ad-hoc command", "command", cmd.node, "from", sender.String(), "ok", !ans.isError)
	b.open("command", "xmlns", nsCommands, "node", r.Node, "sessionid", session, "status", "completed")
	b.element("note", ans.text, "type", noteType)
	b.close("command")
	return nil
}

// value returns a submitted field's single value, trimmed.
func (f *submittedForm) value(name string) string {
	v, _, serr := f.single(name)
	if serr != nil {
		return ""
	}
	return v
}

// nodeList is a list-single of the nodes, for forms that pick one.
func nodeList(label string, names []string) form.Field {
	opts := []form.Option{form.Label(label), form.Required}
	for i, n := range names {
		if i == maxCommandNodes {
			break
		}
		opts = append(opts, form.ListItem(n, n))
	}
	return form.List(cmdFieldNode, opts...)
}

// allNodeNames lists the nodes' names.
func allNodeNames(ctx context.Context, c *Component) ([]string, error) {
	nodes, err := c.hub.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	return names, nil
}

// messageTypeField offers the notification message types.
func messageTypeField(value string) form.Field {
	return form.List(fieldMessageType, form.Label("Message type of notifications"),
		form.Value(value),
		form.ListItem("Chat (shown in a conversation, kept while you are offline)", hub.NotifyChat),
		form.ListItem("Normal (kept while you are offline)", hub.NotifyNormal),
		form.ListItem("Headline (shown, not kept while you are offline)", hub.NotifyHeadline))
}

func subscribeForm(ctx context.Context, c *Component, sender jid.JID) (*form.Data, error) {
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
func runSubscribe(ctx context.Context, c *Component, sender jid.JID, f *submittedForm) (commandAnswer, error) {
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
	ans, err := c.subscribeTarget(ctx, sender.Bare().String(), f.value(cmdFieldTarget), opts, apply, "ad-hoc command")
	return infoOrError(ans), err
}

func unsubscribeForm(ctx context.Context, c *Component, sender jid.JID) (*form.Data, error) {
	subs, err := c.hub.Subscriptions(ctx, hub.SubscriptionFilter{Kind: hub.KindXMPP, BareJID: sender.Bare().String()})
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

func runUnsubscribe(ctx context.Context, c *Component, sender jid.JID, f *submittedForm) (commandAnswer, error) {
	ans, err := c.unsubscribeTarget(ctx, sender.Bare().String(), f.value(cmdFieldNode), "ad-hoc command")
	return infoOrError(ans), err
}

func runList(ctx context.Context, c *Component, sender jid.JID, _ *submittedForm) (commandAnswer, error) {
	ans, err := c.chatList(ctx, sender.Bare().String())
	return info(ans), err
}

func runNodes(ctx context.Context, c *Component, _ jid.JID, _ *submittedForm) (commandAnswer, error) {
	ans, err := c.chatNodes(ctx)
	return info(ans), err
}

func lastForm(ctx context.Context, c *Component, sender jid.JID) (*form.Data, error) {
	names, err := allNodeNames(ctx, c)
	if err != nil {
		return nil, err
	}
	return form.New(
		form.Title("Newest items"),
		nodeList("Node", names),
		form.Text(cmdFieldCount, form.Label(fmt.Sprintf("How many (1 to %d)", maxLastItems)), form.Value(strconv.Itoa(defaultLastItems))),
	), nil
}

func runLast(ctx context.Context, c *Component, sender jid.JID, f *submittedForm) (commandAnswer, error) {
	cmd := chatCommand{Name: "last", Arg: f.value(cmdFieldNode)}
	if v := f.value(cmdFieldCount); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return errNote(fmt.Sprintf("%q is not a number.", v)), nil
		}
		cmd.Count, cmd.HasCount = n, true
		cmd.Arg += " " + v
	}
	ans, err := c.chatLast(ctx, sender.Bare().String(), cmd)
	if err == nil && (strings.HasPrefix(ans, "The newest") || strings.Contains(ans, "has no items yet")) {
		return info(ans), nil
	}
	return errNote(ans), err
}

func accessField(value string) form.Field {
	return form.List(cmdFieldAccess, form.Label("Who may subscribe and read"), form.Value(value),
		form.ListItem("Anyone", string(hub.AccessOpen)),
		form.ListItem("Only those on the whitelist", string(hub.AccessWhitelist)))
}

func createNodeForm(ctx context.Context, c *Component, sender jid.JID) (*form.Data, error) {
	return form.New(
		form.Title("Create a node"),
		form.Text(cmdFieldNode, form.Label("Node name"), form.Required),
		form.Text(cmdFieldTitle, form.Label("Title")),
		form.Text(cmdFieldSource, form.Label("Source: a feed's URL (optional)")),
		accessField(string(hub.AccessOpen)),
	), nil
}

func runCreateNode(ctx context.Context, c *Component, sender jid.JID, f *submittedForm) (commandAnswer, error) {
	name := f.value(cmdFieldNode)
	if err := hub.ValidNodeName(name); err != nil {
		return errNote(fmt.Sprintf("%q cannot be a node name: %v", name, err)), nil
	}
	cfg := hub.DefaultNodeConfig()
	cfg.Title = f.value(cmdFieldTitle)
	if v := f.value(cmdFieldAccess); v != "" {
		cfg.AccessModel = hub.AccessModel(v)
	}
	if !cfg.AccessModel.Valid() {
		return errNote(fmt.Sprintf("%q is not an access model (open or whitelist).", cfg.AccessModel)), nil
	}
	n, _, err := c.hub.CreateNode(ctx, hub.NodeSpec{Name: name, Source: f.value(cmdFieldSource), Config: cfg})
	switch {
	case errors.Is(err, hub.ErrExists):
		return errNote(fmt.Sprintf("A node called %q exists already.", name)), nil
	case errors.Is(err, hub.ErrInvalid):
		return errNote(fmt.Sprintf("The node was not created: %v", err)), nil
	case err != nil:
		return commandAnswer{}, err
	}
	if err := c.hub.SetAffiliation(ctx, n, sender.Bare().String(), hub.AffOwner); err != nil {
		return commandAnswer{}, err
	}
	msg := fmt.Sprintf("Created the node %q (%s).", n.Name, n.AccessModel)
	if n.SourceURL != "" {
		msg += " It follows " + n.SourceURL + "."
	}
	return info(msg), nil
}

// ownedNode finds the node an owner command names.
func ownedNode(ctx context.Context, c *Component, name string) (*hub.Node, commandAnswer, error) {
	n, msg, err := c.chatNode(ctx, name)
	if n == nil {
		return nil, errNote(msg), err
	}
	return n, commandAnswer{}, nil
}

func nodeOnlyForm(title string) func(context.Context, *Component, jid.JID) (*form.Data, error) {
	return func(ctx context.Context, c *Component, sender jid.JID) (*form.Data, error) {
		names, err := allNodeNames(ctx, c)
		if err != nil {
			return nil, err
		}
		return form.New(form.Title(title), nodeList("Node", names)), nil
	}
}

func setSourceForm(ctx context.Context, c *Component, sender jid.JID) (*form.Data, error) {
	names, err := allNodeNames(ctx, c)
	if err != nil {
		return nil, err
	}
	return form.New(
		form.Title("Set a node's source"),
		nodeList("Node", names),
		form.Text(cmdFieldSource, form.Label("Source: a feed's URL (empty: none)")),
	), nil
}

func runSetSource(ctx context.Context, c *Component, sender jid.JID, f *submittedForm) (commandAnswer, error) {
	n, ans, err := ownedNode(ctx, c, f.value(cmdFieldNode))
	if n == nil {
		return ans, err
	}
	src := f.value(cmdFieldSource)
	updated, err := c.hub.SetNodeSourceURL(ctx, n.Name, src)
	switch {
	case errors.Is(err, hub.ErrInvalid):
		return errNote(fmt.Sprintf("The source was not changed: %v", err)), nil
	case err != nil:
		return commandAnswer{}, err
	}
	if updated.SourceURL == "" {
		return info(fmt.Sprintf("%q follows no source now.", n.Name)), nil
	}
	return info(fmt.Sprintf("%q follows %s now.", n.Name, updated.SourceURL)), nil
}

func setAccessForm(ctx context.Context, c *Component, sender jid.JID) (*form.Data, error) {
	names, err := allNodeNames(ctx, c)
	if err != nil {
		return nil, err
	}
	return form.New(form.Title("Set a node's access model"), nodeList("Node", names), accessField(string(hub.AccessOpen))), nil
}

func runSetAccess(ctx context.Context, c *Component, sender jid.JID, f *submittedForm) (commandAnswer, error) {
	n, ans, err := ownedNode(ctx, c, f.value(cmdFieldNode))
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
	if err := c.hub.ConfigureNode(ctx, n.Name, cfg); err != nil {
		return commandAnswer{}, err
	}
	return info(fmt.Sprintf("%q is %s now.", n.Name, model)), nil
}

func whitelistForm(title string) func(context.Context, *Component, jid.JID) (*form.Data, error) {
	return func(ctx context.Context, c *Component, sender jid.JID) (*form.Data, error) {
		names, err := allNodeNames(ctx, c)
		if err != nil {
			return nil, err
		}
		return form.New(form.Title(title), nodeList("Node", names),
			form.JID(cmdFieldJID, form.Label("The member's address (user@example.org)"), form.Required)), nil
	}
}

func runWhitelist(aff hub.Affiliation) func(context.Context, *Component, jid.JID, *submittedForm) (commandAnswer, error) {
	return func(ctx context.Context, c *Component, sender jid.JID, f *submittedForm) (commandAnswer, error) {
		n, ans, err := ownedNode(ctx, c, f.value(cmdFieldNode))
		if n == nil {
			return ans, err
		}
		j, perr := jid.Parse(f.value(cmdFieldJID))
		if perr != nil || j.Localpart() == "" {
			return errNote(fmt.Sprintf("%q is not an address like user@example.org.", f.value(cmdFieldJID))), nil
		}
		bare := j.Bare().String()
		if aff == hub.AffNone {
			current, err := c.hub.AffiliationOf(ctx, n, bare)
			if err != nil {
				return commandAnswer{}, err
			}
			if current != hub.AffMember {
				return errNote(fmt.Sprintf("%s is not a member of %q.", bare, n.Name)), nil
			}
		}
		if err := c.hub.SetAffiliation(ctx, n, bare, aff); err != nil {
			return commandAnswer{}, err
		}
		if aff == hub.AffNone {
			if n.AccessModel == hub.AccessWhitelist {
				if err := c.hub.RevokeSubscriptions(ctx, n, bare); err != nil {
					return commandAnswer{}, err
				}
			}
			return info(fmt.Sprintf("%s is no longer on the whitelist of %q.", bare, n.Name)), nil
		}
		return info(fmt.Sprintf("%s is on the whitelist of %q now.", bare, n.Name)), nil
	}
}

func runSourceStatus(ctx context.Context, c *Component, sender jid.JID, f *submittedForm) (commandAnswer, error) {
	n, ans, err := ownedNode(ctx, c, f.value(cmdFieldNode))
	if n == nil {
		return ans, err
	}
	if n.SourceID == 0 {
		return info(fmt.Sprintf("%q follows no source: items come from its publishers.", n.Name)), nil
	}
	src, err := c.hub.Source(ctx, n.SourceID)
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
