-- A publish in one statement (issue 30: PostgreSQL may add at most 30 ms a ticket).
--
-- A ticket's run publishes its record about 16 times (once a transition), each one
-- transaction: BEGIN, the lease row locked and read, the clock, the ``state_seq`` lock,
-- the upserts, COMMIT. Sent by psycopg as a pipelined transaction that cost about 2 ms a
-- publish, most of it the driver's own work per statement; the same work as one call of
-- the function below costs a quarter of that. A statement run outside a transaction
-- block is its own transaction, so the call is all or nothing as the block was.
--
-- state_fence(ticket, token)   the fence: locks the ticket's lease row (FOR UPDATE, held
--                              until the transaction ends, so no takeover lands between
--                              this check and the write) and raises SQLSTATE OR001 unless
--                              ``token`` is its current, unexpired token, on the
--                              database's clock read once the lock is held. The error's
--                              DETAIL is JSON: {"current", "holder", "expired"}.
--                              ``runs.check_fence`` calls it: one definition of the fence.
-- publish_state(ticket, token, seq_lock, rows)
--                              state_fence (unless ticket and token are NULL), then
--                              ``state_seq`` held shared (``seq_lock``: the caller's
--                              ``runs.STATE_SEQ_LOCK``), then one row of its table for
--                              each element of ``rows`` (a JSON array of objects: table,
--                              key, ticket_id, number, name, size, sha256, created, and
--                              the body in base64; ``runs.StateRow``): a run record (its
--                              body the record's UTF-8 text), a stage log (compressed and
--                              redacted by the caller; size and sha256 of the uncompressed
--                              bytes), the rest upserted when their bytes changed. A file
--                              written once (verdicts, transcripts, approvals) already
--                              there with other bytes raises SQLSTATE OR002, DETAIL the
--                              element's index (from 0).
--
-- The rows travel as one JSON parameter: psycopg's adaptation of nine parallel arrays
-- (a bytea[] above all) cost more than the statement itself.

CREATE FUNCTION state_fence(p_ticket text, p_token bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    held record;
    expired boolean;
BEGIN
    SELECT token, holder, expires_at INTO held
        FROM ticket_leases WHERE ticket_id = p_ticket FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fenced out: ticket %: no lease', p_ticket USING ERRCODE = 'OR001',
            DETAIL = json_build_object('current', NULL, 'holder', NULL, 'expired', true)::text;
    END IF;
    expired := NOT held.expires_at > clock_timestamp();
    IF held.token <> p_token OR expired THEN
        RAISE EXCEPTION 'fenced out: ticket %', p_ticket USING ERRCODE = 'OR001',
            DETAIL = json_build_object(
                'current', held.token, 'holder', held.holder, 'expired', expired)::text;
    END IF;
END
$$;

CREATE FUNCTION publish_state(
    p_ticket text,
    p_token bigint,
    p_seq_lock bigint,
    p_rows jsonb
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    i integer;
    r jsonb;
    tbl text;
    body bytea;
    held bytea;
BEGIN
    IF p_ticket IS NOT NULL THEN
        PERFORM state_fence(p_ticket, p_token);
    END IF;
    PERFORM pg_advisory_xact_lock_shared(p_seq_lock);
    FOR i IN 0 .. jsonb_array_length(p_rows) - 1 LOOP
        r := p_rows -> i;
        tbl := r ->> 'table';
        body := decode(r ->> 'body', 'base64');
        held := NULL;
        CASE tbl
        WHEN 'runs' THEN
            INSERT INTO runs (run_id, ticket_id, created_at, updated_at, record)
                VALUES (r ->> 'key', r ->> 'ticket_id', (r ->> 'created')::timestamptz,
                        clock_timestamp(), convert_from(body, 'UTF8'))
                ON CONFLICT (run_id) DO UPDATE SET ticket_id = EXCLUDED.ticket_id,
                    created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,
                    record = EXCLUDED.record;
        WHEN 'verdicts' THEN
            INSERT INTO verdicts (run_id, ticket_id, number, body, sha256)
                VALUES (r ->> 'key', r ->> 'ticket_id', (r ->> 'number')::integer, body,
                        r ->> 'sha256')
                ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN
                SELECT v.body INTO held FROM verdicts v
                    WHERE v.run_id = r ->> 'key' AND v.number = (r ->> 'number')::integer;
            END IF;
        WHEN 'approvals' THEN
            INSERT INTO approvals (run_id, ticket_id, number, body)
                VALUES (r ->> 'key', r ->> 'ticket_id', (r ->> 'number')::integer, body)
                ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN
                SELECT a.body INTO held FROM approvals a
                    WHERE a.run_id = r ->> 'key' AND a.number = (r ->> 'number')::integer;
            END IF;
        WHEN 'transcripts' THEN
            INSERT INTO transcripts (run_id, ticket_id, name, body)
                VALUES (r ->> 'key', r ->> 'ticket_id', r ->> 'name', body)
                ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN
                SELECT t.body INTO held FROM transcripts t
                    WHERE t.run_id = r ->> 'key' AND t.name = r ->> 'name';
            END IF;
        WHEN 'stage_logs' THEN
            INSERT INTO stage_logs (run_id, ticket_id, name, body, size, sha256)
                VALUES (r ->> 'key', r ->> 'ticket_id', r ->> 'name', body,
                        (r ->> 'size')::bigint, r ->> 'sha256')
                ON CONFLICT (run_id, name) DO UPDATE SET body = EXCLUDED.body,
                    size = EXCLUDED.size, sha256 = EXCLUDED.sha256, seq = EXCLUDED.seq
                WHERE stage_logs.sha256 <> EXCLUDED.sha256;
        WHEN 'run_files' THEN
            INSERT INTO run_files (run_id, ticket_id, name, body)
                VALUES (r ->> 'key', r ->> 'ticket_id', r ->> 'name', body)
                ON CONFLICT (run_id, name) DO UPDATE SET body = EXCLUDED.body,
                    seq = EXCLUDED.seq
                WHERE run_files.body <> EXCLUDED.body;
        WHEN 'batches' THEN
            INSERT INTO batches (batch_id, name, body)
                VALUES (r ->> 'key', r ->> 'name', body)
                ON CONFLICT (batch_id, name) DO UPDATE SET body = EXCLUDED.body,
                    seq = EXCLUDED.seq
                WHERE batches.body <> EXCLUDED.body;
        WHEN 'state_files' THEN
            INSERT INTO state_files (path, body)
                VALUES (r ->> 'name', body)
                ON CONFLICT (path) DO UPDATE SET body = EXCLUDED.body, seq = EXCLUDED.seq
                WHERE state_files.body <> EXCLUDED.body;
        END CASE;
        IF held IS NOT NULL AND held <> body THEN
            RAISE EXCEPTION 'written once: % already holds other bytes', tbl
                USING ERRCODE = 'OR002', DETAIL = i::text;
        END IF;
    END LOOP;
END
$$;
