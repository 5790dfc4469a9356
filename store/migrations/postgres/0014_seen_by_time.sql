-- The ids of a source are forgotten oldest first: when a fetch recorded
-- new ones, those it did not show beyond the newest hub.MaxHiddenSeen
-- (ApplyFetch), and those not shown for 90 days (ForgetSeenEntries). Both
-- read a source's ids in the order of their seen_at.
CREATE INDEX seen_source_time ON seen (source_id, seen_at);
