package component

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
)

// service is the request side of the component: every stanza a client
// sends to the component's JID is taken off the stream, carried out and
// answered here. The IQ plumbing of the XEP-0030 and XEP-0060 service
// (receiving, dispatching, answering) is in this file; disco.go,
// subscriber.go, publisher.go, subopts.go and rsm.go are its own use
// cases; the owner's requests (ownerRequests, owner.go), the chat
// commands (chatCommands, chat.go), the ad-hoc commands (adhocService,
// adhoc*.go) and what both subscribe to (subscriptionTargets, targets.go)
// are types of their own it hands requests to. Presence is in
// presence.go and errors answering notifications in bounces.go. The
// Component hands the service each stanza (on the reader) and each job of
// its request pool (on a worker); the service writes its answers on the
// connection it is given, and tells the dispatcher what a request sets
// off (a wake, the newest item for a new subscription).
type service struct {
	*sharedState
	// access finds nodes and checks who may do what with them.
	access nodeAccess
	// owner carries out the owner use cases (owner.go), chat the chat
	// commands (chat.go), commands the ad-hoc commands (adhoc*.go),
	// targets the subscriptions both make (targets.go).
	owner    *ownerRequests
	chat     *chatCommands
	commands *adhocService
	targets  *subscriptionTargets
	// completeEntry: see Config.CompleteEntry.
	completeEntry func(hub.Entry) hub.Entry
	// limits are each JID's share of the requests and look-ups
	// (limits.go).
	limits sharedLimits

	// dispatcher sends the notifications; requests wake it and hand it
	// what goes to one subscriber.
	dispatcher *dispatcher

	// bounced counts the notifications answered with an error (for
	// /metrics; Component.NotificationCounts).
	bounced atomic.Int64
	// silent are the clients whose disco#info probe timed out lately
	// (clientformat.go).
	silent silentClients
}

// The IQ plumbing of the XEP-0030 and XEP-0060 service answered on the
// component's JID: receiving, dispatching, answering and the access checks
// every role shares.

// receiveIQ takes one IQ off the stream (on the reader): an answer to one
// of pingd's own queries goes to whoever waits for it; a request is parsed
// and handed to the request pool, or refused at once when it is malformed,
// not for the service, or beyond its sender's share (limits.go). Every get and set gets exactly one answer;
// results and errors get none.
func (svc *service) receiveIQ(ctx context.Context, cn *connection, pool *requestPool, iq *element) {
	if svc.dispatcher.isAckMarker(iq) {
		// One of our markers, back from the server (acks.go): nobody
		// waits for an answer to it.
		svc.dispatcher.acknowledge(cn, iq)
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
		svc.log.WarnContext(ctx, "IQ without a valid sender dropped", "from", iq.attr("from"), "id", iq.attr("id"))
		return
	}
	bare := from.Bare().String()
	if !svc.admitRequest(ctx, bare) {
		svc.replyError(cn, iq, refusal(errTooFast))
		return
	}
	req, serr := parseIQ(iq)
	if serr == nil && !svc.isServiceAddress(iq.attr("to")) {
		serr = serviceUnavailable()
	}
	if serr != nil {
		svc.log.DebugContext(ctx, "IQ refused", "from", from.String(), "id", iq.attr("id"), "error", serr.Error())
		svc.replyError(cn, iq, serr)
		return
	}
	j := &job{iq: iq, req: req, from: from, sender: bare, bounds: svc.boundsOf(bare)}
	switch {
	case req.Op == opCommand:
		// A sender's commands and chat keep their order; commands of
		// different people run side by side.
		j.key = "chat\x00" + from.String()
	case req.HasNode && req.Node != "":
		j.key = "node\x00" + req.Node
	}
	if err := pool.submit(j); err != nil {
		// Refused at once, never waited for: the reader serves everyone.
		svc.log.DebugContext(ctx, "IQ refused", "from", from.String(), "id", iq.attr("id"), "reason", err.Error())
		svc.replyError(cn, iq, refusal(err))
	}
}

// answerIQ carries out one parsed IQ request and answers it.
func (svc *service) answerIQ(ctx context.Context, cn *connection, iq *element, req *request, from jid.JID) {
	ctx, after := withFollowUps(ctx)
	payload, serr := svc.execute(ctx, from, req)
	svc.answer(ctx, cn, iq, req, from, payload, serr)
	after.run(ctx)
}

