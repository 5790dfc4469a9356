package component

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
)

// The XEP-0030 and XEP-0060 service answered on the component's JID.

// pubsubFeatures are the XEP-0060 features pingd implements (§10).
var pubsubFeatures = []string{
	"access-open",
	"access-whitelist",
	"config-node",
	"config-node-max",
	"create-and-configure",
	"create-nodes",
	"delete-items",
	"delete-nodes",
	"instant-nodes",
	"item-ids",
	"manage-subscriptions",
	"member-affiliation",
	"meta-data",
	"modify-affiliations",
	"outcast-affiliation",
	"persistent-items",
	"publish",
	"publisher-affiliation",
	"purge-nodes",
	"retract-items",
	"retrieve-affiliations",
	"retrieve-default",
	"retrieve-default-sub",
	"retrieve-items",
	"retrieve-subscriptions",
	"rsm",
	"subscribe",
	"subscription-notifications",
	"subscription-options",
}

// maxPayloadBytes is the largest payload an owner may publish, as
// stored: the limit on every entry's payload (hub.MaxEntryPayloadBytes),
// which keeps every notification within the stanza budget.
const maxPayloadBytes = hub.MaxEntryPayloadBytes

// receiveIQ takes one IQ off the stream (on the reader): an answer to one
// of pingd's own queries goes to whoever waits for it; a request is parsed
// and handed to the request pool, or refused at once when it is malformed
// or not for the service. Every get and set gets exactly one answer;
// results and errors get none.
func (c *Component) receiveIQ(ctx context.Context, cn *connection, pool *requestPool, iq *element) {
	if c.isAckMarker(iq) {
		// One of our markers, back from the server (acks.go): nobody
		// waits for an answer to it.
		c.acknowledge(cn, iq)
		return
	}
	typ := iq.attr("type")
	if typ == string(stanza.ResultIQ) || typ == string(stanza.ErrorIQ) {
		cn.queries.deliver(iq)
		return
	}
	from, err := jid.Parse(iq.attr("from"))
	if err != nil {
		// The server stamps every sender; without one there is no one to answer.
		c.log.WarnContext(ctx, "IQ without a valid sender dropped", "from", iq.attr("from"), "id", iq.attr("id"))
		return
	}
	req, serr := parseIQ(iq)
	if serr == nil && !c.isServiceAddress(iq.attr("to")) {
		serr = serviceUnavailable()
	}
	if serr != nil {
		c.log.DebugContext(ctx, "IQ refused", "from", from.String(), "id", iq.attr("id"), "error", serr.Error())
		c.replyError(cn, iq, serr)
		return
	}
	j := &job{iq: iq, req: req, from: from}
	switch {
	case req.Op == opCommand:
		// A sender's commands and chat keep their order; commands of
		// different people run side by side.
		j.key = "chat\x00" + from.String()
	case req.HasNode && req.Node != "":
		j.key = "node\x00" + req.Node
	}
	pool.submit(ctx, j) // refused only when shutting down, with the stream
}

// answerIQ carries out one parsed IQ request and answers it.
func (c *Component) answerIQ(ctx context.Context, cn *connection, iq *element, req *request, from jid.JID) {
	ctx, after := withFollowUps(ctx)
	payload, serr := c.execute(ctx, from, req)
	c.answer(ctx, cn, iq, req, from, payload, serr)
	after.run(ctx)
}

// answer sends the result with payload, or the error serr.
func (c *Component) answer(ctx context.Context, cn *connection, iq *element, req *request, from jid.JID, payload []byte, serr *stanzaError) {
	if a := c.answerBytes(ctx, iq, req, from, payload, serr); a != nil {
		c.send(ctx, cn, a)
	}
}

// answerBytes renders the result with payload, or the error serr.
func (c *Component) answerBytes(ctx context.Context, iq *element, req *request, from jid.JID, payload []byte, serr *stanzaError) []byte {
	if serr != nil {
		c.log.DebugContext(ctx, "IQ refused", "from", from.String(), "id", iq.attr("id"), "error", serr.Error())
		return c.errorReply(iq, serr)
	}
	c.log.DebugContext(ctx, "IQ answered", "from", from.String(), "id", iq.attr("id"), "op", req.Op.String(), "node", req.Node)
	var b xmlBuf
	b.open("iq", "type", "result", "id", iq.attr("id"), "from", c.replyFrom(iq), "to", iq.attr("from"))
	b.Write(payload)
	b.close("iq")
	if limit := c.limit.bytes(); b.Len() > limit {
		// Answers that grow with what is stored page or cut themselves;
		// anything else that would still be over the budget is refused
		// rather than allowed to end the stream.
		c.log.WarnContext(ctx, "IQ answer over the stanza budget refused", "from", from.String(), "op", req.Op.String(), "node", req.Node,
			"bytes", b.Len(), "budget_bytes", limit)
		return c.errorReply(iq, newError(stanza.Wait, stanza.ResourceConstraint, "",
			fmt.Sprintf("the answer would be %d bytes, more than the %d a stanza may take here; ask for less (XEP-0059 <set/>)", b.Len(), limit)))
	}
	return b.Bytes()
}

