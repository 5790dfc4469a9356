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

// chatCommands runs the chat commands (help, nodes, list, subscribe,
// unsubscribe, last) and writes their answers for people; the service
// takes the messages off the stream and sends the answers.
type chatCommands struct {
	*subscriptionTargets
	domainStr string
	publicURL string // pingd's HTTP base URL, without a trailing slash
}

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
	Name string // help, nodes, list, subscribe, unsubscribe, last, unknown
	// Word is the first word of a command not understood, as sent.
	Word string
	// Arg is everything after the command word (a node name may contain
	// spaces); Count is last's optional trailing number.
	Arg      string
	Count    int
	HasCount bool
}

// parseChatCommand reads a chat body. An empty one asks for help; a word
// pingd does not know is "unknown", answered with a short list.
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
	case "":
		cmd.Name = "help"
	default:
		cmd = chatCommand{Name: "unknown", Word: word}
	}
	return cmd
}

// receiveMessage takes one message off the stream (on the reader): a chat
// command goes to the request pool, in order with the sender's other
// commands, or gets a "busy" answer beyond the sender's share (limits.go); a multicast notification the server bounced is sent again one
// by one (multicast.go); a chat or normal message to an address at the
// component's domain other than the service is refused; anything else is
// ignored.
func (svc *service) receiveMessage(ctx context.Context, cn *connection, pool *requestPool, msg *element) {
	typ := msg.attr("type")
	if typ == "error" {
		switch {
		case svc.dispatcher.isMulticastBounce(cn, msg):
			_ = pool.submit(&job{msg: msg, bounced: true, bounds: boundNone}) // never refused
		case isNotificationBounce(msg):
			// In order with the sender's chat commands, which clear the
			// bounces of its subscriptions.
			from, err := jid.Parse(msg.attr("from"))
			if err != nil {
				return
			}
			bare := from.Bare().String()
			// Anyone may send errors naming a notification id, and each
			// costs a store write: held to the sender's rate like a request.
			if !svc.admitRequest(ctx, bare) {
				return
			}
			if err := pool.submit(&job{key: "chat\x00" + msg.attr("from"), sender: bare, bounds: svc.boundsOf(bare), msg: msg, notificationError: true}); err != nil {
				svc.log.DebugContext(ctx, "error answering a notification dropped", "from", msg.attr("from"), "reason", err.Error())
			}
		}
		return
	}
	if typ != "chat" && typ != "normal" && typ != "" {
		return // headline and groupchat messages are never answered, not even with an error
	}
	if !svc.isServiceAddress(msg.attr("to")) {
		// Nobody lives at the component's domain but the service: the
		// server's answer for a message to an account that does not exist
		// (RFC 6120 §10.5.3.2), as IQs and presence get.
		svc.replyError(cn, msg, serviceUnavailable())
		return
	}
	if msg.child(msg.Name.Space, "body") == nil {
		return
	}
	from, err := jid.Parse(msg.attr("from"))
	if err != nil {
		return
	}
	bare := from.Bare().String()
	if !svc.admitRequest(ctx, bare) {
		svc.answerBusy(ctx, cn, msg, from, errTooFast)
		return
	}
	if err := pool.submit(&job{key: "chat\x00" + msg.attr("from"), sender: bare, bounds: svc.boundsOf(bare), msg: msg}); err != nil {
		svc.answerBusy(ctx, cn, msg, from, err)
	}
}

// handleMessage answers chat commands; other messages are ignored.
func (svc *service) handleMessage(ctx context.Context, cn *connection, msg *element) {
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
	answer := cutChatAnswer(svc.chat.runChatCommand(ctx, from, cmd), svc.dispatcher.render.suffixBudget()-2048)
	var b xmlBuf
	b.open("message", "type", "chat", "id", svc.stanzaIDs.next(), "from", svc.replyFrom(msg), "to", from.String())
	b.element("body", answer)
	if th := msg.child(msg.Name.Space, "thread"); th != nil && th.text() != "" {
		b.element("thread", th.text())
	}
	b.close("message")
	svc.send(ctx, cn, b.Bytes())
}

// runChatCommand executes a command for sender and returns the answer.
func (ch *chatCommands) runChatCommand(ctx context.Context, sender jid.JID, cmd chatCommand) string {
	bare := sender.Bare().String()
	// Whoever sends a command is there: its notifications' bounces are
	// forgotten (bounces.go).
	if err := ch.hub.SubscriberIsThere(ctx, bare); err != nil {
		ch.log.WarnContext(ctx, "clear the bounces of a subscriber", "jid", bare, "err", err)
	}
	var answer string
	var err error
	switch cmd.Name {
	case "nodes":
		answer, err = ch.chatNodes(ctx)
	case "list":
		answer, err = ch.chatList(ctx, bare)
	case "subscribe":
		answer, err = ch.chatSubscribe(ctx, bare, cmd.Arg)
	case "unsubscribe":
		answer, err = ch.chatUnsubscribe(ctx, bare, cmd.Arg)
	case "last":
		answer, err = ch.chatLast(ctx, bare, cmd)
	case "unknown":
		answer = chatUnknown(cmd.Word)
	default:
		answer = ch.chatHelp()
	}
	if err != nil {
		ch.log.ErrorContext(ctx, "chat command failed", "command", cmd.Name, "from", sender.String(), "err", err)
		return "Sorry, that did not work (an internal error). Please try again later."
	}
	return answer
}

