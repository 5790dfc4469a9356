package component

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
)

// Chat commands: a message of type chat (or normal) with a body, sent to
// the component, is a command answered by chat in plain text.

const (
	maxChatBody       = 4096
	defaultLastItems  = 5
	maxLastItems      = 20
	maxNodesInListing = 200
)

// chatCommand is a parsed chat body.
type chatCommand struct {
	Name string // help, nodes, list, subscribe, unsubscribe, last
	// Arg is everything after the command word (a node name may contain
	// spaces); Count is last's optional trailing number.
	Arg      string
	Count    int
	HasCount bool
}

// parseChatCommand reads a chat body. Unknown commands become help.
func parseChatCommand(body string) chatCommand {
	if len(body) > maxChatBody {
		body = body[:maxChatBody]
	}
	body = strings.TrimSpace(body)
	word, rest := body, ""
	if i := strings.IndexAny(body, " \t\r\n"); i >= 0 {
		word, rest = body[:i], body[i+1:]
	}
	cmd := chatCommand{Name: strings.ToLower(word), Arg: strings.TrimSpace(rest)}
	switch cmd.Name {
	case "help", "nodes", "list", "subscribe", "unsubscribe":
	case "last":
		if i := strings.LastIndexAny(cmd.Arg, " \t"); i >= 0 {
			if n, err := strconv.Atoi(cmd.Arg[i+1:]); err == nil {
				cmd.Count, cmd.HasCount = n, true
			}
		}
	default:
		cmd.Name = "help"
	}
	return cmd
}

// receiveMessage takes one message off the stream (on the reader): a chat
// command goes to the request pool, in order with the sender's other
// commands; a multicast notification the server bounced is sent again one
// by one (multicast.go); a chat or normal message to an address at the
// component's domain other than the service is refused; anything else is
// ignored.
func (c *Component) receiveMessage(ctx context.Context, cn *connection, pool *requestPool, msg *element) {
	typ := msg.attr("type")
	if typ == "error" {
		switch {
		case c.dispatcher.isMulticastBounce(cn, msg):
			pool.submit(ctx, &job{msg: msg, bounced: true})
		case isNotificationBounce(msg):
			// In order with the sender's chat commands, which clear the
			// bounces of its subscriptions.
			pool.submit(ctx, &job{key: "chat\x00" + msg.attr("from"), msg: msg, notificationError: true})
		}
		return
	}
	if typ != "chat" && typ != "normal" && typ != "" {
		return // headline and groupchat messages are never answered, not even with an error
	}
	if !c.isServiceAddress(msg.attr("to")) {
		// Nobody lives at the component's domain but the service: the
		// server's answer for a message to an account that does not exist
		// (RFC 6120 §10.5.3.2), as IQs and presence get.
		c.replyError(cn, msg, serviceUnavailable())
		return
	}
	if msg.child(msg.Name.Space, "body") == nil {
		return
	}
	from := msg.attr("from")
	if from == "" {
		return
	}
	pool.submit(ctx, &job{key: "chat\x00" + from, msg: msg})
}

// handleMessage answers chat commands; other messages are ignored.
func (c *Component) handleMessage(ctx context.Context, cn *connection, msg *element) {
	typ := msg.attr("type")
	if typ != "chat" && typ != "normal" && typ != "" {
		return // headline, groupchat and error messages are not commands
	}
	body := msg.child(msg.Name.Space, "body")
	if body == nil {
		return // chat states and receipts carry no command
	}
	from, err := jid.Parse(msg.attr("from"))
	if err != nil {
		return
	}
	cmd := parseChatCommand(body.text())
	ctx, after := withFollowUps(ctx)
	defer after.run(ctx)
	answer := cutChatAnswer(c.runChatCommand(ctx, from, cmd), c.dispatcher.suffixBudget()-2048)
	var b xmlBuf
	b.open("message", "type", "chat", "id", c.stanzaIDs.next(), "from", c.replyFrom(msg), "to", from.String())
	b.element("body", answer)
	if th := msg.child(msg.Name.Space, "thread"); th != nil && th.text() != "" {
		b.element("thread", th.text())
	}
	b.close("message")
	c.send(ctx, cn, b.Bytes())
}

// runChatCommand executes a command for sender and returns the answer.
func (c *Component) runChatCommand(ctx context.Context, sender jid.JID, cmd chatCommand) string {
	bare := sender.Bare().String()
	// Whoever sends a command is there: its notifications' bounces are
	// forgotten (bounces.go).
	if err := c.hub.SubscriberIsThere(ctx, bare); err != nil {
		c.log.WarnContext(ctx, "clear the bounces of a subscriber", "jid", bare, "err", err)
	}
	var answer string
	var err error
	switch cmd.Name {
	case "nodes":
		answer, err = c.chatNodes(ctx)
	case "list":
		answer, err = c.chatList(ctx, bare)
	case "subscribe":
		answer, err = c.chatSubscribe(ctx, bare, cmd.Arg)
	case "unsubscribe":
		answer, err = c.chatUnsubscribe(ctx, bare, cmd.Arg)
	case "last":
		answer, err = c.chatLast(ctx, bare, cmd)
	default:
		answer = c.chatHelp()
	}
	if err != nil {
		c.log.ErrorContext(ctx, "chat command failed", "command", cmd.Name, "from", sender.String(), "err", err)
		return "Sorry, that did not work (an internal error). Please try again later."
	}
	return answer
}

