-- Stands in for migration 23, a change of its own, so that 24 follows it;
-- it changes nothing.
SELECT 1;
