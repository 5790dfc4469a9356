package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pingd/pingd/hub"
)

// Requests that a subscriber verifies (webhooks, WebSub, rssCloud) and the
// pending changes they make of verified subscriptions. A verified
// subscription keeps its settings in its own columns and a request about
// it in the change_* columns until the engine applies or refuses that
// request by its change_id; each request gets a new change_id, so a
// verification answered after a newer request came in applies nothing.
// What a request or a verification does is the hub's rule
// (hub/changerules.go): each method here reads the subscription under its
// transaction, asks the rule and writes the row it decided.

// freeChangeLeaseSQL releases the lease of a change's verification.
const freeChangeLeaseSQL = `change_lease_owner = '', change_lease_until = NULL`

// subKeyWhere selects the subscription of a node, kind and address ($1–$3).
const subKeyWhere = `WHERE s.node_id = $1 AND s.kind = $2 AND s.address = $3`

// subByKey reads and, on PostgreSQL, locks the subscription of a node, kind
// and address; nil when there is none.
func (s *sqlStore) subByKey(ctx context.Context, tx *txn, nodeID int64, kind hub.Kind, address string) (*hub.Subscription, error) {
	got, err := s.subsWhere(ctx, tx, subKeyWhere+s.forUpdateOf("s"), nodeID, string(kind), address)
	if err != nil || len(got) == 0 {
		return nil, err
	}
	return &got[0], nil
}

// subByIDLocked reads and, on PostgreSQL, locks one subscription; nil when
// it is gone.
func (s *sqlStore) subByIDLocked(ctx context.Context, tx *txn, id int64) (*hub.Subscription, error) {
	got, err := s.subsWhere(ctx, tx, `WHERE s.id = $1`+s.forUpdateOf("s"), id)
	if err != nil || len(got) == 0 {
		return nil, err
	}
	return &got[0], nil
}

// writeDecision writes what a rule of hub/changerules.go decided about
// the subscription cur, read (and on PostgreSQL locked) in tx. It reports
// the row's id and whether the row was written: false when nothing was to
// be, or when the row is no longer as read (removed, its state changed,
// or, for an insert, one with its key stored meanwhile).
func (s *sqlStore) writeDecision(ctx context.Context, tx *txn, cur *hub.Subscription, d hub.SubscriptionDecision) (int64, bool, error) {
	switch d.Row {
	case hub.RowInserted:
		return s.insertRequested(ctx, tx, d.Sub)
	case hub.RowUpdated:
		ok, err := s.updateRequestColumns(ctx, tx, cur.State, d.Sub)
		return cur.ID, ok, err
	case hub.RowDeleted:
		n, err := s.execCount(ctx, tx, `DELETE FROM subscriptions WHERE id = $1`, cur.ID)
		return cur.ID, n > 0, err
	default:
		return cur.ID, false, nil
	}
}

