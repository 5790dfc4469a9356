-- A JID's affiliations on every node (XEP-0060 retrieve-affiliations
-- without a node) are read by JID: the primary key starts with the node.
CREATE INDEX affiliations_jid ON affiliations (jid);
