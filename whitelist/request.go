package whitelist

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/pingd/pingd/internal/xmppaddr"

	"github.com/pingd/pingd/internal/getpingd"
)

// Errors of request parsing and of the Service. The HTTP layer maps them:
// ErrMalformed and ErrBadJID to 400, ErrTooLarge to 413, ErrUnauthorized to
// 401; hub.ErrNotFound (no such node) to 404.
var (
	ErrMalformed    = getpingd.ErrMalformedConsumer
	ErrTooLarge     = getpingd.ErrConsumerTooLarge
	ErrBadJID       = errors.New("invalid JID")
	ErrUnauthorized = errors.New("a node or admin token is required")
)

// Action is what a whitelist request asks for.
type Action string

const (
	// Subscribe adds the consumer's bare JID to the node's whitelist.
	Subscribe Action = "subscribe"
	// Unsubscribe removes it, with its subscriptions.
	Unsubscribe Action = "unsubscribe"
)

// Request is a parsed whitelist request.
type Request struct {
	Action Action
	// JID is the consumer's normalised bare JID; a full JID in the request
	// is reduced to it.
	JID string
}

// ParseConsumerRequest reads a whitelist request (at most
// getpingd.MaxRequestBytes, in the grammar of getpingd.ParseConsumerRequest):
//
//	<subscribe><consumer jid="listener@example.com/FeedListener"/></subscribe>
//	<unsubscribe><consumer jid="listener@example.com"/></unsubscribe>
//
// and reduces the consumer's JID to its normalised bare JID. Errors:
// ErrMalformed, ErrTooLarge, ErrBadJID.
func ParseConsumerRequest(r io.Reader) (Request, error) {
	req, err := getpingd.ParseConsumerRequest(r)
	if err != nil {
		return Request{}, err
	}
	bare, err := BareJID(req.JID)
	if err != nil {
		return Request{}, err
	}
	return Request{Action: Action(req.Action), JID: bare}, nil
}

// BareJID validates and normalises a JID (PRECIS profiles, IDNA) and
// returns its bare form. Errors wrap ErrBadJID and say why.
func BareJID(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%w: empty", ErrBadJID)
	}
	bare, err := xmppaddr.Bare(s)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %w", ErrBadJID, s, err)
	}
	return bare, nil
}
