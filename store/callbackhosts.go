package store

import (
	"context"
	"fmt"

	"github.com/pingd/pingd/hub"
)

// fillCallbackHosts gives the subscriptions stored before migration
// callback_hosts their callback's host (hub.CallbackHost), which SQL cannot
// take apart the way the hub does.
func fillCallbackHosts(ctx context.Context, tx *txn) error {
	type sub struct {
		id            int64
		kind, address string
	}
	var subs []sub
	rows, err := tx.QueryContext(ctx, `SELECT id, kind, address FROM subscriptions WHERE kind <> 'xmpp' ORDER BY id`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var s sub
		if err := rows.Scan(&s.id, &s.kind, &s.address); err != nil {
			rows.Close()
			return err
		}
		subs = append(subs, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, s := range subs {
		host := hub.CallbackHost(hub.Kind(s.kind), s.address)
		if host == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE subscriptions SET callback_host = $1 WHERE id = $2`, host, s.id); err != nil {
			return fmt.Errorf("subscription %d: %w", s.id, err)
		}
	}
	return nil
}

// CountCallbackHostSubscriptions counts the subscriptions whose callback
// is on host; see hub.SubscriptionStore.
func (s *sqlStore) CountCallbackHostSubscriptions(ctx context.Context, host string) (int, error) {
	var n int
	if err := s.queryRow(ctx, s.read, `SELECT COUNT(*) FROM subscriptions WHERE callback_host = $1`, []any{host}, &n); err != nil {
		return 0, fmt.Errorf("count subscriptions with callbacks on %s: %w", host, err)
	}
	return n, nil
}

// CountXMPPSubscriptions counts the bare JID's XMPP subscriptions, to one
// node or to all; see hub.SubscriptionStore. The query repeats the condition of the
// partial index subscriptions_bare_jid (a bare JID is set), so that both
// databases use it.
func (s *sqlStore) CountXMPPSubscriptions(ctx context.Context, bareJID string, nodeID int64) (int, error) {
	if bareJID == "" {
		return 0, nil
	}
	var n int
	var err error
	if nodeID > 0 {
		err = s.queryRow(ctx, s.read, `SELECT COUNT(*) FROM subscriptions
			WHERE bare_jid = $1 AND bare_jid <> '' AND kind = 'xmpp' AND node_id = $2`, []any{bareJID, nodeID}, &n)
	} else {
		err = s.queryRow(ctx, s.read, `SELECT COUNT(*) FROM subscriptions
			WHERE bare_jid = $1 AND bare_jid <> '' AND kind = 'xmpp'`, []any{bareJID}, &n)
	}
	if err != nil {
		return 0, fmt.Errorf("count the XMPP subscriptions of %s: %w", bareJID, err)
	}
	return n, nil
}
