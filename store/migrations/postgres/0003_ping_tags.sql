-- Tags of extendedPing (the fifth parameter), '|'-separated as received,
-- trimmed; '' for none.
ALTER TABLE pings ADD COLUMN tags TEXT NOT NULL DEFAULT '';
