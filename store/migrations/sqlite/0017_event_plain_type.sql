-- A revoke event keeps the message type of the removed subscription's
-- plain messages (hub.Event.PlainType) in a column of its own; '' for an
-- XEP-0060 subscription, which is what revokes stored before read as.
ALTER TABLE events ADD COLUMN plain_type TEXT NOT NULL DEFAULT '';
