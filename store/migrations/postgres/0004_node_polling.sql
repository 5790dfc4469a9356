-- What a node's owner tells readers of its own feeds about polling:
-- JSON {ttl_minutes, skip_hours, skip_days, update_period, update_frequency}.
ALTER TABLE nodes ADD COLUMN polling TEXT NOT NULL DEFAULT '{}';
