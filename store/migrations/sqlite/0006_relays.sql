-- Ping relay: pings to forward to the ping servers the operator lists.
CREATE TABLE relays (
    id               INTEGER PRIMARY KEY,
    target           TEXT    NOT NULL,
    name             TEXT    NOT NULL DEFAULT '',
    url              TEXT    NOT NULL,
    feed_url         TEXT    NOT NULL DEFAULT '',
    tags             TEXT    NOT NULL DEFAULT '',
    state            TEXT    NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TEXT NOT NULL,
    last_error       TEXT    NOT NULL DEFAULT '',
    lease_owner      TEXT    NOT NULL DEFAULT '',
    lease_until      TEXT,
    created_at       TEXT NOT NULL,
    sent_at          TEXT
) STRICT;
CREATE INDEX relays_due ON relays (next_attempt_at) WHERE state = 'pending';
CREATE INDEX relays_dedupe ON relays (target, url, created_at);
