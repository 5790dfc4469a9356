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

// sourceColumns are a source's columns but its body, which lives in
// source_bodies (migration 0018) and is read only where it is needed:
// sourceWithBodyColumns and sourceWithBodyFrom add it.
const sourceColumns = `s.id, s.original_url, s.url, s.etag, s.last_modified, s.body_hash, s.content_type,
	s.is_feed, s.title, s.description, s.site_url, s.hints, s.baselined, s.gone,
	s.moved_from, s.moved_at, s.last_fetch_at, s.last_status, s.last_bytes, s.last_new_items,
	s.last_error, s.consecutive_errors, s.unchanged, s.last_change_at, s.last_ping_at,
	s.next_fetch_at, s.next_fetch_reason, s.has_note, s.note_title, s.note_description, s.note_extensions,
	s.lease_owner, s.lease_until, s.created_at`

// sourceWithBodyColumns and sourceWithBodyFrom read a source with its
// body (scanSourceWithBody); a source without one has no source_bodies row.
const (
	sourceWithBodyColumns = sourceColumns + `, b.body, b.encoding`
	sourceWithBodyFrom    = `sources s LEFT JOIN source_bodies b ON b.source_id = s.id`
)

func scanSource(r rowScanner) (hub.Source, error) {
	var src hub.Source
	return src, scanSourceInto(r, &src)
}

func scanSourceWithBody(r rowScanner) (hub.Source, error) {
	var src hub.Source
	var stored []byte
	var encoding sql.NullString // NULL: no source_bodies row
	if err := scanSourceInto(r, &src, &stored, &encoding); err != nil {
		return src, err
	}
	body, err := decodeBody(encoding.String, stored)
	if err != nil {
		return src, fmt.Errorf("body of source %d: %w", src.ID, err)
	}
	src.Body = body
	return src, nil
}

// scanSourceInto scans sourceColumns, then extra.
func scanSourceInto(r rowScanner, src *hub.Source, extra ...any) error {
	var hints []byte
	var hasNote bool
	var note hub.ChangeNote
	st := &src.SourceState
	dest := []any{&src.ID, &src.OriginalURL, &st.URL, &st.ETag, &st.LastModified, &st.BodyHash, &st.ContentType,
		&st.IsFeed, &st.Title, &st.Description, &st.SiteURL, &hints, &st.Baselined, &st.Gone,
		&st.MovedFrom, tc(&st.MovedAt), tc(&st.LastFetchAt), &st.LastStatus, &st.LastBytes, &st.LastNewItems,
		&st.LastError, &st.ConsecutiveErrors, &st.Unchanged, tc(&st.LastChangeAt), tc(&st.LastPingAt),
		tc(&st.NextFetchAt), &st.NextFetchReason, &hasNote, &note.Title, &note.Description, &note.Extensions,
		&src.LeaseOwner, tc(&src.LeaseUntil), tc(&src.CreatedAt)}
	if err := r.Scan(append(dest, extra...)...); err != nil {
		return err
	}
	if len(hints) > 0 {
		if err := json.Unmarshal(hints, &st.Hints); err != nil {
			return fmt.Errorf("source %d: poll hints: %w", src.ID, err)
		}
	}
	if hasNote {
		src.PendingNote = &note
	}
	return nil
}

// sourcesWhere reads sources without their bodies.
func (s *sqlStore) sourcesWhere(ctx context.Context, q querier, where string, args ...any) ([]hub.Source, error) {
	return s.sourcesSelect(ctx, q, `SELECT `+sourceColumns+` FROM sources s `+where, scanSource, args)
}

func (s *sqlStore) sourcesSelect(ctx context.Context, q querier, query string, scan func(rowScanner) (hub.Source, error), args []any) ([]hub.Source, error) {
	var out []hub.Source
	err := s.query(ctx, q, query, args, func(r *sql.Rows) error {
		src, err := scan(r)
		if err != nil {
			return err
		}
		out = append(out, src)
		return nil
	})
	return out, err
}

