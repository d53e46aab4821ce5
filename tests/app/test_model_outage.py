"""A model-provider outage during a diagnosis does not spend the ticket (issue 43): once
the gateway's own retries are used up, a call the provider failed (a throttle, a 5xx or
529 overloaded, the network, a timeout) leaves the failure undecided; the run waits
(``waiting-infra``), its diagnosis not counted against the cap, and the next run decides
it. The failed call is still persisted, in the ledger and replayable. Driven through the
real Anthropic SDK over an ``httpx2.MockTransport``; the SDK's retry sleeps are recorded,
never slept."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest

from orchestrator.actions.budget import diagnoses_spent
from orchestrator.app.driver import run_ticket
from orchestrator.app.ledger_link import ledger_for
from orchestrator.app.replay import replay
from orchestrator.domain.config import load_config
from orchestrator.domain.infra_wait import MODEL_OUTAGES, model_call_waits_out, outage_since
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import (
    Attempt,
    AttemptStatus,
    Halt,
    ResumeRecord,
    RunRecord,
    VerdictRef,
    undecided_failure,
)
from orchestrator.domain.tickets import load_ticket
from orchestrator.domain.transcripts import CallError
from orchestrator.recovery.anthropic_gateway import AnthropicGateway
from orchestrator.recovery.gateway import ModelGateway, ModelReply, ScriptedGateway
from orchestrator.storage.budget import BudgetStore, Charge, ChargeKind, TicketBudget
from orchestrator.storage.decisions import read_verdict
from orchestrator.storage.runs import RunStore

from conftest import write_ticket
from support.gitrepo import bare_clone, commit_files, init_repo
from support.notify_fixtures import run_record
from support.services import make_services

pytestmark = pytest.mark.timeout(60)

ACTIONS = ("retry", "escalate-model", "switch-engine", "split", "abandon-human", "mechanical-fix")
ENVIRON = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "DRY_RUN": "false"}
MODEL = "claude-sonnet-4-6"
T0 = datetime(2026, 12, 1, 3, 0, 0, tzinfo=UTC)
VERDICT = {"action": "abandon-human", "summary": "the build script is broken"}


# ---- which failed calls wait: pure ----------------------------------------------------------


@pytest.mark.parametrize("error", list(CallError))
def test_only_the_providers_outages_wait_for_a_later_batch(error: CallError) -> None:
    waits = {CallError.RATE_LIMITED, CallError.SERVER, CallError.CONNECTION, CallError.TIMEOUT}
    assert model_call_waits_out(error) is (error in waits)
    assert MODEL_OUTAGES == waits
    assert not model_call_waits_out(None)


def test_the_diagnoses_an_outage_spoiled_do_not_count_against_the_cap() -> None:
    def charge(key: str, kind: ChargeKind = "diagnosis") -> Charge:
        return Charge(kind=kind, key=key, run_id="R", at=T0)

    budget = TicketBudget(ticket_id="T-1", charges=(
        charge("R:attempt-2:verdict-1:diagnosis-1"),  # the provider was down
        charge("R:attempt-2:verdict-2:diagnosis-2"),
        charge("R:attempt-2:verdict-10:diagnosis-3"),  # not verdict-1's, for all its prefix
        charge("R:attempt-2:verdict-1:retry-1", "retry"),
    ))  # fmt: skip
    assert diagnoses_spent(budget) == budget.spent("diagnosis") == 3
    assert diagnoses_spent(budget, ["R:attempt-2:verdict-1"]) == 2


def test_a_failure_waiting_to_be_decided_is_as_old_as_the_failure() -> None:
    failed = Attempt(
        number=2, stage="build", status=AttemptStatus.FINISHED, started_at=T0,
        ended_at=T0 + timedelta(minutes=3), exit_code=1, failure_class="code",
    )  # fmt: skip
    ref = VerdictRef(number=1, attempt=2, source="model", action="abandon-human", path="v1")
    record = run_record(RunState.WAITING_INFRA, attempts=(failed,), verdicts=(ref,))
    assert outage_since(record) is None  # a code failure the model decided: no outage
    waiting = record.model_copy(
        update={"verdicts": (ref.model_copy(update={"model_unavailable": True}),)}
    )
    assert outage_since(waiting) == T0 + timedelta(minutes=3)
    # Once a person resumed it after the wait ran out, its age starts again from there.
    expired = Halt(reason=HaltReason.INFRA_WAIT_EXPIRED, stage="build", detail="-")
    resumed = waiting.model_copy(update={"resumes": (ResumeRecord(
        at=T0 + timedelta(minutes=9), by="alice", from_state=RunState.NEEDS_HUMAN,
        halt=expired, stage="build",
    ),)})  # fmt: skip
    assert outage_since(resumed) is None
    # A failure the provider's outage left undecided is decided again by the next run.
    assert undecided_failure(record) is None and undecided_failure(waiting) == failed


# ---- through a run -------------------------------------------------------------------------


def pipeline(tmp_path: Path, extra: str = "") -> tuple[Path, Path]:
    """A clone and a build stage that always fails; one diagnosis per ticket."""
    work = init_repo(tmp_path / "work")
    commit_files(work, {"README.md": "hello\n"}, "initial")
    bare_clone(tmp_path / "work", tmp_path / "origin.git")
    config = tmp_path / "config.toml"
    config.write_text(
        'state_dir = "state"\n[recovery]\nmax_diag_invocations_per_ticket = 1\n[routing]\n'
        + "".join(f'"{a}" = 0.0\n' for a in ACTIONS)
        + extra
        + '[[stages]]\nname = "clone"\ncommand = ["{python}", "-P", "-m", '
        '"orchestrator.stages.clone"]\ncwd = "run"\n'
        '[[stages]]\nname = "build"\ncwd = "clone"\n'
        'command = ["bash", "-c", "echo it broke; exit 1"]\n'
    )
    return config, write_ticket(tmp_path / "t", repository="../origin.git")


def drive(config: Path, ticket: Path, gateway: ModelGateway) -> RunRecord:
    services = make_services(
        load_config(config), config.parent / "state", environ=dict(ENVIRON),
        gateway_factory=lambda: gateway,
    )  # fmt: skip
    return run_ticket(load_ticket(ticket), services)


def message(text: str) -> dict[str, Any]:
    return {
        "id": "msg_01", "type": "message", "role": "assistant", "model": f"{MODEL}-20260101",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 812, "output_tokens": 37},
    }  # fmt: skip


def via_sdk(respond: Callable[[httpx2.Request], httpx2.Response]) -> AnthropicGateway:
    return AnthropicGateway(
        model=MODEL, api_key="sk-ant-test-SECRET-0123456789", timeout_s=5.0, max_retries=2,
        http_client=httpx2.Client(transport=httpx2.MockTransport(respond)),
    )  # fmt: skip


OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


@pytest.mark.slow
def test_an_overloaded_model_leaves_the_run_waiting_and_the_next_run_decides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[int] = []
    # Named by its path: the SDK (2.5 s of CPU to import) is loaded by the test that uses
    # it, not by every xdist worker as it collects the suite.
    monkeypatch.setattr(
        "anthropic._base_client.SyncAPIClient._sleep_for_retry",
        lambda self, *, retries_taken, **_: slept.append(retries_taken),
    )
    config, ticket = pipeline(tmp_path)
    asked: list[httpx2.Request] = []

    def overloaded(request: httpx2.Request) -> httpx2.Response:
        asked.append(request)
        return httpx2.Response(529, json=OVERLOADED)

    record = drive(config, ticket, via_sdk(overloaded))

    # The SDK's own retries were used up (three tries), then the run waits, undecided.
    assert len(asked) == 3 and slept == [0, 1]
    assert record.state is RunState.WAITING_INFRA
    assert record.halt is not None and record.halt.reason is HaltReason.INFRA_UNAVAILABLE
    assert record.halt.stage == "build" and "529" in record.halt.detail
    assert record.counters.diagnoses == 0
    [ref] = record.verdicts
    assert ref.model_unavailable and ref.source == "model"
    # Charged before the call, as every diagnosis is; not counted against the cap.
    budget = BudgetStore(tmp_path / "state").load(record.ticket_id)
    assert budget.spent("diagnosis") == 1
    assert diagnoses_spent(budget, [f"{record.run_id}:attempt-2:verdict-1"]) == 0
    assert outage_since(record) == record.attempts[-1].ended_at
    # The failed call is persisted (its tokens, its transcript) and in the ledger.
    verdict = read_verdict(Path(ref.path))
    assert verdict.halt == "infra_unavailable" and verdict.transcript is not None
    [call] = verdict.transcript
    assert call.kind == "model" and call.error is CallError.SERVER
    rows = [r for r in ledger_for(tmp_path / "state", {}).rows() if r["run"] == record.run_id]
    assert [(r["kind"], r["decision_id"], r["outcome"]) for r in rows] == [
        ("decision", f"{record.run_id}:attempt-2:verdict-1", None),
        ("outcome", f"{record.run_id}:attempt-2:verdict-1", "waiting-infra: infra_unavailable"),
    ]

    # The model answers again: the same failure is decided, within the cap of one.
    healthy: list[httpx2.Request] = []

    def answers(request: httpx2.Request) -> httpx2.Response:
        healthy.append(request)
        return httpx2.Response(200, json=message(json.dumps(VERDICT)))

    record = drive(config, ticket, via_sdk(answers))
    assert len(healthy) == 1
    assert record.state is RunState.NEEDS_HUMAN
    assert record.halt is not None and record.halt.reason is HaltReason.ABANDONED
    assert record.counters.diagnoses == 1
    assert [(v.number, v.attempt, v.model_unavailable) for v in record.verdicts] == [
        (1, 2, True), (2, 2, False),
    ]  # fmt: skip
    assert len(record.attempts) == 2  # decided, not run again

    # Both decisions replay exactly from their transcripts.
    results = replay(RunStore(tmp_path / "state"), load_config(config), record.run_id, None)
    assert [r.identical for r in results] == [True, True], [r.differences for r in results]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("error", "state", "halt"),
    [
        (CallError.RATE_LIMITED, RunState.WAITING_INFRA, HaltReason.INFRA_UNAVAILABLE),
        (CallError.AUTHENTICATION, RunState.NEEDS_HUMAN, HaltReason.MODEL_ERROR),
        (CallError.API, RunState.NEEDS_HUMAN, HaltReason.MODEL_ERROR),
    ],
)
@pytest.mark.parametrize("mode", ["single", "investigate"])
def test_in_either_mode_only_an_outage_waits(
    tmp_path: Path, error: CallError, state: RunState, halt: HaltReason, mode: str
) -> None:
    config, ticket = pipeline(tmp_path, f'[diagnosis]\nmode = "{mode}"\n')
    failed = ModelReply(text=None, model="m-1", error=f"{error} (test)", error_kind=error)
    record = drive(config, ticket, ScriptedGateway([failed], model_name="m-1"))
    assert record.state is state
    assert record.halt is not None and record.halt.reason is halt
    assert record.counters.diagnoses == (0 if state is RunState.WAITING_INFRA else 1)
    [result] = replay(RunStore(tmp_path / "state"), load_config(config), record.run_id, None)
    assert result.identical, result.differences
