-- pingd schema, version 1 (SQLite).
-- Times are UTC text, 2006-01-02T15:04:05.000000Z, so that text order is
-- time order; NULL stands for "no time". Booleans are 0/1.

CREATE TABLE sources (
    id                  INTEGER PRIMARY KEY,
    original_url        TEXT    NOT NULL UNIQUE,
    url                 TEXT    NOT NULL,
    etag                TEXT    NOT NULL DEFAULT '',
    last_modified       TEXT    NOT NULL DEFAULT '',
    body_hash           TEXT    NOT NULL DEFAULT '',
    content_type        TEXT    NOT NULL DEFAULT '',
    body                BLOB,
    is_feed             INTEGER NOT NULL DEFAULT 0,
    title               TEXT    NOT NULL DEFAULT '',
    description         TEXT    NOT NULL DEFAULT '',
    site_url            TEXT    NOT NULL DEFAULT '',
    hints               TEXT    NOT NULL DEFAULT '{}',
    baselined           INTEGER NOT NULL DEFAULT 0,
    gone                INTEGER NOT NULL DEFAULT 0,
    moved_from          TEXT    NOT NULL DEFAULT '',
    moved_at            TEXT,
    last_fetch_at       TEXT,
    last_status         INTEGER NOT NULL DEFAULT 0,
    last_bytes          INTEGER NOT NULL DEFAULT 0,
    last_new_items      INTEGER NOT NULL DEFAULT 0,
    last_error          TEXT    NOT NULL DEFAULT '',
    consecutive_errors  INTEGER NOT NULL DEFAULT 0,
    unchanged           INTEGER NOT NULL DEFAULT 0,
    last_change_at      TEXT,
    last_ping_at        TEXT,
    next_fetch_at       TEXT,
    next_fetch_reason   TEXT    NOT NULL DEFAULT '',
    has_note            INTEGER NOT NULL DEFAULT 0,
    note_title          TEXT    NOT NULL DEFAULT '',
    note_description    TEXT    NOT NULL DEFAULT '',
    lease_owner         TEXT    NOT NULL DEFAULT '',
    lease_until         TEXT,
    created_at          TEXT    NOT NULL
) STRICT;
CREATE INDEX sources_url ON sources (url);
CREATE INDEX sources_site_url ON sources (site_url) WHERE site_url <> '';
CREATE INDEX sources_due ON sources (next_fetch_at) WHERE NOT gone;

-- seen records every entry id ever found in a source, so that only entries
-- never seen are new; it is keyed by the source, not its URL, so a source
-- that moves keeps them.
CREATE TABLE seen (
    source_id  INTEGER NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    entry_id   TEXT    NOT NULL,
    seen_at    TEXT    NOT NULL,
    PRIMARY KEY (source_id, entry_id)
) STRICT;

CREATE TABLE nodes (
    id                 INTEGER PRIMARY KEY,
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
    updated_at         TEXT    NOT NULL
) STRICT;
CREATE INDEX nodes_source ON nodes (source_id) WHERE source_id IS NOT NULL;

-- events is each node's log; seq counts per node from 1.
CREATE TABLE events (
    node_id    INTEGER NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    item_id    TEXT    NOT NULL DEFAULT '',
    payload    BLOB,
    title      TEXT    NOT NULL DEFAULT '',
    summary    TEXT    NOT NULL DEFAULT '',
    link       TEXT    NOT NULL DEFAULT '',
    address    TEXT    NOT NULL DEFAULT '',
    publisher  TEXT    NOT NULL DEFAULT '',
    updated    TEXT,
    created    TEXT    NOT NULL,
    PRIMARY KEY (node_id, seq)
) STRICT;

-- items names each node's current items: the event that last published
-- the item id, while no retraction, purge or max_items removed it.
CREATE TABLE items (
    node_id  INTEGER NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    item_id  TEXT    NOT NULL,
    seq      INTEGER NOT NULL,
    PRIMARY KEY (node_id, item_id)
) STRICT;
CREATE UNIQUE INDEX items_seq ON items (node_id, seq);

CREATE TABLE subscriptions (
    id                  INTEGER PRIMARY KEY,
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
CREATE INDEX subscriptions_bare_jid ON subscriptions (bare_jid) WHERE bare_jid <> '';
CREATE INDEX subscriptions_expiry ON subscriptions (expires_at) WHERE expires_at IS NOT NULL;
-- Delivery claims: HTTP subscriptions waiting for verification ...
CREATE INDEX subscriptions_waiting ON subscriptions (state, next_attempt_at) WHERE kind <> 'xmpp';
-- ... and active ones whose cursor is behind their node's log.
CREATE INDEX subscriptions_behind ON subscriptions (node_id, state, cursor_seq) WHERE kind <> 'xmpp';

CREATE TABLE affiliations (
    node_id      INTEGER NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    jid          TEXT    NOT NULL,
    affiliation  TEXT    NOT NULL,
    PRIMARY KEY (node_id, jid)
) STRICT;

CREATE TABLE pings (
    id           INTEGER PRIMARY KEY,
    dialect      TEXT NOT NULL,
    name         TEXT NOT NULL DEFAULT '',
    url          TEXT NOT NULL,
    remote       TEXT NOT NULL DEFAULT '',
    received_at  TEXT NOT NULL
) STRICT;
CREATE INDEX pings_received ON pings (received_at);

-- counters keeps totals that outlive pruning (pings ever received).
CREATE TABLE counters (
    name   TEXT    PRIMARY KEY,
    value  INTEGER NOT NULL
) STRICT;
INSERT INTO counters (name, value) VALUES ('pings', 0);
