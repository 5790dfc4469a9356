package component

import (
	"context"
	"strings"
	"sync"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/pingd/pingd/hub"
)

// Choosing the notification format for a client that cannot show
// pubsub events.
//
// Some clients subscribe from a generic service browser but drop every
// message that carries a pubsub#event (Gajim 1.7: its message handler
// returns on any), so the reader sees nothing. A plain XEP-0060 subscribe
// (no options form) from a full JID therefore makes pingd ask that client
// what it handles (XEP-0030 disco#info). A client that announces XEP-0163
// filtered notifications (`NAMESPACE+notify` features) tells which payload
// namespaces it wants events of; when Atom, the namespace of every pingd
// item, is not among them, the client has said it does not handle these
// events, and the subscription gets plain messages (hub.FormatMessage, of
// type chat), the format chat subscriptions get. A client that announces
// no +notify at all (a pubsub library: slixmpp, mellium) filters nothing,
// and keeps the pubsub event, as does any client that does not answer in
// time or answers with an error. An options form is a choice of its own:
// it is never overridden.

// clientProbeTimeout bounds the wait for a subscriber's disco#info: a
// client answers at once; one that does not keeps the pubsub event.
const clientProbeTimeout = 3 * time.Second

// atomNotify is the XEP-0163 feature of a client that wants events whose
// payload is an Atom entry.
const atomNotify = nsAtom + "+notify"

// showsPubsubEvents tells from a client's disco#info answer whether it
// handles events with Atom payloads (see above).
func showsPubsubEvents(info *element) bool {
	filtered := false
	for _, f := range info.child(nsDiscoInfo, "query").childrenNamed(nsDiscoInfo, "feature") {
		v := f.attr("var")
		if v == atomNotify {
			return true
		}
		if strings.HasSuffix(v, "+notify") {
			filtered = true
		}
	}
	return !filtered
}

// wantsProbe reports whether a new subscription made by r from sender
// should have its format chosen by the client's features.
func wantsProbe(sender jid.JID, r *request) bool {
	return r.Form == nil && sender.Resourcepart() != ""
}

// optionsForClient asks the subscribing client (the full JID the request
// came from; the subscription may name the bare JID, as Gajim's does) what
// it handles and returns opts with the plain message format when it does
// not handle Atom events. The answer to the subscribe waits for it, so that
// the newest item, sent right after the answer, goes out in the chosen
// format and in order.
func (svc *service) optionsForClient(ctx context.Context, client jid.JID, node string, opts hub.Options) hub.Options {
	cn := svc.connection()
	if cn == nil {
		return opts
	}
	// By full JID: another client of the account (a phone asleep) says
	// nothing of this one.
	full := client.String()
	if svc.silent.isSilent(full, time.Now()) {
		return opts
	}
	qctx, cancel := context.WithTimeout(ctx, clientProbeTimeout)
	defer cancel()
	// A client that does not answer holds this request up to the timeout:
	// the pool starts another worker meanwhile, so a sender whose client
	// never answers delays no one else's requests.
	ended := hub.StartSlowWait(ctx)
	defer ended()
	info, err := svc.dispatcher.query(qctx, cn, client.String(), `<query xmlns="`+nsDiscoInfo+`"/>`)
	if err != nil {
		if qctx.Err() != nil && ctx.Err() == nil {
			svc.silent.add(full, time.Now())
		}
		svc.log.DebugContext(ctx, "subscriber's features unknown: it keeps pubsub events", "node", node, "client", client.String(), "err", err)
		return opts
	}
	if showsPubsubEvents(info) {
		return opts
	}
	svc.log.InfoContext(ctx, "subscriber's client does not handle Atom events: it gets plain messages", "node", node, "client", client.String())
	opts.Format = hub.FormatMessage
	return opts
}

// A client (full JID) that let a probe time out is not asked again for
// clientSilentFor: requests about one node are carried out in order, so
// each of its subscribes would otherwise hold that node's other requests
// (its owner's publishes) for clientProbeTimeout, as often as it
// subscribes. Its subscriptions meanwhile keep the pubsub event.
const (
	clientSilentFor = 10 * time.Minute
	// maxSilentClients bounds what is remembered.
	maxSilentClients = 10000
)

// silentClients remembers, by full JID, until when a client is not probed.
type silentClients struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (s *silentClients) isSilent(client string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	until, ok := s.until[client]
	if ok && !now.Before(until) {
		delete(s.until, client)
		return false
	}
	return ok
}

func (s *silentClients) add(client string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.until == nil {
		s.until = map[string]time.Time{}
	}
	if len(s.until) >= maxSilentClients {
		for k, until := range s.until {
			if !now.Before(until) || len(s.until) >= maxSilentClients {
				delete(s.until, k)
			}
		}
	}
	s.until[client] = now.Add(clientSilentFor)
}
