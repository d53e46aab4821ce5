-- Budgets in PostgreSQL: what ``.state/tickets/<ticket-id>.json`` holds for a ticket (its
-- charges and its caps resets) and what ``.state/batches/<batch-id>/budget.json`` holds for
-- a batch (calls, tokens, estimated cost), so that a charge is one transaction.
--
-- ticket_budgets        one row per ticket that was ever charged or reset. Every charge
--                       and reset locks it (SELECT ... FOR UPDATE): what serialises
--                       charges to one ticket from any number of processes. ``charges``
--                       is how many charges it holds (the next one's position).
-- ticket_charges        the charges, in the order they were made (``position`` 0, 1, ...,
--                       the file's list order). A (kind, key) is charged once.
-- ticket_caps_resets    a person's reset of the caps: ``after`` charges made before it no
--                       longer count (they stay: a charged key is never charged again).
-- batch_spend           one row per batch: calls reserved, tokens and cost recorded
--                       (cost in whole micro-dollars, as the Redis fleet budget counts it).
-- batch_charge_keys     the keys of reservations and records already counted, so a
--                       redelivered one is not counted twice.
--
-- Budgets are never refunded: nothing here is updated downwards or deleted by the code;
-- the CHECKs refuse a negative counter and a charge past the recorded count.

CREATE TABLE ticket_budgets (
    ticket_id text PRIMARY KEY,
    charges integer NOT NULL DEFAULT 0 CHECK (charges >= 0)
);

CREATE TABLE ticket_charges (
    ticket_id text NOT NULL REFERENCES ticket_budgets (ticket_id),
    position integer NOT NULL CHECK (position >= 0),
    kind text NOT NULL CHECK (kind IN ('diagnosis', 'retry', 'infra-retry')),
    key text NOT NULL,
    run_id text NOT NULL,
    at timestamptz NOT NULL,
    PRIMARY KEY (ticket_id, position),
    UNIQUE (ticket_id, kind, key)
);

CREATE TABLE ticket_caps_resets (
    ticket_id text NOT NULL REFERENCES ticket_budgets (ticket_id),
    position integer NOT NULL CHECK (position >= 0),
    at timestamptz NOT NULL,
    by_whom text NOT NULL,
    reason text NOT NULL,
    after integer NOT NULL CHECK (after >= 0),
    cleared jsonb NOT NULL,
    PRIMARY KEY (ticket_id, position)
);

CREATE TABLE batch_spend (
    batch_id text PRIMARY KEY,
    calls bigint NOT NULL DEFAULT 0 CHECK (calls >= 0),
    input_tokens bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cost_micros bigint NOT NULL DEFAULT 0 CHECK (cost_micros >= 0)
);

CREATE TABLE batch_charge_keys (
    batch_id text NOT NULL REFERENCES batch_spend (batch_id),
    step text NOT NULL CHECK (step IN ('reserve', 'record')),
    key text NOT NULL,
    PRIMARY KEY (batch_id, step, key)
);
