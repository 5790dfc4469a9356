package delivery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/rsscloud"
)

// cloudNotifyTimeout bounds one notification.
const cloudNotifyTimeout = 30 * time.Second

// RSSCloud notifies rssCloud registrations that a URL changed: an
// http-post form with url=…, an XML-RPC call of the registered procedure
// with the URL, or a SOAP 1.1 call of it. Registrations last 25 hours and
// are suspended after three consecutive failures until renewed.
type RSSCloud struct {
	HTTPSender
	// Now is the clock for registration expiry; nil means time.Now.
	Now func() time.Time
}

func (c *RSSCloud) now() time.Time {
	if c.Now != nil {
		return c.Now().UTC()
	}
	return time.Now().UTC()
}

// Wants takes every change: rssCloud says "this URL changed", whatever
// changed in it.
func (c *RSSCloud) Wants(_ *hub.Subscription, ev hub.Event) bool { return ev.Kind.IsChange() }

// Policy: a failing registration is retried with backoff and suspended
// after three errors in a row; the retry window only bounds the backoff.
func (c *RSSCloud) Policy() Policy {
	return Policy{RetryWindow: c.window(), SuspendAfter: rsscloud.SuspendAfter}
}

// Verify checks a registration before it is stored as active. An
// http-post or SOAP registration with a domain must echo a random
// challenge sent with the URL in a GET (so nobody registers a host that
// did not ask); any other, an XML-RPC one with a domain included, must
// accept a test notification (rsscloud.Challenged). It returns the registration's expiry.
// rssCloud has no unsubscribe; such a request is confirmed as is.
func (c *RSSCloud) Verify(ctx context.Context, sub *hub.Subscription, node *hub.Node, mode string) (time.Time, error) {
	if mode != "subscribe" {
		return time.Time{}, nil
	}
	vctx, cancel := context.WithTimeout(ctx, rsscloud.VerifyTimeout)
	defer cancel()
	resource := cloudResource(sub, node)
	if rsscloud.Challenged(sub.Options.Protocol, sub.Options.Verify[rsscloud.VerifyDomain]) {
		if err := c.challenge(vctx, sub.Address, resource); err != nil {
			return time.Time{}, fmt.Errorf("rssCloud challenge: %w", err)
		}
	} else if _, err := c.notify(vctx, sub, resource); err != nil {
		return time.Time{}, fmt.Errorf("rssCloud test notification: %w", err)
	}
	return c.now().Add(rsscloud.Lease), nil
}

// Deliver tells the registration once that its URL changed, however many
// changes the batch holds.
func (c *RSSCloud) Deliver(ctx context.Context, d *Delivery) Result {
	if !d.Sub.ExpiresAt.IsZero() && !c.now().Before(d.Sub.ExpiresAt) {
		return Result{Err: errors.New("registration expired"), Remove: true}
	}
	nctx, cancel := context.WithTimeout(ctx, cloudNotifyTimeout)
	defer cancel()
	status, err := c.notify(nctx, d.Sub, cloudResource(d.Sub, d.Node))
	return Result{Status: status, Err: err}
}

// cloudResource is the URL a registration asked about.
func cloudResource(sub *hub.Subscription, node *hub.Node) string {
	if sub.Options.Topic != "" {
		return sub.Options.Topic
	}
	return node.SourceURL
}

// challenge does the GET of a registration that named a domain: url and
// a random challenge in the query, answered with a 2xx whose body is the
// challenge.
func (c *RSSCloud) challenge(ctx context.Context, callback, resource string) error {
	u, err := url.Parse(callback)
	if err != nil {
		return fmt.Errorf("callback URL: %w", err)
	}
	challenge := hub.RandomID()
	q := u.Query()
	q.Set("url", resource)
	q.Set("challenge", challenge)
	u.RawQuery = q.Encode()
	resp, err := do(ctx, c.Client, c.UserAgent, request{Method: http.MethodGet, URL: u.String()})
	if err != nil {
		return err
	}
	if resp.Status < 200 || resp.Status > 299 {
		return fmt.Errorf("callback answered HTTP %d", resp.Status)
	}
	if strings.TrimSpace(string(resp.Body)) != challenge {
		return errors.New("callback did not echo the challenge")
	}
	return nil
}

// notify sends one notification in the registration's protocol and
// judges the answer by rssCloud's rule (rsscloud.CheckAnswer).
func (c *RSSCloud) notify(ctx context.Context, sub *hub.Subscription, resource string) (int, error) {
	n, err := rsscloud.EncodeNotification(sub.Options.Protocol, sub.Options.Procedure, resource)
	if err != nil {
		return 0, err
	}
	r := request{Method: http.MethodPost, URL: sub.Address, ContentType: n.ContentType, Body: n.Body, Header: n.Header}
	resp, err := do(ctx, c.Client, c.UserAgent, r)
	if err != nil {
		return resp.Status, err
	}
	return resp.Status, rsscloud.CheckAnswer(rsscloud.Notify, sub.Options.Protocol, resp.Status, resp.Body)
}