// answer sends the result with payload, or the error serr.
func (svc *service) answer(ctx context.Context, cn *connection, iq *element, req *request, from jid.JID, payload []byte, serr *stanzaError) {
	if a := svc.answerBytes(ctx, iq, req, from, payload, serr); a != nil {
		svc.send(ctx, cn, a)
	}
}

// answerBytes renders the result with payload, or the error serr.
func (svc *service) answerBytes(ctx context.Context, iq *element, req *request, from jid.JID, payload []byte, serr *stanzaError) []byte {
	if serr != nil {
		svc.log.DebugContext(ctx, "IQ refused", "from", from.String(), "id", iq.attr("id"), "error", serr.Error())
		return svc.errorReply(iq, serr)
	}
	svc.log.DebugContext(ctx, "IQ answered", "from", from.String(), "id", iq.attr("id"), "op", req.Op.String(), "node", req.Node)
	var b xmlBuf
	b.open("iq", "type", "result", "id", iq.attr("id"), "from", svc.replyFrom(iq), "to", iq.attr("from"))
	b.Write(payload)
	b.close("iq")
	if limit := svc.limit.bytes(); b.Len() > limit {
		// Answers that grow with what is stored page or cut themselves;
		// anything else that would still be over the budget is refused
		// rather than allowed to end the stream.
		svc.log.WarnContext(ctx, "IQ answer over the stanza budget refused", "from", from.String(), "op", req.Op.String(), "node", req.Node,
			"bytes", b.Len(), "budget_bytes", limit)
		return svc.errorReply(iq, newError(stanza.Wait, stanza.ResourceConstraint, "",
			fmt.Sprintf("the answer would be %d bytes, more than the %d a stanza may take here; ask for less (XEP-0059 <set/>)", b.Len(), limit)))
	}
	return b.Bytes()
}

// isServiceAddress reports whether to addresses the service itself (the
// domain, with or without a resource), not an entity at it.
func (svc *service) isServiceAddress(to string) bool {
	if to == "" {
		return true
	}
	j, err := jid.Parse(to)
	return err == nil && j.Localpart() == "" && j.Domainpart() == svc.domain.Domainpart()
}

// replyFrom is the from of an answer: the address the request went to.
func (svc *service) replyFrom(st *element) string {
	if j, err := jid.Parse(st.attr("to")); err == nil && j.Domainpart() == svc.domain.Domainpart() {
		return j.String() // normalised, so the server recognises its component
	}
	return svc.domainStr
}

// replyError answers a stanza with an error (RFC 6120 §8.3).
func (svc *service) replyError(cn *connection, st *element, serr *stanzaError) {
	if answer := svc.errorReply(st, serr); answer != nil {
		svc.send(context.Background(), cn, answer)
	}
}

// errorReply renders the error answer to a stanza; nil when it gets none.
func (svc *service) errorReply(st *element, serr *stanzaError) []byte {
	if st.attr("from") == "" || st.attr("type") == "error" {
		return nil // never answer an error with an error
	}
	var b xmlBuf
	b.open(st.Name.Local, "type", "error", "id", st.attr("id"), "from", svc.replyFrom(st), "to", st.attr("from"))
	b.Write(serr.Payload)
	serr.write(&b, svc.domainStr)
	b.close(st.Name.Local)
	return b.Bytes()
}

// send writes one stanza.
func (svc *service) send(ctx context.Context, cn *connection, stanzaBytes []byte) {
	err := cn.writeThen(func(w *bufio.Writer) error {
		_, err := w.Write(stanzaBytes)
		return err
	}, func() { cn.noteWrite(len(stanzaBytes)) })
	if err != nil {
		svc.log.WarnContext(ctx, "answer not sent: the stream is gone", "err", err)
	}
}

