"""A whole state dir moved into a PostgreSQL database (``export_state``) and back
(``import_state``): what ``orchestrator storage export|import`` does (issue 30).

What moves, and how
    The ledger by ``import_ledger``/``export_ledger`` (the same lines, byte for byte), the
    budgets by ``export_budgets``/``import_budgets`` (here: ``tickets/<id>.json`` to and
    from ticket_budgets/ticket_charges/ticket_caps_resets, ``batches/<id>/budget.json`` to
    and from batch_spend), and every other file the state dir mirrors by ``StateMirror``
    (``publish_tree``, ``hydrate``).

Never over anyone's state
    An export refuses a database that holds ledger rows, runs or budgets; an import
    refuses a state dir that has a ledger, runs or budget files. Each names what it
    found. Both check before they write anything, and refuse a ledger that does not
    verify (the source's) before anything is written. An export is one transaction, the
    mirror's per-file transactions nested in it: it commits whole or not at all.

Afterwards each side's ledger is verified again (the database's by ``PostgresLedger``,
the files' by ``Ledger``) and the ``TransferReport`` says what moved and what the verify
said. Stop every writer first: nothing here locks the state dir or the database against
them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.domain.errors import StateError
from orchestrator.domain.validation import read_model
from orchestrator.storage._atomic import atomic_write
from orchestrator.storage.batch_budget import Spend
from orchestrator.storage.budget import TicketBudget
from orchestrator.storage.files import FileStorage
from orchestrator.storage.layout import TICKETS_DIR, StateLayout, run_record_paths
from orchestrator.storage.ledger import Ledger, LedgerError, VerifyResult
from orchestrator.storage.postgres.budgets import KINDS, _budget
from orchestrator.storage.postgres.ledger import PostgresLedger, export_ledger, import_ledger
from orchestrator.storage.postgres.migrate import migrate
from orchestrator.storage.postgres.mirror import RUN_TABLES, StateMirror
from orchestrator.storage.postgres.session import (
    ConnectionFactory,
    connection_factory,
    transaction,
)

if TYPE_CHECKING:
    import psycopg

WHERE = "state error: the PostgreSQL database"


@dataclass(frozen=True)
class BudgetCounts:
    """What a budgets transfer moved."""

    tickets: int = 0
    charges: int = 0
    resets: int = 0
    batches: int = 0

    def __str__(self) -> str:
        return (
            f"{self.tickets} ticket budget(s) ({self.charges} charge(s), {self.resets} caps "
            f"reset(s)), {self.batches} batch budget(s)"
        )


@dataclass(frozen=True)
class TransferReport:
    """What ``export_state``/``import_state`` moved, counted in the state dir, and the
    verify of the ledger where it arrived."""

    direction: Literal["export", "import"]
    runs: int
    verdicts: int
    approvals: int
    ledger_rows: int
    budgets: BudgetCounts
    files: int  # published or hydrated by the mirror (runs, verdicts, logs, ...)
    verify: VerifyResult

    def lines(self) -> list[str]:
        """The report for a person, one fact a line."""
        if self.verify.ok:
            verified = f"OK: {self.verify.count} entries"
        else:
            at = f" at line {self.verify.line}" if self.verify.line is not None else ""
            verified = f"FAILED{at}: {self.verify.reason}"
        return [
            f"runs: {self.runs}",
            f"verdicts: {self.verdicts}",
            f"approvals: {self.approvals}",
            f"ledger rows: {self.ledger_rows}",
            f"budgets: {self.budgets}",
            f"files: {self.files}",
            f"ledger verify ({'database' if self.direction == 'export' else 'files'}): {verified}",
        ]


# --- budgets ---------------------------------------------------------------------------


def _ticket_budgets(layout: StateLayout) -> list[TicketBudget]:
    """Every ``tickets/<id>.json`` of the state dir, read and checked, in name order."""
    found = []
    for path in sorted((layout.root / TICKETS_DIR).glob("*.json")):
        budget = read_model(path, TicketBudget, "ticket budget")
        if budget is None:  # gone since the glob: nothing to move
            continue
        if layout.ticket_budget_path(budget.ticket_id) != path:
            raise StateError(
                f"state error: {path}: holds the budget of ticket {budget.ticket_id!r}, "
                "not of the ticket its name says; refusing to export it"
            )
        times = [c.at for c in budget.charges] + [r.at for r in budget.resets]
        if any(at.tzinfo is None or at.utcoffset() is None for at in times):
            raise StateError(
                f"state error: {path}: a time without a timezone; refusing to export it "
                "(the database stores aware times)"
            )
        found.append(budget)
    return found


def _batch_spends(layout: StateLayout) -> list[tuple[str, Spend]]:
    """Every ``batches/<id>/budget.json``, read and checked, by batch id."""
    found = []
    for batch_id in layout.batch_ids():
        path = layout.batch_budget_path(batch_id)
        try:
            raw = json.loads(path.read_bytes())
            spend = Spend(**raw)
            counts = (spend.calls, spend.input_tokens, spend.output_tokens)
            valid = all(type(n) is int and n >= 0 for n in counts) and (
                isinstance(spend.cost_usd, int | float) and spend.cost_usd >= 0
            )
        except FileNotFoundError:
            continue
        except (OSError, ValueError, TypeError) as exc:
            raise StateError(f"state error: {path}: not a batch budget: {exc}") from None
        if not valid:
            raise StateError(f"state error: {path}: not a batch budget: {raw!r}")
        found.append((batch_id, spend))
    return found


def _budget_rows(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """(ticket budgets, batch budgets) the database holds."""
    (tickets,) = conn.execute("SELECT count(*) FROM ticket_budgets").fetchone() or (0,)
    (batches,) = conn.execute("SELECT count(*) FROM batch_spend").fetchone() or (0,)
    return int(tickets), int(batches)


def _refuse_held_budgets(conn: psycopg.Connection[Any]) -> None:
    tickets, batches = _budget_rows(conn)
    if tickets or batches:
        raise StateError(
            f"{WHERE}: refusing to export budgets into a database that already holds "
            f"{tickets} ticket budget(s) and {batches} batch budget(s)"
        )


def _write_budgets(
    conn: psycopg.Connection[Any],
    tickets: list[TicketBudget],
    batches: list[tuple[str, Spend]],
) -> BudgetCounts:
    for budget in tickets:
        conn.execute(
            "INSERT INTO ticket_budgets (ticket_id, charges) VALUES (%s, %s)",
            (budget.ticket_id, len(budget.charges)),
        )
        for position, charge in enumerate(budget.charges):
            conn.execute(
                "INSERT INTO ticket_charges (ticket_id, position, kind, key, run_id, at) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (budget.ticket_id, position, charge.kind, charge.key, charge.run_id, charge.at),
            )
        for position, reset in enumerate(budget.resets):
            conn.execute(
                "INSERT INTO ticket_caps_resets "
                "(ticket_id, position, at, by_whom, reason, after, cleared) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (
                    budget.ticket_id,
                    position,
                    reset.at,
                    reset.by,
                    reset.reason,
                    reset.after,
                    json.dumps(reset.cleared),
                ),
            )
    for batch_id, spend in batches:
        conn.execute(
            "INSERT INTO batch_spend (batch_id, calls, input_tokens, output_tokens, cost_micros) "
            "VALUES (%s, %s, %s, %s, %s)",
            (
                batch_id,
                spend.calls,
                spend.input_tokens,
                spend.output_tokens,
                round(spend.cost_usd * 1_000_000),
            ),
        )
    return BudgetCounts(
        tickets=len(tickets),
        charges=sum(len(b.charges) for b in tickets),
        resets=sum(len(b.resets) for b in tickets),
        batches=len(batches),
    )


def _txn(
    factory: ConnectionFactory, *, snapshot: bool = False
) -> AbstractContextManager[psycopg.Connection[Any]]:
    return transaction(factory, says=WHERE, error=StateError, snapshot=snapshot, utc=True)


def export_budgets(state_dir: Path, source: str | ConnectionFactory) -> BudgetCounts:
    """Every ticket budget and batch budget of ``state_dir`` into the database's budget
    tables, in one transaction (the schema migrated). Refuses a database that already
    holds budgets, and a budget file that does not read, before writing anything."""
    layout = StateLayout(state_dir)
    tickets, batches = _ticket_budgets(layout), _batch_spends(layout)
    factory = connection_factory(source)
    with factory() as conn:
        migrate(conn)
    with _txn(factory) as conn:
        _refuse_held_budgets(conn)
        return _write_budgets(conn, tickets, batches)


def _budget_files(layout: StateLayout) -> list[Path]:
    tickets = sorted((layout.root / TICKETS_DIR).glob("*.json"))
    batches = [layout.batch_budget_path(b) for b in layout.batch_ids()]
    return tickets + [path for path in batches if path.exists()]


def _ordered(budget: TicketBudget) -> TicketBudget:
    """``cleared`` in the file store's order (jsonb keeps its own), so the file written
    is the bytes ``BudgetStore`` wrote."""
    resets = tuple(
        reset.model_copy(
            update={
                "cleared": {
                    **{k: reset.cleared[k] for k in KINDS if k in reset.cleared},
                    **reset.cleared,
                }
            }
        )
        for reset in budget.resets
    )
    return budget.model_copy(update={"resets": resets})


def _read_budgets(
    conn: psycopg.Connection[Any],
) -> tuple[list[TicketBudget], list[tuple[str, Spend]]]:
    ids = [t for (t,) in conn.execute("SELECT ticket_id FROM ticket_budgets ORDER BY ticket_id")]
    tickets = [_ordered(_budget(conn, ticket_id)) for ticket_id in ids]
    batches = [
        (batch_id, Spend(int(calls), int(inp), int(out), int(micros) / 1_000_000))
        for batch_id, calls, inp, out, micros in conn.execute(
            "SELECT batch_id, calls, input_tokens, output_tokens, cost_micros FROM batch_spend "
            "ORDER BY batch_id"
        )
    ]
    return tickets, batches


def _write_budget_files(
    layout: StateLayout, tickets: list[TicketBudget], batches: list[tuple[str, Spend]]
) -> BudgetCounts:
    """The files as ``BudgetStore`` and ``BatchBudget`` write them (the same encoding)."""
    for budget in tickets:
        path = layout.ticket_budget_path(budget.ticket_id)
        atomic_write(path, budget.model_dump_json(indent=2).encode())
    for batch_id, spend in batches:
        path = layout.batch_budget_path(batch_id)
        atomic_write(path, json.dumps(spend.__dict__, sort_keys=True).encode())
    return BudgetCounts(
        tickets=len(tickets),
        charges=sum(len(b.charges) for b in tickets),
        resets=sum(len(b.resets) for b in tickets),
        batches=len(batches),
    )


def _refuse_budget_files(layout: StateLayout) -> None:
    held = _budget_files(layout)
    if held:
        raise StateError(
            f"state error: {layout.root}: refusing to import budgets into a state dir that "
            f"already has {len(held)} budget file(s) (e.g. {held[0]})"
        )


def import_budgets(source: str | ConnectionFactory, state_dir: Path) -> BudgetCounts:
    """The database's ticket and batch budgets as ``tickets/<id>.json`` and
    ``batches/<id>/budget.json`` files, read from one snapshot. Refuses a state dir that
    already has budget files. A batch's charge keys (what made a redelivered
    reservation count once) have no place in the file and are not written."""
    layout = StateLayout(state_dir)
    _refuse_budget_files(layout)
    with _txn(connection_factory(source), snapshot=True) as conn:
        tickets, batches = _read_budgets(conn)
    return _write_budget_files(layout, tickets, batches)


# --- the whole state dir -------------------------------------------------------------


@contextmanager
def _lent(conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    """``conn`` lent to a store without closing it: its transactions nest in ours."""
    yield conn


def _count(conn: psycopg.Connection[Any], table: str) -> int:
    (found,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone() or (0,)
    return int(found)


def _database_holds(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """What the database holds of a state dir, each kind that it holds any of."""
    tickets, batches = _budget_rows(conn)
    others = [t for t in (*RUN_TABLES, "batches", "state_files") if t != "runs"]
    held = {
        "ledger row(s)": _count(conn, "ledger_rows"),
        "run(s)": _count(conn, "runs"),
        "other mirrored file(s)": sum(_count(conn, table) for table in others),
        "ticket budget(s)": tickets,
        "batch budget(s)": batches,
    }
    return {what: n for what, n in held.items() if n}


def _state_dir_holds(layout: StateLayout) -> dict[str, int]:
    ledger = [
        p for p in (layout.ledger_path, layout.ledger_path.with_suffix(".head")) if p.exists()
    ]
    held = {
        "ledger file(s)": len(ledger),
        "run(s)": len(list(run_record_paths(layout.runs_dir))),
        "budget file(s)": len(_budget_files(layout)),
    }
    return {what: n for what, n in held.items() if n}


def _said(held: dict[str, int]) -> str:
    return ", ".join(f"{n} {what}" for what, n in held.items())


def _counted(
    direction: Literal["export", "import"],
    state_dir: Path,
    budgets: BudgetCounts,
    files: int,
    verify: VerifyResult,
) -> TransferReport:
    storage = FileStorage(state_dir)
    return TransferReport(
        direction=direction,
        runs=len(list(run_record_paths(storage.layout.runs_dir))),
        verdicts=len(storage.decisions.find()),
        approvals=len(storage.approvals.find()),
        ledger_rows=verify.count,
        budgets=budgets,
        files=files,
        verify=verify,
    )


def export_state(
    state_dir: Path, source: str | ConnectionFactory, *, key: bytes | None = None
) -> TransferReport:
    """The state dir's files into the database: the schema migrated, then the ledger, the
    budgets and every mirrored file in one transaction (a failure leaves the database as
    it was); then the database's ledger verified. Refuses a file
    ledger that does not verify and a database that holds ledger rows, runs, other
    mirrored files or budgets. ``key``: the ledger's HMAC key."""
    layout = StateLayout(state_dir)
    if not state_dir.is_dir():
        raise StateError(f"state error: {state_dir}: no such state dir")
    ledger_file = Ledger(layout.ledger_path, key=key)
    checked = ledger_file.verify()
    if not checked.ok:
        at = f"line {checked.line}: " if checked.line is not None else ""
        raise LedgerError(
            f"ledger error: {layout.ledger_path}: refusing to export: {at}{checked.reason}"
        )
    tickets, batches = _ticket_budgets(layout), _batch_spends(layout)
    factory = connection_factory(source)
    with factory() as conn:
        migrate(conn)
        with _txn(lambda: _lent(conn)) as locked:
            held = _database_holds(locked)
            if held:
                raise StateError(
                    f"{WHERE}: refusing to export into a database that is not empty "
                    f"(it holds {_said(held)})"
                )
            if layout.ledger_path.exists():
                import_ledger(layout.ledger_path, PostgresLedger(lambda: _lent(locked), key=key))
            budgets = _write_budgets(locked, tickets, batches)
            files = StateMirror(lambda: _lent(locked), state_dir).publish_tree()
    verify = PostgresLedger(factory, key=key).verify()
    return _counted("export", state_dir, budgets, files, verify)


