-- What a followed source costs, made smaller.
--
-- A source's last body is stored compressed: encoding says how a row's
-- body is stored, '' as fetched (every row written before) or 'zstd'.
-- No row is rewritten here; each is compressed when its source's
-- representation next changes (store.encodeBody).
ALTER TABLE source_bodies ADD COLUMN encoding TEXT NOT NULL DEFAULT '';

-- The seen ids are their primary key alone (WITHOUT ROWID), not a table
-- and a copy of it in the key's index, and without the index by time:
-- a source keeps the ids of its feed's window (hub.HiddenSeenKept), few
-- enough that ApplyFetch and ForgetSeenEntries order them by time from
-- the key's range of the source.
CREATE TABLE seen_compact (
    source_id  INTEGER NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    entry_id   TEXT    NOT NULL,
    seen_at    TEXT    NOT NULL,
    PRIMARY KEY (source_id, entry_id)
) STRICT, WITHOUT ROWID;
INSERT INTO seen_compact (source_id, entry_id, seen_at) SELECT source_id, entry_id, seen_at FROM seen;
DROP TABLE seen;
ALTER TABLE seen_compact RENAME TO seen;
