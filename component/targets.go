package component

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/ratelimit"
)

// subscriptionTargets finds what a user names when subscribing by chat
// or ad-hoc command, and subscribes and unsubscribes them; it creates a
// node for a new feed when nodeCreation allows it.
type subscriptionTargets struct {
	nodeAccess
	log *slog.Logger
	// resolver: see Config.
	resolver hub.SourceResolver
	// creation says who may have nodes created for new feeds
	// (opensources.go).
	creation *nodeCreation
	// lookups bound each JID's page look-ups (limits.go).
	lookups *ratelimit.Lookups
}

// What a user names when subscribing by chat or ad-hoc command: a node,
// or the URL of a feed or of a page that links to one. Both interfaces
// share these answers, written for people.

// isWebURL reports whether s looks like an absolute http(s) URL.
func isWebURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// findTarget finds the node a user (bare) names. With create, a URL no
// node follows gets one when the operator allows it for that user
// (opensources.go). It returns the node, or nil and a plain answer saying
// why not.
func (t *subscriptionTargets) findTarget(ctx context.Context, bare, target string, create bool) (*hub.Node, string, error) {
	target = strings.TrimSpace(target)
	if target == "" {
		return nil, `Which node or feed? Send "nodes" to see the nodes.`, nil
	}
	if !isWebURL(target) {
		n, msg, err := t.chatNode(ctx, target)
		if n == nil && err == nil && create && target != "" {
			// Subscribing takes a URL too: say so to whoever
			// mistyped a node or did not know.
			msg = fmt.Sprintf("There is no node called %q. Send \"nodes\" to see them, or subscribe to a feed or web page by its URL (subscribe https://example.org/feed.xml).", target)
		}
		return n, msg, err
	}
	// A node named by the URL, or one following it: no fetch needed.
	if n, err := t.hub.Node(ctx, target); err == nil {
		return n, "", nil
	}
	n, err := t.hub.NodeForURL(ctx, target, false)
	if err == nil {
		return n, "", nil
	}
	if !errors.Is(err, hub.ErrNotFound) {
		return nil, invalidURLAnswer(target, err), nilUnlessInternal(err)
	}
	// Finding a page's feed fetches it: only for those who may add feeds,
	// so a stranger cannot have pingd fetch pages of its choosing.
	if msg := t.creation.creationRefused(bare, target); msg != "" {
		if !create {
			msg = fmt.Sprintf("No node follows %s.", target)
		}
		return nil, msg, nil
	}
	feedURL := target
	if t.resolver != nil {
		res, msg := t.lookUp(ctx, bare, target, create)
		if msg != "" {
			return nil, msg, nil
		}
		if res.FeedURL != "" {
			feedURL = res.FeedURL
		}
		if feedURL != target {
			if n, err := t.hub.NodeForURL(ctx, feedURL, false); err == nil {
				return n, "", nil
			}
		}
	}
	if !create {
		return nil, fmt.Sprintf("No node follows %s.", target), nil
	}
	if msg, err := t.creation.mayCreateNode(ctx, bare, feedURL); msg != "" || err != nil {
		return nil, msg, err
	}
	n, err = t.hub.NodeForURL(ctx, feedURL, true)
	if err != nil {
		return nil, invalidURLAnswer(feedURL, err), nilUnlessInternal(err)
	}
	t.log.InfoContext(ctx, "node created for a feed a user named", "node", n.Name, "source", feedURL, "named", target, "jid", bare)
	return n, "", nil
}

// lookUp finds the feed of the page target, for bare: a look-up with
// its own bounds (limits.go), refused before any request when bare has
// spent its budget or too many run at once, and abandoned when the
// stream the answer would go to ends. It returns the source, or a plain
// answer saying why there is none.
func (t *subscriptionTargets) lookUp(ctx context.Context, bare, target string, create bool) (*hub.ResolvedSource, string) {
	lk, err := t.lookups.Begin(ctx, bare, !t.hub.IsAdmin(bare))
	if err != nil {
		t.log.InfoContext(ctx, "page look-up refused", "jid", bare, "url", target, "reason", err.Error())
		if refused := (*ratelimit.LookupRefused)(nil); errors.As(err, &refused) {
			return nil, lookupRefusedAnswer(target, refused)
		}
		return nil, fmt.Sprintf("pingd did not look at %s: it is busy. Please try again in a minute.", target)
	}
	defer lk.End()
	lctx, stop := streamWork(lk.Context())
	defer stop()
	// Fetching the page (and what it points to) takes as long as its
	// server does, up to the look-up's deadline: the pool lets another
	// worker run meanwhile.
	ended := hub.StartSlowWait(lctx)
	res, rerr := t.resolver.ResolveSource(lctx, target)
	ended()
	var refused *ratelimit.LookupRefused
	switch {
	case rerr != nil && errors.As(rerr, &refused):
		t.log.InfoContext(ctx, "page look-up cut: per-JID budget", "jid", bare, "url", target, "requests", lk.Requests())
		return nil, lookupRefusedAnswer(target, refused)
	case rerr != nil && !create:
		return nil, fmt.Sprintf("No node follows %s.", target)
	case rerr != nil && lk.Context().Err() != nil && ctx.Err() == nil:
		t.log.InfoContext(ctx, "page look-up timed out", "jid", bare, "url", target, "requests", lk.Requests())
		return nil, fmt.Sprintf("pingd could not reach %s: it did not answer in time.", hostOf(target))
	case rerr != nil:
		t.log.InfoContext(ctx, "no feed found for a URL a user named", "url", target, "err", rerr)
		return nil, readErrorAnswer(target, rerr)
	}
	return res, ""
}

