-- An XMPP subscription's own state, which it kept in the delivery columns
-- of its subscriptions row with other meanings than the HTTP kinds' (its
-- digest due time in next_attempt_at, its bounces in consecutive_errors,
-- its digest cursor in cursor_seq): the cursor of its digests (XEP-0060
-- pubsub#digest), when the next one is due and when the last one was
-- sent; the bounces of its notifications in a row, since when, and the
-- last one's condition and text. One row per XMPP subscription, gone with
-- it. The XMPP rows of subscriptions keep their delivery columns at their
-- defaults from now on.
CREATE TABLE xmpp_subscription_state (
    subscription_id  INTEGER PRIMARY KEY REFERENCES subscriptions (id) ON DELETE CASCADE,
    digest_cursor    INTEGER NOT NULL DEFAULT 0,
    digest_due_at    TEXT,
    digest_sent_at   TEXT,
    bounces          INTEGER NOT NULL DEFAULT 0,
    first_bounce_at  TEXT,
    last_bounce      TEXT NOT NULL DEFAULT ''
) STRICT;
-- The due digests, without reading every XMPP subscription.
CREATE INDEX xmpp_subscription_state_digests ON xmpp_subscription_state (digest_due_at)
    WHERE digest_due_at IS NOT NULL;

INSERT INTO xmpp_subscription_state (subscription_id, digest_cursor, digest_due_at, digest_sent_at,
    bounces, first_bounce_at, last_bounce)
SELECT id, cursor_seq, next_attempt_at, last_delivered_at, consecutive_errors, first_failure_at, last_error
FROM subscriptions WHERE kind = 'xmpp';
UPDATE subscriptions SET cursor_seq = 0, consecutive_errors = 0, first_failure_at = NULL, next_attempt_at = NULL,
    last_error = '', last_delivered_at = NULL
WHERE kind = 'xmpp';
DROP INDEX subscriptions_digests;
