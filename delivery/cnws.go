package delivery

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
	"unicode"
	"unicode/utf8"

	"github.com/pingd/pingd/hub"
)

// CNWSNamespace is the namespace of CNWS documents (the 2003-04-08 draft).
const CNWSNamespace = "http://www.owlfish.com/thoughts/cnws-2003-04-08.html"

// CNWSMaxTitleRunes is the longest title CNWS allows.
const CNWSMaxTitleRunes = 255

// CNWSMinRetryLimit is the shortest ageing of an unreachable subscriber
// the CNWS draft allows: "a minimum of a 24 hour period".
const CNWSMinRetryLimit = 24 * time.Hour

// cnwsContentType is what pingd posts CNWS documents as.
const cnwsContentType = "text/xml; charset=utf-8"

// CNWS notifies CNWS subscribers with a <notification><resourceChange>
// naming the resource they subscribed to, with a title and description of
// the change so that they need not fetch it. A subscriber that answers
// false or with an HTTP error is removed; one that cannot be reached ages:
// it is retried for RetryLimit (24 hours unless set) with a last retry at
// the end, then removed.
type CNWS struct {
	HTTPSender
	// RetryLimit is how long a subscriber that cannot be contacted ages
	// before it is removed: the draft's "configurable limit", which must
	// be at least its 24 hours (cmd/pingd refuses less). Zero takes
	// HTTPSender's retry window, 24 hours.
	RetryLimit time.Duration
	// Now is the clock of changeTime when an event has none; nil means
	// time.Now.
	Now func() time.Time
}

func (c *CNWS) now() time.Time {
	if c.Now != nil {
		return c.Now().UTC()
	}
	return time.Now().UTC()
}

// Wants takes every change of the resource.
func (c *CNWS) Wants(_ *hub.Subscription, ev hub.Event) bool { return ev.Kind.IsChange() }

// Policy: unreachable subscribers age for RetryLimit with a last retry.
func (c *CNWS) Policy() Policy {
	if c.RetryLimit > 0 {
		return Policy{RetryWindow: c.RetryLimit}
	}
	return Policy{RetryWindow: c.window()}
}

// Verify confirms at once: CNWS has no verification of intent, a
// subscription is active from the answer to <subscribe>.
func (c *CNWS) Verify(context.Context, *hub.Subscription, *hub.Node, string) (time.Time, error) {
	return time.Time{}, nil
}

// Deliver posts one <resourceChange> for the batch of changes.
func (c *CNWS) Deliver(ctx context.Context, d *Delivery) Result {
	change := c.changeOf(d)
	body, err := EncodeCNWSChange(change)
	if err != nil {
		return Result{Err: err}
	}
	resp, err := do(ctx, c.Client, c.UserAgent, request{Method: http.MethodPost, URL: d.Sub.Address, ContentType: cnwsContentType, Body: body})
	if err != nil {
		// Not contacted: the ageing process (the engine's retry window).
		return Result{Err: err}
	}
	return judgeCNWS(resp)
}

// judgeCNWS maps a subscriber's answer to a result. "If a HTTP error
// occurs then the server is removed"; statuses that say the host could
// not be reached just now (a gateway's 502/503/504, 408, 429) age like an
// unreachable host instead, so a restart does not cost a subscription.
func judgeCNWS(resp response) Result {
	switch {
	case resp.Status >= 200 && resp.Status <= 299:
		if status, ok := DecodeCNWSStatus(resp.Body); ok && !status {
			return Result{Status: resp.Status, Err: errors.New("the subscriber answered false"), Remove: true}
		}
		return Result{Status: resp.Status}
	case resp.Status == http.StatusRequestTimeout, resp.Status == http.StatusTooManyRequests,
		resp.Status == http.StatusBadGateway, resp.Status == http.StatusServiceUnavailable,
		resp.Status == http.StatusGatewayTimeout:
		return Result{Status: resp.Status, Err: errStatus(resp.Status)}
	default:
		return Result{Status: resp.Status, Err: errStatus(resp.Status), Remove: true}
	}
}

