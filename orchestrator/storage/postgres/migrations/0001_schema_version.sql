-- Version 1: the schema's own bookkeeping. ``schema_version`` itself is made by
-- migrate.py before it reads what is applied (it must exist for migration 1 to be
-- recorded); this migration only describes it, so the table's purpose is in the database.
COMMENT ON TABLE schema_version IS
    'One row per migration applied (orchestrator/storage/postgres/migrations/NNNN_<name>.sql), by migrate.py under an advisory lock';
