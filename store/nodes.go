package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pingd/pingd/hub"
)

const nodeColumns = `n.id, n.name, n.title, n.access_model, n.max_items, n.deliver_payloads,
	n.notification_type, COALESCE(n.source_id, 0), COALESCE(src.url, ''), n.is_implicit,
	n.token_hash, n.last_seq, n.xmpp_seq, n.created_at, n.updated_at, n.polling, n.send_last_published_item`

const nodesFrom = ` FROM nodes n LEFT JOIN sources src ON src.id = n.source_id`

type rowScanner interface{ Scan(dest ...any) error }

func scanNode(r rowScanner) (hub.Node, error) {
	var n hub.Node
	var access, notify, polling string
	err := r.Scan(&n.ID, &n.Name, &n.Title, &access, &n.MaxItems, &n.DeliverPayloads,
		&notify, &n.SourceID, &n.SourceURL, &n.Implicit,
		&n.TokenHash, &n.LastSeq, &n.XMPPSeq, tc(&n.CreatedAt), tc(&n.UpdatedAt), &polling, &n.SendLastPublished)
	if err == nil && polling != "" && polling != "{}" {
		if jerr := json.Unmarshal([]byte(polling), &n.Polling); jerr != nil {
			return n, fmt.Errorf("node %q: polling hints: %w", n.Name, jerr)
		}
	}
	n.AccessModel = hub.AccessModel(access)
	n.NotificationType = notify
	return n, err
}

func (s *sqlStore) nodesWhere(ctx context.Context, q querier, where string, args ...any) ([]hub.Node, error) {
	var out []hub.Node
	err := s.query(ctx, q, `SELECT `+nodeColumns+nodesFrom+` `+where, args, func(r *sql.Rows) error {
		n, err := scanNode(r)
		if err != nil {
			return err
		}
		out = append(out, n)
		return nil
	})
	return out, err
}

func (s *sqlStore) oneNode(ctx context.Context, q querier, what, where string, args ...any) (*hub.Node, error) {
	n, err := scanNode(rowOf(s, ctx, q, `SELECT `+nodeColumns+nodesFrom+` `+where, args))
	if err != nil {
		return nil, notFound(err, what)
	}
	return &n, nil
}

// boundRow is a *sql.Row whose per-query timeout ends once it is scanned.
type boundRow struct {
	row    *sql.Row
	cancel context.CancelFunc
}

func (b boundRow) Scan(dest ...any) error {
	defer b.cancel()
	return b.row.Scan(dest...)
}

func rowOf(s *sqlStore, ctx context.Context, q querier, query string, args []any) boundRow {
	if sctx, err := statementCtx(ctx, q); err == nil {
		ctx = sctx
	} // else ctx has ended: database/sql refuses the query before it starts
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	return boundRow{row: s.rowContext(ctx, q, query, args), cancel: cancel}
}

