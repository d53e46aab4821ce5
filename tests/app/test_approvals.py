"""Human in the loop, end to end: a proposal the system is not sure about waits for a
person; approve carries it out, reject hands the ticket over; both are recorded."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.app.ledger_link import ledger_for
from orchestrator.cli.commands.approve import answer
from orchestrator.domain.errors import UsageError
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.storage.approvals import approval_path, os_user, read_approval
from orchestrator.storage.runs import RunStore

from conftest import write_ticket
from support.harness import Harness, flaky, make_origin, reply, write_pipeline

pytestmark = pytest.mark.slow


def paused(tmp_path: Path) -> tuple[Harness, str]:
    """A model says "retry" about an unknown failure: with default thresholds a person
    must look first (a fresh model verdict scores under the retry threshold)."""
    make_origin(tmp_path)
    config = write_pipeline(tmp_path, flaky("build", fails=1), routing="")
    h = Harness(config, ScriptedGateway([reply({"action": "retry", "summary": "flaky build"})]))
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.AWAITING_APPROVAL
    assert "orchestrator approve" in h.out.getvalue()
    return h, record.run_id


@pytest.mark.slow
@pytest.mark.quick
def test_an_unsure_proposal_waits_and_approve_carries_it_out(tmp_path: Path) -> None:
    h, run_id = paused(tmp_path)
    store = RunStore(tmp_path / "state")
    proposal = json.loads(store.verdict_path(run_id, 1).read_text())["proposal"]
    assert proposal["routing"] == "hitl_recommended"
    assert [a.stage for a in store.load(run_id).attempts] == ["clone", "build"]  # nothing ran yet

    # Running the ticket again does not carry it out by itself.
    again = h.run(tmp_path / "t" / "T-1.md")
    assert again.state is RunState.AWAITING_APPROVAL and again.run_id == run_id

    out = io.StringIO()
    code = answer(
        tmp_path / "config.toml", None, run_id, approved=True, reason=None, out=out,
        environ={**h.services.environ}, now=True,
    )  # fmt: skip
    assert code == 0, out.getvalue()
    assert out.getvalue().startswith(
        f"approved: verdict 1 of {run_id} (retry, routed hitl_recommended"
    )
    assert (
        "carrying it out here (--now): this shell's environment decides DRY_RUN "
        "(DRY_RUN is false here) and the tools\n"
    ) in out.getvalue()
    record = store.load(run_id)
    assert record.state is RunState.COMPLETED
    assert [a.stage for a in record.attempts] == ["clone", "build", "build"]
    approval = read_approval(approval_path(store.runs_dir, run_id, 1))
    assert approval is not None and approval.approved and approval.by == os_user()
    assert approval.decision_id == proposal["decision_id"]
    rows = list(ledger_for(tmp_path / "state", {}).rows())
    # (Then the approved retry, green, is proposed for the playbook: a `playbook` row.)
    assert [(r["kind"], r["outcome"]) for r in rows if r["kind"] != "playbook"] == [
        ("decision", None),
        ("outcome", "retry: re-running build"),
    ]


def test_reject_hands_the_ticket_to_a_person(tmp_path: Path) -> None:
    h, run_id = paused(tmp_path)
    out = io.StringIO()
    code = answer(
        tmp_path / "config.toml", None, run_id, approved=False, reason="this is a real bug",
        out=out, environ={**h.services.environ},
    )  # fmt: skip
    assert code == 3
    record = RunStore(tmp_path / "state").load(run_id)
    assert record.state is RunState.NEEDS_HUMAN
    assert record.halt is not None and record.halt.reason is HaltReason.HUMAN_REJECTED
    assert f"rejected by {os_user()}: this is a real bug" in record.halt.detail
    assert "this is a real bug" in Path(record.handoff or "").read_text()


def test_a_decision_is_answered_once(tmp_path: Path) -> None:
    h, run_id = paused(tmp_path)
    answer(
        tmp_path / "config.toml",
        None,
        run_id,
        approved=True,
        reason=None,
        out=io.StringIO(),
        environ=dict(h.services.environ),
        now=True,
    )
    with pytest.raises(UsageError, match=f"run {run_id} is completed, not awaiting approval"):
        answer(
            tmp_path / "config.toml",
            None,
            run_id,
            approved=False,
            reason=None,
            out=io.StringIO(),
            environ=dict(h.services.environ),
        )


def test_approve_through_the_cli_exits_with_the_runs_outcome(tmp_path: Path) -> None:
    from conftest import orchestrator_cmd, subprocess_env

    _, run_id = paused(tmp_path)
    proc = subprocess.run(
        orchestrator_cmd("--config", str(tmp_path / "config.toml"), "approve", run_id, "--now"),
        capture_output=True, text=True, timeout=120,
        env=subprocess_env(PATH=os.environ["PATH"], DRY_RUN="false"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "approved: verdict 1" in proc.stdout
    assert RunStore(tmp_path / "state").load(run_id).state is RunState.COMPLETED


def test_the_ledger_remembers_green_recipes_by_signature_and_age(tmp_path: Path) -> None:
    from datetime import timedelta

    from orchestrator.app.ledger_link import LedgerLink
    from orchestrator.recovery.confidence import HALF_LIFE_DAYS

    from support.harness import demo_harness

    h, tickets, _ = demo_harness(tmp_path, ScriptedGateway([]))
    first = h.run(tickets["CARDS-1"])
    assert first.state is RunState.COMPLETED
    link = LedgerLink(ledger_for(tmp_path / "state", {}))
    signature = "review/lint-bug-commit-order/code"
    history = link.history(signature)
    assert (history["mechanical-fix"].green, history["mechanical-fix"].total) == (1, 1)
    # What a decision is given: the same outcome, weighted by its age.
    decided_at = h.services.clock()
    fresh = link.recent_history(signature, now=decided_at)["mechanical-fix"]
    later = link.recent_history(signature, now=decided_at + timedelta(days=HALF_LIFE_DAYS))
    assert fresh.green == fresh.total and 0.99 < fresh.total <= 1.0
    assert later["mechanical-fix"].total == pytest.approx(fresh.total / 2, rel=1e-3)

    # A second ticket with the same failure: the playbook is a rule, and a rule's
    # confidence is not moved by the ledger (only a model verdict's is).
    source = tickets["CARDS-1"]
    twin = source.with_name("CARDS-1b.md")
    twin.write_text(source.read_text().replace('id = "CARDS-1"', 'id = "CARDS-1b"'))
    second = h.run(twin)
    assert second.state is RunState.COMPLETED
    proposals = [
        json.loads(Path(r.verdicts[0].path).read_text())["proposal"] for r in (first, second)
    ]
    assert proposals[1]["confidence"] == proposals[0]["confidence"]
    assert [p["evidence"]["failure"]["signature"] for p in proposals] == [signature, signature]
    assert "history" not in proposals[1]["evidence"]["signals"]
