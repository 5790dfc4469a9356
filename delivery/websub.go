package delivery

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/nodeurl"
	"github.com/pingd/pingd/internal/websub"
)

// webSubBaselineWait bounds how long the check of a new subscription waits
// for the first fetch of its topic, to deny a topic pingd cannot fetch.
const webSubBaselineWait = 15 * time.Second

// WebSub distributes content to WebSub subscribers (W3C Recommendation
// §5–§8): verification of intent with the lease echoed, denial notices,
// and for each change the new entries in the topic's own format (or, for
// a topic that is not a feed, its whole new content), with the topic's
// content type, Link rel="hub" and rel="self", and X-Hub-Signature when
// the subscriber gave a secret.
type WebSub struct {
	HTTPSender
	Store SourceReader
	// Now is the clock of leases; nil means time.Now.
	Now func() time.Time
	// BaselineWait overrides how long a new subscription's check waits for
	// the topic's first fetch (tests).
	BaselineWait time.Duration
}

func (w *WebSub) now() time.Time {
	if w.Now != nil {
		return w.Now().UTC()
	}
	return time.Now().UTC()
}

// Wants takes new items only: WebSub distributes content, not removals.
func (w *WebSub) Wants(_ *hub.Subscription, ev hub.Event) bool { return ev.Kind == hub.EventItem }

// Policy: retried for 24 hours with a last retry; 410 removes.
func (w *WebSub) Policy() Policy { return Policy{RetryWindow: w.window()} }

// Verify handles a pending request. A request pingd refused gets the
// denial notice (hub.mode=denied with hub.reason), and so does a topic
// (other than pingd's own feeds of the node) whose first fetch failed;
// otherwise the callback must echo the challenge of a GET with hub.mode,
// hub.topic and, for subscribes, hub.lease_seconds. It returns the end of
// the lease.
func (w *WebSub) Verify(ctx context.Context, sub *hub.Subscription, node *hub.Node, mode string) (time.Time, error) {
	topic := w.topic(sub, node)
	if mode == "subscribe" {
		reason := sub.Options.Verify[websub.VerifyDenied]
		if _, own := nodeurl.OwnNodeName(w.PublicURL, topic); reason == "" && !own {
			// pingd's own feed of the node is there whatever its source
			// does; only a topic that is the source itself can fail.
			reason = w.unservable(ctx, node)
		}
		if reason != "" {
			if err := w.deny(ctx, sub.Address, topic, reason); err != nil {
				return time.Time{}, fmt.Errorf("denied (%s); the denial notice failed: %w", reason, err)
			}
			return time.Time{}, fmt.Errorf("denied: %s", reason)
		}
	}
	lease := sub.Options.LeaseSeconds
	if lease <= 0 {
		lease = websub.DefaultLease
	}
	params := url.Values{"hub.mode": {mode}, "hub.topic": {topic}}
	if mode == "subscribe" {
		params.Set("hub.lease_seconds", strconv.Itoa(lease))
	}
	if err := verifyIntent(ctx, w.Client, w.UserAgent, sub.Address, params); err != nil {
		return time.Time{}, err
	}
	if mode != "subscribe" {
		return time.Time{}, nil
	}
	return w.now().Add(time.Duration(lease) * time.Second), nil
}

// unservable waits (briefly) for the first fetch of the node's source and
// returns why its content cannot be served, or "".
func (w *WebSub) unservable(ctx context.Context, node *hub.Node) string {
	if node.SourceID == 0 || w.Store == nil {
		return ""
	}
	wait := w.BaselineWait
	if wait <= 0 {
		wait = webSubBaselineWait
	}
	deadline := time.Now().Add(wait)
	for {
		src, err := w.Store.Source(ctx, node.SourceID)
		if err != nil {
			return "" // not the subscriber's fault: verify and let fetches retry
		}
		switch {
		case src.Gone:
			return "the topic is gone (HTTP 410)"
		case src.Baselined:
			return ""
		case !src.LastFetchAt.IsZero() && src.LastError != "":
			return "the topic cannot be fetched: " + src.LastError
		}
		if time.Now().After(deadline) {
			return "" // not fetched yet: the subscription may wait for it
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ""
		case <-t.C:
		}
	}
}

