-- Implicit nodes that nobody has subscribed to for a day, and sources that
-- no node has followed for an hour, are removed (hub.UnusedNodeGrace,
-- hub.UnfollowedSourceGrace, Store.DeleteUnused). These columns say since
-- when; NULL: in use, or not looked at yet. A new subscription clears its
-- node's, a new node its source's, in the transaction that stores it.
ALTER TABLE nodes ADD COLUMN unsubscribed_since TIMESTAMPTZ;
ALTER TABLE sources ADD COLUMN unfollowed_since TIMESTAMPTZ;
-- Counting the implicit nodes (Config.MaxImplicitNodes) and finding the
-- unused ones read this index only.
CREATE INDEX nodes_implicit ON nodes (unsubscribed_since) WHERE is_implicit;
