-- The state dir's files other machines read, mirrored (issue 30,
-- ``storage/postgres/mirror.py``): each machine's state dir stays its working copy, and
-- every file the stores write under it is published here, in one fenced transaction,
-- before it lands. Other machines bring down (``hydrate``) what they lack.
--
-- One sequence numbers every write of every table below (and of ``runs``), so
-- "everything newer than N" is one number. A writer draws its number while holding the
-- shared advisory lock ``runs.STATE_SEQ_LOCK``; a reader takes it exclusively for an
-- instant to learn up to which number every writer has finished.
--
-- Paths are never stored: each table's key names the file the way the layout does, and
-- ``mirror.route`` maps a state-dir path to (table, key) and back.
--
-- runs          (0004) + seq: the run record, ``runs/<run-id>.json``
-- verdicts      ``runs/<run-id>.verdict-<n>.json``: written once
-- transcripts   ``runs/<run-id>.replies/<sha256>.txt``: content-addressed, written once
-- approvals     ``runs/<run-id>.approval-<n>.json``: written once
-- batches       ``batches/<batch-id>/{batch,queue}.json`` (not budget.json: the batch's
--               budget is ``batch_spend``; not the workers' logs)
-- stage_logs    ``runs/<run-id>/logs/<name>``, zlib-compressed; ``size`` and ``sha256``
--               are of the uncompressed bytes
-- run_files     every other file of a run, ``name`` relative to ``runs/``: bundles, the
--               hand-off, mechanical-fix reports, the call journal
--               (``<run-id>.replies/pending-<n>.json``), the ticket snapshot
--               (``<run-id>/ticket/…``), ``pull-request.json``, ``pruned.json``, prompts
-- state_files   the rest worth sharing, by path: the notify outbox, the intake dir

CREATE SEQUENCE state_seq AS bigint;

ALTER TABLE runs ADD COLUMN seq bigint NOT NULL DEFAULT nextval('state_seq');
CREATE INDEX runs_seq ON runs (seq);

-- Every write of a run record takes the next number: by a trigger, so ``PostgresRuns``'s
-- upsert is the same statement with or without this migration.
CREATE FUNCTION runs_next_seq() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.seq := nextval('state_seq');
    RETURN NEW;
END
$$;

CREATE TRIGGER runs_next_seq
    BEFORE INSERT OR UPDATE ON runs
    FOR EACH ROW EXECUTE FUNCTION runs_next_seq();

CREATE TABLE verdicts (
    run_id text NOT NULL,
    ticket_id text NOT NULL,
    number integer NOT NULL CHECK (number >= 0),
    body bytea NOT NULL,
    sha256 text NOT NULL,
    seq bigint NOT NULL DEFAULT nextval('state_seq'),
    PRIMARY KEY (run_id, number)
);

CREATE TABLE transcripts (
    run_id text NOT NULL,
    ticket_id text NOT NULL,
    name text NOT NULL,
    body bytea NOT NULL,
    seq bigint NOT NULL DEFAULT nextval('state_seq'),
    PRIMARY KEY (run_id, name)
);

CREATE TABLE approvals (
    run_id text NOT NULL,
    ticket_id text NOT NULL,
    number integer NOT NULL CHECK (number >= 0),
    body bytea NOT NULL,
    seq bigint NOT NULL DEFAULT nextval('state_seq'),
    PRIMARY KEY (run_id, number)
);

CREATE TABLE batches (
    batch_id text NOT NULL,
    name text NOT NULL,
    body bytea NOT NULL,
    seq bigint NOT NULL DEFAULT nextval('state_seq'),
    PRIMARY KEY (batch_id, name)
);

CREATE TABLE stage_logs (
    run_id text NOT NULL,
    ticket_id text NOT NULL,
    name text NOT NULL,
    body bytea NOT NULL,
    size bigint NOT NULL CHECK (size >= 0),
    sha256 text NOT NULL,
    seq bigint NOT NULL DEFAULT nextval('state_seq'),
    PRIMARY KEY (run_id, name)
);

CREATE TABLE run_files (
    run_id text NOT NULL,
    ticket_id text NOT NULL,
    name text NOT NULL,
    body bytea NOT NULL,
    seq bigint NOT NULL DEFAULT nextval('state_seq'),
    PRIMARY KEY (run_id, name)
);

CREATE TABLE state_files (
    path text PRIMARY KEY,
    body bytea NOT NULL,
    seq bigint NOT NULL DEFAULT nextval('state_seq')
);

CREATE INDEX verdicts_seq ON verdicts (seq);
CREATE INDEX transcripts_seq ON transcripts (seq);
CREATE INDEX approvals_seq ON approvals (seq);
CREATE INDEX batches_seq ON batches (seq);
CREATE INDEX stage_logs_seq ON stage_logs (seq);
CREATE INDEX run_files_seq ON run_files (seq);
CREATE INDEX state_files_seq ON state_files (seq);

CREATE INDEX verdicts_ticket_id ON verdicts (ticket_id);
CREATE INDEX transcripts_ticket_id ON transcripts (ticket_id);
CREATE INDEX approvals_ticket_id ON approvals (ticket_id);
CREATE INDEX stage_logs_ticket_id ON stage_logs (ticket_id);
CREATE INDEX run_files_ticket_id ON run_files (ticket_id);
