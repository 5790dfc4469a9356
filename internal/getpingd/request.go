package getpingd

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/pingd/pingd/hub"
)

// MaxRequestBytes caps a subscription request body (either type); the
// documents are a few hundred bytes.
const MaxRequestBytes = 64 << 10

// MaxSecretBytes caps a webhook's signing secret, as WebSub caps
// hub.secret.
const MaxSecretBytes = 199

// maxDepth caps element nesting: the documents are two levels deep, room
// is left for unknown extension elements.
const maxDepth = 16

// Errors of the request parsers, one pair per request type so that each
// says which request it refused: 400 and 413 on the HTTP side.
var (
	ErrMalformedWebhook  = errors.New("malformed subscription request")
	ErrWebhookTooLarge   = fmt.Errorf("subscription request larger than %d bytes", MaxRequestBytes)
	ErrMalformedConsumer = errors.New("malformed whitelist request")
	ErrConsumerTooLarge  = fmt.Errorf("whitelist request larger than %d bytes", MaxRequestBytes)
)

// Action is what a subscription request asks for: its root element.
type Action string

const (
	Subscribe   Action = "subscribe"
	Unsubscribe Action = "unsubscribe"
)

// WebhookRequest is a parsed GetPingd HTTP subscription request.
type WebhookRequest struct {
	Action Action
	// Href is the callback URL, an absolute http(s) URL.
	Href string
	// Method is POST or NOTIFY, Diff one of DiffNone, DiffPatchOps and
	// DiffXMLPatch, Secret the optional signing secret; all three are
	// empty in an unsubscribe request.
	Method string
	Diff   string
	Secret string
}

// ConsumerRequest is a parsed GetPingd XMPP consumer (whitelist) request.
type ConsumerRequest struct {
	Action Action
	// JID is the consumer's JID as the request wrote it; package
	// whitelist validates and normalises it.
	JID string
}

// requestType tells the two request types apart: the element the root
// holds and the errors that name the request.
type requestType struct {
	child               string
	noun                string
	malformed, tooLarge error
}

var (
	webhookType  = requestType{child: "url", noun: "subscription request", malformed: ErrMalformedWebhook, tooLarge: ErrWebhookTooLarge}
	consumerType = requestType{child: "consumer", noun: "whitelist request", malformed: ErrMalformedConsumer, tooLarge: ErrConsumerTooLarge}
)

// ParseWebhookRequest reads a GetPingd HTTP (webhook) subscription request
// of at most MaxRequestBytes:
//
//	<subscribe><url href="…" method="POST|NOTIFY" diff="none|application/patch-ops+xml" secret="…"/></subscribe>
//	<unsubscribe><url href="…"/></unsubscribe>
//
// method defaults to POST and diff to none; application/xml-patch+xml is
// taken as an alias of application/patch-ops+xml. The href is returned in
// canonical form (hub.CanonicalURL). Errors wrap ErrMalformedWebhook or
// are ErrWebhookTooLarge; the grammar is parseRequest's.
func ParseWebhookRequest(r io.Reader) (WebhookRequest, error) {
	action, urlElem, err := readRequest(r, webhookType)
	if err != nil {
		return WebhookRequest{}, err
	}
	malformed := func(format string, args ...any) (WebhookRequest, error) {
		return WebhookRequest{}, fmt.Errorf("%w: %s", ErrMalformedWebhook, fmt.Sprintf(format, args...))
	}
	req := WebhookRequest{Action: action}
	href, ok := unqualifiedAttr(urlElem, "href")
	if !ok {
		return malformed("<url> has no href attribute")
	}
	// The callback is the subscription's identity: in canonical form, one
	// callback spelled two ways is one subscription.
	href, err = hub.CanonicalURL(strings.TrimSpace(href))
	if err != nil {
		return malformed("href: %v", err)
	}
	req.Href = href
	if action == Unsubscribe {
		return req, nil
	}
	req.Method = WebhookMethodPost
	if m, ok := unqualifiedAttr(urlElem, "method"); ok && strings.TrimSpace(m) != "" {
		switch m = strings.ToUpper(strings.TrimSpace(m)); m {
		case WebhookMethodPost, WebhookMethodNotify:
			req.Method = m
		default:
			return malformed("method %q, want POST or NOTIFY", m)
		}
	}
	req.Diff = DiffNone
	if d, ok := unqualifiedAttr(urlElem, "diff"); ok && strings.TrimSpace(d) != "" {
		switch d = strings.ToLower(strings.TrimSpace(d)); d {
		case DiffNone, DiffPatchOps, DiffXMLPatch:
			req.Diff = d
		default:
			return malformed("diff %q, want none, %s or %s", d, DiffPatchOps, DiffXMLPatch)
		}
	}
	if s, ok := unqualifiedAttr(urlElem, "secret"); ok {
		if len(s) > MaxSecretBytes {
			return malformed("secret longer than %d bytes", MaxSecretBytes)
		}
		req.Secret = s
	}
	return req, nil
}

