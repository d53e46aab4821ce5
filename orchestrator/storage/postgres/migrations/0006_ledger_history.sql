-- The decision history in PostgreSQL: what the file ledger's sqlite index (ledger.db)
-- answers, from indexes over the rows themselves, so a decision's confidence history is
-- a few index look-ups however long the ledger grows (issue 30: a decision with 1M rows
-- in the database within 20 ms of one with none).
--
-- Nothing new is stored: both are expression indexes over ``line``, partial to the rows
-- they serve, so they can never disagree with the rows, need no backfill of their own
-- (CREATE INDEX reads the rows there are) and keep the table append-only.
-- ``PostgresLedger.history`` and ``recent_outcomes`` use them to find the candidates,
-- then judge each pair with the file ledger's own Python (``decision_subject``,
-- ``is_green``), so the answers are the scan's exactly.
--
-- ledger_member(line, path...)    one member of a row's JSON as text, or NULL when there
--                                 is none. A \u0000 anywhere in the line (valid JSON, and a
--                                 valid row, which PostgreSQL refuses to read as text) is
--                                 read as U+FFFD: the members looked up here (kind,
--                                 supersedes, decision.signature) are hashes and names, and
--                                 the rest of the row must not hide them. Never an error: an
--                                 index expression that raised would refuse the append of a
--                                 good row.
-- ledger_rows_decision_signature  decision rows, by ``decision.signature``
-- ledger_rows_outcome_supersedes  outcome rows, by the decision row they conclude

CREATE FUNCTION ledger_member(line text, VARIADIC path text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    RETURN (replace(line, '\u0000', '\ufffd')::json) #>> path;
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$;

CREATE INDEX ledger_rows_decision_signature
    ON ledger_rows (ledger_member(line, 'decision', 'signature'), seq)
    WHERE ledger_member(line, 'kind') = 'decision';

CREATE INDEX ledger_rows_outcome_supersedes
    ON ledger_rows (ledger_member(line, 'supersedes'), seq)
    WHERE ledger_member(line, 'kind') = 'outcome';