// EnsureSource returns the source with this URL (original or current),
// creating it if needed.
func (s *sqlStore) EnsureSource(ctx context.Context, url string) (*hub.Source, bool, error) {
	if url == "" {
		return nil, false, fmt.Errorf("%w: empty source URL", hub.ErrInvalid)
	}
	find := func(q querier) (*hub.Source, error) {
		found, err := s.sourcesWhere(ctx, q, `WHERE s.original_url = $1 OR s.url = $1 ORDER BY s.id LIMIT 1`, url)
		if err != nil || len(found) == 0 {
			return nil, err
		}
		return &found[0], nil
	}
	src, err := find(s.read)
	if err != nil {
		return nil, false, fmt.Errorf("find source %s: %w", url, err)
	}
	if src != nil {
		return src, false, nil
	}
	created := false
	err = s.inTx(ctx, func(tx *txn) error {
		n, err := s.execCount(ctx, tx, `INSERT INTO sources (original_url, url, created_at)
			VALUES ($1, $1, $2) ON CONFLICT (original_url) DO NOTHING`, url, s.timeArg(time.Now()))
		if err != nil {
			return err
		}
		created = n == 1
		src, err = find(tx)
		if err == nil && src == nil {
			err = errors.New("source vanished after insert")
		}
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("create source %s: %w", url, err)
	}
	return src, created, nil
}

// Source returns a source by id, with its body (WebSub serves the body
// of a topic that is not a feed); one row read by its key.
func (s *sqlStore) Source(ctx context.Context, id int64) (*hub.Source, error) {
	src, err := scanSourceWithBody(rowOf(s, ctx, s.read,
		`SELECT `+sourceWithBodyColumns+` FROM `+sourceWithBodyFrom+` WHERE s.id = $1`, []any{id}))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("source %d", id))
	}
	return &src, nil
}

// The conditions of SourcesLeasedByOthers and SourcesLeasedBy: both say
// that the lease owner is not empty, as the partial index of leased
// sources (sources_leased) does, so that the index serves them; an
// equality with a parameter does not tell the planner that much. The
// leases of others are sorted after reading: ordered by id in SQL, SQLite
// would rather walk every source in id order than sort a few.
const (
	sourcesLeasedByOthersWhere = `WHERE s.lease_owner <> '' AND s.lease_owner <> $2 AND s.lease_until > $1`
	sourcesLeasedByWhere       = `WHERE s.lease_owner <> '' AND s.lease_owner = $1 ORDER BY s.id`
)

// SourcesLeasedByOthers lists the sources leased by anyone but owner whose
// lease runs at now (a start after a crash), from the index of leased
// sources.
func (s *sqlStore) SourcesLeasedByOthers(ctx context.Context, owner string, now time.Time) ([]hub.Source, error) {
	srcs, err := s.sourcesWhere(ctx, s.read, sourcesLeasedByOthersWhere, s.timeArg(now), owner)
	if err != nil {
		return nil, fmt.Errorf("sources leased by others: %w", err)
	}
	slices.SortFunc(srcs, func(a, b hub.Source) int { return cmp.Compare(a.ID, b.ID) })
	return srcs, nil
}

// SourcesLeasedBy lists the sources whose lease owner holds, whatever its
// time (a start under the name of a process that died).
func (s *sqlStore) SourcesLeasedBy(ctx context.Context, owner string) ([]hub.Source, error) {
	if owner == "" {
		return nil, nil
	}
	srcs, err := s.sourcesWhere(ctx, s.read, sourcesLeasedByWhere, owner)
	if err != nil {
		return nil, fmt.Errorf("sources leased by %q: %w", owner, err)
	}
	return srcs, nil
}

// SourceBody reads the last body alone, decompressed (a fetch merging a
// delta, a new node taking its source's current entries).
func (s *sqlStore) SourceBody(ctx context.Context, id int64) ([]byte, error) {
	var stored []byte
	var encoding string
	err := rowOf(s, ctx, s.read, `SELECT body, encoding FROM source_bodies WHERE source_id = $1`, []any{id}).Scan(&stored, &encoding)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err == nil {
		var body []byte
		if body, err = decodeBody(encoding, stored); err == nil {
			return body, nil
		}
	}
	return nil, fmt.Errorf("body of source %d: %w", id, err)
}

// SourcesMatching returns the sources whose original, current or site URL
// is url.
func (s *sqlStore) SourcesMatching(ctx context.Context, url string) ([]hub.Source, error) {
	if url == "" {
		return nil, nil
	}
	out, err := s.sourcesWhere(ctx, s.read,
		`WHERE s.original_url = $1 OR s.url = $1 OR (s.site_url = $1 AND s.site_url <> '') ORDER BY s.id`, url)
	if err != nil {
		return nil, fmt.Errorf("find sources of %s: %w", url, err)
	}
	return out, nil
}

