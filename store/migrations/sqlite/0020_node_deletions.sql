-- A deleted node's notice to its XMPP subscribers (XEP-0060 §8.4), written
-- in the transaction that deletes the node and kept until the XMPP server
-- acknowledged the notifications: the node row, its log and its
-- subscriptions are gone by then, so the row keeps what the notifications
-- need (the node's name, title and notification type, and each XMPP
-- subscriber's address and options, JSON). No reference to nodes: the
-- node it names no longer exists.
CREATE TABLE node_deletions (
    id                 INTEGER PRIMARY KEY,
    node_id            INTEGER NOT NULL,
    name               TEXT    NOT NULL,
    title              TEXT    NOT NULL DEFAULT '',
    notification_type  TEXT    NOT NULL DEFAULT '',
    subscribers        TEXT    NOT NULL,
    deleted_at         TEXT    NOT NULL
) STRICT;
