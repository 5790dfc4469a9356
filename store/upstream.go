package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/pingd/pingd/hub"
)

// Upstream subscriptions (hub.UpstreamStore): the subscriptions pingd
// holds at its sources' own WebSub hubs and rssCloud clouds.

var _ hub.UpstreamStore = (*sqlStore)(nil)

const upstreamColumns = `id, source_id, kind, endpoint, topic, secret, state, lease_seconds,
	expires_at, next_renew_at, last_push_at, last_error, created_at, updated_at`

func scanUpstream(r interface{ Scan(...any) error }) (hub.Upstream, error) {
	var u hub.Upstream
	err := r.Scan(&u.ID, &u.SourceID, &u.Kind, &u.Endpoint, &u.Topic, &u.Secret, &u.State, &u.LeaseSeconds,
		tc(&u.ExpiresAt), tc(&u.NextRenewAt), tc(&u.LastPushAt), &u.LastError, tc(&u.CreatedAt), tc(&u.UpdatedAt))
	return u, err
}

// PutUpstream inserts u or replaces the one of the same source and kind.
func (s *sqlStore) PutUpstream(ctx context.Context, u *hub.Upstream) error {
	if u.Kind != hub.UpstreamWebSub && u.Kind != hub.UpstreamRSSCloud {
		return fmt.Errorf("%w: upstream kind %q", hub.ErrInvalid, u.Kind)
	}
	now := time.Now().UTC()
	if u.CreatedAt.IsZero() {
		u.CreatedAt = now
	}
	u.UpdatedAt = now
	err := s.inTx(ctx, func(tx *txn) error {
		return s.queryRow(ctx, tx, `INSERT INTO upstreams (source_id, kind, endpoint, topic, secret, state, lease_seconds,
			expires_at, next_renew_at, last_push_at, last_error, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT (source_id, kind) DO UPDATE SET endpoint = excluded.endpoint, topic = excluded.topic,
				secret = excluded.secret, state = excluded.state, lease_seconds = excluded.lease_seconds,
				expires_at = excluded.expires_at, next_renew_at = excluded.next_renew_at,
				last_push_at = excluded.last_push_at, last_error = excluded.last_error, updated_at = excluded.updated_at
			RETURNING id`,
			[]any{u.SourceID, u.Kind, u.Endpoint, u.Topic, u.Secret, u.State, u.LeaseSeconds,
				s.timeArg(u.ExpiresAt), s.timeArg(u.NextRenewAt), s.timeArg(u.LastPushAt), u.LastError,
				s.timeArg(u.CreatedAt), s.timeArg(u.UpdatedAt)}, &u.ID)
	})
	if err != nil {
		return fmt.Errorf("store upstream %s subscription of source %d: %w", u.Kind, u.SourceID, err)
	}
	return nil
}

// Upstream returns one upstream subscription by id.
func (s *sqlStore) Upstream(ctx context.Context, id int64) (*hub.Upstream, error) {
	var out []hub.Upstream
	if err := s.upstreamsWhere(ctx, &out, `WHERE id = $1`, id); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("upstream %d: %w", id, hub.ErrNotFound)
	}
	return &out[0], nil
}

// UpstreamsOfSource lists a source's upstream subscriptions.
func (s *sqlStore) UpstreamsOfSource(ctx context.Context, sourceID int64) ([]hub.Upstream, error) {
	var out []hub.Upstream
	return out, s.upstreamsWhere(ctx, &out, `WHERE source_id = $1 ORDER BY id`, sourceID)
}

// Upstreams lists every upstream subscription.
func (s *sqlStore) Upstreams(ctx context.Context) ([]hub.Upstream, error) {
	var out []hub.Upstream
	return out, s.upstreamsWhere(ctx, &out, `ORDER BY id`)
}

func (s *sqlStore) upstreamsWhere(ctx context.Context, out *[]hub.Upstream, where string, args ...any) error {
	err := s.query(ctx, s.read, `SELECT `+upstreamColumns+` FROM upstreams `+where, args, func(r *sql.Rows) error {
		u, err := scanUpstream(r)
		if err != nil {
			return err
		}
		*out = append(*out, u)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read upstream subscriptions: %w", err)
	}
	return nil
}

// MarkUpstreamPush records a push received at t.
func (s *sqlStore) MarkUpstreamPush(ctx context.Context, id int64, t time.Time) error {
	n, err := s.execCount(ctx, s.write, `UPDATE upstreams SET last_push_at = $2, updated_at = $2 WHERE id = $1`, id, s.timeArg(t))
	if err != nil {
		return fmt.Errorf("record a push of upstream %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("upstream %d: %w", id, hub.ErrNotFound)
	}
	return nil
}

// DeleteUpstream removes one upstream subscription.
func (s *sqlStore) DeleteUpstream(ctx context.Context, id int64) error {
	n, err := s.execCount(ctx, s.write, `DELETE FROM upstreams WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete upstream %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("upstream %d: %w", id, hub.ErrNotFound)
	}
	return nil
}
