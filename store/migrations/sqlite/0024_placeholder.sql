-- Placeholder: this version's migration is written on another line of work
-- and replaces this file when both are joined.
SELECT 1;
