-- The status page reads the few sources, nodes and subscriptions with a
-- problem through these partial indexes, rather than reading and sorting
-- every row to find them (store/stats.go). Each holds only the rows that
-- meet its condition, so the writes of healthy rows do not touch it.
CREATE INDEX sources_problems ON sources (consecutive_errors)
    WHERE consecutive_errors > 0 OR gone OR NOT baselined OR moved_from <> '';
CREATE INDEX nodes_behind_xmpp ON nodes (name) WHERE last_seq > xmpp_seq;
CREATE INDEX subscriptions_problems ON subscriptions (node_id)
    WHERE consecutive_errors > 0 OR state = 'suspended';
