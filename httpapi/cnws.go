package httpapi

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gorilla/mux"
	"golang.org/x/text/encoding/htmlindex"

	"github.com/pingd/pingd/delivery"
	"github.com/pingd/pingd/hub"
)

// CNWS (change notification web service, 2003): POST /cnws takes a
// <notification> holding a <subscribe> (a subscriber asks to be told when
// a resource changes) or a <resourceChange> (a publisher says it changed).
// Every answer is a <notification><result><status>; a bad document gets
// status false with HTTP 400.

// DialectCNWS is recorded with pings that came as CNWS resourceChange.
const DialectCNWS = "cnws"

// cnwsBaselineWait bounds how long a subscribe waits for the resource's
// first fetch so that its answer can carry the title and description.
const cnwsBaselineWait = 3 * time.Second

// cnwsMaxDepth bounds the nesting of a CNWS document.
const cnwsMaxDepth = 8

// maxCNWSFieldBytes caps one field's text (a description may be long, but
// not without end).
const maxCNWSFieldBytes = 256 << 10

func (a *API) cnwsRoutes(r *mux.Router) {
	r.HandleFunc("/cnws", a.cnws).Methods(http.MethodPost)
}

// CNWSRequest is a decoded CNWS <notification>: exactly one of Subscribe
// and Change is set.
type CNWSRequest struct {
	Subscribe *CNWSSubscribe
	Change    *CNWSChange
}

// CNWSSubscribe is a <subscribe>.
type CNWSSubscribe struct {
	ResourceID      string
	NotificationURL string
}

// CNWSChange is a <resourceChange>. ChangeTime is kept as given: the
// draft shows an RFC 1123 date with a zone name, which no parser reads
// reliably, and pingd stamps changes with its own clock anyway.
type CNWSChange struct {
	ResourceID  string
	ChangeTime  string
	Title       string
	Description string
	// HasText says whether a title or description was given.
	HasText bool
	// Extensions are the elements of other namespaces it carried, each a
	// self-contained XML element, in document order.
	Extensions string
}

// ErrCNWS marks a document that is not a valid CNWS notification.
var ErrCNWS = errors.New("invalid CNWS document")

func cnwsErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCNWS, fmt.Sprintf(format, args...))
}

