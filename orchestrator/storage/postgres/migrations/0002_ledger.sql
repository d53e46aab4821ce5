-- The decision ledger in PostgreSQL: the same rows, hashed over the same bytes, as the
-- file ledger (``ledger.jsonl`` and its head file), so one exports to the other and back
-- and ``ledger verify`` checks either the same way.
--
-- ledger_rows  one row per ledger line, seq 1, 2, 3, ... ``line`` is the line exactly as
--              the file ledger writes it, without its newline (the file's line is
--              ``line || E'\n'``); the hashes are computed over its bytes, never over the
--              other columns. entry_hash, prev_hash and decision_id are copies of the
--              line's members for queries and the index: verify reads only ``line``.
-- ledger_head  one row (id = true): what the head file holds. seq 0 (with no entry_hash)
--              means "no head", as a missing head file does. Each append locks this row
--              (SELECT ... FOR UPDATE), which is what serialises appenders.
--
-- Append-only: triggers raise on UPDATE, DELETE and TRUNCATE of ledger_rows, and on
-- DELETE and TRUNCATE of ledger_head (only its one row is ever updated). The application
-- role usually owns these tables, so revoking privileges from it would not bind it; a
-- trigger does, until someone with the owner's rights disables it, which verify catches.

DO $$
BEGIN
    -- The line's bytes must come back exactly as they went in.
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RAISE EXCEPTION 'the ledger needs a UTF8 database (this one is %)',
            current_setting('server_encoding');
    END IF;
END
$$;

CREATE TABLE ledger_rows (
    seq bigint PRIMARY KEY CHECK (seq >= 1),
    line text NOT NULL CHECK (strpos(line, E'\n') = 0),
    entry_hash text NOT NULL UNIQUE CHECK (entry_hash ~ '^[0-9a-f]{64}$'),
    prev_hash text NOT NULL CHECK (prev_hash ~ '^[0-9a-f]{64}$'),
    decision_id text NOT NULL
);

CREATE INDEX ledger_rows_decision_id ON ledger_rows (decision_id, seq);

CREATE TABLE ledger_head (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    seq bigint NOT NULL CHECK (seq >= 0),
    entry_hash text CHECK (entry_hash ~ '^[0-9a-f]{64}$'),
    hmac text CHECK (hmac ~ '^[0-9a-f]{64}$'),
    CHECK ((seq = 0) = (entry_hash IS NULL)),
    CHECK (seq > 0 OR hmac IS NULL)
);

INSERT INTO ledger_head (id, seq) VALUES (true, 0);

CREATE FUNCTION ledger_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the ledger is append-only: % on % is refused', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER ledger_rows_append_only
    BEFORE UPDATE OR DELETE ON ledger_rows
    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();

CREATE TRIGGER ledger_rows_no_truncate
    BEFORE TRUNCATE ON ledger_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

CREATE TRIGGER ledger_head_kept
    BEFORE DELETE ON ledger_head
    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();

CREATE TRIGGER ledger_head_no_truncate
    BEFORE TRUNCATE ON ledger_head
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- The head only moves forward: an append moves it one row on, an import from 0 to the
-- file's head. Moving it back would hide rows from the truncation check.
CREATE FUNCTION ledger_head_forward() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.seq <= OLD.seq THEN
        RAISE EXCEPTION 'the ledger head only moves forward (from seq % to %)', OLD.seq, NEW.seq
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER ledger_head_forward
    BEFORE UPDATE ON ledger_head
    FOR EACH ROW EXECUTE FUNCTION ledger_head_forward();
