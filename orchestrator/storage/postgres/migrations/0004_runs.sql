-- Run records and ticket leases in PostgreSQL (issue 30). Independent of 0003: it
-- creates its own tables and reads no other migration's.
--
-- runs           one row per run. ``record`` is the run record exactly as the file store
--                writes ``runs/<run-id>.json`` (``model_dump_json(indent=2)``), as text,
--                not jsonb: jsonb reorders keys and drops the layout, so an exported file
--                would differ from the one the file store writes, and ``load`` validates
--                the same bytes either store holds. ticket_id and created_at are copies
--                of the record's own members, for ``latest_for_ticket`` and its index;
--                updated_at is when the row was last written (the database's clock).
-- ticket_leases  one row per ticket ever leased: who holds it (``holder``), until when
--                (``expires_at``, the database's clock), and the fencing token of that
--                lease. The row is kept after a release or an expiry, so the token only
--                grows: the next lease takes token + 1 (a row made by an acquire starts at
--                token 0, holder NULL, already expired). A fenced write locks this row and
--                checks the token and the expiry in the transaction that writes.

CREATE TABLE runs (
    run_id text PRIMARY KEY,
    ticket_id text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    record text NOT NULL
);

CREATE INDEX runs_ticket_id ON runs (ticket_id, created_at DESC, run_id);

CREATE TABLE ticket_leases (
    ticket_id text PRIMARY KEY,
    holder text,
    token bigint NOT NULL CHECK (token >= 0),
    expires_at timestamptz NOT NULL
);

-- The token never goes back: a lease row is never deleted, and an update may only keep
-- its token or raise it.
CREATE FUNCTION ticket_leases_token_grows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'ticket_leases rows are kept (ticket %): their token only grows',
            OLD.ticket_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.token < OLD.token THEN
        RAISE EXCEPTION 'the fencing token of ticket % only grows (from % to %)',
            OLD.ticket_id, OLD.token, NEW.token USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER ticket_leases_token_grows
    BEFORE UPDATE OR DELETE ON ticket_leases
    FOR EACH ROW EXECUTE FUNCTION ticket_leases_token_grows();
