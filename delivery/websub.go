package delivery

import (
	"bytes"
	"context"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
)

// WebSub distributes content to WebSub subscribers (W3C Recommendation
// §7 and §8): the new entries in the topic's own format, or for a topic
// that is not a feed its whole new content, signed when a secret was given.
type WebSub struct {
	HTTPSender
	Store hub.Store
}

// Wants takes new items only: WebSub distributes content, not removals.
func (w *WebSub) Wants(_ *hub.Subscription, ev hub.Event) bool { return ev.Kind == hub.EventItem }

// Policy: retried for 24 hours with a last retry; 410 removes.
func (w *WebSub) Policy() Policy { return Policy{RetryWindow: w.window()} }

// Verify does the verification of intent, with the lease for subscribes.
func (w *WebSub) Verify(ctx context.Context, sub *hub.Subscription, node *hub.Node, mode string) (time.Time, error) {
	params := url.Values{"hub.mode": {mode}, "hub.topic": {w.topic(sub, node)}}
	if mode == "subscribe" && sub.Options.LeaseSeconds > 0 {
		params.Set("hub.lease_seconds", strconv.Itoa(sub.Options.LeaseSeconds))
	}
	if err := verifyIntent(ctx, w.Client, w.UserAgent, sub.Address, params); err != nil {
		return time.Time{}, err
	}
	if mode == "subscribe" && sub.Options.LeaseSeconds > 0 {
		return time.Now().UTC().Add(time.Duration(sub.Options.LeaseSeconds) * time.Second), nil
	}
	return time.Time{}, nil
}

// topic is the topic URL as the subscriber named it.
func (w *WebSub) topic(sub *hub.Subscription, node *hub.Node) string {
	if sub.Options.Topic != "" {
		return sub.Options.Topic
	}
	if links, err := w.links(node); err == nil {
		return links.Atom
	}
	return node.SourceURL
}

// Deliver sends the content of the change.
func (w *WebSub) Deliver(ctx context.Context, d *Delivery) Result {
	links, err := w.links(d.Node)
	if err != nil {
		return Result{Err: err}
	}
	topic := w.topic(d.Sub, d.Node)
	body, contentType, err := w.content(ctx, d, topic)
	if err != nil {
		return Result{Err: err}
	}
	if body == nil {
		return Result{}
	}
	header := http.Header{}
	header.Set("Link", linkHeader(links.Hub, topic))
	if secret := d.Sub.Options.Secret; secret != "" {
		sig, err := signature(d.Sub.Options.SigAlgo, secret, body)
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
	links, err := w.links(d.Node)
	if err != nil {
		return nil, "", err
	}
	items, _ := latestItems(d.Events)
	if len(items) == 0 {
		return nil, "", nil
	}
	meta := nodeFeedMeta(d.Node, links)
	switch {
	case topic == links.RSS:
		return feed.RSSFeed(meta, nil, 0, items), "application/rss+xml", nil
	case topic == links.Atom || topic == links.Descriptor || d.Node.SourceID == 0:
		return feed.AtomFeed(meta, items), atomMediaType, nil
	}
	src, err := w.Store.Source(ctx, d.Node.SourceID)
	if err != nil {
		return nil, "", err
	}
	ct := src.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	if !src.IsFeed {
		return src.Body, ct, nil
	}
	meta.SelfURL = topic
	if mt, _, _ := mime.ParseMediaType(ct); strings.Contains(mt, "rss") || strings.Contains(mt, "rdf") || looksLikeRSS(src.Body) {
		return feed.RSSFeed(meta, nil, 0, items), ct, nil
	}
	return feed.AtomFeed(meta, items), atomMediaType, nil
}

// looksLikeRSS reports whether a feed served as generic XML is RSS: its
// root element is <rss> or <rdf:RDF>.
func looksLikeRSS(body []byte) bool {
	head := body[:min(len(body), 2048)]
	return bytes.Contains(head, []byte("<rss")) || bytes.Contains(head, []byte("<rdf:RDF"))
}
