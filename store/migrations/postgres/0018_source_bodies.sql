-- A source's last body (kept for merging RFC 3229 deltas and for WebSub
-- topics that are not feeds) moves out of the sources row into a table of
-- its own, so that the fetch state and lease updates of the row never
-- copy it into a new row version. A source without a body has no row here.
CREATE TABLE source_bodies (
    source_id  BIGINT  PRIMARY KEY REFERENCES sources (id) ON DELETE CASCADE,
    body       BYTEA   NOT NULL
);
INSERT INTO source_bodies (source_id, body)
SELECT id, body FROM sources WHERE body IS NOT NULL AND length(body) > 0;
ALTER TABLE sources DROP COLUMN body;