// Sources lists every source followed by at least one node.
func (s *sqlStore) Sources(ctx context.Context) ([]hub.Source, error) {
	out, err := s.sourcesWhere(ctx, s.read,
		`WHERE EXISTS (SELECT 1 FROM nodes n WHERE n.source_id = s.id) ORDER BY s.id`)
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	return out, nil
}

// MarkSourceDue makes the source due at `at` (earlier only), records the
// ping time and keeps note for the next fetch.
func (s *sqlStore) MarkSourceDue(ctx context.Context, id int64, at time.Time, note *hub.ChangeNote) error {
	atArg := s.timeArg(at)
	query := `UPDATE sources SET
		next_fetch_at = CASE WHEN next_fetch_at IS NULL OR next_fetch_at > $1 THEN $1 ELSE next_fetch_at END,
		last_ping_at = $1`
	args := []any{atArg, id}
	if note != nil {
		query += `, has_note = TRUE, note_title = $3, note_description = $4, note_extensions = $5`
		args = append(args, note.Title, note.Description, note.Extensions)
	}
	count, err := s.writeCount(ctx, query+` WHERE id = $2`, args...)
	if err != nil {
		return fmt.Errorf("mark source %d due: %w", id, err)
	}
	if count == 0 {
		return fmt.Errorf("source %d: %w", id, hub.ErrNotFound)
	}
	return nil
}

// ScheduleSource makes the source due at `at` (earlier only) without
// recording a ping.
func (s *sqlStore) ScheduleSource(ctx context.Context, id int64, at time.Time, reason string) error {
	count, err := s.execCount(ctx, s.write, `UPDATE sources SET
		next_fetch_reason = CASE WHEN next_fetch_at IS NULL OR next_fetch_at > $1 THEN $2 ELSE next_fetch_reason END,
		next_fetch_at = CASE WHEN next_fetch_at IS NULL OR next_fetch_at > $1 THEN $1 ELSE next_fetch_at END
		WHERE id = $3`, s.timeArg(at), reason, id)
	if err != nil {
		return fmt.Errorf("schedule source %d: %w", id, err)
	}
	if count == 0 {
		return fmt.Errorf("source %d: %w", id, hub.ErrNotFound)
	}
	return nil
}

// ForgetSeenEntries forgets, per source, the entry ids its fetches have
// not shown for `after`, counted back from the latest fetch that showed
// any: a source whose feed has not changed for a year forgets nothing.
// It reads only the lists whose ids span more than `after`.
func (s *sqlStore) ForgetSeenEntries(ctx context.Context, after time.Duration) (int64, error) {
	sources, err := s.queryInts(ctx, s.read, `SELECT source_id FROM seen WHERE span_seconds > $1 ORDER BY source_id`,
		int64(after/time.Second))
	if err != nil {
		return 0, fmt.Errorf("forget seen entries: %w", err)
	}
	var forgotten int64
	for _, id := range sources {
		var n int
		err := s.inTx(ctx, func(tx *txn) error {
			n = 0
			// The source's row first, as ApplyFetch locks it before its
			// list: a fetch applied meanwhile is not undone.
			if _, err := s.queryInts(ctx, tx, `SELECT id FROM sources WHERE id = $1`+s.forUpdate(), id); err != nil {
				return err
			}
			list, err := s.seenListTx(ctx, tx, id)
			if err != nil || len(list) == 0 {
				return err
			}
			_, newest := list.bounds()
			if n = list.forgetBefore(newest - after.Microseconds()); n == 0 {
				return nil
			}
			return s.putSeenListTx(ctx, tx, id, list)
		})
		if err != nil {
			return forgotten, fmt.Errorf("forget seen entries of source %d: %w", id, err)
		}
		forgotten += int64(n)
	}
	return forgotten, nil
}

