-- The sources under a lease, by their owner: a start reads the ones it or
-- another process left leased (SourcesLeasedBy, SourcesLeasedByOthers),
-- few rows that were a scan of every source (0.6 s before the first poll
-- at a million). A lease is written as '' when it ends, so the index
-- holds only the sources being fetched.
CREATE INDEX sources_leased ON sources (lease_owner) WHERE lease_owner <> '';
