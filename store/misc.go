package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pingd/pingd/hub"
)

// SetAffiliation sets jid's affiliation on the node; AffNone removes it.
func (s *sqlStore) SetAffiliation(ctx context.Context, nodeID int64, jid string, a hub.Affiliation) error {
	if !a.Valid() {
		return fmt.Errorf("%w: affiliation %q", hub.ErrInvalid, a)
	}
	var err error
	if a == hub.AffNone {
		_, err = s.exec(ctx, s.write, `DELETE FROM affiliations WHERE node_id = $1 AND jid = $2`, nodeID, jid)
	} else {
		err = s.inTx(ctx, func(tx *txn) error {
			var id int64
			if err := s.queryRow(ctx, tx, `SELECT id FROM nodes WHERE id = $1`, []any{nodeID}, &id); err != nil {
				return notFound(err, fmt.Sprintf("node %d", nodeID))
			}
			_, err := s.exec(ctx, tx, `INSERT INTO affiliations (node_id, jid, affiliation) VALUES ($1, $2, $3)
				ON CONFLICT (node_id, jid) DO UPDATE SET affiliation = excluded.affiliation`, nodeID, jid, string(a))
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("set affiliation of %s on node %d: %w", jid, nodeID, err)
	}
	return nil
}

// Affiliation returns jid's affiliation (AffNone if it has none).
func (s *sqlStore) Affiliation(ctx context.Context, nodeID int64, jid string) (hub.Affiliation, error) {
	var a string
	err := s.queryRow(ctx, s.read, `SELECT affiliation FROM affiliations WHERE node_id = $1 AND jid = $2`,
		[]any{nodeID, jid}, &a)
	if errors.Is(err, sql.ErrNoRows) {
		return hub.AffNone, nil
	}
	if err != nil {
		return "", fmt.Errorf("affiliation of %s on node %d: %w", jid, nodeID, err)
	}
	return hub.Affiliation(a), nil
}

// Affiliations lists the node's affiliations by JID.
func (s *sqlStore) Affiliations(ctx context.Context, nodeID int64) (map[string]hub.Affiliation, error) {
	out := map[string]hub.Affiliation{}
	err := s.query(ctx, s.read, `SELECT jid, affiliation FROM affiliations WHERE node_id = $1 ORDER BY jid`,
		[]any{nodeID}, func(r *sql.Rows) error {
			var jid, a string
			if err := r.Scan(&jid, &a); err != nil {
				return err
			}
			out[jid] = hub.Affiliation(a)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("affiliations of node %d: %w", nodeID, err)
	}
	return out, nil
}

// RecordPing stores a received ping, sets its ID and counts it.
func (s *sqlStore) RecordPing(ctx context.Context, p *hub.Ping) error {
	_, err := s.RecordPingMarkingDue(ctx, p, nil, time.Time{}, nil)
	return err
}

// Statements of RecordPingMarkingDue. The sources' UPDATE is
// MarkSourceDue's. The sources a URL names are looked up first and
// updated by id: most pinged URLs name no followed source, and an
// UPDATE … RETURNING whose WHERE is an OR over three indexes opens a
// temporary table for its rows in SQLite even when it matches none (the
// look-up instead took a tenth off a lone ping's CPU, BenchmarkRecordPing).
const (
	insertPingSQL = `INSERT INTO pings (dialect, name, url, feed_url, remote, received_at, tags)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`
	insertPingSQLite = `INSERT INTO pings (dialect, name, url, feed_url, remote, received_at, tags)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`
	countPingSQL    = `UPDATE counters SET value = value + $1 WHERE name = 'pings'`
	sourcesByURLSQL = `SELECT id FROM sources WHERE (original_url = $1 OR url = $1 OR (site_url = $1 AND site_url <> '')) AND NOT gone`
	markDueByIDSQL  = `UPDATE sources SET
		next_fetch_at = CASE WHEN next_fetch_at IS NULL OR next_fetch_at > $1 THEN $1 ELSE next_fetch_at END,
		last_ping_at = $1`
	markDueByIDWhere = ` WHERE id = $2 AND NOT gone`
	markDueByIDNote  = `, has_note = TRUE, note_title = $3, note_description = $4, note_extensions = $5`
)

// RecordPingMarkingDue stores a received ping, sets its ID, counts it and
// marks the sources matching urls due, in one transaction: a ping costs
// one commit (on SQLite shared with the pings arriving meanwhile) and no
// read outside it, also when nothing matches.
func (s *sqlStore) RecordPingMarkingDue(ctx context.Context, p *hub.Ping, urls []string, at time.Time, note *hub.ChangeNote) ([]int64, error) {
	marked, err := s.RecordPingsMarkingDue(ctx, []hub.PingToRecord{{Ping: p, URLs: urls, Note: note}}, at)
	if err != nil {
		return nil, err
	}
	return marked[0], nil
}

// RecordPingsMarkingDue is RecordPingMarkingDue of every ping of batch in
// one transaction, with one update of the counter.
func (s *sqlStore) RecordPingsMarkingDue(ctx context.Context, batch []hub.PingToRecord, at time.Time) ([][]int64, error) {
	for _, r := range batch {
		if r.Ping.ReceivedAt.IsZero() {
			r.Ping.ReceivedAt = time.Now()
		}
		r.Ping.ReceivedAt = dbTimeOf(r.Ping.ReceivedAt)
	}
	marked := make([][]int64, len(batch))
	err := s.inTx(ctx, func(tx *txn) error {
		for i, r := range batch {
			m, err := s.recordPingTx(ctx, tx, r, at, marked[i][:0]) // PostgreSQL retries a deadlocked transaction
			if err != nil {
				if len(batch) == 1 {
					return err
				}
				return fmt.Errorf("ping of %s: %w", r.Ping.URL, err)
			}
			marked[i] = m
		}
		// Last: on PostgreSQL the counter's row is locked until the
		// commit, and every ping takes it.
		_, err := s.execShort(ctx, tx, countPingSQL, len(batch))
		return err
	})
	if err != nil {
		if len(batch) == 1 {
			return nil, fmt.Errorf("record ping of %s: %w", batch[0].Ping.URL, err)
		}
		return nil, fmt.Errorf("record %d pings: %w", len(batch), err)
	}
	return marked, nil
}

// recordPingTx stores one ping and marks its sources due in tx, appending
// the ids of the sources marked to marked.
func (s *sqlStore) recordPingTx(ctx context.Context, tx *txn, r hub.PingToRecord, at time.Time, marked []int64) ([]int64, error) {
	p, note := r.Ping, r.Note
	markSQL := markDueByIDSQL + markDueByIDWhere
	if note != nil {
		markSQL = markDueByIDSQL + markDueByIDNote + markDueByIDWhere
	}
	args := []any{p.Dialect, p.Name, p.URL, p.FeedURL, p.Remote, s.timeArg(p.ReceivedAt), strings.Join(p.Tags, "|")}
	if s.backend == backendSQLite {
		// The row's id without a result set to read: a statement and
		// its rows cost a third of a ping's work in the store.
		res, err := s.execShort(ctx, tx, insertPingSQLite, args...)
		if err != nil {
			return nil, err
		}
		if p.ID, err = res.LastInsertId(); err != nil {
			return nil, err
		}
	} else if err := s.queryRowShort(ctx, tx, insertPingSQL, args, &p.ID); err != nil {
		return nil, err
	}
	var found []int64
	for _, u := range r.URLs {
		err := s.queryShort(ctx, tx, sourcesByURLSQL, []any{u}, func(r *sql.Rows) error {
			var id int64
			if err := r.Scan(&id); err != nil {
				return err
			}
			if !slices.Contains(found, id) {
				found = append(found, id)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("find sources of %s: %w", u, err)
		}
	}
	// In id order: concurrent pings on PostgreSQL lock the rows they
	// share in the same order.
	slices.Sort(found)
	for _, id := range found {
		args := []any{s.timeArg(at), id}
		if note != nil {
			args = append(args, note.Title, note.Description, note.Extensions)
		}
		res, err := s.execShort(ctx, tx, markSQL, args...)
		if err != nil {
			return nil, fmt.Errorf("mark source %d due: %w", id, err)
		}
		// On PostgreSQL a source may have gone since the look-up.
		if n, err := res.RowsAffected(); err != nil {
			return nil, fmt.Errorf("mark source %d due: %w", id, err)
		} else if n > 0 {
			marked = append(marked, id)
		}
	}
	return marked, nil
}

// Pings returns pings received since the given time, newest first (all of
// them when limit <= 0), and the number of pings ever received.
func (s *sqlStore) Pings(ctx context.Context, since time.Time, limit int) ([]hub.Ping, int64, error) {
	return s.PingsBetween(ctx, since, time.Time{}, limit)
}

// PingsBetween returns the pings received in [since, until) (either end
// open when zero), newest first, and the number of pings ever received.
func (s *sqlStore) PingsBetween(ctx context.Context, since, until time.Time, limit int) ([]hub.Ping, int64, error) {
	var total int64
	if err := s.queryRow(ctx, s.read, `SELECT value FROM counters WHERE name = 'pings'`, nil, &total); err != nil {
		return nil, 0, fmt.Errorf("count pings: %w", err)
	}
	query := `SELECT id, dialect, name, url, feed_url, remote, received_at, tags FROM pings`
	var args []any
	var conds []string
	if !since.IsZero() {
		args = append(args, s.timeArg(since))
		conds = append(conds, fmt.Sprintf(`received_at >= $%d`, len(args)))
	}
	if !until.IsZero() {
		args = append(args, s.timeArg(until))
		conds = append(conds, fmt.Sprintf(`received_at < $%d`, len(args)))
	}
	if len(conds) > 0 {
		query += ` WHERE ` + strings.Join(conds, ` AND `)
	}
	query += ` ORDER BY received_at DESC, id DESC`
	if limit > 0 {
		args = append(args, limit)
		query += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	var out []hub.Ping
	err := s.query(ctx, s.read, query, args, func(r *sql.Rows) error {
		var p hub.Ping
		var tags string
		if err := r.Scan(&p.ID, &p.Dialect, &p.Name, &p.URL, &p.FeedURL, &p.Remote, tc(&p.ReceivedAt), &tags); err != nil {
			return err
		}
		if tags != "" {
			p.Tags = strings.Split(tags, "|")
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list pings: %w", err)
	}
	return out, total, nil
}

// Prune removes pings older than pingsBefore and, node by node, the log
// events that are not current items and that the XMPP stream and every
// HTTP subscription have passed or that are out of the node's log window.
func (s *sqlStore) Prune(ctx context.Context, pingsBefore time.Time) error {
	if !pingsBefore.IsZero() {
		if _, err := s.exec(ctx, s.write, `DELETE FROM pings WHERE received_at < $1`, s.timeArg(pingsBefore)); err != nil {
			return fmt.Errorf("prune pings: %w", err)
		}
	}
	type bound struct{ node, seq int64 }
	var bounds []bound
	// A node's bound is the lowest of its XMPP cursor and the cursors of
	// its HTTP subscriptions, whatever their state: a pending or suspended
	// subscription still delivers from its cursor later; and of its XMPP
	// subscriptions with a digest due (store/xmpp.go); but no lower than
	// the start of its log window, where a subscriber further behind
	// skips to (hub.LogWindow).
	err := s.query(ctx, s.read, `SELECT n.id, n.xmpp_seq, n.last_seq,
		(SELECT MIN(s.cursor_seq) FROM subscriptions s WHERE s.node_id = n.id AND `+httpSub+`),
		(SELECT MIN(x.digest_cursor) FROM subscriptions s JOIN xmpp_subscription_state x ON x.subscription_id = s.id
			WHERE s.node_id = n.id AND x.digest_due_at IS NOT NULL)
		FROM nodes n WHERE EXISTS (SELECT 1 FROM events e WHERE e.node_id = n.id)`, nil,
		func(r *sql.Rows) error {
			var b bound
			var last int64
			var minCursor, minDigest sql.NullInt64
			if err := r.Scan(&b.node, &b.seq, &last, &minCursor, &minDigest); err != nil {
				return err
			}
			for _, c := range []sql.NullInt64{minCursor, minDigest} {
				if c.Valid && c.Int64 < b.seq {
					b.seq = c.Int64
				}
			}
			b.seq = max(b.seq, last-hub.LogWindow)
			if b.seq > 0 {
				bounds = append(bounds, b)
			}
			return nil
		})
	if err != nil {
		return fmt.Errorf("prune: find cursors: %w", err)
	}
	for _, b := range bounds {
		if _, err := s.exec(ctx, s.write, `DELETE FROM events WHERE node_id = $1 AND seq <= $2
			AND NOT EXISTS (SELECT 1 FROM items i WHERE i.node_id = events.node_id AND i.seq = events.seq)`,
			b.node, b.seq); err != nil {
			return fmt.Errorf("prune log of node %d: %w", b.node, err)
		}
	}
	return nil
}

// JIDAffiliations lists the JID's affiliations on every node, by node
// name, in one query (the affiliations_jid index).
func (s *sqlStore) JIDAffiliations(ctx context.Context, jid string) ([]hub.NodeAffiliation, error) {
	var out []hub.NodeAffiliation
	err := s.query(ctx, s.read, `SELECT n.name, a.affiliation FROM affiliations a JOIN nodes n ON n.id = a.node_id
		WHERE a.jid = $1 ORDER BY n.name`, []any{jid}, func(r *sql.Rows) error {
		var na hub.NodeAffiliation
		var a string
		if err := r.Scan(&na.Node, &a); err != nil {
			return err
		}
		na.Affiliation = hub.Affiliation(a)
		out = append(out, na)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("affiliations of %s: %w", jid, err)
	}
	return out, nil
}
