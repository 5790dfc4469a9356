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

// cleanRecordSQL clears the failure record and retry time of a
// subscription whose subscriber has just verified a request: errors from
// before a renewal must not suspend or age it at once.
const cleanRecordSQL = `consecutive_errors = 0, first_failure_at = NULL, last_error = '', next_attempt_at = NULL`

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

// RequestSubscription stores a subscribe request; see hub.SubscriptionStore.
func (s *sqlStore) RequestSubscription(ctx context.Context, sub *hub.Subscription) (hub.RequestOutcome, error) {
	if !sub.Kind.HTTP() {
		return "", fmt.Errorf("%w: subscription kind %q has no verified requests", hub.ErrInvalid, sub.Kind)
	}
	if sub.Address == "" {
		return "", fmt.Errorf("%w: empty subscriber address", hub.ErrInvalid)
	}
	sub.State = hub.SubPending // only a verification makes it active
	options, err := json.Marshal(sub.Options)
	if err != nil {
		return "", fmt.Errorf("subscription options: %w", err)
	}
	changeID := hub.RandomID()
	now := s.timeArg(time.Now())
	var outcome hub.RequestOutcome
	var stored *hub.Subscription
	err = s.inTx(ctx, func(tx *txn) error {
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
			var id int64
			switch {
			case cur == nil:
				d := sub.DeliveryState
				err = s.queryRow(ctx, tx, `INSERT INTO subscriptions (node_id, kind, address, bare_jid, sub_id, state,
					options, expires_at, created_at, updated_at, cursor_seq, change_id, change_requested_at, callback_host)
					VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11, $9, $12)
					ON CONFLICT (node_id, kind, address) DO NOTHING RETURNING id`,
					[]any{sub.NodeID, string(sub.Kind), sub.Address, sub.BareJID, sub.SubID, string(sub.State),
						string(options), s.timeArg(sub.ExpiresAt), now, d.Cursor, changeID, hub.CallbackHost(sub.Kind, sub.Address)}, &id)
				outcome = hub.RequestCreated
			case cur.State == hub.SubPending:
				// Nobody verified it yet: the latest request is the one to
				// verify.
				err = s.queryRow(ctx, tx, `UPDATE subscriptions SET options = $2, sub_id = $3, expires_at = $4,
					updated_at = $5, change_id = $6, change_requested_at = $5
					WHERE id = $1 AND state = 'pending' RETURNING id`,
					[]any{cur.ID, string(options), sub.SubID, s.timeArg(sub.ExpiresAt), now, changeID}, &id)
				outcome = hub.RequestReplaced
			default:
				err = s.queryRow(ctx, tx, `UPDATE subscriptions SET change_id = $2, change_mode = 'subscribe',
					change_options = $3, change_requested_at = $4, change_outcome = '', `+freeChangeLeaseSQL+`
					WHERE id = $1 AND state <> 'pending' RETURNING id`,
					[]any{cur.ID, changeID, string(options), now}, &id)
				outcome = hub.RequestChangePending
			}
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			if stored, err = s.subByIDLocked(ctx, tx, id); err != nil {
				return err
			}
			if stored == nil {
				return fmt.Errorf("subscription %d vanished", id)
			}
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
	now := s.timeArg(time.Now())
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
		if cur.State == hub.SubPending {
			// Never verified: verifying the unsubscription would let a
			// refused check activate what nobody confirmed.
			if _, err := s.exec(ctx, tx, `DELETE FROM subscriptions WHERE id = $1`, cur.ID); err != nil {
				return err
			}
			outcome, stored = hub.RequestCancelled, cur
			return nil
		}
		if _, err := s.exec(ctx, tx, `UPDATE subscriptions SET change_id = $2, change_mode = 'unsubscribe',
			change_options = '{}', change_requested_at = $3, change_outcome = '', `+freeChangeLeaseSQL+`
			WHERE id = $1`,
			cur.ID, changeID, now); err != nil {
			return err
		}
		outcome = hub.RequestChangePending
		stored, err = s.subByIDLocked(ctx, tx, cur.ID)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("store %s unsubscription request of %s: %w", kind, address, err)
	}
	return stored, outcome, nil
}

// ApplySubscriptionChange applies a verified request; see delivery.Store.
func (s *sqlStore) ApplySubscriptionChange(ctx context.Context, id int64, changeID string, expires time.Time) (bool, error) {
	applied := false
	err := s.inTx(ctx, func(tx *txn) error {
		applied = false
		cur, err := s.subByIDLocked(ctx, tx, id)
		if err != nil || cur == nil || cur.Change.ID != changeID {
			return err
		}
		now := s.timeArg(time.Now())
		switch {
		case cur.Change.Mode == hub.ChangeUnsubscribe:
			_, err = s.exec(ctx, tx, `DELETE FROM subscriptions WHERE id = $1`, id)
		case cur.Change.Mode == hub.ChangeSubscribe:
			// One statement: the settings, the lease, the state and the
			// clean record change together or not at all.
			_, err = s.exec(ctx, tx, `UPDATE subscriptions SET options = change_options, expires_at = $2,
				state = 'active', updated_at = $3, `+cleanRecordSQL+`,
				change_mode = '', change_options = '{}', change_outcome = 'applied', `+freeChangeLeaseSQL+`
				WHERE id = $1`, id, s.timeArg(expires), now)
		case cur.State == hub.SubPending:
			_, err = s.exec(ctx, tx, `UPDATE subscriptions SET state = 'active', expires_at = $2, updated_at = $3,
				`+cleanRecordSQL+` WHERE id = $1`, id, s.timeArg(expires), now)
		default:
			return nil // nothing waits
		}
		applied = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("apply the verified request about subscription %d: %w", id, err)
	}
	return applied, nil
}

// RefuseSubscriptionChange drops a request its subscriber did not verify;
// see delivery.Store.
func (s *sqlStore) RefuseSubscriptionChange(ctx context.Context, id int64, changeID string) (bool, error) {
	refused := false
	err := s.inTx(ctx, func(tx *txn) error {
		refused = false
		cur, err := s.subByIDLocked(ctx, tx, id)
		if err != nil || cur == nil || cur.Change.ID != changeID {
			return err
		}
		switch {
		case cur.Change.Pending():
			_, err = s.exec(ctx, tx, `UPDATE subscriptions SET change_mode = '', change_options = '{}',
				change_outcome = 'refused', `+freeChangeLeaseSQL+` WHERE id = $1`, id)
		case cur.State == hub.SubPending:
			_, err = s.exec(ctx, tx, `DELETE FROM subscriptions WHERE id = $1`, id)
		default:
			return nil // nothing waits
		}
		refused = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("refuse the request about subscription %d: %w", id, err)
	}
	return refused, nil
}

// ReleaseSubscriptionChange gives back the lease of an undecided change's
// verification; see delivery.Store.
func (s *sqlStore) ReleaseSubscriptionChange(ctx context.Context, id int64, changeID, owner string) error {
	if _, err := s.writeCount(ctx, `UPDATE subscriptions SET `+freeChangeLeaseSQL+`
		WHERE id = $1 AND change_id = $2 AND change_lease_owner = $3`, id, changeID, owner); err != nil {
		return fmt.Errorf("release the verification of a change of subscription %d: %w", id, err)
	}
	return nil
}