// DecodeCNWS reads one CNWS <notification> of at most max bytes. It
// accepts the root in the draft's namespace or in none (early clients
// left it out), refuses DOCTYPEs and any other declaration, and checks
// what the draft says: URLs that are absolute http(s), a title of at most
// 255 characters, title and description free of markup.
func DecodeCNWS(r io.Reader, max int64) (CNWSRequest, error) {
	body, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return CNWSRequest{}, err
	}
	if int64(len(body)) > max {
		return CNWSRequest{}, cnwsErrorf("document larger than %d bytes", max)
	}
	body = bytes.TrimPrefix(body, []byte("\uFEFF"))
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = true
	d.CharsetReader = func(label string, input io.Reader) (io.Reader, error) {
		enc, err := htmlindex.Get(label)
		if err != nil {
			return nil, fmt.Errorf("unsupported encoding %q", label)
		}
		return enc.NewDecoder().Reader(input), nil
	}
	var req CNWSRequest
	var stack []string
	var fields map[string]string
	var field string
	var text strings.Builder
	seenRoot := false
	skip := 0 // depth of an extension element being skipped, 0: none
	// Extension elements of a resourceChange are kept, each re-encoded on
	// its own with the namespace declarations it needs (extensions.go).
	var ext extensionCapture
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return CNWSRequest{}, cnwsErrorf("not well-formed XML: %v", err)
		}
		switch t := tok.(type) {
		case xml.Directive:
			return CNWSRequest{}, cnwsErrorf("declarations (DOCTYPE) are not allowed")
		case xml.StartElement:
			if len(stack) >= cnwsMaxDepth {
				return CNWSRequest{}, cnwsErrorf("nested deeper than %d elements", cnwsMaxDepth)
			}
			stack = append(stack, t.Name.Local)
			if skip > 0 {
				if err := ext.token(t); err != nil {
					return CNWSRequest{}, err
				}
				continue
			}
			ns := t.Name.Space
			ours := ns == delivery.CNWSNamespace || ns == ""
			switch depth := len(stack); {
			case depth == 1:
				if seenRoot {
					return CNWSRequest{}, cnwsErrorf("more than one root element")
				}
				seenRoot = true
				if t.Name.Local != "notification" || !ours {
					return CNWSRequest{}, cnwsErrorf("the root element is {%s}%s, not a CNWS <notification>", ns, t.Name.Local)
				}
				if v, ok := attr(t, "version"); ok && strings.TrimSpace(v) != "1.0" {
					return CNWSRequest{}, cnwsErrorf("version %q (want 1.0)", v)
				}
			case !ours:
				// Extensions live in other namespaces; the draft lets
				// receivers ignore them.
				if field != "" {
					return CNWSRequest{}, cnwsErrorf("<%s> must be plain text, without markup", field)
				}
				skip = depth
				if depth == 3 && stack[1] == "resourceChange" {
					if err := ext.start(t); err != nil {
						return CNWSRequest{}, err
					}
				}
			case depth == 2:
				if fields != nil {
					return CNWSRequest{}, cnwsErrorf("a notification carries one <subscribe> or <resourceChange>, not more")
				}
				if t.Name.Local != "subscribe" && t.Name.Local != "resourceChange" {
					return CNWSRequest{}, cnwsErrorf("unknown element <%s>", t.Name.Local)
				}
				fields = map[string]string{}
			case depth == 3:
				if _, dup := fields[t.Name.Local]; dup {
					return CNWSRequest{}, cnwsErrorf("<%s> given twice", t.Name.Local)
				}
				field = t.Name.Local
				text.Reset()
			default:
				return CNWSRequest{}, cnwsErrorf("<%s> must be plain text, without markup", field)
			}
		case xml.EndElement:
			depth := len(stack)
			stack = stack[:depth-1]
			if skip > 0 {
				if err := ext.token(t); err != nil {
					return CNWSRequest{}, err
				}
				if depth == skip {
					skip = 0
					if err := ext.end(); err != nil {
						return CNWSRequest{}, err
					}
				}
				continue
			}
			switch depth {
			case 3:
				fields[field] = text.String()
				field = ""
			case 2:
				var err error
				if t.Name.Local == "subscribe" {
					req.Subscribe, err = cnwsSubscribe(fields)
				} else {
					req.Change, err = cnwsChange(fields)
				}
				if err != nil {
					return CNWSRequest{}, err
				}
			}
		case xml.CharData:
			if skip > 0 {
				if err := ext.token(t); err != nil {
					return CNWSRequest{}, err
				}
				continue
			}
			switch {
			case field != "" && skip == 0:
				if text.Len()+len(t) > maxCNWSFieldBytes {
					return CNWSRequest{}, cnwsErrorf("<%s> longer than %d bytes", field, maxCNWSFieldBytes)
				}
				text.Write(t)
			case len(stack) == 0 && len(bytes.TrimSpace(t)) > 0:
				return CNWSRequest{}, cnwsErrorf("text outside the root element")
			}
		}
	}
	if !seenRoot {
		return CNWSRequest{}, cnwsErrorf("empty document")
	}
	if req.Subscribe == nil && req.Change == nil {
		return CNWSRequest{}, cnwsErrorf("the notification has neither <subscribe> nor <resourceChange>")
	}
	if req.Change != nil {
		req.Change.Extensions = ext.String()
	}
	return req, nil
}

