"""``orchestrator reset TICKET --reason …``: a person clears a ticket's caps; the ledger
records who and why before anything changes, and the next run has fresh caps."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from orchestrator.app.ledger_link import ledger_for
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.storage.budget import BudgetStore
from orchestrator.storage.files import FileStorage
from orchestrator.storage.ledger import LedgerRow

from conftest import subprocess_env, write_ticket
from support.cli_here import cli_here
from support.harness import Harness, make_origin, reply, write_pipeline

ALWAYS_FAILS = '[[stages]]\nname = "build"\ncommand = ["bash", "-c", "echo broken; exit 1"]\n'
RETRY = reply({"action": "retry", "summary": "flaky: try again"})


def spent_caps(tmp_path: Path) -> tuple[Harness, ScriptedGateway, Path]:
    """A ticket that spent both caps and ended failed (cap_exhausted)."""
    make_origin(tmp_path)
    gateway = ScriptedGateway([RETRY, RETRY])
    h = Harness(write_pipeline(tmp_path, ALWAYS_FAILS), gateway)
    ticket = write_ticket(tmp_path / "t")
    record = h.run(ticket)
    assert record.state is RunState.FAILED
    assert record.halt is not None and record.halt.reason is HaltReason.CAP_EXHAUSTED
    assert h.budget() == (2, 2) and gateway.calls == 2
    return h, gateway, ticket


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``orchestrator reset`` in this process (``support.cli_here``), as carol."""
    argv = ["--config", str(tmp_path / "config.toml"), "reset", *args]
    return cli_here(argv, subprocess_env(USER="carol"))


@pytest.mark.slow
def test_reset_records_who_and_why_and_the_next_run_has_fresh_caps(tmp_path: Path) -> None:
    h, gateway, ticket = spent_caps(tmp_path)
    proc = cli(tmp_path, "T-1", "--reason", "the flaky runner was replaced", "--by", "alice")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(
        "reset: T-1's caps cleared (diagnoses 2, retries 2, infra retries 0) by alice: "
        "the flaky runner was replaced\n"
    )
    ledger = ledger_for(tmp_path / "state", {})
    [row] = [r for r in ledger.rows() if r["source"] == "human"]
    assert (row["ticket"], row["capability"], row["decision_id"]) == (
        "T-1", "reset-caps", "T-1:caps-reset-1",
    )  # fmt: skip
    assert row["decision"] == {
        "action": "reset-caps",
        "by": "alice",
        "reason": "the flaky runner was replaced",
        "cleared": {"diagnosis": 2, "retry": 2, "infra-retry": 0},
    }
    assert ledger.verify().ok
    budget = BudgetStore(tmp_path / "state").load("T-1")
    assert h.budget() == (0, 0) and len(budget.charges) == 4  # kept, no longer counted
    assert budget.resets[-1].by == "alice"

    # The next run is diagnosed again: the model is asked, within fresh caps.
    gateway.script.extend([reply({"action": "abandon-human", "summary": "still broken"})])
    again = h.run(ticket)
    assert gateway.calls == 3
    assert again.halt is not None and again.halt.reason is HaltReason.ABANDONED
    assert h.budget() == (1, 0)


@pytest.mark.slow
def test_reset_without_a_reason_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    spent_caps(tmp_path)
    before = (tmp_path / "state" / "ledger.jsonl").read_bytes()
    for args in (("T-1",), ("T-1", "--reason", "   ")):
        proc = cli(tmp_path, *args)
        assert proc.returncode == 2
        assert proc.stderr.startswith("usage error: reset needs --reason")
    assert (tmp_path / "state" / "ledger.jsonl").read_bytes() == before
    assert BudgetStore(tmp_path / "state").load("T-1").resets == ()


@pytest.mark.slow
def test_reset_defaults_to_the_os_user_and_keeps_secrets_out_of_the_ledger(
    tmp_path: Path,
) -> None:
    spent_caps(tmp_path)
    secret = "sk-ant-api03-" + "x" * 40
    proc = cli(tmp_path, "T-1", "--reason", f"rotated the key {secret}")
    assert proc.returncode == 0, proc.stderr
    assert secret not in (tmp_path / "state" / "ledger.jsonl").read_text()
    assert secret not in proc.stdout
    row = json.loads((tmp_path / "state" / "ledger.jsonl").read_text().splitlines()[-1])
    assert row["decision"]["by"] == "carol"


@pytest.mark.slow
def test_reset_of_a_ticket_being_run_is_refused(tmp_path: Path) -> None:
    spent_caps(tmp_path)
    with FileStorage(tmp_path / "state").locks.ticket("T-1"):
        proc = cli(tmp_path, "T-1", "--reason", "x")
    assert proc.returncode == 75
    assert proc.stderr.startswith("skipped: T-1 is locked by pid ")
    assert BudgetStore(tmp_path / "state").load("T-1").resets == ()


def test_reset_of_a_ticket_with_nothing_spent_records_nothing(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('state_dir = "state"\n')
    proc = cli(tmp_path, "NEW-1", "--reason", "just in case")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "reset: NEW-1 has spent nothing against its caps; nothing to reset\n"
    assert not (tmp_path / "state" / "ledger.jsonl").exists()


@pytest.mark.slow
def test_reset_refuses_what_is_not_a_ticket_id(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('state_dir = "state"\n')
    proc = cli(tmp_path, "../etc", "--reason", "x")
    assert proc.returncode == 2 and "is not a ticket id" in proc.stderr


@pytest.mark.slow
def test_a_reset_cut_short_after_its_ledger_row_is_finished_by_the_next_one(
    tmp_path: Path,
) -> None:
    """Killed between the ledger row and the budget file: asked again, the reset finds
    its row, appends no second one, and clears the caps as that row recorded."""
    from datetime import UTC, datetime

    from orchestrator.app.reset import reset_caps

    spent_caps(tmp_path)
    state = tmp_path / "state"
    ledger = ledger_for(state, {})
    ledger.append(LedgerRow(
        kind="decision", decision_id="T-1:caps-reset-1", ticket="T-1", run="",
        capability="reset-caps", inputs_hash="0" * 64, model_version=None,
        prompt_version=None, source="human",
        decision={"action": "reset-caps", "by": "alice", "reason": "first ask", "cleared": {}},
    ))  # fmt: skip
    result = reset_caps(state, ledger, "T-1", by="bob", reason="second ask", at=datetime.now(UTC))
    assert result.reset is not None and (result.reset.by, result.reset.reason) == (
        "alice", "first ask",
    )  # fmt: skip
    assert [r["decision_id"] for r in ledger.rows() if r["source"] == "human"] == [
        "T-1:caps-reset-1"
    ]
    assert BudgetStore(state).load("T-1").spent("diagnosis") == 0
