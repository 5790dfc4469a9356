package delivery

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/cnws"
)

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
	body, err := cnws.EncodeChange(change)
	if err != nil {
		return Result{Err: err}
	}
	resp, err := do(ctx, c.Client, c.UserAgent, request{Method: http.MethodPost, URL: d.Sub.Address, ContentType: cnws.ContentType, Body: body})
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
		if status, ok := cnws.DecodeStatus(resp.Body); ok && !status {
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

// changeOf sums up a batch: a publisher's own words (a CNWS
// resourceChange note) win; otherwise the newest new item's title and
// summary describe the change.
func (c *CNWS) changeOf(d *Delivery) cnws.Change {
	ch := cnws.Change{ResourceID: d.Sub.Options.Topic}
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