// isServiceAddress reports whether to addresses the service itself (the
// domain, with or without a resource), not an entity at it.
func (c *Component) isServiceAddress(to string) bool {
	if to == "" {
		return true
	}
	j, err := jid.Parse(to)
	return err == nil && j.Localpart() == "" && j.Domainpart() == c.domain.Domainpart()
}

// replyFrom is the from of an answer: the address the request went to.
func (c *Component) replyFrom(st *element) string {
	if j, err := jid.Parse(st.attr("to")); err == nil && j.Domainpart() == c.domain.Domainpart() {
		return j.String() // normalised, so the server recognises its component
	}
	return c.domainStr
}

// replyError answers a stanza with an error (RFC 6120 §8.3).
func (c *Component) replyError(cn *connection, st *element, serr *stanzaError) {
	if answer := c.errorReply(st, serr); answer != nil {
		c.send(context.Background(), cn, answer)
	}
}

// errorReply renders the error answer to a stanza; nil when it gets none.
func (c *Component) errorReply(st *element, serr *stanzaError) []byte {
	if st.attr("from") == "" || st.attr("type") == "error" {
		return nil // never answer an error with an error
	}
	var b xmlBuf
	b.open(st.Name.Local, "type", "error", "id", st.attr("id"), "from", c.replyFrom(st), "to", st.attr("from"))
	b.Write(serr.Payload)
	serr.write(&b, c.domainStr)
	b.close(st.Name.Local)
	return b.Bytes()
}

// send writes one stanza.
func (c *Component) send(ctx context.Context, cn *connection, stanzaBytes []byte) {
	err := cn.writeThen(func(w *bufio.Writer) error {
		_, err := w.Write(stanzaBytes)
		return err
	}, func() { cn.noteWrite(len(stanzaBytes)) })
	if err != nil {
		c.log.WarnContext(ctx, "answer not sent: the stream is gone", "err", err)
	}
}

// execute runs a parsed request for sender and returns the IQ result's
// payload (possibly empty).
func (c *Component) execute(ctx context.Context, sender jid.JID, r *request) ([]byte, *stanzaError) {
	var b xmlBuf
	var err error
	switch r.Op {
	case opDiscoInfo:
		err = c.discoInfo(ctx, &b, sender, r)
	case opDiscoItems:
		err = c.discoItems(ctx, &b, sender, r)
	case opSubscribe:
		err = c.subscribe(ctx, &b, sender, r)
	case opUnsubscribe:
		err = c.unsubscribe(ctx, sender, r)
	case opSubscriptions:
		err = c.ownSubscriptions(ctx, &b, sender, r)
	case opAffiliations:
		err = c.ownAffiliations(ctx, &b, sender, r)
	case opItems:
		err = c.items(ctx, &b, sender, r)
	case opPublish:
		payloads, errs := c.publish(ctx, sender, r.Node, []*request{r})
		if errs[0] != nil {
			return nil, errs[0]
		}
		return payloads[0], nil
	case opRetract:
		err = c.retract(ctx, sender, r)
	case opCreate:
		err = c.create(ctx, &b, sender, r)
	case opConfigureGet:
		err = c.configureGet(ctx, &b, sender, r)
	case opConfigureSet:
		err = c.configureSet(ctx, sender, r)
	case opDefault:
		b.open("pubsub", "xmlns", nsPubsubOwner).open("default")
		renderForm(&b, configForm(hub.DefaultNodeConfig()))
		b.close("default").close("pubsub")
	case opDelete:
		err = c.deleteNode(ctx, sender, r)
	case opPurge:
		err = c.purge(ctx, sender, r)
	case opOwnerSubscriptionsGet:
		err = c.ownerSubscriptions(ctx, &b, sender, r)
	case opOwnerSubscriptionsSet:
		err = c.ownerSetSubscriptions(ctx, sender, r)
	case opOwnerAffiliationsGet:
		err = c.ownerAffiliations(ctx, &b, sender, r)
	case opOwnerAffiliationsSet:
		err = c.ownerSetAffiliations(ctx, sender, r)
	case opOptionsGet:
		err = c.optionsGet(ctx, &b, sender, r)
	case opOptionsSet:
		err = c.optionsSet(ctx, sender, r)
	case opSubscriptionDefault:
		err = c.subscriptionDefaults(ctx, &b, r)
	case opCommand:
		err = c.runCommand(ctx, &b, sender, r)
	default:
		return nil, serviceUnavailable()
	}
	if err != nil {
		return nil, c.stanzaErrorOf(ctx, err, r, sender)
	}
	return b.Bytes(), nil
}

