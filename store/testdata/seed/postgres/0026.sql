-- Data written by a pingd at schema version 1, for the migration test:
-- after migrating to the newest version the store must still read it.
INSERT INTO sources (original_url, url, etag, is_feed, title, hints, baselined,
    last_fetch_at, last_status, next_fetch_at, next_fetch_reason, has_note, note_title, created_at)
VALUES ('https://example.org/feed', 'https://example.org/feed', '"v1"', TRUE, 'Seeded feed',
    '{"ttl":3600000000000}', TRUE, '2031-05-06T07:00:00Z', 200, '2031-05-06T08:00:00Z', 'ttl',
    TRUE, 'pending note', '2031-01-01T00:00:00Z');
-- The seen ids as one list per source (version 26): e1, shown at
-- 2031-05-06T07:00:00Z (store/seenlist.go).
INSERT INTO seen (source_id, span_seconds, id_count, ids)
SELECT id, 0, 1, '\x010180f0f288b2a7f006010000026531'::bytea FROM sources WHERE original_url = 'https://example.org/feed';

INSERT INTO nodes (name, title, access_model, max_items, deliver_payloads, notification_type, source_id,
    token_hash, last_seq, xmpp_seq, created_at, updated_at)
SELECT 'seeded', 'Seeded', 'whitelist', 10, TRUE, 'headline', id, '\x00ff', 2, 1,
    '2031-01-01T00:00:00Z', '2031-01-02T00:00:00Z'
FROM sources WHERE original_url = 'https://example.org/feed';

INSERT INTO events (node_id, seq, kind, item_id, payload, title, link, created)
SELECT id, 1, 'item', 'e1', convert_to('<entry/>', 'UTF8'), 'Entry one', 'https://example.org/e1', '2031-05-06T07:00:00Z'
FROM nodes WHERE name = 'seeded';
INSERT INTO events (node_id, seq, kind, created)
SELECT id, 2, 'change', '2031-05-06T07:30:00Z' FROM nodes WHERE name = 'seeded';
INSERT INTO items (node_id, item_id, seq) SELECT id, 'e1', 1 FROM nodes WHERE name = 'seeded';

INSERT INTO subscriptions (node_id, kind, address, state, options, created_at, updated_at, cursor_seq)
SELECT id, 'webhook', 'http://127.0.0.1/cb', 'active', '{"method":"POST","secret":"s3cret"}',
    '2031-01-01T00:00:00Z', '2031-01-01T00:00:00Z', 1
FROM nodes WHERE name = 'seeded';
INSERT INTO affiliations (node_id, jid, affiliation)
SELECT id, 'member@example.org', 'member' FROM nodes WHERE name = 'seeded';

INSERT INTO pings (dialect, name, url, remote, received_at)
VALUES ('rest', 'Seeded blog', 'https://example.org/feed', '127.0.0.1', '2031-05-06T07:00:00Z');
UPDATE counters SET value = value + 1 WHERE name = 'pings';

INSERT INTO upstreams (source_id, kind, endpoint, topic, secret, state, lease_seconds, expires_at, next_renew_at, created_at, updated_at)
SELECT id, 'websub', 'https://hub.example.org/', 'https://example.org/feed', 's3cret', 'active', 86400,
    '2031-05-07T07:00:00Z', '2031-05-07T02:00:00Z', '2031-05-06T07:00:00Z', '2031-05-06T07:00:00Z'
FROM sources WHERE original_url = 'https://example.org/feed';

-- An extendedPing lists the weblog's url and its feed apart.
INSERT INTO pings (dialect, name, url, feed_url, remote, received_at, tags)
VALUES ('xmlrpc-extended', 'Tagged', 'https://example.org/', 'https://example.org/tagged', '192.0.2.9', '2031-05-06T07:30:00Z', 'go|xmpp');

UPDATE nodes SET polling = '{"ttl_minutes":30,"skip_hours":[1,2]}' WHERE name = 'seeded';

INSERT INTO relays (target, name, url, state, next_attempt_at, created_at)
VALUES ('xmlrpc:https://rpc.example.org/RPC2', 'Seeded', 'https://example.org/', 'pending', '2031-05-06T07:00:00Z', '2031-05-06T07:00:00Z');

-- Requests about verified subscriptions, pending until verified: an
-- unsubscription and new settings.
INSERT INTO subscriptions (node_id, kind, address, state, options, created_at, updated_at, cursor_seq,
    change_id, change_mode, change_options, change_requested_at)
SELECT id, 'websub', 'http://127.0.0.1/leaving', 'active', '{"secret":"mine"}', '2031-05-06T07:00:00Z', '2031-05-06T07:00:00Z', 2,
    'c1', 'unsubscribe', '{}', '2031-05-06T07:00:00Z'
FROM nodes WHERE name = 'seeded';
INSERT INTO subscriptions (node_id, kind, address, state, options, created_at, updated_at, cursor_seq,
    change_id, change_mode, change_options, change_requested_at)
SELECT id, 'rsscloud', 'http://127.0.0.1/renewing', 'suspended', '{"protocol":"xml-rpc","procedure":"a.b"}', '2031-05-06T07:00:00Z', '2031-05-06T07:00:00Z', 1,
    'c2', 'subscribe', '{"protocol":"http-post"}', '2031-05-06T07:00:00Z'
FROM nodes WHERE name = 'seeded';

UPDATE nodes SET send_last_published_item = 'never' WHERE name = 'seeded';

