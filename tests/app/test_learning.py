"""The playbook learning from a run (issue 44), through ``run_ticket`` and the real CLI:
a retry that turned green is proposed once, however often the run learns (a resume, a
kill -9 between the stage passing and the proposal); a learned retry whose stage fails
again is retired before the next decision, which asks the model."""

from __future__ import annotations

import io
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.app.driver import run_ticket
from orchestrator.app.learning import learn
from orchestrator.app.playbook import promote, store_for
from orchestrator.cli.commands.approve import answer
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.playbook import EntryStatus, PlaybookEntry
from orchestrator.domain.tickets import load_ticket
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.storage.approvals import os_user
from orchestrator.storage.playbook import PlaybookStore

from conftest import COUNTS, subprocess_env, write_ticket
from support.harness import Harness, make_origin, reply, write_pipeline
from support.scripted_cli import CALLS_ENV, SCRIPT_ENV, requests_made, run_forked, run_here

pytestmark = pytest.mark.slow

# A build that fails once (and always, while ``never`` is there), then passes. What it
# says when it fails varies by run ($RANDOM): the signature masks it.
BUILD = (
    f'[[stages]]\nname = "build"\ncwd = "clone"\nwritable = ["{COUNTS}"]\n'
    'command = ["bash", "-c", "c=' + COUNTS + "; if [ -e $c/never ] || [ ! -e $c/once ]; then "
    "touch $c/once; echo error: deal dealt 3 cards, expected 4, seed $RANDOM; exit 1; fi; "
    'echo built"]\n'
)
RETRY = {"action": "retry", "summary": "the deal is flaky"}
GIVE_UP = {"action": "abandon-human", "summary": "it fails every time"}


def learned(root: Path) -> list[PlaybookEntry]:
    return [e for e in PlaybookStore(root).entries() if e.match.signature]


def events(h: Harness) -> list[str]:
    rows = h.services.storage.ledger().rows()
    return [r["decision"]["event"] for r in rows if r.get("kind") == "playbook"]


@pytest.mark.quick  # the file's one test in the quick tier (about half a second)
def test_a_retry_that_turned_green_is_proposed_once_however_often_the_run_learns(
    tmp_path: Path,
) -> None:
    make_origin(tmp_path)
    (tmp_path / "counts").mkdir()
    gateway = ScriptedGateway([reply(RETRY)])
    h = Harness(write_pipeline(tmp_path, BUILD), gateway)
    record = h.run(write_ticket(tmp_path / "t", repository="../origin.git"))
    assert record.state is RunState.COMPLETED, record.halt
    assert [a.stage for a in record.attempts] == ["clone", "build", "build"]
    [entry] = learned(tmp_path)
    assert (entry.status, entry.decision["action"]) == (EntryStatus.PROPOSED, "retry")
    assert entry.match.signature == ("error: deal dealt <n> cards, expected <n>, seed <n>",)
    [proof] = entry.provenance
    assert (proof.verdict, proof.source, proof.approved_by, proof.outcome) == (
        1, "model", "auto", "retry green: build passes (attempt 3)",
    )  # fmt: skip
    # A resumed or re-run process learns the same again: nothing changes.
    path = PlaybookStore(tmp_path).dir / f"{entry.id}.toml"
    before = path.read_bytes()
    learn(record, h.services)
    learn(record, h.services)
    assert path.read_bytes() == before
    assert events(h) == ["proposed"]


