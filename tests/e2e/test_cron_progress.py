"""A week of cron, compressed: batches that make progress without a person, except where
only a person can help, and whose exit codes say so.

The crontab forgot ``DRY_RUN=false``; the ledger has a long, red memory of retries; the
batch's model budget pays for one call; the queue holds two files with one id and a ticket
whose repository is gone. Every batch's exit code is asserted, and so is
what each ticket cost: no stage that finished runs again, no model call is repeated."""

from __future__ import annotations

import io
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.app.ledger_link import ledger_for
from orchestrator.cli.commands.batch import batch
from orchestrator.cli.commands.resume import resume
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.storage.budget import BudgetStore
from orchestrator.storage.decisions import read_verdict
from orchestrator.storage.ledger import LedgerRow, inputs_hash
from orchestrator.storage.runs import RunStore

from conftest import untimed, write_ticket
from support.harness import SameAnswerModel

pytestmark = pytest.mark.slow


# Where the stages count their runs, across the runs of a ticket: beside the state dir,
# which the sandbox hides from them (the run dir is state/runs/<run-id>).
COUNTS = "$ORCH_RUN_DIR/../../../counts"


def stage(name: str, script: str, extra: str = "") -> str:
    counted = f"echo x >> {COUNTS}/count-{name}-$ORCH_TICKET_ID; {script}"
    return (
        f'[[stages]]\nname = "{name}"\ncwd = "run"\nwritable = ["../../../counts"]\n'
        f'{extra}command = ["bash", "-c", "{counted}"]\n'
    )


FIRST_TIME = "[ $(wc -l < " + COUNTS + "/count-{name}-$ORCH_TICKET_ID) -ge 2 ]"
CONFIG = (
    'state_dir = "state"\n'
    "[recovery]\ninfra_backoff_s = 0.0\n"
    "[batch]\nmax_model_calls = 1\n"
    "[routing]\nretry = 0.0\n"
    # RL-1's fetch is rate limited once (a plain 429, named the way any stage may name it).
    + stage(
        "fetch",
        "git init -q clone; if [ $ORCH_TICKET_ID = RL-1 ] && ! "
        + FIRST_TIME.format(name="fetch")
        + "; then "
        "echo ::failure-class::rate_limited; exit 1; fi",
    )
    # BUD-* tickets' build fails once: a code failure the model must decide.
    + stage(
        "build",
        "case $ORCH_TICKET_ID in BUD-*) " + FIRST_TIME.format(name="build") + ";; esac",
    )
    + stage("publish", "true", "side_effectful = true\n")
)


def long_red_history(state: Path, signatures: tuple[str, ...], n: int = 60) -> None:
    """Many earlier tickets whose retries of this stage never went green."""
    ledger = ledger_for(state, {})
    now = datetime.now(UTC).isoformat()
    for i in range(n):
        for signature in signatures:
            row = ledger.append(LedgerRow(
                kind="decision", decision_id=f"OLD-{i}-20260101T000000Z-0000:{signature}",
                ticket=f"OLD-{i}", run=f"OLD-{i}-20260101T000000Z-0000",
                capability="recover-stage", inputs_hash=inputs_hash({"i": i}),
                model_version=None, prompt_version="recovery-v1", source="infra",
                decision={"signature": signature, "verdict": {"action": "retry"}},
                confidence=1.0, routing="auto", ts=now,
            ))  # fmt: skip
            ledger.append_outcome(row, "retried fetch: failed again", ts=now)