// execute runs a parsed request for sender and returns the IQ result's
// payload (possibly empty).
func (svc *service) execute(ctx context.Context, sender jid.JID, r *request) ([]byte, *stanzaError) {
	var b xmlBuf
	var err error
	switch r.Op {
	case opDiscoInfo:
		err = svc.discoInfo(ctx, &b, sender, r)
	case opDiscoItems:
		err = svc.discoItems(ctx, &b, sender, r)
	case opSubscribe:
		err = svc.subscribe(ctx, &b, sender, r)
	case opUnsubscribe:
		err = svc.unsubscribe(ctx, sender, r)
	case opSubscriptions:
		err = svc.ownSubscriptions(ctx, &b, sender, r)
	case opAffiliations:
		err = svc.ownAffiliations(ctx, &b, sender, r)
	case opItems:
		err = svc.items(ctx, &b, sender, r)
	case opPublish:
		payloads, errs := svc.publish(ctx, sender, r.Node, []*request{r})
		if errs[0] != nil {
			return nil, errs[0]
		}
		return payloads[0], nil
	case opRetract:
		err = svc.retract(ctx, sender, r)
	case opCreate:
		err = svc.owner.create(ctx, &b, sender, r)
	case opConfigureGet:
		err = svc.owner.configureGet(ctx, &b, sender, r)
	case opConfigureSet:
		err = svc.owner.configureSet(ctx, sender, r)
	case opDefault:
		b.open("pubsub", "xmlns", nsPubsubOwner).open("default")
		renderForm(&b, configForm(hub.DefaultNodeConfig()))
		b.close("default").close("pubsub")
	case opDelete:
		err = svc.owner.deleteNode(ctx, sender, r)
	case opPurge:
		err = svc.owner.purge(ctx, sender, r)
	case opOwnerSubscriptionsGet:
		err = svc.owner.ownerSubscriptions(ctx, &b, sender, r)
	case opOwnerSubscriptionsSet:
		err = svc.owner.ownerSetSubscriptions(ctx, sender, r)
	case opOwnerAffiliationsGet:
		err = svc.owner.ownerAffiliations(ctx, &b, sender, r)
	case opOwnerAffiliationsSet:
		err = svc.owner.ownerSetAffiliations(ctx, sender, r)
	case opOptionsGet:
		err = svc.optionsGet(ctx, &b, sender, r)
	case opOptionsSet:
		err = svc.optionsSet(ctx, sender, r)
	case opSubscriptionDefault:
		err = svc.subscriptionDefaults(ctx, &b, r)
	case opCommand:
		err = svc.commands.runCommand(ctx, &b, sender, r)
	default:
		return nil, serviceUnavailable()
	}
	if err != nil {
		return nil, svc.stanzaErrorOf(ctx, err, r, sender)
	}
	return b.Bytes(), nil
}

// stanzaErrorOf maps a failed request's error to its stanza error, logging
// what is not the requester's fault.
func (svc *service) stanzaErrorOf(ctx context.Context, err error, r *request, sender jid.JID) *stanzaError {
	se, ok := asStanzaError(err, r.Node)
	if !ok {
		svc.log.ErrorContext(ctx, "XMPP request failed", "op", r.Op.String(), "node", r.Node, "from", sender.String(), "err", err)
	}
	return se
}

// nodeAccess finds nodes and checks who may do what with them: what every
// request area shares.
type nodeAccess struct {
	hub *hub.Hub
}

// node looks a node up; a name that cannot exist is simply not found.
func (na nodeAccess) node(ctx context.Context, name string) (*hub.Node, error) {
	if hub.ValidNodeName(name) != nil {
		return nil, itemNotFound(fmt.Sprintf("no node %q", name))
	}
	n, err := na.hub.Node(ctx, name)
	if errors.Is(err, hub.ErrNotFound) {
		return nil, itemNotFound(fmt.Sprintf("no node %q", name))
	}
	return n, err
}

// requireOwner returns forbidden unless sender owns the node.
func (na nodeAccess) requireOwner(ctx context.Context, n *hub.Node, sender jid.JID) error {
	ok, err := na.hub.IsOwner(ctx, n, sender.Bare().String())
	if err != nil {
		return err
	}
	if !ok {
		return forbidden(fmt.Sprintf("only the owners of %q may do that", n.Name))
	}
	return nil
}

// requirePublisher returns forbidden unless sender may publish to the node.
func (na nodeAccess) requirePublisher(ctx context.Context, n *hub.Node, sender jid.JID) error {
	aff, err := na.hub.AffiliationOf(ctx, n, sender.Bare().String())
	if err != nil {
		return err
	}
	if aff != hub.AffOwner && aff != hub.AffPublisher {
		return forbidden(fmt.Sprintf("only the owners and publishers of %q may do that", n.Name))
	}
	return nil
}

// requireReader checks that sender may read the node (XEP-0060 §6.5.9).
func (na nodeAccess) requireReader(ctx context.Context, n *hub.Node, sender jid.JID) error {
	aff, err := na.hub.AffiliationOf(ctx, n, sender.Bare().String())
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