// nilUnlessInternal keeps an error only when it is pingd's own failure,
// not a refusal to explain to the user.
func nilUnlessInternal(err error) error {
	if errors.Is(err, hub.ErrInvalid) || errors.Is(err, hub.ErrExists) || errors.Is(err, hub.ErrNotFound) || errors.Is(err, hub.ErrLimit) {
		return nil
	}
	return err
}

// subscribeTarget subscribes bare to the node target names, with opts.
// An existing subscription keeps its options unless change (nil: keep)
// gives other ones.
func (t *subscriptionTargets) subscribeTarget(ctx context.Context, bare, target string, opts hub.Options, change func(hub.Options) hub.Options, via string) (string, error) {
	n, msg, err := t.findTarget(ctx, bare, target, true)
	if n == nil {
		return msg, err
	}
	sub, existed, err := t.hub.Subscribe(ctx, hub.Subscription{NodeName: n.Name, Kind: hub.KindXMPP, Address: bare, BareJID: bare, Options: opts})
	switch {
	case errors.Is(err, hub.ErrNotMember):
		return fmt.Sprintf("The node %q is closed: only JIDs on its whitelist may subscribe. Ask its owner to add you.", n.Name), nil
	case errors.Is(err, hub.ErrForbidden):
		return fmt.Sprintf("You may not subscribe to %q: its owner has banned you.", n.Name), nil
	case errors.Is(err, hub.ErrNodeResourcesFull):
		return fmt.Sprintf("You cannot subscribe to %q from one more address: your account has as many subscriptions to it as this service allows. Unsubscribe one of them first.", n.Name), nil
	case errors.Is(err, hub.ErrAccountSubscriptionsFull):
		return fmt.Sprintf("You cannot subscribe to %q: your account has as many subscriptions as this service allows. Unsubscribe from a node you no longer read first.", n.Name), nil
	case err != nil:
		return "", err
	case existed:
		if change != nil {
			if opts := change(sub.Options); !sameXMPPOptions(opts, sub.Options) {
				if _, err := t.hub.SetSubscriptionOptions(ctx, *sub, opts); err != nil {
					return "", err
				}
				return fmt.Sprintf("You are already subscribed to %q; your notification settings are updated.", n.Name), nil
			}
		}
		return fmt.Sprintf("You are already subscribed to %q.", n.Name), nil
	}
	t.log.InfoContext(ctx, "XMPP subscription by "+via, "node", n.Name, "jid", bare)
	answer := fmt.Sprintf("Subscribed to %q: its new entries will come to %s.", n.Name, bare)
	if n.Title != "" {
		answer = fmt.Sprintf("Subscribed to %q (%s): its new entries will come to %s.", n.Name, n.Title, bare)
	}
	switch sent, err := t.sendLastAfterAnswer(ctx, n, sub); {
	case err != nil:
		return "", err
	case sent:
		answer += " Its newest entry follows."
	case n.SendLastPublished != hub.SendLastNever:
		answer += " It has no entry yet: the first comes when it changes."
	}
	return answer, nil
}

// sendLastAfterAnswer has the node's newest item sent to a new
// subscription once the answer is written (XEP-0060 §12.5, on_sub), so
// the subscriber sees at once that the subscription works; it reports
// whether there is one to send.
func (t *subscriptionTargets) sendLastAfterAnswer(ctx context.Context, n *hub.Node, sub *hub.Subscription) (bool, error) {
	if n.SendLastPublished == hub.SendLastNever {
		return false, nil
	}
	items, err := t.hub.Items(ctx, n, nil, 1)
	if err != nil || len(items) == 0 {
		return false, err
	}
	s := *sub
	afterAnswer(ctx, func(ctx context.Context) {
		if _, err := t.hub.SendLastPublished(ctx, &s); err != nil {
			t.log.ErrorContext(ctx, "send the newest item to a new subscriber", "node", n.Name, "jid", s.Address, "err", err)
		}
	})
	return true, nil
}

// unsubscribeTarget removes bare's subscriptions to the node target names.
func (t *subscriptionTargets) unsubscribeTarget(ctx context.Context, bare, target, via string) (string, error) {
	n, msg, err := t.findTarget(ctx, bare, target, false)
	if n == nil {
		return msg, err
	}
	subs, err := t.hub.Subscriptions(ctx, hub.SubscriptionFilter{NodeID: n.ID, Kind: hub.KindXMPP, BareJID: bare})
	if err != nil {
		return "", err
	}
	if len(subs) == 0 {
		return fmt.Sprintf("You are not subscribed to %q.", n.Name), nil
	}
	for _, s := range subs {
		if _, err := t.hub.Unsubscribe(ctx, n.Name, hub.KindXMPP, s.Address); err != nil && !errors.Is(err, hub.ErrNotFound) {
			return "", err
		}
	}
	t.log.InfoContext(ctx, "XMPP unsubscription by "+via, "node", n.Name, "jid", bare)
	return fmt.Sprintf("Unsubscribed from %q.", n.Name), nil
}
