package whitelist

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/pingd/pingd/internal/xmppaddr"
)

// ContentType is the media type of whitelist requests.
const ContentType = "application/getpingd+xmpp+subscribe+xml"

// MaxRequestBytes caps a request body; the documents are a few hundred
// bytes.
const MaxRequestBytes = 64 << 10

// maxDepth caps element nesting: the document is two levels deep, room is
// left for unknown extension elements.
const maxDepth = 16

// Errors of request parsing and of the Service. The HTTP layer maps them:
// ErrMalformed and ErrBadJID to 400, ErrTooLarge to 413, ErrUnauthorized to
// 401; hub.ErrNotFound (no such node) to 404.
var (
	ErrMalformed    = errors.New("malformed whitelist request")
	ErrTooLarge     = fmt.Errorf("whitelist request larger than %d bytes", MaxRequestBytes)
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

// ParseConsumerRequest reads a whitelist request (at most MaxRequestBytes):
//
//	<subscribe><consumer jid="listener@example.com/FeedListener"/></subscribe>
//	<unsubscribe><consumer jid="listener@example.com"/></unsubscribe>
//
// The elements carry no namespace in the GetPingd proposal; one on the
// root is tolerated if the consumer element shares it. Unknown elements
// are skipped. A DOCTYPE, more than one root, more than one consumer, a
// missing or invalid jid are errors (ErrMalformed, ErrBadJID).
func ParseConsumerRequest(r io.Reader) (Request, error) {
	body, err := io.ReadAll(io.LimitReader(r, MaxRequestBytes+1))
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		return Request{}, ErrTooLarge // the caller's own, smaller cap
	}
	if err != nil {
		return Request{}, fmt.Errorf("reading the whitelist request: %w", err)
	}
	if len(body) > MaxRequestBytes {
		return Request{}, ErrTooLarge
	}
	return parse(body)
}

func parse(body []byte) (Request, error) {
	body = bytes.TrimPrefix(body, []byte("\uFEFF")) // a UTF-8 byte order mark
	// The decoder checks UTF-8 in names, attributes and text but not in
	// comments and processing instructions: check it all.
	if !utf8.Valid(body) {
		return Request{}, fmt.Errorf("%w: not valid UTF-8", ErrMalformed)
	}
	dec := xml.NewDecoder(bytes.NewReader(body))
	dec.Strict = true
	// No CharsetReader: a document declaring another encoding than UTF-8
	// is refused by the decoder.
	var (
		req      Request
		rootNS   string
		depth    int
		roots    int
		consumer *xml.StartElement
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Request{}, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		switch t := tok.(type) {
		case xml.Directive:
			// DOCTYPE and friends: refused, so no entity is ever declared.
			return Request{}, fmt.Errorf("%w: DOCTYPE and other declarations are not allowed", ErrMalformed)
		case xml.StartElement:
			if dup := duplicateAttr(t); dup != "" {
				return Request{}, fmt.Errorf("%w: attribute %s repeated on <%s>", ErrMalformed, dup, t.Name.Local)
			}
			depth++
			if depth > maxDepth {
				return Request{}, fmt.Errorf("%w: elements nested deeper than %d", ErrMalformed, maxDepth)
			}
			switch depth {
			case 1:
				roots++
				if roots > 1 {
					return Request{}, fmt.Errorf("%w: more than one root element", ErrMalformed)
				}
				switch Action(t.Name.Local) {
				case Subscribe, Unsubscribe:
					req.Action = Action(t.Name.Local)
				default:
					return Request{}, fmt.Errorf("%w: root element <%s>, want <subscribe> or <unsubscribe>", ErrMalformed, t.Name.Local)
				}
				rootNS = t.Name.Space
			case 2:
				if t.Name.Local != "consumer" || t.Name.Space != rootNS {
					continue // an extension: skipped
				}
				if consumer != nil {
					return Request{}, fmt.Errorf("%w: more than one <consumer>", ErrMalformed)
				}
				consumer = &t
			}
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && len(bytes.TrimSpace(t)) > 0 {
				return Request{}, fmt.Errorf("%w: text outside the root element", ErrMalformed)
			}
		}
	}
	if roots == 0 {
		return Request{}, fmt.Errorf("%w: no root element", ErrMalformed)
	}
	if consumer == nil {
		return Request{}, fmt.Errorf("%w: no <consumer> element", ErrMalformed)
	}
	raw, ok := attrValue(*consumer, "jid")
	if !ok {
		return Request{}, fmt.Errorf("%w: <consumer> has no jid attribute", ErrMalformed)
	}
	bare, err := BareJID(raw)
	if err != nil {
		return Request{}, err
	}
	req.JID = bare
	return req, nil
}

// duplicateAttr returns the name of an attribute the element carries twice
// (a well-formedness error encoding/xml lets through), or "".
func duplicateAttr(el xml.StartElement) string {
	seen := make(map[xml.Name]bool, len(el.Attr))
	for _, a := range el.Attr {
		if seen[a.Name] {
			return a.Name.Local
		}
		seen[a.Name] = true
	}
	return ""
}

// attrValue returns the value of the unqualified attribute name.
func attrValue(el xml.StartElement, name string) (string, bool) {
	for _, a := range el.Attr {
		if a.Name.Space == "" && a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
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