// stanzaErrorOf maps a failed request's error to its stanza error, logging
// what is not the requester's fault.
func (c *Component) stanzaErrorOf(ctx context.Context, err error, r *request, sender jid.JID) *stanzaError {
	se, ok := asStanzaError(err, r.Node)
	if !ok {
		c.log.ErrorContext(ctx, "XMPP request failed", "op", r.Op.String(), "node", r.Node, "from", sender.String(), "err", err)
	}
	return se
}

// node looks a node up; a name that cannot exist is simply not found.
func (c *Component) node(ctx context.Context, name string) (*hub.Node, error) {
	if hub.ValidNodeName(name) != nil {
		return nil, itemNotFound(fmt.Sprintf("no node %q", name))
	}
	n, err := c.hub.Node(ctx, name)
	if errors.Is(err, hub.ErrNotFound) {
		return nil, itemNotFound(fmt.Sprintf("no node %q", name))
	}
	return n, err
}

// requireOwner returns forbidden unless sender owns the node.
func (c *Component) requireOwner(ctx context.Context, n *hub.Node, sender jid.JID) error {
	ok, err := c.hub.IsOwner(ctx, n, sender.Bare().String())
	if err != nil {
		return err
	}
	if !ok {
		return forbidden(fmt.Sprintf("only the owners of %q may do that", n.Name))
	}
	return nil
}

// requirePublisher returns forbidden unless sender may publish to the node.
func (c *Component) requirePublisher(ctx context.Context, n *hub.Node, sender jid.JID) error {
	aff, err := c.hub.AffiliationOf(ctx, n, sender.Bare().String())
	if err != nil {
		return err
	}
	if aff != hub.AffOwner && aff != hub.AffPublisher {
		return forbidden(fmt.Sprintf("only the owners and publishers of %q may do that", n.Name))
	}
	return nil
}

// requireReader checks that sender may read the node (XEP-0060 §6.5.9).
func (c *Component) requireReader(ctx context.Context, n *hub.Node, sender jid.JID) error {
	aff, err := c.hub.AffiliationOf(ctx, n, sender.Bare().String())
	if err != nil {
		return err
	}
	if aff == hub.AffOutcast {
		return forbidden(fmt.Sprintf("you are banned from %q", n.Name))
	}
	if !aff.MayRead(n.AccessModel) {
		return closedNode(n.Name)
	}
	return nil
}

func (c *Component) discoInfo(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	if r.Node == nsCommands {
		// XEP-0050 §2.2: the command list's own identity.
		b.open("query", "xmlns", nsDiscoInfo, "node", nsCommands)
		b.empty("identity", "category", "automation", "type", "command-list", "name", "pingd commands")
		b.empty("feature", "var", nsCommands)
		b.close("query")
		return nil
	}
	if cmd := commandByNode(r.Node); cmd != nil {
		if cmd.owner && !c.hub.IsAdmin(sender.Bare().String()) {
			// XEP-0050 §2.3: a command the requester may not run is not shown.
			return forbidden("only pingd's administrators may run " + cmd.name)
		}
		c.commandInfo(b, cmd)
		return nil
	}
	if !r.HasNode || r.Node == "" {
		b.open("query", "xmlns", nsDiscoInfo)
		b.empty("identity", "category", "pubsub", "type", "service", "name", "pingd")
		b.empty("feature", "var", nsDiscoInfo)
		b.empty("feature", "var", nsDiscoItems)
		b.empty("feature", "var", nsCommands)
		b.empty("feature", "var", nsPubsub)
		for _, f := range pubsubFeatures {
			b.empty("feature", "var", nsPubsub+"#"+f)
		}
		// XEP-0059 on items retrieval; XEP-0060 §6.5.4 asks for pubsub#rsm
		// too, so it is not taken for another protocol's result sets.
		b.empty("feature", "var", nsRSM)
		b.close("query")
		return nil
	}
	n, err := c.node(ctx, r.Node)
	if err != nil {
		return err
	}
	subs, err := c.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID})
	if err != nil {
		return err
	}
	affs, err := c.hub.OwnerAffiliations(ctx, n)
	if err != nil {
		return err
	}
	var owners []string
	for j, a := range affs {
		if a == hub.AffOwner {
			owners = append(owners, j)
		}
	}
	slices.Sort(owners)
	b.open("query", "xmlns", nsDiscoInfo, "node", n.Name)
	b.empty("identity", "category", "pubsub", "type", "leaf", "name", n.Title)
	b.empty("feature", "var", nsPubsub)
	b.empty("feature", "var", nsDiscoInfo)
	b.empty("feature", "var", nsDiscoItems)
	// A whitelist node's source may be a private feed, and anyone could
	// read it here and follow it elsewhere: only its members and owners
	// (admins included) see it.
	showSource := n.AccessModel != hub.AccessWhitelist || affs[sender.Bare().String()].MayRead(n.AccessModel)
	renderForm(b, metaDataForm(n, len(subs), owners, showSource))
	b.close("query")
	return nil
}

