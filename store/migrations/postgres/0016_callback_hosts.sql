-- The host of each HTTP subscription's callback (hub.CallbackHost; '' for
-- XMPP), so that the subscriptions of one callback host are counted from
-- an index (Config.MaxCallbackHostSubscriptions). The rows stored before
-- get theirs from a Go step (dataMigrations).
ALTER TABLE subscriptions ADD COLUMN callback_host TEXT NOT NULL DEFAULT '';
CREATE INDEX subscriptions_callback_host ON subscriptions (callback_host) WHERE callback_host <> '';
