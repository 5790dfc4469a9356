package store

import (
	"context"
	"fmt"
	"time"
)

// unusedBatch bounds the nodes or sources one DeleteUnused transaction
// removes, so that a large backlog (a node's log goes with it) never holds
// the write connection long.
const unusedBatch = 500

// DeleteUnused removes implicit nodes without subscriptions and sources
// without nodes; see hub.MaintenanceStore.
//
// Each step is one statement. The deleting ones repeat their "unused"
// condition on the row they delete, so on PostgreSQL a subscription (or a
// node) stored while they run keeps its node (or source): storing it
// clears the row's marker first, and a DELETE that waited for that row
// checks the condition again on the new version and leaves it. A
// subscription that comes after the deletion finds no node and fails
// instead of being lost.
func (s *sqlStore) DeleteUnused(ctx context.Context, now, nodesBefore, sourcesBefore time.Time) (nodes, sources int64, err error) {
	const hasSubs = `EXISTS (SELECT 1 FROM subscriptions s WHERE s.node_id = nodes.id)`
	const hasNodes = `EXISTS (SELECT 1 FROM nodes n WHERE n.source_id = sources.id)`
	nodes, err = s.deleteMarked(ctx, now, nodesBefore, "implicit nodes without subscriptions", "nodes", "unsubscribed_since",
		"is_implicit", hasSubs)
	if err != nil {
		return nodes, 0, err
	}
	// After the nodes: the sources of the nodes just deleted are unfollowed
	// from now on.
	sources, err = s.deleteMarked(ctx, now, sourcesBefore, "sources no node follows", "sources", "unfollowed_since",
		"TRUE", hasNodes)
	return nodes, sources, err
}

// deleteMarked clears the marker column of the table's rows that are in
// use again, marks with now those of kind (a condition) that are not, and
// deletes, a batch per transaction, those marked before `before` that are
// still not in use.
func (s *sqlStore) deleteMarked(ctx context.Context, now, before time.Time, what, table, marker, kind, inUse string) (int64, error) {
	if _, err := s.writeCount(ctx, `UPDATE `+table+` SET `+marker+` = NULL
		WHERE `+marker+` IS NOT NULL AND `+inUse); err != nil {
		return 0, fmt.Errorf("%s: clear the marks of those in use: %w", what, err)
	}
	if _, err := s.writeCount(ctx, `UPDATE `+table+` SET `+marker+` = $1
		WHERE `+kind+` AND `+marker+` IS NULL AND NOT `+inUse, s.timeArg(now)); err != nil {
		return 0, fmt.Errorf("%s: mark them: %w", what, err)
	}
	var total int64
	for {
		n, err := s.writeCount(ctx, `DELETE FROM `+table+`
			WHERE `+kind+` AND `+marker+` < $1 AND NOT `+inUse+`
			AND id IN (SELECT id FROM `+table+` WHERE `+kind+` AND `+marker+` < $1 ORDER BY id LIMIT $2)`,
			s.timeArg(before), unusedBatch)
		if err != nil {
			return total, fmt.Errorf("%s: delete them: %w", what, err)
		}
		total += n
		if n < unusedBatch {
			return total, nil
		}
	}
}