func (c *Component) discoItems(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	if r.Node == nsCommands {
		c.commandItems(b, sender)
		return nil
	}
	if !r.HasNode || r.Node == "" {
		nodes, err := c.hub.Nodes(ctx)
		if err != nil {
			return err
		}
		return c.nodeItems(b, nodes, r.Page)
	}
	// A leaf node's items are listed by id (XEP-0060 §5.5), to those who
	// may read them.
	n, err := c.node(ctx, r.Node)
	if err != nil {
		return err
	}
	b.open("query", "xmlns", nsDiscoItems, "node", n.Name)
	if c.requireReader(ctx, n, sender) == nil {
		items, err := c.hub.Items(ctx, n, nil, n.MaxItems)
		if err != nil {
			return err
		}
		for _, it := range items {
			b.empty("item", "jid", c.domainStr, "name", it.ItemID)
		}
	}
	b.close("query")
	return nil
}

func (c *Component) subscribe(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	if !r.JID.Bare().Equal(sender.Bare()) {
		return badRequest("invalid-jid", "you may subscribe %s only, not %s", sender.Bare(), r.JID)
	}
	n, err := c.node(ctx, r.Node)
	if err != nil {
		return err
	}
	var opts hub.Options
	if r.Form != nil {
		var serr *stanzaError
		if opts, serr = applySubOptionsForm(opts, r.Form); serr != nil {
			return serr
		}
	}
	sub, existed, err := c.hub.Subscribe(ctx, hub.Subscription{
		NodeName: r.Node,
		Kind:     hub.KindXMPP,
		Address:  r.JID.String(),
		BareJID:  r.JID.Bare().String(),
		Options:  opts,
	})
	if err != nil {
		return err
	}
	if existed && r.Form != nil && !sameXMPPOptions(sub.Options, opts) {
		// Subscribing again with options changes them (§6.3.7).
		if sub, err = c.hub.SetSubscriptionOptions(ctx, *sub, opts); err != nil {
			return err
		}
	}
	if !existed {
		c.log.InfoContext(ctx, "XMPP subscription", "node", r.Node, "jid", sub.Address, "subid", sub.SubID)
		if _, err := c.sendLastAfterAnswer(ctx, n, sub); err != nil {
			return err
		}
	}
	b.open("pubsub", "xmlns", nsPubsub)
	b.empty("subscription", "node", r.Node, "jid", sub.Address, "subid", sub.SubID, "subscription", "subscribed")
	if r.Form != nil {
		b.open("options", "node", r.Node, "jid", sub.Address, "subid", sub.SubID)
		renderForm(b, subOptionsForm(sub.Options, n, true))
		b.close("options")
	}
	b.close("pubsub")
	return nil
}

func (c *Component) unsubscribe(ctx context.Context, sender jid.JID, r *request) error {
	if !r.JID.Bare().Equal(sender.Bare()) {
		return forbidden(fmt.Sprintf("you may unsubscribe %s only, not %s", sender.Bare(), r.JID))
	}
	n, err := c.node(ctx, r.Node)
	if err != nil {
		return err
	}
	subs, err := c.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP, Address: r.JID.String()})
	if err != nil {
		return err
	}
	if len(subs) == 0 {
		return newError(stanza.Cancel, stanza.UnexpectedRequest, "not-subscribed",
			fmt.Sprintf("%s is not subscribed to %q", r.JID, n.Name))
	}
	if r.SubID != "" && r.SubID != subs[0].SubID {
		return notAcceptable("invalid-subid", "no subscription %q", r.SubID)
	}
	if _, err := c.hub.Unsubscribe(ctx, n.Name, hub.KindXMPP, r.JID.String()); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "XMPP unsubscription", "node", n.Name, "jid", r.JID.String())
	return nil
}