def test_a_learned_retry_whose_stage_fails_again_is_retired_and_the_model_asked(
    tmp_path: Path,
) -> None:
    make_origin(tmp_path)
    (tmp_path / "counts").mkdir()
    gateway = ScriptedGateway([reply(RETRY), reply(GIVE_UP)])
    h = Harness(write_pipeline(tmp_path, BUILD), gateway)
    h.run(write_ticket(tmp_path / "t", "T-1", repository="../origin.git"))
    [entry] = learned(tmp_path)
    promote(
        store_for(tmp_path), entry.id, by="alice", at=datetime(2026, 12, 7, tzinfo=UTC),
        ledger=h.services.storage.ledger(),
    )  # fmt: skip
    assert gateway.calls == 1

    (tmp_path / "counts" / "never").touch()  # the retry the entry decides cannot help now
    record = run_ticket(
        load_ticket(write_ticket(tmp_path / "t", "T-2", repository="../origin.git")), h.services
    )
    assert [a.stage for a in record.attempts] == ["clone", "build", "build"]
    assert [(v.source, v.action) for v in record.verdicts] == [
        ("playbook", "retry"), ("model", "abandon-human"),
    ]  # fmt: skip
    assert gateway.calls == 2  # the model was asked about the failure the entry got wrong
    [entry] = learned(tmp_path)
    assert entry.status is EntryStatus.RETIRED
    assert entry.retired_reason == (
        f"retry red: build failed again (attempt 3) (run {record.run_id}, verdict 1)"
    )
    assert events(h) == ["proposed", "promoted", "retired"]
    assert f"playbook: entry {entry.id} retired" in h.out.getvalue()


@pytest.mark.parametrize("approved", [True, False])
def test_a_persons_approved_decision_that_went_green_is_proposed_in_their_name(
    tmp_path: Path, approved: bool
) -> None:
    make_origin(tmp_path)
    (tmp_path / "counts").mkdir()
    # Default thresholds: a fresh model verdict waits for a person.
    h = Harness(write_pipeline(tmp_path, BUILD, routing=""), ScriptedGateway([reply(RETRY)]))
    record = h.run(write_ticket(tmp_path / "t", repository="../origin.git"))
    assert record.state is RunState.AWAITING_APPROVAL
    assert learned(tmp_path) == []
    answer(
        tmp_path / "config.toml", None, record.run_id, approved=approved, reason="no",
        out=io.StringIO(), environ=dict(h.services.environ), now=True,
    )  # fmt: skip
    if not approved:  # what a person rejected did not run: nothing to learn
        assert learned(tmp_path) == []
        return
    [entry] = learned(tmp_path)
    [proof] = entry.provenance
    assert (proof.approved_by, proof.outcome) == (
        os_user(), "retry green: build passes (attempt 3)",
    )  # fmt: skip


def _cli(root: Path, crash: str | None) -> subprocess.CompletedProcess[str]:
    argv = ["--config", str(root / "config.toml"), "run", str(root / "t" / "T-1.md")]
    extra = {SCRIPT_ENV: str(root / "script.json"), CALLS_ENV: str(root / "calls")}
    if crash is None:
        return run_here(root, argv, subprocess_env(DRY_RUN="false", **extra))
    return run_forked(
        root, argv, subprocess_env(DRY_RUN="false", ORCHESTRATOR_CRASH_AT=crash, **extra)
    )


@pytest.mark.parametrize(
    "crash",
    [
        "attempt-finished:3",  # the build passed, on disk; nothing learned yet
        "outcome",  # the retry decided and carried out; the build not run again yet
    ],
)
def test_a_kill_before_the_proposal_loses_nothing_and_adds_nothing_twice(
    tmp_path: Path, crash: str
) -> None:
    make_origin(tmp_path)
    (tmp_path / "counts").mkdir()
    write_pipeline(tmp_path, BUILD)
    write_ticket(tmp_path / "t", repository="../origin.git")
    (tmp_path / "script.json").write_text(json.dumps([reply(RETRY)]))
    killed = _cli(tmp_path, crash)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert learned(tmp_path) == []
    done = _cli(tmp_path, None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert requests_made(tmp_path / "calls") == 1
    [entry] = learned(tmp_path)
    assert [(p.verdict, p.outcome) for p in entry.provenance] == [
        (1, "retry green: build passes (attempt 3)")
    ]
