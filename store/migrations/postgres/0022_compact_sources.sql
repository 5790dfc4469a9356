-- What a followed source costs, made smaller.
--
-- A source's last body is stored compressed: encoding says how a row's
-- body is stored, '' as fetched (every row written before) or 'zstd'.
-- No row is rewritten here; each is compressed when its source's
-- representation next changes (store.encodeBody). A compressed body does
-- not compress again: TOAST stores it without trying.
ALTER TABLE source_bodies ADD COLUMN encoding TEXT NOT NULL DEFAULT '';
ALTER TABLE source_bodies ALTER COLUMN body SET STORAGE EXTERNAL;

-- The seen ids lose their index by time: a source keeps the ids of its
-- feed's window (hub.HiddenSeenKept), few enough that ApplyFetch and
-- ForgetSeenEntries order them by time from the primary key's range of
-- the source.
DROP INDEX seen_source_time;