func (c *Component) ownSubscriptions(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	f := hub.SubscriptionFilter{Kind: hub.KindXMPP, BareJID: sender.Bare().String()}
	if r.HasNode && r.Node != "" {
		n, err := c.node(ctx, r.Node)
		if err != nil {
			return err
		}
		f.NodeID = n.ID
	}
	subs, err := c.hub.Subscriptions(ctx, f)
	if err != nil {
		return err
	}
	b.open("pubsub", "xmlns", nsPubsub).open("subscriptions", "node", r.Node)
	for _, s := range subs {
		b.empty("subscription", "node", s.NodeName, "jid", s.Address, "subid", s.SubID, "subscription", "subscribed")
	}
	b.close("subscriptions").close("pubsub")
	return nil
}

func (c *Component) ownAffiliations(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	var nodes []hub.Node
	if r.HasNode && r.Node != "" {
		n, err := c.node(ctx, r.Node)
		if err != nil {
			return err
		}
		nodes = []hub.Node{*n}
	} else {
		all, err := c.hub.Nodes(ctx)
		if err != nil {
			return err
		}
		nodes = all
	}
	b.open("pubsub", "xmlns", nsPubsub).open("affiliations", "node", r.Node)
	for i := range nodes {
		aff, err := c.hub.AffiliationOf(ctx, &nodes[i], sender.Bare().String())
		if err != nil {
			return err
		}
		if aff != hub.AffNone {
			b.empty("affiliation", "node", nodes[i].Name, "affiliation", string(aff))
		}
	}
	b.close("affiliations").close("pubsub")
	return nil
}

func (c *Component) items(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	n, err := c.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := c.requireReader(ctx, n, sender); err != nil {
		return err
	}
	limit := n.MaxItems
	if r.MaxItems > 0 {
		limit = min(limit, r.MaxItems)
	}
	items, err := c.hub.Items(ctx, n, r.ItemIDs, limit)
	if err != nil {
		return err
	}
	// A result set request pages through what the request names (XEP-0059);
	// the node keeps at most max_items, so the page is cut in memory.
	page, first := items, 0
	if r.Page != nil {
		var serr *stanzaError
		if page, first, serr = pageOf(items, r.Page); serr != nil {
			return serr
		}
	}
	// The answer stays within the stanza budget: a page that would not
	// is cut, and says so with a result set (XEP-0060 §6.5.4, XEP-0059)
	// the client pages on from, whether it asked for one or not.
	whole := c.limit.bytes() - envelopeBytes - b.Len() - 2*len(n.Name) - 1024
	room := whole
	cut := len(page)
	payloads := make([][]byte, 0, len(page))
	for i, it := range page {
		p := c.payload(it)
		size := len(p) + escapedLen(it.ItemID) + 32
		if size > whole {
			// One item stored before the entry limit: its id alone.
			p, size = nil, escapedLen(it.ItemID)+32
			c.shrunk.Add(1)
		}
		if size > room {
			cut = i
			break
		}
		room -= size
		payloads = append(payloads, p)
	}
	b.open("pubsub", "xmlns", nsPubsub).open("items", "node", n.Name)
	for i, it := range page[:cut] {
		writeItem(b, it.ItemID, payloads[i], true)
	}
	b.close("items")
	if r.Page != nil || cut < len(page) {
		writePageResult(b, page[:cut], first, len(items))
	}
	b.close("pubsub")
	return nil
}

// writeItem writes <item id="…">payload</item>.
func writeItem(b *xmlBuf, id string, payload []byte, withPayload bool) {
	if !withPayload || len(payload) == 0 {
		b.empty("item", "id", id)
		return
	}
	b.open("item", "id", id)
	b.Write(payload)
	b.close("item")
}

// payload returns an event's payload as a self-contained element, or nil
// when the stored bytes are not one well-formed element (it is then left
// out rather than allowed to break the stream).
func (c *Component) payload(ev hub.Event) []byte {
	if len(ev.Payload) == 0 {
		return nil
	}
	if c.published.has(ev.Payload) {
		return ev.Payload // written by standalone when it was published here
	}
	el, err := parseDocument(ev.Payload)
	if err != nil {
		c.log.Warn("stored payload is not well-formed XML; sending the item without it",
			"node_id", ev.NodeID, "item", ev.ItemID, "err", err)
		return nil
	}
	return el.standalone()
}