// deny sends the denial notice (§5.2): a GET with hub.mode=denied,
// hub.topic and hub.reason. Its answer does not matter.
func (w *WebSub) deny(ctx context.Context, callback, topic, reason string) error {
	u, err := url.Parse(callback)
	if err != nil {
		return fmt.Errorf("callback URL: %w", err)
	}
	q := u.Query()
	q.Set("hub.mode", "denied")
	q.Set("hub.topic", topic)
	q.Set("hub.reason", reason)
	u.RawQuery = q.Encode()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = do(dctx, w.Client, w.UserAgent, request{Method: http.MethodGet, URL: u.String()})
	return err
}

// topic is the topic URL as the subscriber named it.
func (w *WebSub) topic(sub *hub.Subscription, node *hub.Node) string {
	links, err := w.links(node)
	if err != nil && sub.Options.Topic == "" {
		return node.SourceURL
	}
	return topicOf(sub, links)
}

// topicOf is the topic given the node's links: as the subscriber named
// it, else pingd's own Atom feed of the node.
func topicOf(sub *hub.Subscription, links nodeurl.Links) string {
	if sub.Options.Topic != "" {
		return sub.Options.Topic
	}
	return links.Atom
}

// Deliver sends the content of the change.
func (w *WebSub) Deliver(ctx context.Context, d *Delivery) Result {
	if !d.Sub.ExpiresAt.IsZero() && !w.now().Before(d.Sub.ExpiresAt) {
		return Result{Err: errors.New("lease expired"), Remove: true}
	}
	links, err := d.Links(w.PublicURL)
	if err != nil {
		return Result{Err: err}
	}
	topic := topicOf(d.Sub, links)
	body, contentType, err := d.Render(topic, func() ([]byte, string, error) { return w.content(ctx, d, topic) })
	if err != nil {
		return Result{Err: err}
	}
	if body == nil {
		return Result{}
	}
	header := http.Header{}
	header.Set("Link", websub.LinkHeader(links.Hub, topic))
	if secret := d.Sub.Options.Secret; secret != "" {
		sig, err := websub.Sign(d.Sub.Options.SigAlgo, secret, body)
		if err != nil {
			return Result{Err: err}
		}
		header.Set("X-Hub-Signature", sig)
	}
	resp, err := do(ctx, w.Client, w.UserAgent, request{Method: http.MethodPost, URL: d.Sub.Address, ContentType: contentType, Body: body, Header: header})
	if err != nil {
		return Result{Err: err}
	}
	if resp.Status == http.StatusGone {
		return Result{Status: resp.Status, Err: errStatus(resp.Status), Remove: true}
	}
	if resp.Status < 200 || resp.Status > 299 {
		return Result{Status: resp.Status, Err: errStatus(resp.Status)}
	}
	return Result{Status: resp.Status}
}

// content renders what a change of the topic looks like to a subscriber:
// pingd's own Atom or RSS feed of the new items, a feed source's new items
// in its own format, or a non-feed source's current representation.
func (w *WebSub) content(ctx context.Context, d *Delivery, topic string) ([]byte, string, error) {
	links, err := d.Links(w.PublicURL)
	if err != nil {
		return nil, "", err
	}
	items, _ := latestItems(d.Events)
	if len(items) == 0 {
		return nil, "", nil
	}
	meta := feed.NodeFeedMeta(d.Node, links, time.Now().UTC())
	switch {
	case topic == links.RSS:
		meta.SelfURL = links.RSS
		return feed.RSSFeed(meta, nil, 0, items), "application/rss+xml", nil
	case topic == links.Atom || topic == links.Descriptor || d.Node.SourceID == 0:
		return feed.AtomFeed(meta, items), atomMediaType, nil
	}
	src, err := w.Store.Source(ctx, d.Node.SourceID)
	if err != nil {
		return nil, "", err
	}
	ct := src.ContentType
	if !src.IsFeed {
		if ct == "" {
			ct = "application/octet-stream"
		}
		return src.Body, ct, nil
	}
	// The source's own feed: pingd's descriptor and the owner's polling
	// hints describe pingd's feeds of the node, not this one.
	meta.ID, meta.SelfURL = topic, topic
	meta.DescriptorURL, meta.Polling = "", hub.FeedPolling{}
	if mt, _, _ := mime.ParseMediaType(ct); strings.Contains(mt, "rss") || strings.Contains(mt, "rdf") || hub.LooksLikeRSS(src.Body) {
		if ct == "" {
			ct = "application/rss+xml"
		}
		return feed.RSSFeed(meta, nil, 0, items), ct, nil
	}
	return feed.AtomFeed(meta, items), atomMediaType, nil
}
