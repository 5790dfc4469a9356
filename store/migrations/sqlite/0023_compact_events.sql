-- An item event's text is stored compressed: encoding says how a row's
-- text is stored, '' as the columns hold it (every row written before,
-- and events other than items) or 'z1' (its item id, title, summary,
-- link, updated time and payload in one zstd frame in payload, those
-- columns empty; store/eventtext.go). No row is rewritten here: events
-- written from now on are packed, and the rows from before go as their
-- items scroll off.
ALTER TABLE events ADD COLUMN encoding TEXT NOT NULL DEFAULT '';
