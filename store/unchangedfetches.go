package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/pingd/pingd/hub"
)

// Unchanged fetches. Most polls find nothing new (a 304, the same body, an
// error): their outcome is the source's fetch state alone. They are written
// in batches, one transaction for many sources, and only the columns a fetch
// state changes: what describes the representation stays, and its body,
// in source_bodies, is not touched, so the write is a few hundred bytes a
// source on both backends.

// unchangedFetchSQL writes one unchanged outcome ($1 the source, $15 the
// last ping the fetch knew of, $16 its next fetch), if the source's lease
// is still $18's (the holder that fetched it: see hub.FetchOutcome.Owner). A ping stored after
// $15 makes the source due at that ping unless it is due sooner or gone:
// hub.NextFetchAfter, decided by the statement on the row it updates.
// SET expressions read the row as it was before the UPDATE.
const unchangedFetchSQL = `UPDATE sources SET url = $2, etag = $3, last_modified = $4, hints = $5,
		gone = $6, moved_from = $7, moved_at = $8, last_fetch_at = $9, last_status = $10, last_bytes = $11,
		last_new_items = 0, last_error = $12, consecutive_errors = $13, unchanged = $14,
		last_ping_at = CASE WHEN last_ping_at IS NOT NULL AND ($15 IS NULL OR last_ping_at > $15)
			THEN last_ping_at ELSE $15 END,
		next_fetch_at = CASE WHEN $6 THEN NULL
			WHEN last_ping_at IS NOT NULL AND ($15 IS NULL OR last_ping_at > $15) AND ($16 IS NULL OR last_ping_at < $16)
			THEN last_ping_at ELSE $16 END,
		next_fetch_reason = $17, lease_owner = '', lease_until = NULL
		WHERE id = $1 AND lease_owner = $18`

// unchangedFetchTypes are the PostgreSQL types of unchangedFetchArgs, in
// order: a VALUES list of parameters has no types of its own there.
var unchangedFetchTypes = []string{"bigint", "text", "text", "text", "jsonb", "boolean", "text", "timestamptz",
	"timestamptz", "integer", "bigint", "text", "integer", "integer", "timestamptz", "timestamptz", "text", "text"}

func (s *sqlStore) unchangedFetchArgs(o hub.FetchOutcome, hints []byte) []any {
	st := o.State
	return []any{o.SourceID, st.URL, st.ETag, st.LastModified, string(hints), st.Gone, st.MovedFrom,
		s.timeArg(st.MovedAt), s.timeArg(st.LastFetchAt), st.LastStatus, st.LastBytes, st.LastError,
		st.ConsecutiveErrors, st.Unchanged, s.timeArg(st.LastPingAt), s.timeArg(st.NextFetchAt), st.NextFetchReason, o.Owner}
}

// maxUnchangedPerUpdate bounds the rows of one statement of
// ApplyUnchangedFetches on PostgreSQL (18 arguments each).
const maxUnchangedPerUpdate = 128

// ApplyUnchangedFetches writes the outcomes of fetches that changed
// nothing in one transaction; see hub/fetching's Store.
func (s *sqlStore) ApplyUnchangedFetches(ctx context.Context, outs []hub.FetchOutcome) error {
	if len(outs) == 0 {
		return nil
	}
	// The last outcome of a source named twice wins, and rows are written
	// in id order so that two batches never lock rows in opposite orders.
	byID := make(map[int64]int, len(outs))
	for i, o := range outs {
		if !o.Unchanged() {
			return fmt.Errorf("apply unchanged fetches: source %d: %w: the outcome has a change to publish", o.SourceID, hub.ErrInvalid)
		}
		byID[o.SourceID] = i
	}
	ids := make([]int64, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	rows := make([][]any, 0, len(ids))
	for _, id := range ids {
		o := outs[byID[id]]
		hints, err := json.Marshal(o.State.Hints)
		if err != nil {
			return fmt.Errorf("apply unchanged fetch of source %d: poll hints: %w", id, err)
		}
		rows = append(rows, s.unchangedFetchArgs(o, hints))
	}
	err := s.inTx(ctx, func(tx *txn) error {
		if s.backend == backendSQLite {
			// In-process, a prepared statement per row is cheaper than one
			// UPDATE … FROM (as for SaveDeliveryStates).
			for _, args := range rows {
				if _, err := s.execShort(ctx, tx, unchangedFetchSQL, args...); err != nil {
					return fmt.Errorf("source %d: %w", args[0], err)
				}
			}
			return nil
		}
		// PostgreSQL pays a round trip per statement. The transaction may
		// be run again (a deadlock), so rows itself is not consumed.
		for rest := rows; len(rest) > 0; {
			n := min(len(rest), maxUnchangedPerUpdate)
			query, args := unchangedFetchesSQL(rest[:n])
			if _, err := s.exec(ctx, tx, query, args...); err != nil {
				return err
			}
			rest = rest[n:]
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("apply %d unchanged fetches: %w", len(rows), err)
	}
	return nil
}

// unchangedFetchesSQL is unchangedFetchSQL for several sources in one
// UPDATE … FROM (VALUES …) (PostgreSQL), the rows padded to a power of two
// with copies of the last so that few distinct statements are prepared;
// a copy writes the same values again.
func unchangedFetchesSQL(rows [][]any) (string, []any) {
	var b strings.Builder
	b.WriteString(`UPDATE sources SET url = v.column2, etag = v.column3, last_modified = v.column4,
		hints = v.column5, gone = v.column6, moved_from = v.column7, moved_at = v.column8,
		last_fetch_at = v.column9, last_status = v.column10, last_bytes = v.column11, last_new_items = 0,
		last_error = v.column12, consecutive_errors = v.column13, unchanged = v.column14,
		last_ping_at = CASE WHEN sources.last_ping_at IS NOT NULL
				AND (v.column15 IS NULL OR sources.last_ping_at > v.column15)
			THEN sources.last_ping_at ELSE v.column15 END,
		next_fetch_at = CASE WHEN v.column6 THEN NULL
			WHEN sources.last_ping_at IS NOT NULL AND (v.column15 IS NULL OR sources.last_ping_at > v.column15)
				AND (v.column16 IS NULL OR sources.last_ping_at < v.column16)
			THEN sources.last_ping_at ELSE v.column16 END,
		next_fetch_reason = v.column17, lease_owner = '', lease_until = NULL
		FROM (VALUES `)
	args := writeValuesRows(&b, rows, unchangedFetchTypes, true)
	b.WriteString(`) AS v WHERE sources.id = v.column1 AND sources.lease_owner = v.column18`)
	return b.String(), args
}
