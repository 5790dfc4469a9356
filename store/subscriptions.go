package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
)

// subColumns and subsFrom read whole subscriptions of any kind. An XMPP
// subscription's digest and bounces are in xmpp_subscription_state (x;
// store/xmpp.go) and read into the same fields of hub.DeliveryState as
// an HTTP subscription's delivery columns: its digest cursor is its
// Cursor, its digest due time NextAttemptAt, its last digest
// LastDeliveredAt, its bounces ConsecutiveErrors, FirstFailureAt and
// LastError. An XMPP row's own delivery columns stay at their defaults,
// and a subscription of another kind has no x row, so COALESCE picks the
// column that has the value.
const subColumns = `s.id, s.node_id, n.name, s.kind, s.address, s.bare_jid, s.sub_id, s.state, s.options,
	s.expires_at, s.created_at, s.updated_at, COALESCE(x.digest_cursor, s.cursor_seq), s.attempts,
	COALESCE(x.bounces, s.consecutive_errors), COALESCE(x.first_bounce_at, s.first_failure_at),
	COALESCE(x.digest_due_at, s.next_attempt_at), COALESCE(x.last_bounce, s.last_error),
	COALESCE(x.digest_sent_at, s.last_delivered_at), s.last_status,
	s.lease_owner, s.lease_until, s.change_id, s.change_mode, s.change_options, s.change_requested_at,
	s.change_outcome, s.change_lease_owner, s.change_lease_until`

const subsFrom = ` FROM subscriptions s JOIN nodes n ON n.id = s.node_id
	LEFT JOIN xmpp_subscription_state x ON x.subscription_id = s.id`

// httpSubColumns are subColumns for HTTP subscriptions alone (the delivery
// claims), which have no xmpp_subscription_state to join; httpSubsFrom is
// their FROM.
const httpSubColumns = `s.id, s.node_id, n.name, s.kind, s.address, s.bare_jid, s.sub_id, s.state, s.options,
	s.expires_at, s.created_at, s.updated_at, s.cursor_seq, s.attempts, s.consecutive_errors,
	s.first_failure_at, s.next_attempt_at, s.last_error, s.last_delivered_at, s.last_status,
	s.lease_owner, s.lease_until, s.change_id, s.change_mode, s.change_options, s.change_requested_at,
	s.change_outcome, s.change_lease_owner, s.change_lease_until`

const httpSubsFrom = ` FROM subscriptions s JOIN nodes n ON n.id = s.node_id`

// httpKind is the condition on a subscriptions row that keeps the HTTP
// kinds (hub.HTTPKinds): every kind but XMPP. It is written so because it
// is the predicate of the partial indexes the delivery claims read
// (subscriptions_waiting, subscriptions_behind); TestHTTPKindMatchesKinds
// holds hub's kind registry to it. httpSub is the same of subscriptions s.
const (
	httpKind = `kind <> 'xmpp'`
	httpSub  = `s.` + httpKind
)

func scanSubscription(r rowScanner) (hub.Subscription, error) {
	var sub hub.Subscription
	var kind, state string
	var options, changeOptions []byte
	d := &sub.DeliveryState
	c := &sub.Change
	err := r.Scan(&sub.ID, &sub.NodeID, &sub.NodeName, &kind, &sub.Address, &sub.BareJID, &sub.SubID, &state, &options,
		tc(&sub.ExpiresAt), tc(&sub.CreatedAt), tc(&sub.UpdatedAt), &d.Cursor, &d.Attempts, &d.ConsecutiveErrors,
		tc(&d.FirstFailureAt), tc(&d.NextAttemptAt), &d.LastError, tc(&d.LastDeliveredAt), &d.LastStatus,
		&d.LeaseOwner, tc(&d.LeaseUntil), &c.ID, &c.Mode, &changeOptions, tc(&c.RequestedAt), &c.Outcome,
		&c.LeaseOwner, tc(&c.LeaseUntil))
	if err != nil {
		return sub, err
	}
	sub.Kind, sub.State = hub.Kind(kind), hub.SubState(state)
	if len(options) > 0 {
		if err := json.Unmarshal(options, &sub.Options); err != nil {
			return sub, fmt.Errorf("subscription %d: options: %w", sub.ID, err)
		}
	}
	// Only a pending change has options; claims read many rows, so the
	// empty document of the others is not decoded.
	if c.Mode != "" && len(changeOptions) > 0 {
		if err := json.Unmarshal(changeOptions, &c.Options); err != nil {
			return sub, fmt.Errorf("subscription %d: options of its pending change: %w", sub.ID, err)
		}
	}
	return sub, nil
}

