package whitelist

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/pingd/pingd/hub"
	"github.com/pingd/pingd/internal/getpingd"
)

// Service applies whitelist requests to the hub. A node's whitelist is its
// XEP-0060 affiliations, so what the HTTP requests, the admin API and the
// owners' XMPP affiliation requests see and change is one and the same.
type Service struct {
	hub *hub.Hub
	log *slog.Logger
}

// NewService returns a Service over the hub; a nil logger means the
// default one.
func NewService(h *hub.Hub, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{hub: h, log: log}
}

// Entry is one JID of a node's whitelist with its affiliation.
type Entry struct {
	JID         string          `json:"jid"`
	Affiliation hub.Affiliation `json:"affiliation"`
}

// Add puts the JID (reduced to its bare JID) on the node's whitelist as a
// member and returns the bare JID.
//
// It needs the node's token or the admin token on a whitelist node. On an
// open node a request without one records nothing: anyone may subscribe
// there over XMPP without a membership (GetPingd: "security none … no
// further interaction is required"), and a membership anyone could create
// would survive a later switch of the node to the whitelist model, letting
// strangers enrol themselves in advance. It only confirms that the JID may
// subscribe; a banned JID (outcast) may not, and lifting the ban needs a
// token. With a token an open node records the member like a whitelist
// node: the owner's grant is meant to last. A JID that is already a member,
// publisher or owner keeps its affiliation. Errors: ErrUnauthorized
// (nothing changed), ErrBadJID, hub.ErrNotFound for an unknown node.
func (s *Service) Add(ctx context.Context, nodeName, jidString, token string) (string, error) {
	n, err := s.hub.Node(ctx, nodeName)
	if err != nil {
		return "", fmt.Errorf("whitelist add to %q: %w", nodeName, err)
	}
	authorised := s.hub.Authorize(n, token)
	if n.AccessModel == hub.AccessWhitelist && !authorised {
		return "", fmt.Errorf("%w: %q is a whitelist node", ErrUnauthorized, nodeName)
	}
	bare, err := BareJID(jidString)
	if err != nil {
		return "", err
	}
	current, err := s.hub.AffiliationOf(ctx, n, bare)
	if err != nil {
		return "", fmt.Errorf("whitelist add %s to %q: %w", bare, nodeName, err)
	}
	switch current {
	case hub.AffOwner, hub.AffPublisher, hub.AffMember:
		return bare, nil // already allowed to read; never demoted
	case hub.AffOutcast:
		if !authorised {
			return "", fmt.Errorf("%w: %s is banned from %q", ErrUnauthorized, bare, nodeName)
		}
	}
	if !authorised {
		return bare, nil // an open node: free to subscribe, nothing to record
	}
	if err := s.hub.SetAffiliation(ctx, n, bare, hub.AffMember); err != nil {
		return "", fmt.Errorf("whitelist add %s to %q: %w", bare, nodeName, err)
	}
	s.log.InfoContext(ctx, "whitelist: member added", "node", nodeName, "jid", bare, "was", current)
	return bare, nil
}

// Remove takes the JID (reduced to its bare JID) off the node's whitelist,
// whatever its affiliation was, and removes its XMPP subscriptions to the
// node; the hub's revoke event tells the subscriber. It always needs the
// node's token or the admin token. Removing a JID that is not on the list
// is not an error. Errors: ErrUnauthorized (nothing changed), ErrBadJID,
// hub.ErrNotFound for an unknown node.
func (s *Service) Remove(ctx context.Context, nodeName, jidString, token string) error {
	n, err := s.hub.Node(ctx, nodeName)
	if err != nil {
		return fmt.Errorf("whitelist remove from %q: %w", nodeName, err)
	}
	if !s.hub.Authorize(n, token) {
		return fmt.Errorf("%w: removing a JID from %q", ErrUnauthorized, nodeName)
	}
	bare, err := BareJID(jidString)
	if err != nil {
		return err
	}
	if err := s.hub.SetAffiliation(ctx, n, bare, hub.AffNone); err != nil {
		return fmt.Errorf("whitelist remove %s from %q: %w", bare, nodeName, err)
	}
	// SetAffiliation revokes only when the JID may no longer read the node;
	// an unsubscribe request ends the subscriptions on an open node too.
	if err := s.hub.RevokeSubscriptions(ctx, n, bare); err != nil {
		return fmt.Errorf("whitelist remove %s from %q: %w", bare, nodeName, err)
	}
	s.log.InfoContext(ctx, "whitelist: removed", "node", nodeName, "jid", bare)
	return nil
}

// List returns the node's affiliations (its whitelist with the owners,
// publishers and banned JIDs), sorted by JID. The admins configured for
// every node are not listed.
func (s *Service) List(ctx context.Context, nodeName string) ([]Entry, error) {
	n, err := s.hub.Node(ctx, nodeName)
	if err != nil {
		return nil, fmt.Errorf("whitelist of %q: %w", nodeName, err)
	}
	affs, err := s.hub.Affiliations(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("whitelist of %q: %w", nodeName, err)
	}
	entries := make([]Entry, 0, len(affs))
	for j, a := range affs {
		if a != hub.AffNone {
			entries = append(entries, Entry{JID: j, Affiliation: a})
		}
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.JID, b.JID) })
	return entries, nil
}

// Apply carries out a parsed request and returns the answer document:
// <subscribed jid="…" node="…"/> or <unsubscribed jid="…" node="…"/>.
func (s *Service) Apply(ctx context.Context, nodeName string, req Request, token string) ([]byte, error) {
	switch req.Action {
	case Subscribe:
		bare, err := s.Add(ctx, nodeName, req.JID, token)
		if err != nil {
			return nil, err
		}
		return getpingd.SubscribedDocument(bare, nodeName), nil
	case Unsubscribe:
		if err := s.Remove(ctx, nodeName, req.JID, token); err != nil {
			return nil, err
		}
		return getpingd.UnsubscribedDocument(req.JID, nodeName), nil
	}
	return nil, fmt.Errorf("%w: unknown action %q", ErrMalformed, req.Action)
}