func (c *Component) chatHelp() string {
	return "This is pingd, a publish-subscribe service for web feeds at " + c.domainStr + ". Commands:\n" +
		"nodes — list the nodes\n" +
		"list — list your subscriptions\n" +
		"subscribe NODE — get the new items of NODE here (NODE may also be a feed's or a web page's URL)\n" +
		"unsubscribe NODE — stop them\n" +
		"last NODE [n] — the newest n items of NODE (" + strconv.Itoa(defaultLastItems) + " if you leave n out)\n" +
		"help — this text"
}

// nodeLink is the node's page on pingd's HTTP side.
func (c *Component) nodeLink(name string) string {
	if c.publicURL == "" {
		return ""
	}
	return c.publicURL + "/feeds/" + url.PathEscape(name)
}

func (c *Component) chatNodes(ctx context.Context) (string, error) {
	nodes, err := c.hub.Nodes(ctx)
	if err != nil {
		return "", err
	}
	if len(nodes) == 0 {
		return "There are no nodes yet.", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d node(s):", len(nodes))
	for i, n := range nodes {
		if i == maxNodesInListing {
			fmt.Fprintf(&b, "\n… and %d more", len(nodes)-i)
			break
		}
		b.WriteString("\n" + n.Name)
		if n.Title != "" {
			b.WriteString(" — " + n.Title)
		}
		if n.AccessModel == hub.AccessWhitelist {
			b.WriteString(" (whitelist)")
		}
		if l := c.nodeLink(n.Name); l != "" {
			b.WriteString(" " + l)
		}
	}
	return b.String(), nil
}

func (c *Component) chatList(ctx context.Context, bare string) (string, error) {
	subs, err := c.hub.Subscriptions(ctx, hub.SubscriptionFilter{Kind: hub.KindXMPP, BareJID: bare})
	if err != nil {
		return "", err
	}
	if len(subs) == 0 {
		return `You have no subscriptions. Send "nodes" to see the nodes, "subscribe NODE" to follow one.`, nil
	}
	seen := map[string]bool{}
	var b strings.Builder
	b.WriteString("Your subscriptions:")
	for _, s := range subs {
		if seen[s.NodeName] {
			continue
		}
		seen[s.NodeName] = true
		b.WriteString("\n" + s.NodeName)
	}
	return b.String(), nil
}

// chatNode finds a node named in a command, or says plainly why not.
func (c *Component) chatNode(ctx context.Context, name string) (*hub.Node, string, error) {
	if name == "" {
		return nil, `Which node? Send "nodes" to see them.`, nil
	}
	n, err := c.node(ctx, name)
	var se *stanzaError
	if errors.As(err, &se) {
		return nil, fmt.Sprintf("There is no node called %q. Send \"nodes\" to see them.", name), nil
	}
	return n, "", err
}

// chatSubscriptionOptions are the options of subscriptions made by chat:
// plain messages of type chat, which every client shows in a conversation
// and servers keep for readers who are offline (and archive). The ad-hoc
// command and XEP-0060 subscription options change them.
var chatSubscriptionOptions = hub.Options{Format: hub.FormatMessage}

// chatSubscribe subscribes by chat. Subscribing again keeps the options
// the subscription has, whoever chose them.
func (c *Component) chatSubscribe(ctx context.Context, bare, target string) (string, error) {
	return c.subscribeTarget(ctx, bare, target, chatSubscriptionOptions, nil, "chat")
}

func (c *Component) chatUnsubscribe(ctx context.Context, bare, target string) (string, error) {
	return c.unsubscribeTarget(ctx, bare, target, "chat")
}

func (c *Component) chatLast(ctx context.Context, bare string, cmd chatCommand) (string, error) {
	name, count := cmd.Arg, defaultLastItems
	n, msg, err := c.chatNode(ctx, name)
	if n == nil && err == nil && cmd.HasCount {
		// "last NODE n": the number was not part of the name.
		i := strings.LastIndexAny(cmd.Arg, " \t")
		name, count = strings.TrimSpace(cmd.Arg[:i]), cmd.Count
		n, msg, err = c.chatNode(ctx, name)
	}
	if n == nil {
		return msg, err
	}
	if count < 1 || count > maxLastItems {
		return fmt.Sprintf("Ask for 1 to %d items.", maxLastItems), nil
	}
	aff, err := c.hub.AffiliationOf(ctx, n, bare)
	if err != nil {
		return "", err
	}
	if !aff.MayRead(n.AccessModel) {
		return fmt.Sprintf("The node %q is closed: only JIDs on its whitelist may read it.", n.Name), nil
	}
	items, err := c.hub.Items(ctx, n, nil, count)
	if err != nil {
		return "", err
	}
	if len(items) == 0 {
		return fmt.Sprintf("%q has no items yet.", n.Name), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The newest %d item(s) of %q:", len(items), n.Name)
	for i, it := range items {
		title := it.Title
		if title == "" {
			title = "(untitled, id " + it.ItemID + ")"
		}
		fmt.Fprintf(&b, "\n%d. %s", i+1, title)
		if link := hub.WebLink(it.Link); link != "" {
			b.WriteString("\n   " + link)
		}
	}
	return b.String(), nil
}