// insertRequested stores a requested subscription as a new row; false when
// one with its node, kind and address exists.
func (s *sqlStore) insertRequested(ctx context.Context, tx *txn, sub hub.Subscription) (int64, bool, error) {
	options, err := json.Marshal(sub.Options)
	if err != nil {
		return 0, false, fmt.Errorf("subscription options: %w", err)
	}
	var id int64
	err = s.queryRow(ctx, tx, `INSERT INTO subscriptions (node_id, kind, address, bare_jid, sub_id, state,
		options, expires_at, created_at, updated_at, cursor_seq, change_id, change_requested_at, callback_host)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
		ON CONFLICT (node_id, kind, address) DO NOTHING RETURNING id`,
		[]any{sub.NodeID, string(sub.Kind), sub.Address, sub.BareJID, sub.SubID, string(sub.State),
			string(options), s.timeArg(sub.ExpiresAt), s.timeArg(sub.CreatedAt), s.timeArg(sub.UpdatedAt),
			sub.Cursor, sub.Change.ID, s.timeArg(sub.Change.RequestedAt), hub.CallbackHost(sub.Kind, sub.Address)}, &id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return id, err == nil, err
}

// updateRequestColumns writes a subscription's request fields (those a
// rule changes, hub.SubscriptionDecision) if its row is still in state
// was. An XMPP subscription's failure record is its bounces, kept in
// xmpp_subscription_state, so its row's delivery columns are left alone.
func (s *sqlStore) updateRequestColumns(ctx context.Context, tx *txn, was hub.SubState, sub hub.Subscription) (bool, error) {
	options, err := json.Marshal(sub.Options)
	if err != nil {
		return false, fmt.Errorf("subscription options: %w", err)
	}
	changeOptions, err := json.Marshal(sub.Change.Options)
	if err != nil {
		return false, fmt.Errorf("options of a pending change: %w", err)
	}
	c := &sub.Change
	query := `UPDATE subscriptions SET state = $3, options = $4, sub_id = $5, expires_at = $6, updated_at = $7,
		change_id = $8, change_mode = $9, change_options = $10, change_requested_at = $11, change_outcome = $12,
		change_lease_owner = $13, change_lease_until = $14`
	args := []any{sub.ID, string(was), string(sub.State), string(options), sub.SubID, s.timeArg(sub.ExpiresAt),
		s.timeArg(sub.UpdatedAt), c.ID, c.Mode, string(changeOptions), s.timeArg(c.RequestedAt), c.Outcome,
		c.LeaseOwner, s.timeArg(c.LeaseUntil)}
	if sub.Kind.HTTP() {
		query += `, consecutive_errors = $15, first_failure_at = $16, last_error = $17, next_attempt_at = $18`
		args = append(args, sub.ConsecutiveErrors, s.timeArg(sub.FirstFailureAt), sub.LastError, s.timeArg(sub.NextAttemptAt))
	}
	n, err := s.execCount(ctx, tx, query+` WHERE id = $1 AND state = $2`, args...)
	return n > 0, err
}

// RequestSubscription stores a subscribe request; see hub.SubscriptionStore.
func (s *sqlStore) RequestSubscription(ctx context.Context, sub *hub.Subscription) (hub.RequestOutcome, error) {
	if err := hub.CheckSubscribeRequest(*sub); err != nil {
		return "", err
	}
	sub.State = hub.SubPending // only a verification makes it active
	changeID := hub.RandomID()
	now := time.Now()
	var outcome hub.RequestOutcome
	var stored *hub.Subscription
	err := s.inTx(ctx, func(tx *txn) error {
		var nodeID int64
		if err := s.queryRow(ctx, tx, `SELECT id FROM nodes WHERE id = $1`, []any{sub.NodeID}, &nodeID); err != nil {
			return notFound(err, fmt.Sprintf("node %d", sub.NodeID))
		}
		if err := s.markSubscribed(ctx, tx, sub.NodeID); err != nil {
			return err
		}
		// A subscription removed or added by someone else between the
		// steps sends the loop round again; twice is enough.
		for range 3 {
			cur, err := s.subByKey(ctx, tx, sub.NodeID, sub.Kind, sub.Address)
			if err != nil {
				return err
			}
			d := hub.DecideSubscribeRequest(cur, *sub, changeID, now)
			id, written, err := s.writeDecision(ctx, tx, cur, d)
			if err != nil {
				return err
			}
			if !written {
				continue
			}
			if stored, err = s.subByIDLocked(ctx, tx, id); err != nil {
				return err
			}
			if stored == nil {
				return fmt.Errorf("subscription %d vanished", id)
			}
			outcome = d.Outcome
			return nil
		}
		return fmt.Errorf("the subscription kept changing under the request")
	})
	if err != nil {
		return "", fmt.Errorf("store %s subscription request of %s: %w", sub.Kind, sub.Address, err)
	}
	*sub = *stored
	return outcome, nil
}

// RequestUnsubscription stores an unsubscribe request; see hub.SubscriptionStore.
func (s *sqlStore) RequestUnsubscription(ctx context.Context, nodeID int64, kind hub.Kind, address string) (*hub.Subscription, hub.RequestOutcome, error) {
	changeID := hub.RandomID()
	now := time.Now()
	var outcome hub.RequestOutcome
	var stored *hub.Subscription
	err := s.inTx(ctx, func(tx *txn) error {
		cur, err := s.subByKey(ctx, tx, nodeID, kind, address)
		if err != nil {
			return err
		}
		if cur == nil {
			return fmt.Errorf("no %s subscription of %s: %w", kind, address, hub.ErrNotFound)
		}
		d := hub.DecideUnsubscribeRequest(*cur, changeID, now)
		if _, _, err := s.writeDecision(ctx, tx, cur, d); err != nil {
			return err
		}
		outcome = d.Outcome
		if d.Row == hub.RowDeleted {
			stored = cur // as it was
			return nil
		}
		stored, err = s.subByIDLocked(ctx, tx, cur.ID)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("store %s unsubscription request of %s: %w", kind, address, err)
	}
	return stored, outcome, nil
}

// decideChange reads the subscription id under a transaction, asks decide
// what becomes of it and writes that; it reports whether anything was
// written (false also when the subscription is gone).
func (s *sqlStore) decideChange(ctx context.Context, id int64, decide func(cur hub.Subscription) hub.SubscriptionDecision) (bool, error) {
	written := false
	err := s.inTx(ctx, func(tx *txn) error {
		written = false
		cur, err := s.subByIDLocked(ctx, tx, id)
		if err != nil || cur == nil {
			return err
		}
		_, written, err = s.writeDecision(ctx, tx, cur, decide(*cur))
		return err
	})
	return written, err
}

// ApplySubscriptionChange applies a verified request; see delivery.Store.
func (s *sqlStore) ApplySubscriptionChange(ctx context.Context, id int64, changeID string, expires time.Time) (bool, error) {
	now := time.Now()
	applied, err := s.decideChange(ctx, id, func(cur hub.Subscription) hub.SubscriptionDecision {
		return hub.DecideVerifiedChange(cur, changeID, expires, now)
	})
	if err != nil {
		return false, fmt.Errorf("apply the verified request about subscription %d: %w", id, err)
	}
	return applied, nil
}

// RefuseSubscriptionChange drops a request its subscriber did not verify;
// see delivery.Store.
func (s *sqlStore) RefuseSubscriptionChange(ctx context.Context, id int64, changeID string) (bool, error) {
	refused, err := s.decideChange(ctx, id, func(cur hub.Subscription) hub.SubscriptionDecision {
		return hub.DecideRefusedChange(cur, changeID)
	})
	if err != nil {
		return false, fmt.Errorf("refuse the request about subscription %d: %w", id, err)
	}
	return refused, nil
}

// ReleaseSubscriptionChange gives back the lease of an undecided change's
// verification; see delivery.Store.
func (s *sqlStore) ReleaseSubscriptionChange(ctx context.Context, id int64, changeID, owner string) error {
	if _, err := s.decideChange(ctx, id, func(cur hub.Subscription) hub.SubscriptionDecision {
		return hub.DecideChangeRelease(cur, changeID, owner)
	}); err != nil {
		return fmt.Errorf("release the verification of a change of subscription %d: %w", id, err)
	}
	return nil
}