def count(state: Path, name: str, ticket: str) -> int:
    path = state.parent / "counts" / f"count-{name}-{ticket}"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_cron_batches_make_progress_and_tell_the_truth(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(CONFIG)
    (tmp_path / "counts").mkdir()
    tickets = tmp_path / "tickets"
    for ticket_id in ("RL-1", "BUD-1", "BUD-2", "DUP-1"):
        write_ticket(tickets, ticket_id)
    duplicate = tickets / "DUP-1-copy.md"
    duplicate.write_text((tickets / "DUP-1.md").read_text())
    gone = tmp_path / "gone.git"
    write_ticket(tickets, "GONE-1", repository=gone.as_uri())
    state = tmp_path / "state"
    long_red_history(state, ("fetch/stage/rate_limited", "fetch/stage"))
    model = SameAnswerModel({"action": "retry", "summary": "flaky build"})
    cron_env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}  # no DRY_RUN=false

    notices: list[list[str]] = []

    def cron() -> tuple[int, dict[str, str]]:
        out = io.StringIO()
        code = batch(
            config, None, tickets, jobs=1, as_json=False, worker=False, out=out,
            environ=cron_env, gateway_factory=lambda: model,
        )  # fmt: skip
        lines = [line for line in untimed(out.getvalue())[:-1] if not line.startswith("DRY_RUN ")]
        notices.append([line for line in untimed(out.getvalue()) if line.startswith("DRY_RUN ")])
        return code, {line.split()[0]: line.split()[1] for line in lines if line.strip()}

    everyone = ("RL-1", "BUD-1", "BUD-2", "DUP-1", "GONE-1")

    # Batch 1: the 429 is retried by itself, however red the ledger's memory; the budget
    # pays for BUD-1's diagnosis and BUD-2 waits; DRY_RUN blocks what reaches publish.
    # Both DUP-1 files and GONE-1 are refused before any run exists, and the exit code
    # tells cron's monitoring a ticket file needs a person (2 outranks needs-human's 3).
    code, seen = cron()
    assert seen["RL-1"] == "needs-human" and seen["BUD-1"] == "needs-human"
    assert seen["BUD-2"] == "deferred"
    # (a duplicate is named by its file: which of the two is the ticket is the question)
    assert seen["DUP-1.md"] == seen["DUP-1-copy.md"] == seen["GONE-1"] == "refused"
    assert code == 2 and model.calls == 1
    [notice] = notices[-1]  # one line says what DRY_RUN held back, and how to let it through
    assert "(BUD-1, RL-1)" in notice and "DRY_RUN=false" in notice and "resume" in notice
    store = RunStore(state)
    assert store.latest_for_ticket("DUP-1") is None and store.latest_for_ticket("GONE-1") is None
    assert count(state, "fetch", "DUP-1") == 0 and count(state, "fetch", "GONE-1") == 0
    for ticket_id in ("RL-1", "BUD-1"):
        blocked = store.latest_for_ticket(ticket_id)
        assert blocked is not None and blocked.halt is not None
        assert (blocked.halt.reason, blocked.halt.stage) == (HaltReason.DRY_RUN_BLOCK, "publish")
    rl = store.latest_for_ticket("RL-1")
    assert rl is not None and rl.halt is not None and rl.halt.reason is HaltReason.DRY_RUN_BLOCK
    [infra] = [read_verdict(Path(v.path)) for v in rl.verdicts]
    assert (infra.source, infra.proposal.routing) == ("infra", "auto")
    assert "history" not in infra.proposal.evidence.signals
    assert count(state, "fetch", "RL-1") == 2  # the 429, then the automatic retry

    # A person keeps one DUP-1 file and creates GONE-1's repository.
    duplicate.unlink()
    subprocess.run(["git", "init", "-q", "--bare", str(gone)], check=True, timeout=30)

    # Batch 2: a fresh budget decides BUD-2; the fixed tickets run up to the DRY_RUN gate;
    # the others need a person, and still say so.
    code, seen = cron()
    assert seen == {
        "BUD-1": "already-needs-human",
        "BUD-2": "needs-human",
        "DUP-1": "needs-human",
        "GONE-1": "needs-human",
        "RL-1": "already-needs-human",
    }
    assert code == 3 and model.calls == 2
    assert count(state, "build", "BUD-2") == 2  # the failed build, then the decided retry

    # The person sets DRY_RUN=false and resumes each run: only publish runs.
    for ticket_id in everyone:
        out = io.StringIO()
        assert resume(
            config, None, ticket_id, from_stage=None, by="ops", out=out,
            environ={**cron_env, "DRY_RUN": "false"},
        ) == 0, out.getvalue()  # fmt: skip
    for ticket_id in everyone:
        assert count(state, "publish", ticket_id) == 1
        assert count(state, "fetch", ticket_id) == (2 if ticket_id == "RL-1" else 1)
        assert count(state, "build", ticket_id) == (2 if ticket_id.startswith("BUD") else 1)
        record = store.latest_for_ticket(ticket_id)
        assert record is not None and record.state is RunState.COMPLETED
    assert model.calls == 2
    budgets = BudgetStore(state)
    assert [budgets.load(t).spent("diagnosis") for t in ("BUD-1", "BUD-2")] == [1, 1]

    # Batch 3: nothing left to do, and the exit code says all is well.
    code, seen = cron()
    assert set(seen.values()) == {"already-completed"} and code == 0
    assert ledger_for(state, {}).verify().ok
