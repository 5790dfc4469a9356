-- Subscription ids are never reused, as on PostgreSQL (AUTOINCREMENT; a
-- plain INTEGER PRIMARY KEY hands the highest id out again once its row is
-- deleted). A delivery state saved just after its subscription was removed
-- must not land on a new subscription that took the same id.
CREATE TABLE subscriptions_new (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id             INTEGER NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    kind                TEXT    NOT NULL,
    address             TEXT    NOT NULL,
    bare_jid            TEXT    NOT NULL DEFAULT '',
    sub_id              TEXT    NOT NULL DEFAULT '',
    state               TEXT    NOT NULL,
    options             TEXT    NOT NULL DEFAULT '{}',
    expires_at          TEXT,
    created_at          TEXT    NOT NULL,
    updated_at          TEXT    NOT NULL,
    cursor_seq          INTEGER NOT NULL DEFAULT 0,
    attempts            INTEGER NOT NULL DEFAULT 0,
    consecutive_errors  INTEGER NOT NULL DEFAULT 0,
    first_failure_at    TEXT,
    next_attempt_at     TEXT,
    last_error          TEXT    NOT NULL DEFAULT '',
    last_delivered_at   TEXT,
    last_status         INTEGER NOT NULL DEFAULT 0,
    lease_owner         TEXT    NOT NULL DEFAULT '',
    lease_until         TEXT,
    UNIQUE (node_id, kind, address)
) STRICT;
INSERT INTO subscriptions_new (id, node_id, kind, address, bare_jid, sub_id, state, options, expires_at,
    created_at, updated_at, cursor_seq, attempts, consecutive_errors, first_failure_at, next_attempt_at,
    last_error, last_delivered_at, last_status, lease_owner, lease_until)
SELECT id, node_id, kind, address, bare_jid, sub_id, state, options, expires_at,
    created_at, updated_at, cursor_seq, attempts, consecutive_errors, first_failure_at, next_attempt_at,
    last_error, last_delivered_at, last_status, lease_owner, lease_until
FROM subscriptions;
DROP TABLE subscriptions;
ALTER TABLE subscriptions_new RENAME TO subscriptions;
CREATE INDEX subscriptions_bare_jid ON subscriptions (bare_jid) WHERE bare_jid <> '';
CREATE INDEX subscriptions_expiry ON subscriptions (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX subscriptions_waiting ON subscriptions (state, next_attempt_at) WHERE kind <> 'xmpp';
CREATE INDEX subscriptions_behind ON subscriptions (node_id, state, cursor_seq) WHERE kind <> 'xmpp';