func (s *sqlStore) subsWhere(ctx context.Context, q querier, where string, args ...any) ([]hub.Subscription, error) {
	return s.subsOf(ctx, q, `SELECT `+subColumns+subsFrom+` `+where, args...)
}

// subsByIDs reads subscriptions by id, in id order.
func (s *sqlStore) subsByIDs(ctx context.Context, q querier, ids []int64) ([]hub.Subscription, error) {
	var out []hub.Subscription
	for _, chunk := range chunks(ids) {
		in, inArgs := inList(1, chunk)
		got, err := s.subsWhere(ctx, q, `WHERE s.id IN (`+in+`) ORDER BY s.id`, inArgs...)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// PutSubscription inserts sub or updates the one with the same node, kind
// and address, keeping its cursor and dropping its pending change; it
// fills sub from the stored row.
func (s *sqlStore) PutSubscription(ctx context.Context, sub *hub.Subscription) (bool, error) {
	if !sub.Kind.Valid() {
		return false, fmt.Errorf("%w: subscription kind %q", hub.ErrInvalid, sub.Kind)
	}
	if sub.Address == "" {
		return false, fmt.Errorf("%w: empty subscriber address", hub.ErrInvalid)
	}
	if sub.State == "" {
		sub.State = hub.SubActive
	}
	options, err := json.Marshal(sub.Options)
	if err != nil {
		return false, fmt.Errorf("subscription options: %w", err)
	}
	now := s.timeArg(time.Now())
	created := false
	var stored hub.Subscription
	err = s.inTx(ctx, func(tx *txn) error {
		d := sub.DeliveryState
		if sub.Kind == hub.KindXMPP {
			d = hub.DeliveryState{} // its state has a table of its own (putXMPPState)
		}
		var id int64
		if err := s.queryRow(ctx, tx, `SELECT id FROM nodes WHERE id = $1`, []any{sub.NodeID}, &id); err != nil {
			return notFound(err, fmt.Sprintf("node %d", sub.NodeID))
		}
		if err := s.markSubscribed(ctx, tx, sub.NodeID); err != nil {
			return err
		}
		err := s.queryRow(ctx, tx, `INSERT INTO subscriptions (node_id, kind, address, bare_jid, sub_id, state,
			options, expires_at, created_at, updated_at, cursor_seq, attempts, consecutive_errors,
			first_failure_at, next_attempt_at, last_error, last_delivered_at, last_status, callback_host)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
			ON CONFLICT (node_id, kind, address) DO NOTHING RETURNING id`,
			[]any{sub.NodeID, string(sub.Kind), sub.Address, sub.BareJID, sub.SubID, string(sub.State),
				string(options), s.timeArg(sub.ExpiresAt), now, d.Cursor, d.Attempts, d.ConsecutiveErrors,
				s.timeArg(d.FirstFailureAt), s.timeArg(d.NextAttemptAt), d.LastError,
				s.timeArg(d.LastDeliveredAt), d.LastStatus, hub.CallbackHost(sub.Kind, sub.Address)}, &id)
		switch {
		case err == nil:
			created = true
			if sub.Kind == hub.KindXMPP {
				if err := s.putXMPPState(ctx, tx, id, sub.DeliveryState); err != nil {
					return err
				}
			}
		case errors.Is(err, sql.ErrNoRows):
			err = s.queryRow(ctx, tx, `UPDATE subscriptions SET state = $4, options = $5, sub_id = $6,
				expires_at = $7, updated_at = $8, change_mode = '', change_options = '{}'
				WHERE node_id = $1 AND kind = $2 AND address = $3 RETURNING id`,
				[]any{sub.NodeID, string(sub.Kind), sub.Address, string(sub.State), string(options), sub.SubID,
					s.timeArg(sub.ExpiresAt), now}, &id)
			if err != nil {
				return err
			}
		default:
			return err
		}
		got, err := s.subsByIDs(ctx, tx, []int64{id})
		if err != nil {
			return err
		}
		if len(got) != 1 {
			return fmt.Errorf("subscription %d vanished", id)
		}
		stored = got[0]
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store %s subscription of %s: %w", sub.Kind, sub.Address, err)
	}
	*sub = stored
	return created, nil
}

// Subscription returns one subscription by id.
func (s *sqlStore) Subscription(ctx context.Context, id int64) (*hub.Subscription, error) {
	sub, err := scanSubscription(rowOf(s, ctx, s.read, `SELECT `+subColumns+subsFrom+` WHERE s.id = $1`, []any{id}))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("subscription %d", id))
	}
	return &sub, nil
}

// filterWhere turns a filter into a WHERE clause on subscriptions s.
func filterWhere(f hub.SubscriptionFilter) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, strings.Replace(cond, "?", "$"+strconv.Itoa(len(args)), 1))
	}
	if f.NodeID != 0 {
		add("s.node_id = ?", f.NodeID)
	}
	if f.Kind != "" {
		add("s.kind = ?", string(f.Kind))
	}
	if f.Address != "" {
		add("s.address = ?", f.Address)
	}
	if f.BareJID != "" {
		add("s.bare_jid = ?", f.BareJID)
	}
	if f.State != "" {
		add("s.state = ?", string(f.State))
	}
	if len(conds) == 0 {
		return "", nil
	}
	return "WHERE " + strings.Join(conds, " AND "), args
}

