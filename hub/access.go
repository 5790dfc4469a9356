package hub

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
)

// IsAdmin reports whether the bare JID is one of the configured admins.
func (u *AccessUseCases) IsAdmin(bareJID string) bool {
	return u.admins[bareJID]
}

// OwnerAffiliations is Affiliations with the admins, who own every node,
// listed as owners: the affiliations as XMPP owners see them.
func (u *AccessUseCases) OwnerAffiliations(ctx context.Context, n *Node) (map[string]Affiliation, error) {
	affs, err := u.Affiliations(ctx, n)
	if err != nil {
		return nil, err
	}
	if affs == nil {
		affs = map[string]Affiliation{}
	}
	for j := range u.admins {
		affs[j] = AffOwner
	}
	return affs, nil
}

// MaySubscribe reports whether the bare JID may have an XMPP subscription
// to the node: ErrForbidden for an outcast, ErrNotMember when the node is
// closed to it.
func (u *AccessUseCases) MaySubscribe(ctx context.Context, n *Node, bareJID string) error {
	aff, err := u.AffiliationOf(ctx, n, bareJID)
	if err != nil {
		return err
	}
	if aff == AffOutcast {
		return fmt.Errorf("%w: %s is banned from %q", ErrForbidden, bareJID, n.Name)
	}
	if !aff.MayRead(n.AccessModel) {
		return ErrNotMember
	}
	return nil
}

// IsOwner reports whether the bare JID owns the node: an admin, or a JID
// with the owner affiliation.
func (u *AccessUseCases) IsOwner(ctx context.Context, node *Node, bareJID string) (bool, error) {
	if u.IsAdmin(bareJID) {
		return true, nil
	}
	a, err := u.stores.Affiliations.Affiliation(ctx, node.ID, bareJID)
	if err != nil {
		return false, err
	}
	return a == AffOwner, nil
}

// AffiliationOf returns the bare JID's affiliation, admins being owners.
func (u *AccessUseCases) AffiliationOf(ctx context.Context, node *Node, bareJID string) (Affiliation, error) {
	if u.IsAdmin(bareJID) {
		return AffOwner, nil
	}
	return u.stores.Affiliations.Affiliation(ctx, node.ID, bareJID)
}

// RotateToken issues a new bearer token for the node.
func (u *AccessUseCases) RotateToken(ctx context.Context, name string) (string, error) {
	token := randomToken(24)
	if err := u.stores.Nodes.SetNodeToken(ctx, name, HashToken(token)); err != nil {
		return "", err
	}
	return token, nil
}

// IsAdminToken reports, in constant time, whether token is the admin token.
func (u *AccessUseCases) IsAdminToken(token string) bool {
	if !u.hasAdmin || token == "" {
		return false
	}
	sum := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(sum[:], u.adminHash[:]) == 1
}

// Authorize reports whether token is the node's token or the admin token.
func (u *AccessUseCases) Authorize(node *Node, token string) bool {
	if token == "" {
		return false
	}
	if u.IsAdminToken(token) {
		return true
	}
	if len(node.TokenHash) == 0 {
		return false
	}
	return subtle.ConstantTimeCompare(HashToken(token), node.TokenHash) == 1
}

// HashToken is how tokens are stored: SHA-256, enough for random tokens.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

func randomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// RandomID returns a random identifier (challenges, subscription ids).
func RandomID() string { return randomToken(16) }

// JIDAffiliations lists the bare JID's affiliations on every node, by
// node name, in one query; admins, who own every node, are not listed as
// owners of each (AffiliationOf tells).
func (u *AccessUseCases) JIDAffiliations(ctx context.Context, bareJID string) ([]NodeAffiliation, error) {
	return u.stores.Affiliations.JIDAffiliations(ctx, bareJID)
}

// Affiliations lists a node's affiliations.
func (u *AccessUseCases) Affiliations(ctx context.Context, node *Node) (map[string]Affiliation, error) {
	return u.stores.Affiliations.Affiliations(ctx, node.ID)
}

// SetAffiliation sets a bare JID's affiliation on a node. When the new
// affiliation no longer lets the JID read the node, its XMPP subscriptions
// are removed and a revoke event tells it so.
func (u *AccessUseCases) SetAffiliation(ctx context.Context, node *Node, bareJID string, a Affiliation) error {
	if !a.Valid() {
		return fmt.Errorf("%w: affiliation %q", ErrInvalid, a)
	}
	if bareJID == "" || strings.Contains(bareJID, "/") {
		return fmt.Errorf("%w: affiliations are set on bare JIDs, not %q", ErrInvalid, bareJID)
	}
	if err := u.stores.Affiliations.SetAffiliation(ctx, node.ID, bareJID, a); err != nil {
		return err
	}
	if a.MayRead(node.AccessModel) || u.IsAdmin(bareJID) {
		return nil
	}
	return u.revoke(ctx, node, SubscriptionFilter{BareJID: bareJID})
}

// RevokeSubscriptions removes the bare JID's XMPP subscriptions to the node
// and appends a revoke event that tells it so, whatever its affiliation and
// the node's access model: a GetPingd unsubscribe request removes them on an
// open node too.
func (u *AccessUseCases) RevokeSubscriptions(ctx context.Context, node *Node, bareJID string) error {
	if bareJID == "" || strings.Contains(bareJID, "/") {
		return fmt.Errorf("%w: subscriptions are revoked for bare JIDs, not %q", ErrInvalid, bareJID)
	}
	return u.revoke(ctx, node, SubscriptionFilter{BareJID: bareJID})
}

// RevokeSubscription removes the XMPP subscription of the JID address (as
// it subscribed, full or bare) on an owner's word (XEP-0060 §8.8.2) and
// appends a revoke event that tells it so (§8.8.4). Without such a
// subscription nothing changes and nobody is told.
func (u *AccessUseCases) RevokeSubscription(ctx context.Context, node *Node, address string) error {
	if address == "" {
		return fmt.Errorf("%w: empty subscriber address", ErrInvalid)
	}
	return u.revoke(ctx, node, SubscriptionFilter{Address: address})
}

// revoke removes the node's XMPP subscriptions matching f (its address or
// bare JID) and appends one revoke event per subscription removed, with
// the message type of a reader of plain messages (Event.PlainType).
func (u *AccessUseCases) revoke(ctx context.Context, node *Node, f SubscriptionFilter) error {
	f.NodeID, f.Kind = node.ID, KindXMPP
	removed, err := u.stores.Subscriptions.DeleteSubscriptions(ctx, f)
	if err != nil {
		return err
	}
	if len(removed) == 0 {
		return nil
	}
	events := make([]Event, 0, len(removed))
	for _, s := range removed {
		ev := Event{Kind: EventRevoke, Address: s.Address}
		if s.Options.Format == FormatMessage {
			ev.PlainType = MessageTypeOf(node, s.Options)
		}
		events = append(events, ev)
	}
	if _, err := u.stores.Log.Append(ctx, node.ID, events); err != nil {
		return err
	}
	u.wake(node.ID, KindXMPP)
	return nil
}