// publish carries out publish requests of one sender to one node (one, or
// several that waited together) as one append to the node's log, in their
// order, and returns each one's result payload or error. A request refused
// on its own (too big) leaves the others to be published.
func (c *Component) publish(ctx context.Context, sender jid.JID, node string, reqs []*request) ([][]byte, []*stanzaError) {
	payloads := make([][]byte, len(reqs))
	errs := make([]*stanzaError, len(reqs))
	failAll := func(err error) ([][]byte, []*stanzaError) {
		for i, r := range reqs {
			if errs[i] == nil {
				errs[i] = c.stanzaErrorOf(ctx, err, r, sender)
			}
		}
		return payloads, errs
	}
	n, err := c.node(ctx, node)
	if err != nil {
		return failAll(err)
	}
	if err := c.requirePublisher(ctx, n, sender); err != nil {
		return failAll(err)
	}
	entries := make([]hub.Entry, 0, len(reqs))
	index := make([]int, 0, len(reqs)) // request of each entry
	for i, r := range reqs {
		entry, err := c.publishedEntry(n, r.Item)
		if err != nil {
			return failAll(err)
		}
		if len(entry.Payload) > maxPayloadBytes {
			// Checked on the completed entry, the one stored and sent.
			errs[i] = payloadTooBig()
			continue
		}
		entries = append(entries, entry)
		index = append(index, i)
		c.published.add(entry.Payload)
	}
	if len(entries) == 0 {
		return payloads, errs
	}
	publisher := sender.Bare().String()
	events, err := c.hub.PublishTo(ctx, n, publisher, entries)
	if err != nil {
		return failAll(err)
	}
	lastID := ""
	for k, i := range index {
		id := entries[k].ID
		if k < len(events) {
			id = events[k].ItemID
		}
		lastID = id
		var b xmlBuf
		b.open("pubsub", "xmlns", nsPubsub).open("publish", "node", n.Name)
		b.empty("item", "id", id)
		b.close("publish").close("pubsub")
		payloads[i] = b.Bytes()
		if len(entries) > 1 {
			c.log.DebugContext(ctx, "item published over XMPP", "node", n.Name, "item", id, "publisher", publisher)
		}
	}
	if len(entries) == 1 {
		c.log.InfoContext(ctx, "item published over XMPP", "node", n.Name, "item", lastID, "publisher", publisher)
	} else {
		c.log.InfoContext(ctx, "items published over XMPP", "node", n.Name, "items", len(entries), "publisher", publisher)
	}
	return payloads, errs
}

// publishedEntry is the entry a publish of item to n stores: the Atom
// entry completed as the node's feeds show it (Config.CompleteEntry), so
// notifications, items retrieval and the feeds carry the same entry. An
// item without an id takes the entry's Atom id, else a random one; an
// entry without a link gets one to what the node follows, else to the
// node's page; one without a time, the time of publishing.
func (c *Component) publishedEntry(n *hub.Node, item *publishItem) (hub.Entry, error) {
	entry := entryFromPayload(item.ID, item.Payload)
	if entry.ID == "" {
		entry.ID = hub.RandomID()
	}
	if c.completeEntry == nil || len(entry.Payload) > maxPayloadBytes {
		return entry, nil
	}
	if entry.Link == "" {
		entry.Link = cmp.Or(n.SourceURL, c.nodeLink(n.Name))
	}
	if entry.Updated.IsZero() {
		entry.Updated = c.hub.Now()
	}
	done := c.completeEntry(entry)
	// Read back, so what is stored is what standalone writes and the
	// plain fields are the completed entry's.
	el, err := parseDocument(done.Payload)
	if err != nil {
		return hub.Entry{}, fmt.Errorf("complete the entry of item %q: %w", entry.ID, err)
	}
	return entryFromPayload(entry.ID, el), nil
}

func (c *Component) retract(ctx context.Context, sender jid.JID, r *request) error {
	n, err := c.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := c.requirePublisher(ctx, n, sender); err != nil {
		return err
	}
	if _, err := c.hub.RetractFrom(ctx, n, sender.Bare().String(), r.ItemIDs); err != nil {
		if errors.Is(err, hub.ErrNotFound) {
			return itemNotFound("no such item")
		}
		return err
	}
	c.log.InfoContext(ctx, "items retracted over XMPP", "node", n.Name, "items", len(r.ItemIDs), "publisher", sender.Bare().String())
	return nil
}

func (c *Component) create(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	bare := sender.Bare().String()
	if !c.hub.IsAdmin(bare) {
		return forbidden("only pingd's administrators may create nodes")
	}
	cfg, serr := configFromRequest(r.Configure)
	if serr != nil {
		return serr
	}
	name := r.Node
	if !r.HasNode {
		name = hub.RandomID() // an instant node (XEP-0060 §8.1.2)
	}
	if err := hub.ValidNodeName(name); err != nil {
		return badRequest("", "%v", err)
	}
	n, _, err := c.hub.CreateNode(ctx, hub.NodeSpec{Name: name, Config: cfg})
	if err != nil {
		return err
	}
	// The creator is the node's owner on record, whatever the admin list
	// says later.
	if err := c.hub.SetAffiliation(ctx, n, bare, hub.AffOwner); err != nil {
		return err
	}
	b.open("pubsub", "xmlns", nsPubsub).empty("create", "node", n.Name).close("pubsub")
	return nil
}

