package component

import (
	"errors"
	"fmt"

	"mellium.im/xmpp/disco"
	"mellium.im/xmpp/form"
	"mellium.im/xmpp/pubsub"
	"mellium.im/xmpp/stanza"

	"github.com/pingd/pingd/hub"
)

// Namespaces pingd speaks on the component's JID, as mellium names them.
const (
	nsPubsub       = pubsub.NS
	nsPubsubOwner  = pubsub.NSOwner
	nsPubsubEvent  = pubsub.NSEvent
	nsPubsubErrors = pubsub.NSErrors
	nsDiscoInfo    = disco.NSInfo
	nsDiscoItems   = disco.NSItems
	nsDataForms    = form.NS
	nsAtom         = "http://www.w3.org/2005/Atom"
	nsStanzaErrors = stanza.NSError

	formNodeConfig = nsPubsub + "#node_config"
	formMetaData   = nsPubsub + "#meta-data"
)

// stanzaError is an XMPP stanza error (RFC 6120 §8.3) with the optional
// XEP-0060 application condition.
type stanzaError struct {
	Type      stanza.ErrorType
	Condition stanza.Condition
	// App is a condition of the pubsub#errors namespace; Feature goes with
	// App "unsupported".
	App     string
	Feature string
	Text    string
	// AppNS is App's namespace when it is not pubsub#errors (XEP-0050's).
	AppNS string
	// Payload, when set, is sent before the <error/> element: what the
	// request asked for and did not get (XEP-0060 §8.8.2.4).
	Payload []byte
}

func (e *stanzaError) Error() string {
	s := string(e.Condition)
	if e.App != "" {
		s += "/" + e.App
	}
	if e.Feature != "" {
		s += " (" + e.Feature + ")"
	}
	if e.Text != "" {
		s += ": " + e.Text
	}
	return s
}

// write renders the <error/> element; by is the component's JID.
func (e *stanzaError) write(b *xmlBuf, by string) {
	b.open("error", "type", string(e.Type), "by", by)
	b.empty(string(e.Condition), "xmlns", nsStanzaErrors)
	if e.Text != "" {
		b.element("text", e.Text, "xmlns", nsStanzaErrors, "xml:lang", "en")
	}
	switch {
	case e.App != "" && e.AppNS != "":
		b.empty(e.App, "xmlns", e.AppNS)
	case e.App != "":
		b.empty(e.App, "xmlns", nsPubsubErrors, "feature", e.Feature)
	}
	b.close("error")
}

func newError(typ stanza.ErrorType, cond stanza.Condition, app, text string) *stanzaError {
	return &stanzaError{Type: typ, Condition: cond, App: app, Text: text}
}

func badRequest(app, format string, args ...any) *stanzaError {
	return newError(stanza.Modify, stanza.BadRequest, app, fmt.Sprintf(format, args...))
}

func notAcceptable(app, format string, args ...any) *stanzaError {
	return newError(stanza.Modify, stanza.NotAcceptable, app, fmt.Sprintf(format, args...))
}

// payloadTooBig refuses a publish whose payload is over the limit
// (XEP-0060 §7.1.3.6).
func payloadTooBig() *stanzaError {
	return notAcceptable("payload-too-big", "payloads are at most %d bytes (the Atom entry as stored); a longer text belongs at the entry's link", maxPayloadBytes)
}

func forbidden(text string) *stanzaError {
	return newError(stanza.Auth, stanza.Forbidden, "", text)
}

func itemNotFound(text string) *stanzaError {
	return newError(stanza.Cancel, stanza.ItemNotFound, "", text)
}

func closedNode(node string) *stanzaError {
	return newError(stanza.Cancel, stanza.NotAllowed, "closed-node",
		fmt.Sprintf("node %q is open to its whitelist only", node))
}

func serviceUnavailable() *stanzaError {
	return newError(stanza.Cancel, stanza.ServiceUnavailable, "", "")
}

// unsupported is feature-not-implemented with the XEP-0060 feature name.
func unsupported(feature string) *stanzaError {
	return &stanzaError{Type: stanza.Cancel, Condition: stanza.FeatureNotImplemented, App: "unsupported", Feature: feature}
}

// subscriptionsFull refuses a subscription past one of the account's
// bounds (hub.ErrAccountSubscriptionsFull, hub.ErrNodeResourcesFull).
// XEP-0060 §6.1.3 names no condition for it; RFC 6120 §8.3.3.12's
// policy-violation is a local policy broken, and cancel says that sending
// it again will not help (§8.3.2), while resource-constraint with wait
// would have clients retry what stays refused until the account
// unsubscribes somewhere.
func subscriptionsFull(err error) *stanzaError {
	return newError(stanza.Cancel, stanza.PolicyViolation, "", err.Error())
}

func nodeIDRequired() *stanzaError {
	return badRequest("nodeid-required", "the request names no node")
}

func internalError() *stanzaError {
	return newError(stanza.Wait, stanza.InternalServerError, "", "pingd could not complete the request; try again")
}

// asStanzaError maps an error from the hub to the stanza error a client
// gets. ok is false for errors that are pingd's own failures (logged, and
// answered with internal-server-error).
func asStanzaError(err error, node string) (se *stanzaError, ok bool) {
	if errors.As(err, &se) {
		return se, true
	}
	switch {
	case errors.Is(err, hub.ErrNotMember):
		return closedNode(node), true
	case errors.Is(err, hub.ErrForbidden):
		return forbidden(""), true
	case errors.Is(err, hub.ErrAccountSubscriptionsFull), errors.Is(err, hub.ErrNodeResourcesFull):
		return subscriptionsFull(err), true
	case errors.Is(err, hub.ErrNotFound):
		return itemNotFound(fmt.Sprintf("no node %q", node)), true
	case errors.Is(err, hub.ErrExists):
		return newError(stanza.Cancel, stanza.Conflict, "", fmt.Sprintf("node %q already exists", node)), true
	case errors.Is(err, hub.ErrPayloadTooBig):
		return payloadTooBig(), true
	case errors.Is(err, hub.ErrInvalid):
		return notAcceptable("", "%s", err.Error()), true
	}
	return internalError(), false
}