// CNWSChange is the content of one <resourceChange>.
type CNWSChange struct {
	ResourceID  string
	ChangeTime  time.Time
	Title       string
	Description string
	// Extensions are the publisher's elements of other namespaces, each a
	// self-contained XML element, passed on as they came.
	Extensions string
}

// changeOf sums up a batch: a publisher's own words (a CNWS
// resourceChange note) win; otherwise the newest new item's title and
// summary describe the change.
func (c *CNWS) changeOf(d *Delivery) CNWSChange {
	ch := CNWSChange{ResourceID: d.Sub.Options.Topic}
	if ch.ResourceID == "" {
		ch.ResourceID = d.Node.SourceURL
	}
	var note, item *hub.Event
	for i := range d.Events {
		ev := &d.Events[i]
		switch {
		case ev.Kind == hub.EventChange && (ev.Title != "" || ev.Summary != "" || len(ev.Payload) > 0):
			note = ev
		case ev.Kind == hub.EventItem:
			item = ev
		}
	}
	if len(d.Events) > 0 {
		ch.ChangeTime = d.Events[len(d.Events)-1].Created
	}
	switch {
	case note != nil:
		ch.Title, ch.Description, ch.Extensions = note.Title, note.Summary, string(note.Payload)
	case item != nil:
		ch.Title, ch.Description = item.Title, item.Summary
	}
	if ch.ChangeTime.IsZero() {
		ch.ChangeTime = c.now()
	}
	return ch
}

// EncodeCNWSChange renders a <notification> carrying one <resourceChange>.
// The title is cut to 255 characters; both texts lose control characters
// XML cannot carry.
func EncodeCNWSChange(ch CNWSChange) ([]byte, error) {
	if err := hub.ValidURL(ch.ResourceID); err != nil {
		return nil, fmt.Errorf("CNWS resourceID: %w", err)
	}
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<notification version="1.0" xmlns="` + CNWSNamespace + `">` + "\n<resourceChange>\n")
	element(&b, "resourceID", ch.ResourceID)
	element(&b, "changeTime", ch.ChangeTime.UTC().Format(http.TimeFormat))
	if t := CNWSText(ch.Title, CNWSMaxTitleRunes); t != "" {
		element(&b, "title", t)
	}
	if d := CNWSText(ch.Description, 0); d != "" {
		element(&b, "description", d)
	}
	if ch.Extensions != "" {
		b.WriteString(ch.Extensions + "\n")
	}
	b.WriteString("</resourceChange>\n</notification>\n")
	return b.Bytes(), nil
}

func element(b *bytes.Buffer, name, text string) {
	b.WriteString("<" + name + ">")
	_ = xml.EscapeText(b, []byte(text))
	b.WriteString("</" + name + ">\n")
}

// CNWSText makes s fit CNWS's plain text: valid UTF-8, no control
// characters but white space, surrounding space trimmed, at most max
// runes (0: any length).
func CNWSText(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if max > 0 && utf8.RuneCountInString(s) > max {
		runes := []rune(s)
		s = strings.TrimSpace(string(runes[:max]))
	}
	return s
}

// DecodeCNWSStatus reads the <status> of a CNWS <result> answer. ok is
// false when the body is not such a document (or says neither true nor
// false): the caller decides what an unreadable answer means.
func DecodeCNWSStatus(body []byte) (status, ok bool) {
	d := xml.NewDecoder(io.LimitReader(bytes.NewReader(body), maxResponseBytes))
	d.Strict = true
	var path []string
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err != nil {
			return false, false
		}
		switch t := tok.(type) {
		case xml.StartElement:
			path = append(path, t.Name.Local)
			text.Reset()
		case xml.EndElement:
			if len(path) >= 2 && path[len(path)-1] == "status" && path[len(path)-2] == "result" {
				switch strings.ToLower(strings.TrimSpace(text.String())) {
				case "true", "1":
					return true, true
				case "false", "0":
					return false, true
				}
				return false, false
			}
			if len(path) > 0 {
				path = path[:len(path)-1]
			}
		case xml.CharData:
			if text.Len() < 64 {
				text.Write(t)
			}
		case xml.Directive:
			return false, false // no DOCTYPE: nothing to expand
		}
	}
}