func (c *Component) configureGet(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	n, err := c.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := c.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	b.open("pubsub", "xmlns", nsPubsubOwner).open("configure", "node", n.Name)
	renderForm(b, configForm(n.NodeConfig))
	b.close("configure").close("pubsub")
	return nil
}

func (c *Component) configureSet(ctx context.Context, sender jid.JID, r *request) error {
	n, err := c.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := c.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	f, serr := parseForm(r.Form)
	if serr != nil {
		return serr
	}
	switch f.Type {
	case "cancel":
		return nil // XEP-0060 §8.2.4: the configuration stays as it is
	case "submit":
	default:
		return badRequest("", "the configuration form must be of type submit or cancel, not %q", f.Type)
	}
	cfg, serr := applyConfigForm(n.NodeConfig, f)
	if serr != nil {
		return serr
	}
	// A node made whitelist-only loses its non-members' subscriptions in
	// the hub, which tells them.
	if err := c.hub.ConfigureNode(ctx, n.Name, cfg); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "node configured over XMPP", "node", n.Name, "by", sender.Bare().String(),
		"access_model", cfg.AccessModel, "max_items", cfg.MaxItems)
	return nil
}

func (c *Component) deleteNode(ctx context.Context, sender jid.JID, r *request) error {
	n, err := c.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := c.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	return c.hub.DeleteNode(ctx, n.Name)
}

func (c *Component) purge(ctx context.Context, sender jid.JID, r *request) error {
	n, err := c.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := c.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	if err := c.hub.Purge(ctx, n.Name, sender.Bare().String()); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "node purged over XMPP", "node", n.Name, "by", sender.Bare().String())
	return nil
}

func (c *Component) ownerSubscriptions(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	n, err := c.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := c.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	subs, err := c.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP})
	if err != nil {
		return err
	}
	b.open("pubsub", "xmlns", nsPubsubOwner).open("subscriptions", "node", n.Name)
	for _, s := range subs {
		b.empty("subscription", "jid", s.Address, "subscription", "subscribed", "subid", s.SubID)
	}
	b.close("subscriptions").close("pubsub")
	return nil
}

func (c *Component) ownerSetSubscriptions(ctx context.Context, sender jid.JID, r *request) error {
	n, err := c.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := c.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	refused, err := c.refuseSubscriptionChanges(ctx, n, r.Subscriptions)
	if err != nil {
		return err
	}
	if refused != nil {
		return refused
	}
	// Each change goes through the hub's revoke and grant, which tell the
	// subscriber with an event in the node's log (XEP-0060 §8.8.4).
	for _, ch := range r.Subscriptions {
		switch ch.Subscription {
		case "none":
			if err := c.hub.RevokeSubscription(ctx, n, ch.JID.String()); err != nil {
				return err
			}
		case "subscribed":
			if _, _, err := c.hub.GrantSubscription(ctx, hub.Subscription{
				NodeName: n.Name, Kind: hub.KindXMPP, Address: ch.JID.String(), BareJID: ch.JID.Bare().String(),
			}); err != nil {
				return err
			}
		}
	}
	c.log.InfoContext(ctx, "subscriptions changed over XMPP", "node", n.Name, "by", sender.Bare().String(), "changes", len(r.Subscriptions))
	return nil
}

// refuseSubscriptionChanges refuses changes pingd cannot make: to a state
// it does not have (a subscription is subscribed or none, never pending or
// unconfigured: pingd approves every subscription it allows at once and
// requires no configuration), or a subscription for a JID that may not
// have one (an outcast, or not on a whitelist node's whitelist: the owner
// changes its affiliation first). XEP-0060 §8.8.2.4 answers an invalid
// entry with not-acceptable and returns the entries that were not changed,
// each with its current state; pingd then changes none of them, so every
// entry is returned. nil when every change can be made.
func (c *Component) refuseSubscriptionChanges(ctx context.Context, n *hub.Node, changes []subscriptionChange) (*stanzaError, error) {
	why := ""
	for _, ch := range changes {
		var err error
		if why, err = c.subscriptionRefusal(ctx, n, ch); err != nil {
			return nil, err
		}
		if why != "" {
			break
		}
	}
	if why == "" {
		return nil, nil
	}
	var b xmlBuf
	b.open("pubsub", "xmlns", nsPubsubOwner).open("subscriptions", "node", n.Name)
	for _, ch := range changes {
		subs, err := c.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP, Address: ch.JID.String()})
		if err != nil {
			return nil, err
		}
		if len(subs) == 0 {
			b.empty("subscription", "jid", ch.JID.String(), "subscription", "none")
		} else {
			b.empty("subscription", "jid", subs[0].Address, "subscription", "subscribed", "subid", subs[0].SubID)
		}
	}
	b.close("subscriptions").close("pubsub")
	serr := notAcceptable("", "%s; nothing was changed", why)
	serr.Payload = b.Bytes()
	return serr, nil
}

