package delivery

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/beevik/etree"

	"github.com/pingd/pingd/feed"
	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/getpingd"
	"github.com/pingd/pingd/internal/nodeurl"
	"github.com/pingd/pingd/internal/websub"
)

// atomMediaType is what Atom documents are sent as.
const atomMediaType = "application/atom+xml"

// HTTPSender is what the HTTP-based senders share: the guarded client and
// the addresses pingd signs its requests with.
type HTTPSender struct {
	Client    *http.Client
	PublicURL string
	UserAgent string
	// RetryWindow overrides the 24-hour retry window (tests).
	RetryWindow time.Duration
}

func (h *HTTPSender) links(node *hub.Node) (nodeurl.Links, error) {
	return nodeurl.NodeLinks(h.PublicURL, node.Name)
}

func (h *HTTPSender) window() time.Duration {
	if h.RetryWindow > 0 {
		return h.RetryWindow
	}
	return 24 * time.Hour
}

// Webhook delivers to GetPingd HTTP subscribers: each change as an Atom
// feed document of the new entries, or as an XML patch of the node's
// previous Atom document, with the method they asked for.
type Webhook struct{ HTTPSender }

// Wants takes items, and retractions and purges for patch subscribers.
func (w *Webhook) Wants(sub *hub.Subscription, ev hub.Event) bool {
	switch ev.Kind {
	case hub.EventItem:
		return true
	case hub.EventRetract, hub.EventPurge:
		return getpingd.IsPatch(sub.Options.Diff)
	}
	return false
}

// Policy: retried for 24 hours with a last retry; 410 removes.
func (w *Webhook) Policy() Policy { return Policy{RetryWindow: w.window()} }

// Verify asks the callback to echo a challenge (GetPingd follows WebSub's
// verification of intent), with the node's descriptor URL as the topic.
func (w *Webhook) Verify(ctx context.Context, sub *hub.Subscription, node *hub.Node, mode string) (time.Time, error) {
	links, err := w.links(node)
	if err != nil {
		return time.Time{}, err
	}
	return time.Time{}, verifyIntent(ctx, w.Client, w.UserAgent, sub.Address, url.Values{
		"hub.mode": {mode}, "hub.topic": {links.Descriptor},
	})
}

// Deliver sends the new entries (or the patch) in one request.
func (w *Webhook) Deliver(ctx context.Context, d *Delivery) Result {
	links, err := d.Links(w.PublicURL)
	if err != nil {
		return Result{Err: err}
	}
	patch := getpingd.IsPatch(d.Sub.Options.Diff)
	variant := getpingd.DiffNone
	if patch {
		variant = d.Sub.Options.Diff
	}
	body, contentType, err := d.Render(variant, func() ([]byte, string, error) {
		if patch {
			b, err := patchOf(d.Node, feed.NodeFeedMeta(d.Node, links, time.Now().UTC()), d.Events)
			return b, d.Sub.Options.Diff, err
		}
		items, _ := latestItems(d.Events)
		if len(items) == 0 {
			return nil, "", nil // only retractions, which a full-entries subscriber does not get
		}
		return feed.AtomFeed(feed.NodeFeedMeta(d.Node, links, time.Now().UTC()), items), atomMediaType, nil
	})
	if err != nil {
		return Result{Err: err}
	}
	if body == nil {
		return Result{}
	}
	method := d.Sub.Options.Method
	if method == "" {
		method = getpingd.WebhookMethodPost
	}
	header := http.Header{}
	header.Set("Link", websub.LinkHeader(links.Hub, links.Descriptor))
	if secret := d.Sub.Options.Secret; secret != "" {
		sig, err := websub.Sign("sha256", secret, body)
		if err != nil {
			return Result{Err: err}
		}
		header.Set("X-Hub-Signature", sig)
	}
	resp, err := do(ctx, w.Client, w.UserAgent, request{Method: method, URL: d.Sub.Address, ContentType: contentType, Body: body, Header: header})
	if err != nil {
		return Result{Err: err}
	}
	return judge(resp)
}

// NodePatch renders a batch of a node's log events as the XML patch a
// GetPingd subscriber with diff="application/patch-ops+xml" gets for it
// (patchOf), against the node's Atom document under publicURL. cmd/pingd
// hands it to the XMPP component, whose subscriptions may ask for the
// same patches.
func NodePatch(publicURL string, node *hub.Node, events []hub.Event) ([]byte, error) {
	links, err := nodeurl.NodeLinks(publicURL, node.Name)
	if err != nil {
		return nil, err
	}
	return patchOf(node, feed.NodeFeedMeta(node, links, time.Now().UTC()), events)
}

// patchOf renders a batch of events as an XML patch of the node's Atom
// document as it was before the batch. Retractions become <remove>s only
// for the entries that document held: those whose first event in the
// batch is their retraction (pingd retracts only current items); an entry
// both published and retracted within the batch is left out. A purge
// removes entries the batch does not name, so a batch with one replaces
// the whole document with the entries published after the last purge.
func patchOf(node *hub.Node, meta feed.FeedMeta, events []hub.Event) ([]byte, error) {
	lastPurge := -1
	for i, ev := range events {
		if ev.Kind == hub.EventPurge {
			lastPurge = i
		}
	}
	if lastPurge >= 0 {
		items, _ := latestItems(events[lastPurge+1:])
		if node.MaxItems > 0 && len(items) > node.MaxItems {
			items = items[:node.MaxItems]
		}
		return replaceFeedPatch(feed.AtomFeed(meta, items))
	}
	items, _ := latestItems(events)
	first := map[string]bool{}
	var removed []string
	for _, ev := range events {
		if ev.Kind != hub.EventItem && ev.Kind != hub.EventRetract || first[ev.ItemID] {
			continue
		}
		first[ev.ItemID] = true
		if ev.Kind == hub.EventRetract {
			removed = append(removed, ev.ItemID)
		}
	}
	return feed.Patch(items, removed), nil
}

// replaceFeedPatch is an RFC 7351 patch replacing the whole feed document
// with doc's root.
func replaceFeedPatch(doc []byte) ([]byte, error) {
	d := etree.NewDocument()
	if err := d.ReadFromBytes(doc); err != nil || d.Root() == nil {
		return nil, fmt.Errorf("render the replacement feed: %v", err)
	}
	out := etree.NewDocument()
	out.CreateProcInst("xml", `version="1.0" encoding="utf-8"`)
	p := out.CreateElement("p:patch")
	p.CreateAttr("xmlns:p", feed.PatchNS)
	p.CreateAttr("xmlns:a", feed.AtomNS)
	r := p.CreateElement("p:replace")
	r.CreateAttr("sel", "/a:feed")
	r.AddChild(d.Root())
	b, err := out.WriteToBytes()
	if err != nil {
		return nil, fmt.Errorf("write the replacement patch: %w", err)
	}
	return b, nil
}

// judge maps an answer to a result: 2xx is delivered unless its body
// says false; 410 removes; anything else is retried.
func judge(resp response) Result {
	switch {
	case resp.Status == http.StatusGone:
		return Result{Status: resp.Status, Err: errStatus(resp.Status), Remove: true}
	case resp.Status >= 200 && resp.Status <= 299:
		if strings.EqualFold(strings.TrimSpace(string(resp.Body)), "false") {
			return Result{Status: resp.Status, Err: fmt.Errorf("receiver answered false"), Remove: true}
		}
		return Result{Status: resp.Status}
	default:
		return Result{Status: resp.Status, Err: errStatus(resp.Status)}
	}
}
