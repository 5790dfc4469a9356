-- XMPP subscriptions with digests (XEP-0060 pubsub#digest) keep a due
-- time in next_attempt_at; this finds the due ones without reading every
-- XMPP subscription.
CREATE INDEX subscriptions_digests ON subscriptions (next_attempt_at)
    WHERE kind = 'xmpp' AND next_attempt_at IS NOT NULL;
