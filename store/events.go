package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/pingd/pingd/hub"
)

const eventColumns = `e.node_id, e.seq, e.kind, e.item_id, e.payload, e.title, e.summary, e.link,
	e.address, e.plain_type, e.publisher, e.updated, e.created, e.encoding`

// scanEvent reads an events row, unpacking its text once here (a packed
// row, eventtext.go), so every reader of the log gets the event as it was
// appended.
func scanEvent(r rowScanner) (hub.Event, error) {
	var e hub.Event
	var kind, encoding string
	err := r.Scan(&e.NodeID, &e.Seq, &kind, &e.ItemID, &e.Payload, &e.Title, &e.Summary, &e.Link,
		&e.Address, &e.PlainType, &e.Publisher, tc(&e.Updated), tc(&e.Created), &encoding)
	if err != nil {
		return e, err
	}
	e.Kind = hub.EventKind(kind)
	return e, unpackEvent(&e, encoding)
}

func (s *sqlStore) events(ctx context.Context, query string, args ...any) ([]hub.Event, error) {
	var out []hub.Event
	err := s.query(ctx, s.read, query, args, func(r *sql.Rows) error {
		e, err := scanEvent(r)
		if err != nil {
			return err
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// validEvent checks what the log needs from an event.
func validEvent(e *hub.Event) error {
	switch e.Kind {
	case hub.EventItem, hub.EventRetract:
		if e.ItemID == "" {
			return fmt.Errorf("%w: %s event without an item id", hub.ErrInvalid, e.Kind)
		}
	case hub.EventPurge, hub.EventChange, hub.EventRevoke, hub.EventSubscribed, hub.EventLast:
	default:
		return fmt.Errorf("%w: event kind %q", hub.ErrInvalid, e.Kind)
	}
	return nil
}

// Append adds events to the node's log in one transaction.
func (s *sqlStore) Append(ctx context.Context, nodeID int64, events []hub.Event) ([]hub.Event, error) {
	for i := range events {
		if err := validEvent(&events[i]); err != nil {
			return nil, err
		}
	}
	if len(events) == 0 {
		var one int
		err := s.queryRow(ctx, s.read, `SELECT 1 FROM nodes WHERE id = $1`, []any{nodeID}, &one)
		return nil, notFound(err, fmt.Sprintf("append to node %d", nodeID))
	}
	var out []hub.Event
	err := s.inTx(ctx, func(tx *txn) error {
		var err error
		out, err = s.appendTx(ctx, tx, nodeID, events, time.Now())
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// appendTx appends events to one node's log inside tx. Its writes do not
// depend on the number of subscribers: one UPDATE of the node, one INSERT
// per event, one change of the current-items table per item, retraction or
// purge, and at most one DELETE for items that scrolled off.
func (s *sqlStore) appendTx(ctx context.Context, tx *txn, nodeID int64, events []hub.Event, now time.Time) ([]hub.Event, error) {
	// Taking the sequence numbers first locks the node row (PostgreSQL) so
	// concurrent appends to one node get consecutive, distinct numbers.
	//
	// The statements that write one row by its key (and the log window's
	// DELETE, a range of len(events) keys) are short ones (execShort): not
	// watched one by one for the per-query timeout on SQLite, where that
	// costs the driver a goroutine per statement; a publish is the start
	// of every fan-out.
	var last int64
	var maxItems int
	err := s.queryRowShort(ctx, tx, `UPDATE nodes SET last_seq = last_seq + $1 WHERE id = $2
		RETURNING last_seq, max_items`, []any{len(events), nodeID}, &last, &maxItems)
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("append to node %d", nodeID))
	}
	if len(events) == 0 {
		return nil, nil
	}
	created := dbTimeOf(now)
	out := make([]hub.Event, len(events))
	seq := last - int64(len(events))
	items := false
	for i, e := range events {
		seq++
		e.NodeID, e.Seq, e.Created = nodeID, seq, created
		e.Updated = dbTimeOf(e.Updated)
		out[i] = e
		st := packEvent(&e)
		if _, err := s.execShort(ctx, tx, `INSERT INTO events (node_id, seq, kind, item_id, payload,
			title, summary, link, address, plain_type, publisher, updated, created, encoding)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
			nodeID, seq, string(e.Kind), st.itemID, st.payload, st.title, st.summary, st.link,
			e.Address, e.PlainType, e.Publisher, s.timeArg(st.updated), s.timeArg(created), st.encoding); err != nil {
			return nil, fmt.Errorf("append to node %d: %w", nodeID, err)
		}
		switch e.Kind {
		case hub.EventItem:
			items = true
			_, err = s.execShort(ctx, tx, `INSERT INTO items (node_id, item_id, seq) VALUES ($1, $2, $3)
				ON CONFLICT (node_id, item_id) DO UPDATE SET seq = excluded.seq`, nodeID, e.ItemID, seq)
		case hub.EventRetract:
			_, err = s.execShort(ctx, tx, `DELETE FROM items WHERE node_id = $1 AND item_id = $2`, nodeID, e.ItemID)
		case hub.EventPurge:
			_, err = s.exec(ctx, tx, `DELETE FROM items WHERE node_id = $1`, nodeID)
		}
		if err != nil {
			return nil, fmt.Errorf("update items of node %d: %w", nodeID, err)
		}
	}
	if items && maxItems > 0 {
		// Items beyond max_items scroll off, oldest first.
		if _, err := s.exec(ctx, tx, `DELETE FROM items WHERE node_id = $1 AND seq <= (
			SELECT seq FROM items WHERE node_id = $1 ORDER BY seq DESC LIMIT 1 OFFSET $2)`,
			nodeID, maxItems); err != nil {
			return nil, fmt.Errorf("trim items of node %d: %w", nodeID, err)
		}
	}
	// The events this append moved out of the log window go unless they
	// are current items: a subscriber that far behind skips ahead. Events
	// that stop being current items later are Prune's.
	if edge := last - hub.LogWindow; edge > 0 {
		if _, err := s.execShort(ctx, tx, `DELETE FROM events WHERE node_id = $1 AND seq > $2 AND seq <= $3
			AND NOT EXISTS (SELECT 1 FROM items i WHERE i.node_id = events.node_id AND i.seq = events.seq)`,
			nodeID, max(edge-int64(len(events)), 0), edge); err != nil {
			return nil, fmt.Errorf("trim the log of node %d: %w", nodeID, err)
		}
	}
	return out, nil
}

// keepTx appends item events to the node's log inside tx, as appendTx
// does, and moves past them every cursor that stood at the end of the
// log: the node's XMPP cursor and its subscriptions' cursors (HTTP
// deliveries, digests). They become the node's items and no one is told
// of them. A cursor still behind keeps its place and reads them with the
// events it has not read yet. One UPDATE of the subscriptions in all: it
// is done once per node and source, on the baseline.
func (s *sqlStore) keepTx(ctx context.Context, tx *txn, nodeID int64, events []hub.Event, now time.Time) ([]hub.Event, error) {
	if len(events) == 0 {
		return nil, nil
	}
	out, err := s.appendTx(ctx, tx, nodeID, events, now)
	if err != nil {
		return nil, err
	}
	end := out[len(out)-1].Seq
	before := out[0].Seq - 1
	if _, err := s.exec(ctx, tx, `UPDATE nodes SET xmpp_seq = $2 WHERE id = $1 AND xmpp_seq >= $3 AND xmpp_seq < $2`,
		nodeID, end, before); err != nil {
		return nil, fmt.Errorf("move the XMPP cursor of node %d past its kept items: %w", nodeID, err)
	}
	if _, err := s.exec(ctx, tx, `UPDATE subscriptions SET cursor_seq = $2
		WHERE node_id = $1 AND cursor_seq >= $3 AND cursor_seq < $2 AND `+httpKind, nodeID, end, before); err != nil {
		return nil, fmt.Errorf("move the cursors of node %d past its kept items: %w", nodeID, err)
	}
	if _, err := s.exec(ctx, tx, `UPDATE xmpp_subscription_state SET digest_cursor = $2
		WHERE digest_cursor >= $3 AND digest_cursor < $2
		AND subscription_id IN (SELECT id FROM subscriptions WHERE node_id = $1 AND kind = 'xmpp')`,
		nodeID, end, before); err != nil {
		return nil, fmt.Errorf("move the digest cursors of node %d past its kept items: %w", nodeID, err)
	}
	return out, nil
}

// KeepItems makes events the items of a node that has none, without
// telling anyone (keepTx); see hub.LogStore.
func (s *sqlStore) KeepItems(ctx context.Context, nodeID int64, events []hub.Event) (int, error) {
	for i := range events {
		if events[i].Kind != hub.EventItem {
			return 0, fmt.Errorf("%w: keep a %s event as an item", hub.ErrInvalid, events[i].Kind)
		}
		if err := validEvent(&events[i]); err != nil {
			return 0, err
		}
	}
	var kept int
	err := s.inTx(ctx, func(tx *txn) error {
		kept = 0
		// The node row first, locked on PostgreSQL, so that a fetch
		// publishing to the node meanwhile comes before or after as a whole.
		var last int64
		if err := s.queryRow(ctx, tx, `SELECT last_seq FROM nodes WHERE id = $1`+s.forUpdate(),
			[]any{nodeID}, &last); err != nil {
			return notFound(err, fmt.Sprintf("keep items of node %d", nodeID))
		}
		var has int
		err := s.queryRow(ctx, tx, `SELECT COUNT(*) FROM (SELECT 1 FROM items WHERE node_id = $1 LIMIT 1) i`,
			[]any{nodeID}, &has)
		if err != nil || has > 0 {
			return err
		}
		out, err := s.keepTx(ctx, tx, nodeID, events, time.Now())
		kept = len(out)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("keep items of node %d: %w", nodeID, err)
	}
	return kept, nil
}

// Items returns the node's current items, newest first.
func (s *sqlStore) Items(ctx context.Context, nodeID int64, ids []string, max int) ([]hub.Event, error) {
	const from = ` FROM items i JOIN events e ON e.node_id = i.node_id AND e.seq = i.seq WHERE i.node_id = $1`
	if len(ids) == 0 {
		query := `SELECT ` + eventColumns + from + ` ORDER BY i.seq DESC`
		args := []any{nodeID}
		if max > 0 {
			query += ` LIMIT $2`
			args = append(args, max)
		}
		out, err := s.events(ctx, query, args...)
		if err != nil {
			return nil, fmt.Errorf("items of node %d: %w", nodeID, err)
		}
		return out, nil
	}
	var out []hub.Event
	for _, chunk := range chunks(uniqueStrings(ids)) {
		in, inArgs := inList(2, chunk)
		query := `SELECT ` + eventColumns + from + ` AND i.item_id IN (` + in + `)`
		got, err := s.events(ctx, query, append([]any{nodeID}, inArgs...)...)
		if err != nil {
			return nil, fmt.Errorf("items of node %d: %w", nodeID, err)
		}
		out = append(out, got...)
	}
	sortEventsNewestFirst(out)
	return out, nil
}

func sortEventsNewestFirst(es []hub.Event) {
	slices.SortFunc(es, func(a, b hub.Event) int { return cmp.Compare(b.Seq, a.Seq) })
}

func uniqueStrings(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return slices.Compact(out)
}

// EventsAfter returns up to limit events with Seq > after, oldest first
// (all of them when limit <= 0).
func (s *sqlStore) EventsAfter(ctx context.Context, nodeID int64, after int64, limit int) ([]hub.Event, error) {
	query, args := eventsAfterSQL(nodeID, after, limit)
	out, err := s.events(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("events of node %d: %w", nodeID, err)
	}
	return out, nil
}

// eventsAfterSQL selects the node's events after seq `after`, oldest
// first, at most limit of them (0: all).
func eventsAfterSQL(nodeID, after int64, limit int) (string, []any) {
	query := `SELECT ` + eventColumns + ` FROM events e WHERE e.node_id = $1 AND e.seq > $2 ORDER BY e.seq`
	args := []any{nodeID, after}
	if limit > 0 {
		query += ` LIMIT $3`
		args = append(args, limit)
	}
	return query, args
}
