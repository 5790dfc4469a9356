package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pingd/pingd/hub"
)

// OpenNodes lists up to limit open nodes with what their sources' last
// fetch said of them, oldest first (creation order sorts alike on both
// backends, where names would follow PostgreSQL's collation), and counts
// the open nodes. It reads neither the sources' bodies nor their fetch
// state.
func (s *sqlStore) OpenNodes(ctx context.Context, limit int) ([]hub.ListedNode, int, error) {
	open := string(hub.AccessOpen)
	var total int
	if err := s.queryRow(ctx, s.read, `SELECT COUNT(*) FROM nodes WHERE access_model = $1`, []any{open}, &total); err != nil {
		return nil, 0, fmt.Errorf("count open nodes: %w", err)
	}
	out := make([]hub.ListedNode, 0, min(limit, total))
	err := s.query(ctx, s.read, `SELECT n.name, n.title, COALESCE(src.url, ''), COALESCE(src.title, ''), COALESCE(src.site_url, '')
		FROM nodes n LEFT JOIN sources src ON src.id = n.source_id
		WHERE n.access_model = $1 ORDER BY n.id LIMIT $2`, []any{open, limit}, func(r *sql.Rows) error {
		var n hub.ListedNode
		if err := r.Scan(&n.Name, &n.Title, &n.SourceURL, &n.SourceTitle, &n.SiteURL); err != nil {
			return err
		}
		out = append(out, n)
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list open nodes: %w", err)
	}
	return out, total, nil
}
