"""A whole state dir moved into PostgreSQL and back (``export_state``/``import_state``),
and its budgets alone (``export_budgets``/``import_budgets``): the same ledger bytes, the
same budgets, the run's files; refused over anyone's state, and refused whole. On a real
server (``pg_url``); the state dir comes from a real ticket run."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg")

from orchestrator.domain.config import BatchConfig, PriceConfig  # noqa: E402 - after the skip
from orchestrator.domain.errors import StateError  # noqa: E402
from orchestrator.domain.lifecycle import RunState  # noqa: E402
from orchestrator.recovery.gateway import ScriptedGateway  # noqa: E402
from orchestrator.storage.batch_budget import BatchBudget  # noqa: E402
from orchestrator.storage.budget import BudgetStore  # noqa: E402
from orchestrator.storage.files import FileStorage  # noqa: E402
from orchestrator.storage.layout import StateLayout, run_record_paths  # noqa: E402
from orchestrator.storage.ledger import Ledger, LedgerError  # noqa: E402
from orchestrator.storage.postgres.ledger import PostgresLedger  # noqa: E402
from orchestrator.storage.postgres.transfer import (  # noqa: E402
    BudgetCounts,
    export_budgets,
    export_state,
    import_budgets,
    import_state,
)

from conftest import write_ticket  # noqa: E402
from support.harness import Harness, make_origin, reply, write_pipeline  # noqa: E402

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
BATCH = "20260301T090000Z-b1"
PRICES = {"model-a": PriceConfig(input_per_mtok=3.0, output_per_mtok=15.0)}
ALWAYS_FAILS = '[[stages]]\nname = "build"\ncommand = ["bash", "-c", "echo broken; exit 1"]\n'
RETRY = reply({"action": "retry", "summary": "flaky: try again"})


def budgets_in(state: Path) -> Path:
    """Ticket budgets with charges in order and a caps reset, one written with a non-UTC
    offset, and a batch budget with calls, tokens and a cost."""
    store = BudgetStore(state)
    store.charge("T-1", "diagnosis", "d-1", run_id="T-1-20260301T090000Z-ab12", at=T0)
    store.charge("T-1", "retry", "r-1", run_id="T-1-20260301T090000Z-ab12", at=T0)
    store.reset("T-1", by="alice", reason="runner replaced", at=T0 + timedelta(hours=1))
    store.charge("T-1", "infra-retry", "i-1", run_id="T-1-20260301T100000Z-cd34", at=T0)
    plus_two = timezone(timedelta(hours=2))
    store.charge(
        "T-2", "retry", "r-1", run_id="T-2-20260301T090000Z-ab12", at=T0.astimezone(plus_two)
    )
    batch = BatchBudget(StateLayout(state).batch_budget_path(BATCH), BatchConfig(), PRICES)
    assert batch.reserve() is None and batch.reserve() is None
    batch.record("model-a", 1234, 567)
    return state


def tables_in(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    return sorted(name for (name,) in found)


# ------------------------------------------------------------------------------- budgets


@pytest.mark.quick
def test_budgets_go_to_the_database_and_come_back_the_same(pg_url: str, tmp_path: Path) -> None:
    source = budgets_in(tmp_path / "a")
    counts = export_budgets(source, pg_url)
    assert counts == BudgetCounts(tickets=2, charges=4, resets=1, batches=1)

    back = tmp_path / "b"
    assert import_budgets(pg_url, back) == counts
    for ticket in ("T-1", "T-2"):
        assert BudgetStore(back).load(ticket) == BudgetStore(source).load(ticket)
    # Written as the file store writes them: T-1's bytes are the original's; T-2's time
    # comes back in UTC (the same instant, the same model).
    layout_a, layout_b = StateLayout(source), StateLayout(back)
    assert layout_b.ticket_budget_path("T-1").read_bytes() == (
        layout_a.ticket_budget_path("T-1").read_bytes()
    )
    assert layout_b.batch_budget_path(BATCH).read_bytes() == (
        layout_a.batch_budget_path(BATCH).read_bytes()
    )
    assert BudgetStore(back).load("T-1").spent("infra-retry") == 1  # the reset still counts

    with pytest.raises(StateError) as refused:
        export_budgets(source, pg_url)
    assert str(refused.value) == (
        "state error: the PostgreSQL database: refusing to export budgets into a database "
        "that already holds 2 ticket budget(s) and 1 batch budget(s)"
    )
    with pytest.raises(StateError, match=r"already has 3 budget file\(s\)"):
        import_budgets(pg_url, back)


def test_a_budget_file_of_another_ticket_is_refused_before_anything_is_written(
    pg_url: str, tmp_path: Path
) -> None:
    source = budgets_in(tmp_path / "a")
    layout = StateLayout(source)
    layout.ticket_budget_path("T-1").rename(layout.ticket_budget_path("T-9"))
    with pytest.raises(StateError, match="holds the budget of ticket 'T-1'"):
        export_budgets(source, pg_url)
    assert tables_in(pg_url) == []


# --------------------------------------------------------------------------- whole state


def ran_a_ticket(tmp_path: Path) -> Path:
    """A real run: the build always fails, the model says retry twice, the caps run out.
    Then a person resets its caps, and a batch spent some of its budget."""
    make_origin(tmp_path)
    h = Harness(write_pipeline(tmp_path, ALWAYS_FAILS), ScriptedGateway([RETRY, RETRY]))
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.FAILED
    state = tmp_path / "state"
    BudgetStore(state).reset("T-1", by="alice", reason="runner replaced", at=T0)
    batch = BatchBudget(StateLayout(state).batch_budget_path(BATCH), BatchConfig(), PRICES)
    assert batch.reserve() is None
    batch.record("model-a", 100, 20)
    return state


@pytest.mark.slow
def test_a_state_dir_goes_to_the_database_and_back(pg_url: str, tmp_path: Path) -> None:
    state = ran_a_ticket(tmp_path / "ran")
    ledger_rows = Ledger(StateLayout(state).ledger_path).verify().count
    assert ledger_rows >= 4

    files = FileStorage(state)
    verdicts, approvals = files.decisions.find(), files.approvals.find()
    assert len(verdicts) >= 2 and approvals  # retries were decided, and approved (auto)

    exported = export_state(state, pg_url)
    assert exported.verify.ok and exported.ledger_rows == ledger_rows
    assert (exported.runs, exported.verdicts, exported.approvals) == (
        1, len(verdicts), len(approvals),
    )  # fmt: skip
    assert exported.budgets == BudgetCounts(tickets=1, charges=4, resets=1, batches=1)
    assert exported.files > exported.runs + exported.verdicts  # transcripts, logs, ...
    assert PostgresLedger(pg_url).verify() == exported.verify

    back = tmp_path / "back"
    imported = import_state(pg_url, back)
    assert imported.verify == exported.verify
    assert (imported.runs, imported.verdicts, imported.approvals, imported.budgets) == (
        1, len(verdicts), len(approvals), exported.budgets,
    )  # fmt: skip
    before, after = StateLayout(state), StateLayout(back)
    for name in ("ledger.jsonl", "ledger.head"):
        assert (back / name).read_bytes() == (state / name).read_bytes()
    assert Ledger(after.ledger_path).verify().ok
    assert BudgetStore(back).load("T-1") == BudgetStore(state).load("T-1")
    assert after.ticket_budget_path("T-1").read_bytes() == (
        before.ticket_budget_path("T-1").read_bytes()
    )
    assert after.batch_budget_path(BATCH).read_bytes() == (
        before.batch_budget_path(BATCH).read_bytes()
    )
    [record] = run_record_paths(before.runs_dir)
    run, moved = files.runs.load(record.stem), FileStorage(back).runs.load(record.stem)
    assert moved.state is run.state
    # The same attempts, their paths now under this state dir, their logs there.
    assert [(a.stage, a.exit_code) for a in moved.attempts] == [
        (a.stage, a.exit_code) for a in run.attempts
    ]
    for was, now in zip(run.attempts, moved.attempts, strict=True):
        assert was.log_path is not None and now.log_path is not None
        assert Path(now.log_path).is_relative_to(back)
        assert Path(now.log_path).read_bytes() == Path(was.log_path).read_bytes()
    for written_once in [*verdicts, *approvals]:
        copy = after.runs_dir / written_once.path.name
        assert copy.read_bytes() == written_once.path.read_bytes()

    # Neither side is written over.
    with pytest.raises(StateError) as refused:
        export_state(state, pg_url)
    assert f"refusing to export into a database that is not empty (it holds {ledger_rows} " in (
        str(refused.value)
    )
    with pytest.raises(StateError) as refused:
        import_state(pg_url, back)
    assert str(refused.value) == (
        f"state error: {back}: refusing to import into a state dir that is not empty "
        "(it has 2 ledger file(s), 1 run(s), 2 budget file(s))"
    )


@pytest.mark.slow
def test_a_ledger_that_does_not_verify_is_refused_before_anything_is_written(
    pg_url: str, tmp_path: Path
) -> None:
    state = ran_a_ticket(tmp_path / "ran")
    ledger = StateLayout(state).ledger_path
    lines = ledger.read_bytes().splitlines(keepends=True)
    row = json.loads(lines[1])
    row["outcome"] = "edited"
    lines[1] = json.dumps(row).encode() + b"\n"
    ledger.write_bytes(b"".join(lines))

    with pytest.raises(LedgerError) as refused:
        export_state(state, pg_url)
    assert str(refused.value).startswith(f"ledger error: {ledger}: refusing to export: line 2: ")
    assert tables_in(pg_url) == []  # not even migrated


@pytest.mark.quick
def test_an_export_that_fails_part_way_leaves_the_database_as_it_was(
    pg_url: str, tmp_path: Path
) -> None:
    state = budgets_in(tmp_path / "a")
    Ledger(StateLayout(state).ledger_path).verify()  # an empty ledger: it verifies
    broken = StateLayout(state).record_path("T-1-20260301T090000Z-ab12")
    broken.parent.mkdir(parents=True)
    broken.write_text("{}")  # not a run record: the mirror refuses it after the budgets

    with pytest.raises(StateError, match="not a valid run record"):
        export_state(state, pg_url)
    with psycopg.connect(pg_url) as conn:
        held = [
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("ledger_rows", "ticket_budgets", "batch_spend", "runs")
        ]
    assert held == [0, 0, 0, 0]
    broken.unlink()
    assert export_state(state, pg_url).budgets.tickets == 2  # nothing was left to refuse


@pytest.mark.quick
def test_an_import_from_a_database_with_no_state_is_refused(pg_url: str, tmp_path: Path) -> None:
    with pytest.raises(StateError) as refused:
        import_state(pg_url, tmp_path / "state")
    assert str(refused.value) == (
        "state error: the PostgreSQL database: holds no state: nothing to import (the wrong URL?)"
    )
    assert not (tmp_path / "state").exists()
