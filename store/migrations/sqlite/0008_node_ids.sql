-- pingd: foreign keys off
-- Node ids are never reused, as on PostgreSQL (AUTOINCREMENT; a plain
-- INTEGER PRIMARY KEY hands the highest id out again once its row is
-- deleted). Work recorded late for a deleted node (an XMPP acknowledgement
-- naming its id and cursor) must not land on a new node that took the same
-- id. 0007 did the same for subscriptions.
--
-- The table is rebuilt the way SQLite documents for tables that others
-- reference: with foreign keys off (the first line tells the migration
-- runner), so that dropping the old table deletes nothing else and the
-- other tables' references to "nodes" name the new one; the runner checks
-- every reference before it commits.
CREATE TABLE nodes_new (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    name               TEXT    NOT NULL UNIQUE,
    title              TEXT    NOT NULL DEFAULT '',
    access_model       TEXT    NOT NULL,
    max_items          INTEGER NOT NULL,
    deliver_payloads   INTEGER NOT NULL,
    notification_type  TEXT    NOT NULL,
    source_id          INTEGER REFERENCES sources (id),
    is_implicit        INTEGER NOT NULL DEFAULT 0,
    token_hash         BLOB,
    last_seq           INTEGER NOT NULL DEFAULT 0,
    xmpp_seq           INTEGER NOT NULL DEFAULT 0,
    created_at         TEXT    NOT NULL,
    updated_at         TEXT    NOT NULL,
    polling            TEXT    NOT NULL DEFAULT '{}'
) STRICT;
INSERT INTO nodes_new (id, name, title, access_model, max_items, deliver_payloads, notification_type,
    source_id, is_implicit, token_hash, last_seq, xmpp_seq, created_at, updated_at, polling)
SELECT id, name, title, access_model, max_items, deliver_payloads, notification_type,
    source_id, is_implicit, token_hash, last_seq, xmpp_seq, created_at, updated_at, polling
FROM nodes;
DROP TABLE nodes;
ALTER TABLE nodes_new RENAME TO nodes;
CREATE INDEX nodes_source ON nodes (source_id) WHERE source_id IS NOT NULL;