// seenListTx reads the source's seen ids.
func (s *sqlStore) seenListTx(ctx context.Context, tx *txn, sourceID int64) (seenList, error) {
	var stored []byte
	err := s.queryRow(ctx, tx, `SELECT ids FROM seen WHERE source_id = $1`, []any{sourceID}, &stored)
	if errors.Is(err, sql.ErrNoRows) {
		return seenList{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("seen ids of source %d: %w", sourceID, err)
	}
	list, err := decodeSeenList(stored)
	if err != nil {
		return nil, fmt.Errorf("seen ids of source %d: %w", sourceID, err)
	}
	return list, nil
}

// putSeenListTx stores the source's seen ids (an empty list as no row).
func (s *sqlStore) putSeenListTx(ctx context.Context, tx *txn, sourceID int64, list seenList) error {
	if len(list) == 0 {
		_, err := s.exec(ctx, tx, `DELETE FROM seen WHERE source_id = $1`, sourceID)
		return err
	}
	_, err := s.exec(ctx, tx, `INSERT INTO seen (source_id, span_seconds, id_count, ids) VALUES ($1, $2, $3, $4)
		ON CONFLICT (source_id) DO UPDATE SET span_seconds = excluded.span_seconds, id_count = excluded.id_count,
		ids = excluded.ids`, sourceID, list.span(), len(list), list.encode())
	return err
}

// ReviveSource clears a source's gone mark and makes it due at `at`.
func (s *sqlStore) ReviveSource(ctx context.Context, id int64, at time.Time, reason string) (bool, error) {
	count, err := s.writeCount(ctx, `UPDATE sources SET gone = $1, next_fetch_at = $2, next_fetch_reason = $3
		WHERE id = $4 AND gone`, false, s.timeArg(at), reason, id)
	if err != nil {
		return false, fmt.Errorf("revive source %d: %w", id, err)
	}
	if count == 0 {
		if _, err := s.Source(ctx, id); err != nil {
			return false, err
		}
	}
	return count == 1, nil
}

// ClaimDueSources leases up to limit due sources that are not gone, not
// leased and followed by a node, with their subscriber counts. A live
// lease of the same owner is not taken again: that fetch is still running.
func (s *sqlStore) ClaimDueSources(ctx context.Context, now time.Time, limit int, owner string, until time.Time) ([]hub.Source, error) {
	if limit <= 0 {
		return nil, nil
	}
	nowArg := s.timeArg(now)
	var out []hub.Source
	err := s.inTx(ctx, func(tx *txn) error {
		ids, err := s.queryInts(ctx, tx, s.claimSourcesSQL(), nowArg, limit)
		if err != nil || len(ids) == 0 {
			return err
		}
		in, inArgs := inList(3, ids)
		if _, err := s.exec(ctx, tx, `UPDATE sources SET lease_owner = $1, lease_until = $2 WHERE id IN (`+in+`)`,
			append([]any{owner, s.timeArg(until)}, inArgs...)...); err != nil {
			return err
		}
		// Without their bodies: a fetch reads one (SourceBody) only when
		// its origin answers with an RFC 3229 delta.
		in, inArgs = inList(1, ids)
		out, err = s.sourcesWhere(ctx, tx, `WHERE s.id IN (`+in+`)
			ORDER BY s.next_fetch_at, s.id`, inArgs...)
		if err != nil {
			return err
		}
		// The User-Agent's subscriber counts, for the whole claim at once.
		counts, err := s.subscriberCounts(ctx, tx, ids)
		for i := range out {
			out[i].Subscribers = counts[out[i].ID]
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim due sources: %w", err)
	}
	return out, nil
}

// claimSourcesSQL selects the sources to claim ($1 = now, $2 = limit),
// from the sources_due index.
func (s *sqlStore) claimSourcesSQL() string {
	return `SELECT s.id FROM sources s
		WHERE NOT s.gone AND s.next_fetch_at IS NOT NULL AND s.next_fetch_at <= $1
		AND (s.lease_until IS NULL OR s.lease_until <= $1)
		AND EXISTS (SELECT 1 FROM nodes n WHERE n.source_id = s.id)
		ORDER BY s.next_fetch_at, s.id LIMIT $2` + s.skipLocked("s")
}

// NextSourceDue returns the earliest due time after now of a source that
// is not gone and is followed by a node; zero when there is none. It reads
// the first rows of the sources_due index, however many sources there are.
func (s *sqlStore) NextSourceDue(ctx context.Context, now time.Time) (time.Time, error) {
	var next time.Time
	err := s.queryRow(ctx, s.read, `SELECT s.next_fetch_at FROM sources s
		WHERE NOT s.gone AND s.next_fetch_at > $1
		AND EXISTS (SELECT 1 FROM nodes n WHERE n.source_id = s.id)
		ORDER BY s.next_fetch_at LIMIT 1`, []any{s.timeArg(now)}, tc(&next))
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("next source due: %w", err)
	}
	return next, nil
}

// SubscriberCount counts the subscriptions of every kind of the nodes
// following the source.
func (s *sqlStore) SubscriberCount(ctx context.Context, sourceID int64) (int, error) {
	counts, err := s.subscriberCounts(ctx, s.read, []int64{sourceID})
	if err != nil {
		return 0, fmt.Errorf("count subscribers of source %d: %w", sourceID, err)
	}
	return counts[sourceID], nil
}

// subscriberCounts counts, for each of the sources, the subscriptions of
// every kind of the nodes following it; a source without any is left out.
func (s *sqlStore) subscriberCounts(ctx context.Context, q querier, sourceIDs []int64) (map[int64]int, error) {
	counts := make(map[int64]int, len(sourceIDs))
	in, inArgs := inList(1, sourceIDs)
	err := s.query(ctx, q, `SELECT n.source_id, COUNT(*) FROM subscriptions sub
		JOIN nodes n ON n.id = sub.node_id WHERE n.source_id IN (`+in+`) GROUP BY n.source_id`, inArgs,
		func(r *sql.Rows) error {
			var id int64
			var n int
			if err := r.Scan(&id, &n); err != nil {
				return err
			}
			counts[id] = n
			return nil
		})
	return counts, err
}

// ApplyFetch stores a fetch's outcome in one transaction. The body is
// written only when the representation changed (o.Changed): an outcome
// that did not change it (a 304, a note, a release) leaves the stored one,
// whatever o.State.Body holds, as reads without the body leave it empty.
func (s *sqlStore) ApplyFetch(ctx context.Context, o hub.FetchOutcome) (hub.FetchApplied, error) {
	hints, err := json.Marshal(o.State.Hints)
	if err != nil {
		return hub.FetchApplied{}, fmt.Errorf("apply fetch of source %d: poll hints: %w", o.SourceID, err)
	}
	entries := hub.DistinctEntries(o.Entries)
	o.Entries = entries
	var applied hub.FetchApplied
	err = s.inTx(ctx, func(tx *txn) error {
		applied = hub.FetchApplied{}
		now := time.Now()
		var baselined bool
		var lastPing time.Time
		var owner string
		err := s.queryRow(ctx, tx, `SELECT baselined, last_ping_at, lease_owner FROM sources WHERE id = $1`+s.forUpdate(),
			[]any{o.SourceID}, &baselined, tc(&lastPing), &owner)
		if err != nil {
			return notFound(err, fmt.Sprintf("source %d", o.SourceID))
		}
		if owner != o.Owner {
			// The lease ran out and another process took the source: its
			// fetch decides now, this one writes nothing (the row is
			// locked, so the check holds until the commit).
			return fmt.Errorf("lease of %q, not %q: %w", owner, o.Owner, hub.ErrLeaseLost)
		}

		// Record every entry id; those not in the list were never seen
		// (or forgotten since). Those seen before get the time of this
		// fetch, so that only ids a feed stopped showing long ago are
		// forgotten (ForgetSeenEntries).
		seenAt := o.State.LastFetchAt
		if seenAt.IsZero() {
			seenAt = now
		}
		var inserted map[string]bool
		if len(entries) > 0 {
			list, err := s.seenListTx(ctx, tx, o.SourceID)
			if err != nil {
				return err
			}
			ids := make([]string, len(entries))
			for i, e := range entries {
				ids[i] = e.ID
			}
			at := seenMicros(seenAt)
			inserted = list.show(ids, at)
			if len(inserted) > 0 {
				// The record grew: of the ids this fetch did not show,
				// keep those shown last, as many as hub.HiddenSeenKept
				// allows (the feed's own window).
				list.keepHidden(at, hub.HiddenSeenKept(len(entries)))
			}
			if err := s.putSeenListTx(ctx, tx, o.SourceID, list); err != nil {
				return fmt.Errorf("record seen entries: %w", err)
			}
		}
		// The hub's rules say what the fetch brings; this transaction
		// records it.
		news := hub.FetchNewsOf(o, baselined, func(id string) bool { return inserted[id] })
		applied.Baseline = news.Baseline
		applied.New = news.New

		if !news.Empty() {
			type follower struct {
				id       int64
				maxItems int
			}
			var nodes []follower
			err := s.query(ctx, tx, `SELECT id, max_items FROM nodes WHERE source_id = $1 ORDER BY id`, []any{o.SourceID},
				func(r *sql.Rows) error {
					var n follower
					if err := r.Scan(&n.id, &n.maxItems); err != nil {
						return err
					}
					nodes = append(nodes, n)
					return nil
				})
			if err != nil {
				return fmt.Errorf("nodes of source %d: %w", o.SourceID, err)
			}
			for _, n := range nodes {
				// The baseline's entries first, kept as items without
				// telling anyone; then what is told.
				kept, err := s.keepTx(ctx, tx, n.id, news.KeptForNode(n.maxItems), now)
				if err != nil {
					return err
				}
				applied.Kept += len(kept)
				events := news.ForNode(n.maxItems)
				if len(events) == 0 {
					continue
				}
				if _, err := s.appendTx(ctx, tx, n.id, events, now); err != nil {
					return err
				}
				applied.Published += len(events) - len(news.Change)
				applied.Nodes = append(applied.Nodes, n.id)
			}
		}

		if news.Title != "" {
			// Nodes pingd made for the source's URL read as the feed.
			if _, err := s.exec(ctx, tx, `UPDATE nodes SET title = $2
				WHERE source_id = $1 AND is_implicit AND title = ''`, o.SourceID, news.Title); err != nil {
				return fmt.Errorf("title the nodes of source %d: %w", o.SourceID, err)
			}
		}

		// A ping stored while this fetch ran makes the source due again.
		st := o.State
		st.LastPingAt = dbTimeOf(st.LastPingAt)
		st = hub.NextFetchAfter(st, lastPing)
		nextFetch := st.NextFetchAt
		if _, err := s.exec(ctx, tx, `UPDATE sources SET url = $2, etag = $3, last_modified = $4,
			body_hash = $5, content_type = $6, is_feed = $7, title = $8, description = $9,
			site_url = $10, hints = $11, baselined = $12, gone = $13, moved_from = $14, moved_at = $15,
			last_fetch_at = $16, last_status = $17, last_bytes = $18, last_new_items = $19,
			last_error = $20, consecutive_errors = $21, unchanged = $22, last_change_at = $23,
			last_ping_at = $24, next_fetch_at = $25, next_fetch_reason = $26,
			lease_owner = '', lease_until = NULL
			WHERE id = $1`,
			o.SourceID, st.URL, st.ETag, st.LastModified, st.BodyHash, st.ContentType, st.IsFeed,
			st.Title, st.Description, st.SiteURL, string(hints), st.Baselined || baselined || applied.Baseline, st.Gone,
			st.MovedFrom, s.timeArg(st.MovedAt), s.timeArg(st.LastFetchAt), st.LastStatus, st.LastBytes,
			len(news.New), st.LastError, st.ConsecutiveErrors, st.Unchanged, s.timeArg(st.LastChangeAt),
			s.timeArg(st.LastPingAt), s.timeArg(nextFetch), st.NextFetchReason); err != nil {
			return fmt.Errorf("store state of source %d: %w", o.SourceID, err)
		}
		if o.Changed {
			if err := s.replaceBody(ctx, tx, o.SourceID, st.Body); err != nil {
				return fmt.Errorf("store body of source %d: %w", o.SourceID, err)
			}
		}
		if o.Note != nil {
			// Clear the note this fetch consumed, unless another one
			// replaced it meanwhile.
			if _, err := s.exec(ctx, tx, `UPDATE sources SET has_note = FALSE, note_title = '', note_description = '',
				note_extensions = ''
				WHERE id = $1 AND has_note AND note_title = $2 AND note_description = $3 AND note_extensions = $4`,
				o.SourceID, o.Note.Title, o.Note.Description, o.Note.Extensions); err != nil {
				return fmt.Errorf("clear note of source %d: %w", o.SourceID, err)
			}
		}
		return nil
	})
	if err != nil {
		return hub.FetchApplied{}, fmt.Errorf("apply fetch of source %d: %w", o.SourceID, err)
	}
	return applied, nil
}

// replaceBody makes body the source's stored body, compressed
// (encodeBody); an empty one is stored as none (no source_bodies row).
func (s *sqlStore) replaceBody(ctx context.Context, tx *txn, sourceID int64, body []byte) error {
	if len(body) == 0 {
		_, err := s.exec(ctx, tx, `DELETE FROM source_bodies WHERE source_id = $1`, sourceID)
		return err
	}
	encoding, stored := encodeBody(body)
	_, err := s.exec(ctx, tx, `INSERT INTO source_bodies (source_id, body, encoding) VALUES ($1, $2, $3)
		ON CONFLICT (source_id) DO UPDATE SET body = excluded.body, encoding = excluded.encoding`, sourceID, stored, encoding)
	return err
}