// subscriptionRefusal says why pingd cannot make one owner's change of a
// subscription, or "" when it can.
func (c *Component) subscriptionRefusal(ctx context.Context, n *hub.Node, ch subscriptionChange) (string, error) {
	switch ch.Subscription {
	case "none":
		return "", nil
	case "subscribed":
	default:
		return "pingd has no pending or unconfigured subscriptions: a subscription is subscribed or none", nil
	}
	bare := ch.JID.Bare()
	switch err := c.hub.MaySubscribe(ctx, n, bare.String()); {
	case errors.Is(err, hub.ErrNotMember): // before ErrForbidden, which it wraps
		return fmt.Sprintf("%q is a whitelist node and %s is not on its whitelist: make it a member before subscribing it", n.Name, bare), nil
	case errors.Is(err, hub.ErrForbidden):
		return fmt.Sprintf("%s is banned from %q: make it a member before subscribing it", bare, n.Name), nil
	default:
		return "", err
	}
}

func (c *Component) ownerAffiliations(ctx context.Context, b *xmlBuf, sender jid.JID, r *request) error {
	n, err := c.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := c.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	// The admins own every node (XEP-0060 §8.9.1.2 lists every owner).
	affs, err := c.hub.OwnerAffiliations(ctx, n)
	if err != nil {
		return err
	}
	jids := make([]string, 0, len(affs))
	for j := range affs {
		jids = append(jids, j)
	}
	slices.Sort(jids)
	b.open("pubsub", "xmlns", nsPubsubOwner).open("affiliations", "node", n.Name)
	for _, j := range jids {
		b.empty("affiliation", "jid", j, "affiliation", string(affs[j]))
	}
	b.close("affiliations").close("pubsub")
	return nil
}

func (c *Component) ownerSetAffiliations(ctx context.Context, sender jid.JID, r *request) error {
	n, err := c.node(ctx, r.Node)
	if err != nil {
		return err
	}
	if err := c.requireOwner(ctx, n, sender); err != nil {
		return err
	}
	bare := sender.Bare().String()
	affs, err := c.hub.OwnerAffiliations(ctx, n)
	if err != nil {
		return err
	}
	// XEP-0060 §8.9.2.4: a change that cannot be made is refused with the
	// entries as they stand, and pingd then makes none of them.
	for _, ch := range r.Affiliations {
		if c.hub.IsAdmin(ch.JID) && ch.Affiliation != hub.AffOwner {
			return refusedAffiliations(n, r.Affiliations, affs,
				ch.JID+" owns every node by the operator's configuration (PINGD_ADMINS); nothing was changed")
		}
	}
	if !c.hub.IsAdmin(bare) {
		// The last owner may not give up ownership.
		owners := 0
		for _, a := range affs {
			if a == hub.AffOwner {
				owners++
			}
		}
		for _, ch := range r.Affiliations {
			if affs[ch.JID] == hub.AffOwner && ch.Affiliation != hub.AffOwner {
				owners--
			} else if affs[ch.JID] != hub.AffOwner && ch.Affiliation == hub.AffOwner {
				owners++
			}
		}
		if owners < 1 {
			return refusedAffiliations(n, r.Affiliations, affs, "the node would be left without an owner; nothing was changed")
		}
	}
	for _, ch := range r.Affiliations {
		if err := c.hub.SetAffiliation(ctx, n, ch.JID, ch.Affiliation); err != nil {
			return err
		}
		c.log.InfoContext(ctx, "affiliation set over XMPP", "node", n.Name, "jid", ch.JID,
			"affiliation", string(ch.Affiliation), "by", bare)
	}
	return nil
}

// refusedAffiliations is the not-acceptable of XEP-0060 §8.9.2.4: every
// entry of the request with its affiliation as it stands.
func refusedAffiliations(n *hub.Node, changes []affiliationChange, affs map[string]hub.Affiliation, why string) *stanzaError {
	var b xmlBuf
	b.open("pubsub", "xmlns", nsPubsubOwner).open("affiliations", "node", n.Name)
	for _, ch := range changes {
		a := affs[ch.JID]
		if a == "" {
			a = hub.AffNone
		}
		b.empty("affiliation", "jid", ch.JID, "affiliation", string(a))
	}
	b.close("affiliations").close("pubsub")
	serr := notAcceptable("", "%s", why)
	serr.Payload = b.Bytes()
	return serr
}
