package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pingd/pingd/hub"
)

// Node deletions (hub.NodeDeletion). Deleting a node with XMPP
// subscriptions writes a row of node_deletions in the same transaction:
// the node's name, title and notification type and its XMPP subscribers,
// what their delete notifications need once the node, its log and its
// subscriptions are gone. The component sends them and forgets the row
// once the XMPP server acknowledged them, so a deletion made while
// disconnected, before a restart or by another process reaches the
// subscribers like an event of the log does.

// deletedSubscriber is one XMPP subscriber of a deleted node, as kept.
type deletedSubscriber struct {
	Address string      `json:"address"`
	Options hub.Options `json:"options"`
}

// recordNodeDeletion writes n's deletion, with its XMPP subscriptions as
// they are in tx, unless it has none.
func (s *sqlStore) recordNodeDeletion(ctx context.Context, tx *txn, n hub.Node) error {
	var subs []deletedSubscriber
	err := s.query(ctx, tx, `SELECT address, options FROM subscriptions WHERE node_id = $1 AND kind = 'xmpp' ORDER BY id`,
		[]any{n.ID}, func(r *sql.Rows) error {
			var d deletedSubscriber
			var options []byte
			if err := r.Scan(&d.Address, &options); err != nil {
				return err
			}
			if len(options) > 0 {
				if err := json.Unmarshal(options, &d.Options); err != nil {
					return fmt.Errorf("subscription of %s: options: %w", d.Address, err)
				}
			}
			subs = append(subs, d)
			return nil
		})
	if err != nil {
		return fmt.Errorf("XMPP subscribers of node %q: %w", n.Name, err)
	}
	if len(subs) == 0 {
		return nil
	}
	doc, err := json.Marshal(subs)
	if err != nil {
		return fmt.Errorf("XMPP subscribers of node %q: %w", n.Name, err)
	}
	if _, err := s.exec(ctx, tx, `INSERT INTO node_deletions (node_id, name, title, notification_type, subscribers, deleted_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, n.ID, n.Name, n.Title, n.NotificationType, string(doc), s.timeArg(time.Now())); err != nil {
		return fmt.Errorf("record deletion of node %q: %w", n.Name, err)
	}
	return nil
}

// NodeDeletions lists the recorded node deletions, oldest first.
func (s *sqlStore) NodeDeletions(ctx context.Context, limit int) ([]hub.NodeDeletion, error) {
	var out []hub.NodeDeletion
	err := s.query(ctx, s.read, `SELECT id, node_id, name, title, notification_type, subscribers, deleted_at
		FROM node_deletions ORDER BY id LIMIT $1`, []any{limit}, func(r *sql.Rows) error {
		var d hub.NodeDeletion
		var doc string
		if err := r.Scan(&d.ID, &d.Node.ID, &d.Node.Name, &d.Node.Title, &d.Node.NotificationType, &doc, tc(&d.DeletedAt)); err != nil {
			return err
		}
		var subs []deletedSubscriber
		if err := json.Unmarshal([]byte(doc), &subs); err != nil {
			return fmt.Errorf("deletion %d: subscribers: %w", d.ID, err)
		}
		for _, sub := range subs {
			d.Subscribers = append(d.Subscribers, hub.Subscription{NodeID: d.Node.ID, NodeName: d.Node.Name,
				Kind: hub.KindXMPP, Address: sub.Address, Options: sub.Options})
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list node deletions: %w", err)
	}
	return out, nil
}

// ForgetNodeDeletions removes recorded node deletions.
func (s *sqlStore) ForgetNodeDeletions(ctx context.Context, ids []int64) error {
	for _, chunk := range chunks(ids) {
		in, inArgs := inList(1, chunk)
		if _, err := s.writeCount(ctx, `DELETE FROM node_deletions WHERE id IN (`+in+`)`, inArgs...); err != nil {
			return fmt.Errorf("forget node deletions: %w", err)
		}
	}
	return nil
}