func (ch *chatCommands) chatHelp() string {
	return "This is pingd, a publish-subscribe service for web feeds at " + ch.domainStr + ". Commands:\n" +
		"nodes — list the nodes\n" +
		"list — list your subscriptions\n" +
		"subscribe NODE — get the new items of NODE here (NODE may also be a feed's or a web page's URL)\n" +
		"unsubscribe NODE — stop them\n" +
		"last NODE [n] — the newest n items of NODE (" + strconv.Itoa(defaultLastItems) + " if you leave n out)\n" +
		"help — this text"
}

// maxEchoedWord bounds how much of a word pingd did not understand it
// repeats.
const maxEchoedWord = 40

// chatUnknown answers a command pingd does not know: it says so, quoting
// the word, and lists the commands in a line (help has the rest).
func chatUnknown(word string) string {
	if r := []rune(word); len(r) > maxEchoedWord {
		word = string(r[:maxEchoedWord]) + "…"
	}
	return "I did not understand “" + word + "”. Commands: subscribe NODE-OR-URL, unsubscribe NODE, list, nodes, last NODE, help."
}

// nodeLink is the node's page on pingd's HTTP side.
func (ch *chatCommands) nodeLink(name string) string {
	if ch.publicURL == "" {
		return ""
	}
	return ch.publicURL + "/feeds/" + url.PathEscape(name)
}

func (ch *chatCommands) chatNodes(ctx context.Context) (string, error) {
	// One page of the list, read as one; the total is NodeCount's.
	nodes, err := ch.hub.NodesPage(ctx, hub.NodePage{Limit: maxNodesInListing + 1})
	if err != nil {
		return "", err
	}
	if len(nodes) == 0 {
		return "There are no nodes yet.", nil
	}
	total := len(nodes)
	if total > maxNodesInListing {
		if total, err = ch.hub.NodeCount(ctx); err != nil {
			return "", err
		}
		total = max(total, maxNodesInListing+1)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d node(s):", total)
	for i, n := range nodes {
		if i == maxNodesInListing {
			fmt.Fprintf(&b, "\n… and %d more", total-i)
			break
		}
		b.WriteString("\n" + n.Name)
		if n.Title != "" {
			b.WriteString(" — " + n.Title)
		}
		if n.AccessModel == hub.AccessWhitelist {
			b.WriteString(" (whitelist)")
		}
		if l := ch.nodeLink(n.Name); l != "" {
			b.WriteString(" " + l)
		}
	}
	return b.String(), nil
}

func (ch *chatCommands) chatList(ctx context.Context, bare string) (string, error) {
	subs, err := ch.hub.Subscriptions(ctx, hub.SubscriptionFilter{Kind: hub.KindXMPP, BareJID: bare})
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
func (t *subscriptionTargets) chatNode(ctx context.Context, name string) (*hub.Node, string, error) {
	if name == "" {
		return nil, `Which node? Send "nodes" to see them.`, nil
	}
	n, err := t.node(ctx, name)
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
func (ch *chatCommands) chatSubscribe(ctx context.Context, bare, target string) (string, error) {
	return ch.subscribeTarget(ctx, bare, target, chatSubscriptionOptions, nil, "chat")
}

func (ch *chatCommands) chatUnsubscribe(ctx context.Context, bare, target string) (string, error) {
	return ch.unsubscribeTarget(ctx, bare, target, "chat")
}

func (ch *chatCommands) chatLast(ctx context.Context, bare string, cmd chatCommand) (string, error) {
	name, count := cmd.Arg, defaultLastItems
	n, msg, err := ch.chatNode(ctx, name)
	if n == nil && err == nil && cmd.HasCount {
		// "last NODE n": the number was not part of the name.
		i := strings.LastIndexAny(cmd.Arg, " \t")
		name, count = strings.TrimSpace(cmd.Arg[:i]), cmd.Count
		n, msg, err = ch.chatNode(ctx, name)
	}
	if n == nil {
		return msg, err
	}
	if count < 1 || count > maxLastItems {
		return fmt.Sprintf("Ask for 1 to %d items.", maxLastItems), nil
	}
	aff, err := ch.hub.AffiliationOf(ctx, n, bare)
	if err != nil {
		return "", err
	}
	if !aff.MayRead(n.AccessModel) {
		return fmt.Sprintf("The node %q is closed: only JIDs on its whitelist may read it.", n.Name), nil
	}
	items, err := ch.hub.Items(ctx, n, nil, count)
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
