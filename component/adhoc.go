package component

import (
	"context"
	"fmt"
	"strings"

	"mellium.im/xmpp/commands"
	"mellium.im/xmpp/form"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
)

// adhocService lists and runs the XEP-0050 ad-hoc commands: the chat
// commands' use cases behind XEP-0004 forms, and the owner commands.
type adhocService struct {
	*chatCommands
}

// XEP-0050 ad-hoc commands: the chat commands as dialogs (Gajim,
// Conversations, Dino and others show them), plus owner commands for the
// JIDs in PINGD_ADMINS. Every command takes at most one form, so a
// session holds no state on pingd's side: a session id is handed out with
// the form and echoed when it is submitted, and any process sharing the
// component (ejabberd) can complete it. A submission with a session id
// pingd never issued is therefore accepted as long as it names the
// command and carries its form; nothing is kept between the stages.

const (
	nsCommands = commands.NS
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
	form func(ctx context.Context, a *adhocService, sender jid.JID) (*form.Data, error)
	// run carries the command out; the answer is the completed note. A
	// user's mistake is an answer with errNote set, not an error.
	run func(ctx context.Context, a *adhocService, sender jid.JID, f *submittedForm) (commandAnswer, error)
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
func (a *adhocService) visibleCommands(sender jid.JID) []*adhocCommand {
	admin := a.hub.IsAdmin(sender.Bare().String())
	var out []*adhocCommand
	for _, cmd := range adhocCommands {
		if !cmd.owner || admin {
			out = append(out, cmd)
		}
	}
	return out
}

// commandItems answers disco#items on the commands node (XEP-0050 §2.2).
func (a *adhocService) commandItems(b *xmlBuf, sender jid.JID) {
	b.open("query", "xmlns", nsDiscoItems, "node", nsCommands)
	for _, cmd := range a.visibleCommands(sender) {
		b.empty("item", "jid", a.domainStr, "node", commandPrefix+cmd.node, "name", cmd.name)
	}
	b.close("query")
}

// commandInfo answers disco#info on a command's node (XEP-0050 §2.3).
func (a *adhocService) commandInfo(b *xmlBuf, cmd *adhocCommand) {
	b.open("query", "xmlns", nsDiscoInfo, "node", commandPrefix+cmd.node)
	b.empty("identity", "category", "automation", "type", "command-node", "name", cmd.name)
	b.empty("feature", "var", nsCommands)
	b.empty("feature", "var", nsDataForms)
	b.close("query")
}

// runCommand executes one stage of a command.
func (a *adhocService) runCommand(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	cmd := commandByNode(r.Node)
	if cmd == nil {
		return itemNotFound(fmt.Sprintf("no command %q", r.Node))
	}
	if cmd.owner && !a.hub.IsAdmin(sender.Bare().String()) {
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
		d, err := cmd.form(ctx, a, sender)
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
	ans, err := cmd.run(ctx, a, sender, submitted)
	if err != nil {
		return err
	}
	noteType := "info"
	if ans.isError {
		noteType = "error"
	}
	a.log.InfoContext(ctx, "ad-hoc command", "command", cmd.node, "from", sender.String(), "ok", !ans.isError)
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

// allNodeNames lists the names of the first nodes, as many as a form
// offers (maxCommandNodes): one page read, not the whole list.
func allNodeNames(ctx context.Context, a *adhocService) ([]string, error) {
	nodes, err := a.hub.NodesPage(ctx, hub.NodePage{Limit: maxCommandNodes})
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
