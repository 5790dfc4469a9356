-- A request about a verified HTTP subscription (new settings, a renewal, an
-- unsubscription) waits here as the subscription's pending change until
-- the callback verifies it; the subscription goes on as it was meanwhile.
-- change_id names the latest request (on a subscription not verified yet,
-- the one its settings come from), so that a verification answered after a
-- newer request came in applies nothing. The verification of a change is
-- leased apart from the deliveries (change_lease_*), so that a callback
-- slow to answer it holds no delivery back.
ALTER TABLE subscriptions ADD COLUMN change_id TEXT NOT NULL DEFAULT '';
ALTER TABLE subscriptions ADD COLUMN change_mode TEXT NOT NULL DEFAULT '';
ALTER TABLE subscriptions ADD COLUMN change_options TEXT NOT NULL DEFAULT '{}';
ALTER TABLE subscriptions ADD COLUMN change_requested_at TEXT;
ALTER TABLE subscriptions ADD COLUMN change_outcome TEXT NOT NULL DEFAULT '';
ALTER TABLE subscriptions ADD COLUMN change_lease_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE subscriptions ADD COLUMN change_lease_until TEXT;
-- Delivery claims: subscriptions with a change to verify.
CREATE INDEX subscriptions_changing ON subscriptions (node_id) WHERE change_mode <> '';
-- An unsubscription waiting for verification stopped deliveries (state
-- unsubscribing); it is now a pending change of the active subscription.
UPDATE subscriptions SET state = 'active', change_id = 'unsubscribing', change_mode = 'unsubscribe',
    change_requested_at = updated_at
WHERE state = 'unsubscribing';