func attr(el xml.StartElement, name string) (string, bool) {
	for _, a := range el.Attr {
		if a.Name.Space == "" && a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
}

func cnwsURL(fields map[string]string, name string) (string, error) {
	u := strings.TrimSpace(fields[name])
	if u == "" {
		return "", cnwsErrorf("<%s> is missing", name)
	}
	if err := hub.ValidURL(u); err != nil {
		return "", cnwsErrorf("<%s>: %v", name, err)
	}
	return u, nil
}

func cnwsSubscribe(fields map[string]string) (*CNWSSubscribe, error) {
	res, err := cnwsURL(fields, "resourceID")
	if err != nil {
		return nil, err
	}
	cb, err := cnwsURL(fields, "notificationURL")
	if err != nil {
		return nil, err
	}
	return &CNWSSubscribe{ResourceID: res, NotificationURL: cb}, nil
}

func cnwsChange(fields map[string]string) (*CNWSChange, error) {
	res, err := cnwsURL(fields, "resourceID")
	if err != nil {
		return nil, err
	}
	title, titleGiven := fields["title"]
	desc, descGiven := fields["description"]
	title, desc = strings.TrimSpace(title), strings.TrimSpace(desc)
	if n := utf8.RuneCountInString(title); n > delivery.CNWSMaxTitleRunes {
		return nil, cnwsErrorf("the title has %d characters; at most %d are allowed", n, delivery.CNWSMaxTitleRunes)
	}
	return &CNWSChange{
		ResourceID:  res,
		ChangeTime:  strings.TrimSpace(fields["changeTime"]),
		Title:       delivery.CNWSText(title, delivery.CNWSMaxTitleRunes),
		Description: delivery.CNWSText(desc, 0),
		HasText:     (titleGiven && title != "") || (descGiven && desc != ""),
	}, nil
}

// cnws is POST /cnws.
func (a *API) cnws(w http.ResponseWriter, r *http.Request) {
	if !a.limitBody(w, r, func(msg string) { writeCNWSResult(w, http.StatusRequestEntityTooLarge, false, "", "", msg) }) {
		return
	}
	req, err := DecodeCNWS(r.Body, a.cfg.MaxBodyBytes)
	switch {
	case err == nil:
	case isTooLarge(err):
		writeCNWSResult(w, http.StatusRequestEntityTooLarge, false, "", "", a.tooLargeMessage())
		return
	default:
		writeCNWSResult(w, http.StatusBadRequest, false, "", "", err.Error())
		return
	}
	if req.Change != nil {
		a.cnwsChange(w, r, req.Change)
		return
	}
	a.cnwsSubscribe(w, r, req.Subscribe)
}

// cnwsChange takes a publisher's resourceChange as a trusted ping: every
// source of the URL is fetched, and its URL-level subscribers are told
// (with the publisher's title and description) even if the fetch shows no
// difference.
func (a *API) cnwsChange(w http.ResponseWriter, r *http.Request, ch *CNWSChange) {
	ctx := r.Context()
	if limited := a.allowPing(ch.ResourceID); limited != nil {
		setRetryAfter(w, limited.RetryAfter)
		writeCNWSResult(w, http.StatusTooManyRequests, false, "", "", limited.What)
		return
	}
	note := &hub.ChangeNote{Title: ch.Title, Description: ch.Description, Extensions: ch.Extensions}
	urls, err := a.ownNodeSource(ctx, ch.ResourceID)
	if err != nil {
		a.log.ErrorContext(ctx, "CNWS resourceChange not recorded", "url", ch.ResourceID, "err", err)
		writeCNWSResult(w, http.StatusInternalServerError, false, "", "", "the change could not be recorded; please try again later")
		return
	}
	// The resource is recorded as submitted, also when it names one of
	// pingd's own feeds: changes.xml lists what the publisher sent.
	n, err := a.hub.Ping(ctx, hub.Ping{Dialect: DialectCNWS, URL: ch.ResourceID, Remote: clientIP(r)}, urls, note)
	if err != nil {
		if errors.Is(err, hub.ErrInvalid) {
			writeCNWSResult(w, http.StatusBadRequest, false, "", "", err.Error())
			return
		}
		a.log.ErrorContext(ctx, "CNWS resourceChange not recorded", "url", ch.ResourceID, "err", err)
		writeCNWSResult(w, http.StatusInternalServerError, false, "", "", "the change could not be recorded; please try again later")
		return
	}
	a.log.InfoContext(ctx, "ping", "dialect", DialectCNWS, "url", ch.ResourceID, "remote", clientIP(r), "sources", n)
	writeCNWSResult(w, http.StatusOK, true, "", "", "")
}

// cnwsSubscribe adds a subscriber and answers with the resource's title
// and description. A repeated subscribe is the re-confirmation the draft
// asks subscribers to send after 30 days without notification: the
// subscriber is on the list, so the status is true.
func (a *API) cnwsSubscribe(w http.ResponseWriter, r *http.Request, s *CNWSSubscribe) {
	ctx := r.Context()
	if limited := a.allowSubscribe(clientIP(r)); limited != nil {
		setRetryAfter(w, limited.RetryAfter)
		writeCNWSResult(w, http.StatusTooManyRequests, false, "", "", limited.What)
		return
	}
	if !a.hub.Serves(hub.KindCNWS) {
		writeCNWSResult(w, http.StatusServiceUnavailable, false, "", "", "this server does not send CNWS notifications")
		return
	}
	for _, u := range [][2]string{{"the notificationURL", s.NotificationURL}, {"the resourceID", s.ResourceID}} {
		if err := a.checkOutbound(ctx, u[0], u[1]); err != nil {
			writeCNWSResult(w, http.StatusBadRequest, false, "", "", err.Error())
			return
		}
	}
	n, err := a.resourceNode(ctx, s.ResourceID, true)
	switch {
	case errors.Is(err, hub.ErrInvalid), errors.Is(err, hub.ErrNotFound):
		writeCNWSResult(w, http.StatusBadRequest, false, "", "", err.Error())
		return
	case err != nil:
		a.log.ErrorContext(ctx, "CNWS subscribe: find node", "url", s.ResourceID, "err", err)
		writeCNWSResult(w, http.StatusInternalServerError, false, "", "", "the subscription could not be stored; please try again later")
		return
	}
	if ok, _ := a.mayRead(r, n); !ok {
		writeCNWSResult(w, http.StatusUnauthorized, false, "", "",
			fmt.Sprintf("%s belongs to a whitelist node: subscribing needs its bearer token", s.ResourceID))
		return
	}
	// CNWS has no verification of intent, so a repeated <subscribe> (which
	// anyone may send) leaves the subscription as it is: true, and nothing
	// else (hub.Subscribe).
	_, renewed, err := a.hub.Subscribe(ctx, hub.Subscription{
		NodeName: n.Name, Kind: hub.KindCNWS, Address: subscriberAddress(s.NotificationURL, s.ResourceID),
		State: hub.SubActive, Options: hub.Options{Topic: s.ResourceID},
	})
	if err != nil {
		a.log.ErrorContext(ctx, "CNWS subscribe", "url", s.ResourceID, "err", err)
		writeCNWSResult(w, http.StatusInternalServerError, false, "", "", "the subscription could not be stored; please try again later")
		return
	}
	title, desc := a.describe(ctx, n)
	a.log.InfoContext(ctx, "CNWS subscription stored", "node", n.Name, "subscriber", redactCallback(s.NotificationURL), "renewed", renewed)
	writeCNWSResult(w, http.StatusOK, true, title, desc, "")
}

// describe returns the title and description of a node's resource: its
// source's once fetched (waiting briefly for a first fetch), else the
// node's own title.
func (a *API) describe(ctx context.Context, n *hub.Node) (title, desc string) {
	if n.SourceID != 0 {
		deadline := time.Now().Add(cnwsBaselineWait)
		for {
			src, err := a.hub.Source(ctx, n.SourceID)
			if err != nil {
				break
			}
			if src.Baselined || src.Gone || src.LastError != "" || time.Now().After(deadline) {
				title, desc = src.Title, src.Description
				break
			}
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return n.Title, ""
			case <-t.C:
			}
		}
	}
	if title == "" {
		title = n.Title
	}
	return delivery.CNWSText(title, delivery.CNWSMaxTitleRunes), delivery.CNWSText(desc, 0)
}

// writeCNWSResult answers with a CNWS <result>. An error message, when
// given, goes in a <message> element of pingd's own namespace, which CNWS
// clients ignore as the draft's extension rule lets them.
func writeCNWSResult(w http.ResponseWriter, code int, status bool, title, desc, msg string) {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<notification version="1.0" xmlns="` + delivery.CNWSNamespace + `">` + "\n<result>\n")
	fmt.Fprintf(&b, "<status>%t</status>\n", status)
	for _, f := range [][2]string{{"title", title}, {"description", desc}} {
		if f[1] == "" {
			continue
		}
		b.WriteString("<" + f[0] + ">")
		_ = xml.EscapeText(&b, []byte(f[1]))
		b.WriteString("</" + f[0] + ">\n")
	}
	if msg != "" {
		b.WriteString(`<message xmlns="` + cnwsMessageNS + `">`)
		_ = xml.EscapeText(&b, []byte(msg))
		b.WriteString("</message>\n")
	}
	b.WriteString("</result>\n</notification>\n")
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

// cnwsMessageNS is the namespace of pingd's explanation in CNWS answers.
const cnwsMessageNS = "urn:pingd:cnws"