// Subscriptions lists the subscriptions matching f, oldest first.
func (s *sqlStore) Subscriptions(ctx context.Context, f hub.SubscriptionFilter) ([]hub.Subscription, error) {
	where, args := filterWhere(f)
	out, err := s.subsWhere(ctx, s.read, where+` ORDER BY s.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list subscriptions: %w", err)
	}
	return out, nil
}

// DeleteSubscriptions removes the subscriptions matching f and returns
// them; f must name a node or a bare JID.
func (s *sqlStore) DeleteSubscriptions(ctx context.Context, f hub.SubscriptionFilter) ([]hub.Subscription, error) {
	if f.NodeID == 0 && f.BareJID == "" {
		return nil, fmt.Errorf("%w: deleting subscriptions needs a node or a bare JID", hub.ErrInvalid)
	}
	where, args := filterWhere(f)
	var out []hub.Subscription
	err := s.inTx(ctx, func(tx *txn) error {
		var err error
		out, err = s.subsWhere(ctx, tx, where+` ORDER BY s.id`+s.forUpdateOf("s"), args...)
		if err != nil {
			return err
		}
		return s.deleteSubs(ctx, tx, out)
	})
	if err != nil {
		return nil, fmt.Errorf("delete subscriptions: %w", err)
	}
	return out, nil
}

func (s *sqlStore) deleteSubs(ctx context.Context, tx *txn, subs []hub.Subscription) error {
	ids := make([]int64, len(subs))
	for i, sub := range subs {
		ids[i] = sub.ID
	}
	for _, chunk := range chunks(ids) {
		in, inArgs := inList(1, chunk)
		if _, err := s.exec(ctx, tx, `DELETE FROM subscriptions WHERE id IN (`+in+`)`, inArgs...); err != nil {
			return err
		}
	}
	return nil
}

// DeleteSubscription removes one subscription.
func (s *sqlStore) DeleteSubscription(ctx context.Context, id int64) error {
	n, err := s.execCount(ctx, s.write, `DELETE FROM subscriptions WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete subscription %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("subscription %d: %w", id, hub.ErrNotFound)
	}
	return nil
}

