-- Upstream push: the subscriptions pingd holds at the WebSub hubs and
-- rssCloud clouds its sources advertise.
CREATE TABLE upstreams (
    id             INTEGER PRIMARY KEY,
    source_id      INTEGER NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    kind           TEXT    NOT NULL,
    endpoint       TEXT    NOT NULL,
    topic          TEXT    NOT NULL,
    secret         TEXT    NOT NULL DEFAULT '',
    state          TEXT    NOT NULL,
    lease_seconds  INTEGER NOT NULL DEFAULT 0,
    expires_at     TEXT,
    next_renew_at  TEXT,
    last_push_at   TEXT,
    last_error     TEXT    NOT NULL DEFAULT '',
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    UNIQUE (source_id, kind)
) STRICT;
