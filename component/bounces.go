package component

import (
	"context"
	"errors"
	"strings"

	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
)

// Bounced notifications (XEP-0060 §12.3). Every notification carries an
// id naming its node (stanzaIDs.forNode), and the XMPP server that cannot
// deliver it answers from the subscriber's address with that id: the two
// find the subscription. What the error says decides (hub/bounces.go):
//
//   - the address is gone for good: item-not-found (no such account),
//     gone, jid-malformed, and the refusals forbidden, not-allowed,
//     registration-required and subscription-required. The subscription
//     ends at once.
//   - anything else is counted, and the subscription ends after
//     hub.BounceLimit bounces over at least hub.BounceWindow. That
//     includes service-unavailable, which RFC 6121 §8.5.2 gives for an
//     account that does not exist but also for one whose server keeps no
//     offline messages while its user is away, and XEP-0191 for a user
//     who blocked pingd: an offline reader must not lose its subscription
//     at the first notification. remote-server-not-found and
//     remote-server-timeout are counted too: a domain that does not
//     resolve today may tomorrow.
//
// Only the subscriber's own address (or its server, speaking for it) can
// send such an error, so nobody can end another's subscription.

// permanentBounces are the conditions that end a subscription at once.
var permanentBounces = map[stanza.Condition]bool{
	stanza.ItemNotFound:         true,
	stanza.Gone:                 true,
	stanza.JIDMalformed:         true,
	stanza.Forbidden:            true,
	stanza.NotAllowed:           true,
	stanza.RegistrationRequired: true,
	stanza.SubscriptionRequired: true,
}

// isNotificationBounce reports whether an error message answers one of
// the component's notifications.
func isNotificationBounce(msg *element) bool {
	_, ok := nodeOfStanzaID(msg.attr("id"))
	return ok && msg.attr("from") != ""
}

// bounceCondition reads an error stanza's defined condition ("" without
// one) and the reason to record: the condition and its text.
func bounceCondition(msg *element) (stanza.Condition, string) {
	e := msg.child(msg.Name.Space, "error")
	var cond stanza.Condition
	var text string
	if e != nil {
		for _, ch := range e.Children {
			if ch.Name.Space != nsStanzaErrors {
				continue
			}
			if ch.Name.Local == "text" {
				text = strings.TrimSpace(ch.text())
			} else if cond == "" {
				cond = stanza.Condition(ch.Name.Local)
			}
		}
	}
	reason := string(cond)
	if reason == "" {
		reason = "an error without a condition"
	}
	if text != "" {
		reason += ": " + truncateRunes(sanitizeText(text), 200)
	}
	return cond, reason
}

// notificationBounced takes an error answering a notification (on a
// worker).
func (svc *service) notificationBounced(ctx context.Context, msg *element) {
	nodeID, _ := nodeOfStanzaID(msg.attr("id"))
	from, err := jid.Parse(msg.attr("from"))
	if err != nil {
		return
	}
	cond, reason := bounceCondition(msg)
	svc.bounced.Add(1)
	out, err := svc.hub.NotificationBounced(ctx, nodeID, from.String(), permanentBounces[cond], reason)
	switch {
	case errors.Is(err, hub.ErrNotFound):
		svc.log.DebugContext(ctx, "an error answering a notification matches no subscription", "from", from.String(), "id", msg.attr("id"), "reason", reason)
	case err != nil:
		svc.log.ErrorContext(ctx, "record a bounced notification", "from", from.String(), "node_id", nodeID, "err", err)
	case !out.Ended:
		svc.log.InfoContext(ctx, "a notification bounced", "node", out.Sub.NodeName, "jid", from.String(), "reason", reason, "bounces", out.Count)
	}
}
