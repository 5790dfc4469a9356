-- When a node sends its newest item to a subscriber (XEP-0060
-- pubsub#send_last_published_item): 'on_sub', at once to each new
-- subscription, or 'never'.
ALTER TABLE nodes ADD COLUMN send_last_published_item TEXT NOT NULL DEFAULT 'on_sub';