// ParseConsumerRequest reads a GetPingd XMPP consumer (whitelist) request
// of at most MaxRequestBytes:
//
//	<subscribe><consumer jid="listener@example.com/FeedListener"/></subscribe>
//	<unsubscribe><consumer jid="listener@example.com"/></unsubscribe>
//
// It returns the jid as written. Errors wrap ErrMalformedConsumer or are
// ErrConsumerTooLarge; the grammar is parseRequest's.
func ParseConsumerRequest(r io.Reader) (ConsumerRequest, error) {
	action, consumer, err := readRequest(r, consumerType)
	if err != nil {
		return ConsumerRequest{}, err
	}
	raw, ok := unqualifiedAttr(consumer, "jid")
	if !ok {
		return ConsumerRequest{}, fmt.Errorf("%w: <consumer> has no jid attribute", ErrMalformedConsumer)
	}
	return ConsumerRequest{Action: action, JID: raw}, nil
}

// readRequest reads a request body of at most MaxRequestBytes and parses
// it. A body cut by the caller's own, smaller cap (http.MaxBytesReader) is
// too large as well.
func readRequest(r io.Reader, typ requestType) (Action, xml.StartElement, error) {
	body, err := io.ReadAll(io.LimitReader(r, MaxRequestBytes+1))
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		return "", xml.StartElement{}, typ.tooLarge
	}
	if err != nil {
		return "", xml.StartElement{}, fmt.Errorf("reading the %s: %w", typ.noun, err)
	}
	if len(body) > MaxRequestBytes {
		return "", xml.StartElement{}, typ.tooLarge
	}
	return parseRequest(body, typ)
}

// parseRequest reads the grammar both request types share: one root,
// <subscribe> or <unsubscribe>, holding exactly one element typ.child,
// whose start element it returns. The elements carry no namespace in the
// GetPingd proposal; one on the root is tolerated if the child shares it,
// and unknown elements are skipped. The document must be valid UTF-8
// (another declared encoding is refused), without DOCTYPE or any other
// declaration, nested at most maxDepth deep, and no element may repeat an
// attribute.
func parseRequest(body []byte, typ requestType) (Action, xml.StartElement, error) {
	malformed := func(format string, args ...any) (Action, xml.StartElement, error) {
		return "", xml.StartElement{}, fmt.Errorf("%w: %s", typ.malformed, fmt.Sprintf(format, args...))
	}
	body = bytes.TrimPrefix(body, []byte("\uFEFF")) // a UTF-8 byte order mark
	// The decoder checks UTF-8 in names, attributes and text but not in
	// comments and processing instructions: check it all.
	if !utf8.Valid(body) {
		return malformed("not valid UTF-8")
	}
	dec := xml.NewDecoder(bytes.NewReader(body))
	dec.Strict = true
	// No CharsetReader: a document declaring another encoding than UTF-8
	// is refused by the decoder.
	var (
		action Action
		rootNS string
		depth  int
		roots  int
		child  *xml.StartElement
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", xml.StartElement{}, fmt.Errorf("%w: %w", typ.malformed, err)
		}
		switch t := tok.(type) {
		case xml.Directive:
			// DOCTYPE and friends: refused, so no entity is ever declared.
			return malformed("DOCTYPE and other declarations are not allowed")
		case xml.StartElement:
			if dup := repeatedAttr(t); dup != "" {
				return malformed("attribute %s repeated on <%s>", dup, t.Name.Local)
			}
			depth++
			if depth > maxDepth {
				return malformed("elements nested deeper than %d", maxDepth)
			}
			switch depth {
			case 1:
				roots++
				if roots > 1 {
					return malformed("more than one root element")
				}
				switch Action(t.Name.Local) {
				case Subscribe, Unsubscribe:
					action = Action(t.Name.Local)
				default:
					return malformed("root element <%s>, want <subscribe> or <unsubscribe>", t.Name.Local)
				}
				rootNS = t.Name.Space
			case 2:
				if t.Name.Local != typ.child || t.Name.Space != rootNS {
					continue // an extension: skipped
				}
				if child != nil {
					return malformed("more than one <%s>", typ.child)
				}
				child = &t
			}
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && len(bytes.TrimSpace(t)) > 0 {
				return malformed("text outside the root element")
			}
		}
	}
	if roots == 0 {
		return malformed("no root element")
	}
	if child == nil {
		return malformed("no <%s> element", typ.child)
	}
	return action, *child, nil
}

// repeatedAttr returns the name of an attribute the element carries twice
// (a well-formedness error encoding/xml lets through), or "".
func repeatedAttr(el xml.StartElement) string {
	seen := make(map[xml.Name]bool, len(el.Attr))
	for _, a := range el.Attr {
		if seen[a.Name] {
			return a.Name.Local
		}
		seen[a.Name] = true
	}
	return ""
}

// unqualifiedAttr returns the value of the attribute name without a
// namespace.
func unqualifiedAttr(el xml.StartElement, name string) (string, bool) {
	for _, a := range el.Attr {
		if a.Name.Space == "" && a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
}
