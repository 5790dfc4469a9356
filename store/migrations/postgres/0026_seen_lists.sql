-- A source's seen entry ids are one row, not a row each: the ids with
-- the time each was last shown, in one compressed value (store/seenlist.go
-- says how it is written). span_seconds is the time between its oldest
-- and newest id, rounded up, so that ForgetSeenEntries reads only the
-- lists with ids to forget; id_count is how many ids it holds. The value
-- is compressed already: TOAST stores it without trying again.
--
-- The data step (moveSeenIntoLists) writes each source's list from the
-- rows of seen_rows, then drops them.
ALTER TABLE seen RENAME TO seen_rows;
ALTER INDEX seen_pkey RENAME TO seen_rows_pkey;
CREATE TABLE seen (
    source_id    BIGINT  PRIMARY KEY REFERENCES sources (id) ON DELETE CASCADE,
    span_seconds INTEGER NOT NULL,
    id_count     INTEGER NOT NULL,
    ids          BYTEA   NOT NULL
);
ALTER TABLE seen ALTER COLUMN ids SET STORAGE EXTERNAL;