def import_state(
    source: str | ConnectionFactory, state_dir: Path, *, key: bytes | None = None
) -> TransferReport:
    """The database into the state dir's files: the ledger (``ledger.jsonl`` and its
    head), the budget files, then every mirrored file; then the file ledger verified.
    Refuses, before writing anything, a state dir that has a ledger, runs or budgets, a
    database that holds nothing, and a database ledger that does not verify."""
    layout = StateLayout(state_dir)
    held = _state_dir_holds(layout)
    if held:
        raise StateError(
            f"state error: {state_dir}: refusing to import into a state dir that is not "
            f"empty (it has {_said(held)})"
        )
    factory = connection_factory(source)
    with factory() as conn:
        migrate(conn)
    with _txn(factory, snapshot=True) as conn:
        if not _database_holds(conn):
            raise StateError(f"{WHERE}: holds no state: nothing to import (the wrong URL?)")
        tickets, batches = _read_budgets(conn)
    ledger = PostgresLedger(factory, key=key)
    checked = ledger.verify()
    if not checked.ok:
        at = f"line {checked.line}: " if checked.line is not None else ""
        raise LedgerError(f"{ledger.where}: refusing to import: {at}{checked.reason}")
    state_dir.mkdir(parents=True, exist_ok=True)
    if checked.count:
        export_ledger(ledger, layout.ledger_path)
    budgets = _write_budget_files(layout, tickets, batches)
    files = StateMirror(factory, state_dir).hydrate()
    verify = Ledger(layout.ledger_path, key=key).verify()
    return _counted("import", state_dir, budgets, files, verify)