// CreateNode stores n and sets its ID, CreatedAt and UpdatedAt; ErrExists
// if the name is taken.
func (s *sqlStore) CreateNode(ctx context.Context, n *hub.Node) error {
	now := dbTimeOf(time.Now())
	var source any
	if n.SourceID != 0 {
		source = n.SourceID
	}
	polling, err := json.Marshal(n.Polling)
	if err != nil {
		return fmt.Errorf("create node %q: polling hints: %w", n.Name, err)
	}
	var id int64
	err = s.inTx(ctx, func(tx *txn) error {
		if n.SourceID != 0 {
			// Followed again: see DeleteUnused.
			if _, err := s.exec(ctx, tx, `UPDATE sources SET unfollowed_since = NULL
				WHERE id = $1 AND unfollowed_since IS NOT NULL`, n.SourceID); err != nil {
				return err
			}
		}
		return s.queryRow(ctx, tx, `INSERT INTO nodes (name, title, access_model, max_items,
			deliver_payloads, notification_type, source_id, is_implicit, token_hash, created_at, updated_at, polling,
			send_last_published_item)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11, $12)
			ON CONFLICT (name) DO NOTHING RETURNING id`,
			[]any{n.Name, n.Title, string(n.AccessModel), n.MaxItems, n.DeliverPayloads, n.NotificationType,
				source, n.Implicit, n.TokenHash, s.timeArg(now), string(polling), cmp.Or(n.SendLastPublished, hub.SendLastOnSub)}, &id)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("node %q: %w", n.Name, hub.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("create node %q: %w", n.Name, err)
	}
	n.ID, n.CreatedAt, n.UpdatedAt = id, now, now
	n.LastSeq, n.XMPPSeq = 0, 0
	return nil
}

// Node returns the node by name.
func (s *sqlStore) Node(ctx context.Context, name string) (*hub.Node, error) {
	return s.oneNode(ctx, s.read, fmt.Sprintf("node %q", name), `WHERE n.name = $1`, name)
}

// NodeByID returns the node by id.
func (s *sqlStore) NodeByID(ctx context.Context, id int64) (*hub.Node, error) {
	return s.oneNode(ctx, s.read, fmt.Sprintf("node %d", id), `WHERE n.id = $1`, id)
}

// Nodes lists every node by name.
func (s *sqlStore) Nodes(ctx context.Context) ([]hub.Node, error) {
	out, err := s.nodesWhere(ctx, s.read, `ORDER BY n.name`)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// NodesBySource lists the nodes following a source, oldest first.
func (s *sqlStore) NodesBySource(ctx context.Context, sourceID int64) ([]hub.Node, error) {
	out, err := s.nodesWhere(ctx, s.read, `WHERE n.source_id = $1 ORDER BY n.id`, sourceID)
	if err != nil {
		return nil, fmt.Errorf("list nodes of source %d: %w", sourceID, err)
	}
	return out, nil
}

// NodesBehindXMPP lists nodes whose log is ahead of the XMPP stream.
func (s *sqlStore) NodesBehindXMPP(ctx context.Context) ([]hub.Node, error) {
	out, err := s.nodesWhere(ctx, s.read, `WHERE n.last_seq > n.xmpp_seq ORDER BY n.id`)
	if err != nil {
		return nil, fmt.Errorf("list nodes behind XMPP: %w", err)
	}
	return out, nil
}

// updateNode runs an UPDATE of one node by name; ErrNotFound.
func (s *sqlStore) updateNode(ctx context.Context, what, name, set string, args ...any) error {
	n := len(args)
	args = append(args, name, s.timeArg(time.Now()))
	count, err := s.execCount(ctx, s.write,
		fmt.Sprintf(`UPDATE nodes SET %s, updated_at = $%d WHERE name = $%d`, set, n+2, n+1), args...)
	if err != nil {
		return fmt.Errorf("%s of node %q: %w", what, name, err)
	}
	if count == 0 {
		return fmt.Errorf("node %q: %w", name, hub.ErrNotFound)
	}
	return nil
}

// UpdateNodeConfig replaces a node's configuration.
func (s *sqlStore) UpdateNodeConfig(ctx context.Context, name string, cfg hub.NodeConfig) error {
	polling, err := json.Marshal(cfg.Polling)
	if err != nil {
		return fmt.Errorf("configure node %q: polling hints: %w", name, err)
	}
	return s.updateNode(ctx, "configure", name,
		`title = $1, access_model = $2, max_items = $3, deliver_payloads = $4, notification_type = $5, polling = $6,
		send_last_published_item = $7`,
		cfg.Title, string(cfg.AccessModel), cfg.MaxItems, cfg.DeliverPayloads, cfg.NotificationType, string(polling),
		cmp.Or(cfg.SendLastPublished, hub.SendLastOnSub))
}

// SetNodeToken replaces the hash of the node's token.
func (s *sqlStore) SetNodeToken(ctx context.Context, name string, hash []byte) error {
	return s.updateNode(ctx, "set token", name, `token_hash = $1`, hash)
}

// SetNodeSource points the node at a source (0: none).
func (s *sqlStore) SetNodeSource(ctx context.Context, name string, sourceID int64) error {
	var source any
	if sourceID != 0 {
		source = sourceID
	}
	return s.updateNode(ctx, "set source", name, `source_id = $1`, source)
}

// DeleteNode removes the node; its log, items, subscriptions and
// affiliations go with it (ON DELETE CASCADE). A node with XMPP
// subscriptions leaves its NodeDeletion (deletions.go) in the same
// transaction.
func (s *sqlStore) DeleteNode(ctx context.Context, name string) error {
	err := s.inTx(ctx, func(tx *txn) error {
		var n hub.Node
		if err := s.queryRow(ctx, tx, `SELECT id, name, title, notification_type FROM nodes WHERE name = $1`+s.forUpdate(),
			[]any{name}, &n.ID, &n.Name, &n.Title, &n.NotificationType); err != nil {
			return notFound(err, fmt.Sprintf("node %q", name))
		}
		if err := s.recordNodeDeletion(ctx, tx, n); err != nil {
			return err
		}
		_, err := s.exec(ctx, tx, `DELETE FROM nodes WHERE id = $1`, n.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete node %q: %w", name, err)
	}
	return nil
}

// CountImplicitNodes counts the implicit nodes; see hub.NodeStore.
func (s *sqlStore) CountImplicitNodes(ctx context.Context) (int, error) {
	var n int
	if err := s.queryRow(ctx, s.read, `SELECT COUNT(*) FROM nodes WHERE is_implicit`, nil, &n); err != nil {
		return 0, fmt.Errorf("count implicit nodes: %w", err)
	}
	return n, nil
}

// SetXMPPSeq records that events up to seq were written to the XMPP stream.
func (s *sqlStore) SetXMPPSeq(ctx context.Context, nodeID int64, seq int64) error {
	// Never backwards: acknowledgements recorded by several processes
	// may arrive out of order. Never past the node's log either: a cursor
	// beyond it can only be wrong, and would silence the next events.
	count, err := s.writeCount(ctx, `UPDATE nodes SET xmpp_seq = CASE
			WHEN xmpp_seq >= $1 THEN xmpp_seq
			WHEN $1 <= last_seq THEN $1
			WHEN xmpp_seq > last_seq THEN xmpp_seq
			ELSE last_seq END
		WHERE id = $2`, seq, nodeID)
	if err != nil {
		return fmt.Errorf("set XMPP sequence of node %d: %w", nodeID, err)
	}
	if count == 0 {
		return fmt.Errorf("node %d: %w", nodeID, hub.ErrNotFound)
	}
	return nil
}

// NodesPage lists one page of the nodes in name order; see hub.NodePage.
// Each page is one query through the unique index on the names, reading
// its own rows (and, with an offset, the ones it skips), never the table.
func (s *sqlStore) NodesPage(ctx context.Context, p hub.NodePage) ([]hub.Node, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	var out []hub.Node
	var err error
	switch {
	case p.Backward && p.Before != "":
		out, err = s.nodesWhere(ctx, s.read, `WHERE n.name < $1 ORDER BY n.name DESC LIMIT $2`, p.Before, p.Limit)
	case p.Backward:
		out, err = s.nodesWhere(ctx, s.read, `ORDER BY n.name DESC LIMIT $1`, p.Limit)
	default:
		// Every name is longer than "", so one text serves the first page too.
		out, err = s.nodesWhere(ctx, s.read, `WHERE n.name > $1 ORDER BY n.name LIMIT $2 OFFSET $3`,
			p.After, p.Limit, max(p.Offset, 0))
	}
	if err != nil {
		return nil, fmt.Errorf("list a page of nodes: %w", err)
	}
	if p.Backward {
		slices.Reverse(out)
	}
	return out, nil
}

// CountNodes counts the nodes.
func (s *sqlStore) CountNodes(ctx context.Context) (int, error) {
	var n int
	if err := s.queryRow(ctx, s.read, `SELECT COUNT(*) FROM nodes`, nil, &n); err != nil {
		return 0, fmt.Errorf("count nodes: %w", err)
	}
	return n, nil
}