// SetSubscriptionState changes a subscription's state and expiry;
// ErrNotFound if it does not exist.
func (s *sqlStore) SetSubscriptionState(ctx context.Context, id int64, state hub.SubState, expires time.Time) error {
	n, err := s.execCount(ctx, s.write, `UPDATE subscriptions SET state = $1, expires_at = $2, updated_at = $3
		WHERE id = $4`, string(state), s.timeArg(expires), s.timeArg(time.Now()), id)
	if err != nil {
		return fmt.Errorf("set state of subscription %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("subscription %d: %w", id, hub.ErrNotFound)
	}
	return nil
}

// ClaimDeliveries leases up to limit HTTP subscriptions that have work at
// now, as hub.DeliveryWork decides (storetest holds the queries to that
// rule). Three indexed queries find them, so the claim never reads every
// subscription: the ones with a pending change to verify
// (subscriptions_changing; whatever their retry time and delivery lease,
// as the change has a lease of its own), the ones waiting for verification
// (subscriptions_waiting) and the active ones whose cursor is behind their
// node's log (subscriptions_behind, one range per node that has HTTP
// subscriptions). A subscription
// with a pending change may come twice: once for the change, once for its
// deliveries.
//
// A live lease is not taken again even by its own owner: that delivery is
// still under way, and handing it out twice would deliver twice and let
// one busy subscription crowd out the others of a repeated claim.
func (s *sqlStore) ClaimDeliveries(ctx context.Context, now time.Time, nodeID int64, limit int, owner string, until time.Time) ([]hub.Subscription, error) {
	return s.claimDeliveries(ctx, now, nodeID, limit, owner, until, nil)
}

// ClaimNodeDeliveries claims as ClaimDeliveries does and reads the node
// and its events after the claimed subscriptions' usual cursor
// (hub.UsualCursor) in the same transaction. On SQLite that is the write connection, whose pages the
// publish just wrote: the deliveries that follow would otherwise each
// start with a read transaction of their own on the read pool (two reads
// in a row, about a tenth of a fan-out of ten). It reads neither when the
// caller holds those events (held, which a publish of this process hands
// the engine): the claim's own query brings the node's last_seq, which
// tells whether the log ends where they end.
func (s *sqlStore) ClaimNodeDeliveries(ctx context.Context, now time.Time, nodeID int64, limit int, owner string, until time.Time, eventsLimit int, held hub.EventSpan) (*hub.NodeClaim, error) {
	if nodeID <= 0 {
		return nil, fmt.Errorf("%w: claim of node %d", hub.ErrInvalid, nodeID)
	}
	claim := &hub.NodeClaim{}
	subs, err := s.claimDeliveries(ctx, now, nodeID, limit, owner, until, func(tx *txn, claimed []hub.Subscription, lastSeq int64) error {
		claim.Node, claim.After, claim.Events, claim.Held = nil, 0, nil, false // PostgreSQL retries a deadlocked transaction
		after, ok := hub.UsualCursor(claimed)
		if !ok {
			return nil
		}
		if held.After < held.Last && held.After == after && held.Last == lastSeq && held.Last-held.After <= int64(eventsLimit) {
			// The log after the cursor, read with the claim (lastSeq), is
			// what the caller holds: nothing to read.
			claim.After, claim.Held = after, true
			return nil
		}
		// Both reads are by key and bounded: not watched one by one on
		// SQLite (queryShort).
		var n hub.Node
		err := s.queryShort(ctx, tx, `SELECT `+nodeColumns+nodesFrom+` WHERE n.id = $1`, []any{nodeID}, func(r *sql.Rows) error {
			var err error
			n, err = scanNode(r)
			return err
		})
		if err != nil {
			return err
		}
		if n.ID == 0 {
			return nil // deleted meanwhile
		}
		query, args := eventsAfterSQL(nodeID, after, eventsLimit)
		err = s.queryShort(ctx, tx, query, args, func(r *sql.Rows) error {
			e, err := scanEvent(r)
			if err != nil {
				return err
			}
			claim.Events = append(claim.Events, e)
			return nil
		})
		if err != nil {
			return fmt.Errorf("events of node %d: %w", nodeID, err)
		}
		claim.Node, claim.After = &n, after
		return nil
	})
	if err != nil {
		return nil, err
	}
	claim.Subscriptions = subs
	return claim, nil
}

// claimDeliveries is ClaimDeliveries; then, when set, runs in its
// transaction after the leases are written, with the subscriptions claimed.
func (s *sqlStore) claimDeliveries(ctx context.Context, now time.Time, nodeID int64, limit int, owner string, until time.Time,
	then func(tx *txn, claimed []hub.Subscription, lastSeq int64) error) ([]hub.Subscription, error) {
	if limit <= 0 {
		return nil, nil
	}
	args := []any{s.timeArg(now), 0}
	if nodeID > 0 {
		args = append(args, nodeID)
	}
	changingSQL, waitingSQL, behindSQL := s.claimDeliveriesSQL(nodeID > 0)
	var nodeSQL []string
	if nodeID > 0 {
		nodeSQL = s.nodeClaimSQL(changingSQL, waitingSQL, behindSQL)
	}
	// One slice for the queries, grown from a size that serves small
	// claims without copying and costs little to claims that find nothing
	// (each poll's): growing two slices from nothing and joining them
	// copied every subscription read several times.
	out := make([]hub.Subscription, 0, min(limit, claimCapacity))
	changes := 0 // out[:changes] lease changes' verifications
	err := s.inTx(ctx, func(tx *txn) error {
		out = out[:0]
		// The queries that find the subscriptions read them too: they visit
		// each row anyway, and reading the rows again by id was most of a
		// claim's time.
		changes = 0
		lastSeq := int64(-1)
		if nodeID > 0 {
			var err error
			if changes, lastSeq, err = s.claimNodeSubs(ctx, tx, &out, limit, nodeSQL, args); err != nil {
				return err
			}
		}
		for i, query := range []string{changingSQL, waitingSQL, behindSQL} {
			if nodeID > 0 || len(out) >= limit {
				break
			}
			args[1] = limit - len(out)
			if err := s.appendSubs(ctx, tx, &out, query, args...); err != nil {
				return err
			}
			if i == 0 {
				changes = len(out)
			}
		}
		if len(out) == 0 {
			return nil
		}
		// The first changes entries lease a change's verification.
		changeIDs, ids := make([]int64, 0, changes), make([]int64, 0, len(out)-changes)
		for i := range out {
			if i < changes {
				changeIDs = append(changeIDs, out[i].ID)
				out[i].Change.LeaseOwner, out[i].Change.LeaseUntil, out[i].Change.Claimed = owner, dbTimeOf(until), true
				continue
			}
			ids = append(ids, out[i].ID)
			out[i].LeaseOwner, out[i].LeaseUntil = owner, dbTimeOf(until)
		}
		for _, lease := range []struct {
			columns string
			ids     []int64
		}{{"change_lease_owner = $1, change_lease_until = $2", changeIDs}, {"lease_owner = $1, lease_until = $2", ids}} {
			if len(lease.ids) == 0 {
				continue
			}
			in, inArgs := inList(3, lease.ids)
			// By key, so not watched for the timeout (execShort).
			if _, err := s.execShort(ctx, tx, `UPDATE subscriptions SET `+lease.columns+` WHERE id IN (`+in+`)`,
				append([]any{owner, s.timeArg(until)}, inArgs...)...); err != nil {
				return err
			}
		}
		if then != nil {
			return then(tx, out, lastSeq)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	slices.SortFunc(out, func(a, b hub.Subscription) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// claimCapacity is the room a claim reserves before reading.
const claimCapacity = 64

// subsOf runs a query of whole subscription rows.
func (s *sqlStore) subsOf(ctx context.Context, q querier, query string, args ...any) ([]hub.Subscription, error) {
	var out []hub.Subscription
	err := s.appendSubs(ctx, q, &out, query, args...)
	return out, err
}

// claimNodeSubs runs the queries of a claim of one node (nodeClaimSQL)
// and appends to *out, in the order of the three queries of
// ClaimDeliveries, up to limit entries: first those that lease a change's
// verification (their count is changes), then the pending and
// unsubscribing subscriptions, then the active ones behind. lastSeq is
// the node's, read with them (-1 when nothing was found). args are the
// claim's: $2, the limit, is set here.
//
// The queries read one node's ranges of indexes, up to the limit each:
// work bounded as execShort's is, so on SQLite they are not watched for
// the per-query timeout (which costs the driver a goroutine per
// statement).
func (s *sqlStore) claimNodeSubs(ctx context.Context, tx *txn, out *[]hub.Subscription, limit int, queries []string, args []any) (changes int, lastSeq int64, err error) {
	// Rows by their query's number: the parts of a union come in order on
	// PostgreSQL, but nothing in SQL says so without an ORDER BY of the
	// union, which would sort every row.
	var byPart [3][]hub.Subscription
	found := 0
	lastSeq = -1
	for _, query := range queries {
		if found >= limit {
			break
		}
		args[1] = limit - found
		err = s.queryShort(ctx, tx, query, args, func(r *sql.Rows) error {
			var part int
			sub, err := scanSubscription(prefixScanner{r, []any{&part, &lastSeq}})
			if err != nil {
				return err
			}
			if part < 0 || part >= len(byPart) {
				return fmt.Errorf("claim: a row of part %d", part)
			}
			byPart[part] = append(byPart[part], sub)
			found++
			return nil
		})
		if err != nil {
			return 0, -1, err
		}
	}
	taken := 0
	for part, subs := range byPart {
		subs = subs[:min(len(subs), limit-taken)]
		*out = append(*out, subs...)
		taken += len(subs)
		if part == 0 {
			changes = len(subs)
		}
	}
	return changes, lastSeq, nil
}

// prefixScanner scans into the destinations before the ones asked for:
// the columns a query puts before a whole row.
type prefixScanner struct {
	r      rowScanner
	before []any
}

func (p prefixScanner) Scan(dest ...any) error {
	return p.r.Scan(append(p.before[:len(p.before):len(p.before)], dest...)...)
}

// appendSubs runs a query of whole subscription rows and appends them to
// *out.
func (s *sqlStore) appendSubs(ctx context.Context, q querier, out *[]hub.Subscription, query string, args ...any) error {
	return s.query(ctx, q, query, args, func(r *sql.Rows) error {
		sub, err := scanSubscription(r)
		if err != nil {
			return err
		}
		*out = append(*out, sub)
		return nil
	})
}

// nodeClaimSQL is the claim of one node: the three queries of
// claimDeliveriesSQL(true), each row led by its query's number (0
// changing, 1 waiting, 2 behind) and the node's last_seq, which tells the
// claim of a woken node whether the events its caller holds are the end
// of the log. On PostgreSQL they are one statement, a UNION ALL of them
// each up to the limit: two round trips fewer in the claim that starts
// every fan-out. On SQLite, which has no round trips, they stay three:
// the union's co-routines cost more than two statements
// (BenchmarkClaimNodeDeliveries).
func (s *sqlStore) nodeClaimSQL(changing, waiting, behind string) []string {
	lead := func(i int, q string) string {
		return fmt.Sprintf("SELECT %d AS claim_part, n.last_seq AS claim_last_seq, ", i) + strings.TrimPrefix(q, "SELECT ")
	}
	if s.backend == backendSQLite {
		return []string{lead(0, changing), lead(1, waiting), lead(2, behind)}
	}
	part := func(i int, q string) string { return fmt.Sprintf("claim_%d AS (", i) + lead(i, q) + ")" }
	return []string{"WITH " + part(0, changing) + ", " + part(1, waiting) + ", " + part(2, behind) + `
		SELECT * FROM claim_0 UNION ALL SELECT * FROM claim_1 UNION ALL SELECT * FROM claim_2`}
}

// claimDeliveriesSQL returns the three queries of ClaimDeliveries, with
// $1 = now, $2 = limit and, when byNode, $3 = the node id.
func (s *sqlStore) claimDeliveriesSQL(byNode bool) (changing, waiting, behind string) {
	const ready = ` AND ` + httpSub + `
		AND (s.next_attempt_at IS NULL OR s.next_attempt_at <= $1)
		AND (s.lease_until IS NULL OR s.lease_until <= $1)`
	nodeCond := ""
	if byNode {
		nodeCond = ` AND s.node_id = $3`
	}
	// Ordered as subscriptions_changing is, so that the index of the few
	// subscriptions with a pending change is all that is read.
	changing = `SELECT ` + httpSubColumns + httpSubsFrom + `
		WHERE s.change_mode <> '' AND ` + httpSub + `
		AND (s.change_lease_until IS NULL OR s.change_lease_until <= $1)` + nodeCond + `
		ORDER BY s.node_id, s.id LIMIT $2` + s.skipLocked("s")
	waiting = `SELECT ` + httpSubColumns + httpSubsFrom + `
		WHERE s.state IN ('pending', 'unsubscribing')` + ready + nodeCond + `
		ORDER BY s.id LIMIT $2` + s.skipLocked("s")
	if byNode {
		// One node: its row by key, then the range of its subscriptions
		// behind its last_seq (subscriptions_behind).
		// CROSS JOIN keeps that join order on SQLite.
		behind = `SELECT ` + httpSubColumns + ` FROM nodes n CROSS JOIN subscriptions s
			WHERE s.node_id = n.id AND s.state = 'active' AND s.cursor_seq < n.last_seq` + ready + nodeCond + `
			ORDER BY n.id LIMIT $2` + s.skipLocked("s")
		return changing, waiting, behind
	}
	// Every node: the nodes that have HTTP subscriptions, one index seek
	// each (the recursive step asks for the next node id after the last),
	// then per node the range of its subscriptions behind its last_seq.
	// The cost follows the nodes with HTTP subscriptions, not every node
	// (walking every node cost a hub following a million sources with few
	// subscribers 82 ms a claim, inside the write transaction), nor every
	// subscription (walking the active ones costs more than the nodes when
	// many subscribe to few). CROSS JOIN makes SQLite keep that join
	// order; the node ids come in order, so no sort stands before the
	// limit.
	// The walk is withSubscribedNodes, which the status report's figures
	// share.
	behind = s.withSubscribedNodes() + `
		SELECT ` + httpSubColumns + ` FROM subscribed d CROSS JOIN nodes n CROSS JOIN subscriptions s
		WHERE n.id = d.id AND s.node_id = n.id AND s.state = 'active' AND s.cursor_seq < n.last_seq` + ready + `
		LIMIT $2` + s.skipLocked("s")
	return changing, waiting, behind
}

// withSubscribedNodes is the walk of the node ids that have HTTP
// subscriptions (subscribed), for the head of a statement: the delivery
// claim's and the status report's (behindSubscriptions). SQLite is told to seek in
// the partial index of HTTP subscriptions; it would pick the unique
// index of every subscription and pass over the XMPP ones.
func (s *sqlStore) withSubscribedNodes() string {
	httpIndex := s.httpSubscriptionsIndex()
	return `WITH RECURSIVE subscribed (id) AS (
		SELECT MIN(node_id) FROM subscriptions` + httpIndex + ` WHERE ` + httpKind + `
		UNION ALL
		SELECT (SELECT MIN(x.node_id) FROM subscriptions x` + httpIndex + ` WHERE x.` + httpKind + ` AND x.node_id > d.id)
		FROM subscribed d WHERE d.id IS NOT NULL)
	`
}

// httpSubscriptionsIndex names, on SQLite, the partial index of the HTTP
// subscriptions for a statement to read them through: the narrowest
// index that holds them, where SQLite would pick the unique index of
// every subscription. PostgreSQL picks it by itself.
func (s *sqlStore) httpSubscriptionsIndex() string {
	if s.backend == backendSQLite {
		return ` INDEXED BY subscriptions_behind`
	}
	return ""
}

// DeleteExpiredSubscriptions removes subscriptions whose expiry passed and
// returns them.
func (s *sqlStore) DeleteExpiredSubscriptions(ctx context.Context, now time.Time) ([]hub.Subscription, error) {
	var out []hub.Subscription
	err := s.inTx(ctx, func(tx *txn) error {
		var err error
		out, err = s.subsWhere(ctx, tx, `WHERE s.expires_at IS NOT NULL AND s.expires_at <= $1
			ORDER BY s.id`+s.forUpdateOf("s"), s.timeArg(now))
		if err != nil {
			return err
		}
		return s.deleteSubs(ctx, tx, out)
	})
	if err != nil {
		return nil, fmt.Errorf("delete expired subscriptions: %w", err)
	}
	return out, nil
}

// markSubscribed clears the node's mark of having no subscriptions
// (DeleteUnused) in the transaction that stores one: on PostgreSQL the
// update also makes a deletion running meanwhile see the node in use.
func (s *sqlStore) markSubscribed(ctx context.Context, tx *txn, nodeID int64) error {
	if _, err := s.exec(ctx, tx, `UPDATE nodes SET unsubscribed_since = NULL
		WHERE id = $1 AND unsubscribed_since IS NOT NULL`, nodeID); err != nil {
		return fmt.Errorf("node %d is subscribed to: %w", nodeID, err)
	}
	return nil
}