-- An implicit node nobody subscribes to, seen so since a time, and its
-- source, unfollowed since a time.
INSERT INTO sources (original_url, url, created_at, unfollowed_since)
VALUES ('https://example.org/unused', 'https://example.org/unused', '2031-01-01T00:00:00Z', '2031-05-06T07:00:00Z');
INSERT INTO nodes (name, access_model, max_items, deliver_payloads, notification_type, is_implicit, created_at, updated_at, unsubscribed_since)
VALUES ('https://example.org/unused', 'open', 10, TRUE, 'headline', TRUE, '2031-01-01T00:00:00Z', '2031-01-01T00:00:00Z', '2031-05-06T07:00:00Z');

-- Subscriptions know the host of their callback.
UPDATE subscriptions SET callback_host = '127.0.0.1' WHERE kind <> 'xmpp';
INSERT INTO subscriptions (node_id, kind, address, state, options, created_at, updated_at, callback_host)
SELECT id, 'cnws', 'http://hooks.example:8080/cnws#https%3A%2F%2Fexample.org%2Ffeed', 'active', '{}', '2031-05-06T07:00:00Z', '2031-05-06T07:00:00Z', 'hooks.example'
FROM nodes WHERE name = 'seeded';

-- A reader's subscription ended by a revoke, stored before a revoke kept
-- the message type of the reader's plain messages.
INSERT INTO nodes (name, access_model, max_items, deliver_payloads, notification_type, last_seq, created_at, updated_at)
VALUES ('revoked', 'open', 10, TRUE, 'headline', 1, '2031-01-01T00:00:00Z', '2031-01-01T00:00:00Z');
INSERT INTO events (node_id, seq, kind, address, created)
SELECT id, 1, 'revoke', 'old@example.org/phone', '2031-05-06T07:00:00Z' FROM nodes WHERE name = 'revoked';

-- A revoke keeps the message type of the reader's plain messages.
UPDATE nodes SET last_seq = 2 WHERE name = 'revoked';
INSERT INTO events (node_id, seq, kind, address, plain_type, created)
SELECT id, 2, 'revoke', 'reader@example.org', 'chat', '2031-05-06T07:30:00Z' FROM nodes WHERE name = 'revoked';

-- A source's body has a table of its own, compressed (version 22).
INSERT INTO source_bodies (source_id, body, encoding)
SELECT id, '\x28b52ffd04003100003c7273732f3e08749f01', 'zstd' FROM sources WHERE original_url = 'https://example.org/feed';

-- A deleted node's XMPP subscribers wait for their delete notifications.
INSERT INTO node_deletions (node_id, name, title, notification_type, subscribers, deleted_at)
VALUES (9999, 'deleted-node', 'Deleted', 'headline',
        '[{"address":"reader@example.org/home","options":{"format":"message"}}]', '2024-05-06T07:08:09Z');

-- XMPP subscriptions keep their digest and bounces in a table of their
-- own: one with digests (its cursor, due time and last digest), one whose
-- notifications bounce.
INSERT INTO subscriptions (node_id, kind, address, bare_jid, sub_id, state, options, created_at, updated_at)
SELECT id, 'xmpp', 'digest@example.org/home', 'digest@example.org', 'd1', 'active',
    '{"digest":true,"digest_frequency_ms":3600000}', '2031-05-06T07:00:00Z', '2031-05-06T07:00:00Z'
FROM nodes WHERE name = 'seeded';
INSERT INTO subscriptions (node_id, kind, address, bare_jid, sub_id, state, options, created_at, updated_at)
SELECT id, 'xmpp', 'away@example.org/phone', 'away@example.org', 'b1', 'active', '{}',
    '2031-05-06T07:00:00Z', '2031-05-06T07:00:00Z'
FROM nodes WHERE name = 'seeded';
INSERT INTO xmpp_subscription_state (subscription_id, digest_cursor, digest_due_at, digest_sent_at)
SELECT id, 1, '2031-05-06T09:00:00Z', '2031-05-06T08:00:00Z' FROM subscriptions WHERE address = 'digest@example.org/home';
INSERT INTO xmpp_subscription_state (subscription_id, digest_cursor, bounces, first_bounce_at, last_bounce)
SELECT id, 2, 2, '2031-05-06T06:00:00Z', 'recipient-unavailable: away' FROM subscriptions WHERE address = 'away@example.org/phone';

-- An item event's text is stored packed (version 23): its item id,
-- title, summary, link, updated time and payload in one zstd frame, those
-- columns empty.
INSERT INTO nodes (name, access_model, max_items, deliver_payloads, notification_type, last_seq, created_at, updated_at)
VALUES ('packed', 'open', 10, TRUE, 'headline', 1, '2031-01-01T00:00:00Z', '2031-01-01T00:00:00Z');
INSERT INTO events (node_id, seq, kind, payload, created, encoding)
SELECT id, 1, 'item', '\x28b52ffd4500019d0035040084059f02733a2f2f6578616d706c652e6f72672f7061636b65645020656e747279222f323033312d30352d30365430373a343553746f72656420636f6d707265737365642c2072656164206261636b2077686f6c652e1a0c23140f0053a3e5891084415ed738a61b6f6b85606b5d8f1497b6ceb72f9e6d588612b64ca9a0c21532b0c1711a2c854f8e5a', '2031-05-06T07:45:00Z', 'z1' FROM nodes WHERE name = 'packed';
INSERT INTO items (node_id, item_id, seq) SELECT id, 'https://example.org/packed', 1 FROM nodes WHERE name = 'packed';
