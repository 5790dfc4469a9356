-- Nothing to do: PostgreSQL never hands out an identity value twice. The
-- SQLite migration of the same number makes its node ids do the same;
-- both backends keep one version number per schema.
SELECT 1;
