-- A source's last body (kept for merging RFC 3229 deltas and for WebSub
-- topics that are not feeds) moves out of the sources row into a table of
-- its own. In the row it sat before the fetch state and the lease, and
-- SQLite rewrites a whole record, overflow pages and all, on any UPDATE:
-- every claim, unchanged poll and release rewrote the body. A source
-- without a body has no row here.
CREATE TABLE source_bodies (
    source_id  INTEGER PRIMARY KEY REFERENCES sources (id) ON DELETE CASCADE,
    body       BLOB    NOT NULL
) STRICT;
INSERT INTO source_bodies (source_id, body)
SELECT id, body FROM sources WHERE body IS NOT NULL AND length(body) > 0;
ALTER TABLE sources DROP COLUMN body;
