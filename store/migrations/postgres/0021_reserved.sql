-- Stands in for migration 21, a change of its own, so that 22 follows it;
-- it changes nothing.
SELECT 1;
