-- Elements of other namespaces a CNWS resourceChange carried (raw XML),
-- passed on with the change it announces.
ALTER TABLE sources ADD COLUMN note_extensions TEXT NOT NULL DEFAULT '';
