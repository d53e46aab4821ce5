"""A batch stops asking a model that refused its key (issue 27): after one 401, later
decisions of the batch wait uncharged for the next batch, and the batch says so once."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from orchestrator.app.refused_key import RefusedKeyLatch
from orchestrator.cli.commands.batch import batch
from orchestrator.domain.lifecycle import HaltReason
from orchestrator.domain.transcripts import CallError
from orchestrator.recovery.gateway import ModelReply, ModelRequest, ScriptedGateway, Unavailable
from orchestrator.storage.budget import BudgetStore

from conftest import write_ticket
from support.harness import make_origin, write_pipeline

REQUEST = ModelRequest(system="s", prompt="p", json_schema={}, max_tokens=10)
REFUSED = ModelReply(
    text=None,
    model="m",
    error="authentication failed (401)",
    error_kind=CallError.AUTHENTICATION,
)


def test_after_a_refused_key_nobody_is_asked_again_and_it_is_said_once() -> None:
    said: list[str] = []
    built: list[ScriptedGateway] = []

    def inner() -> ScriptedGateway:
        built.append(ScriptedGateway([REFUSED, REFUSED]))
        return built[-1]

    latch = RefusedKeyLatch(inner, "ANTHROPIC_API_KEY", said.append)
    first = latch()
    assert first is not None and not isinstance(first, Unavailable)
    assert first.complete(REQUEST) == REFUSED  # the caller sees the failed call as it was
    # A re-ask within the same decision still goes through (its gateway is handed out);
    # the next decision gets none, and is deferred rather than abandoned.
    assert first.complete(REQUEST) == REFUSED
    later = latch()
    assert later == Unavailable(
        "the model refused its key ($ANTHROPIC_API_KEY): not asked again in this batch",
        defer=True,
    )
    assert latch() == later
    assert len(built) == 1
    assert said == [
        "the model refused its key ($ANTHROPIC_API_KEY): not asked again in this batch; the "
        "decisions it would have made wait for the next batch (fix $ANTHROPIC_API_KEY first)"
    ]


def test_other_failures_and_answers_leave_the_model_asked() -> None:
    said: list[str] = []
    replies = [
        ModelReply(
            text=None, model="m", error="rate limited (429)", error_kind=CallError.RATE_LIMITED
        ),
        "{}",
    ]
    latch = RefusedKeyLatch(lambda: ScriptedGateway(list(replies)), "KEY", said.append)
    for _ in range(2):
        gateway = latch()
        assert gateway is not None and not isinstance(gateway, Unavailable)
        gateway.complete(REQUEST)
    assert latch.refused is None and said == []


def test_no_model_and_a_spent_budget_pass_through() -> None:
    spent = Unavailable("batch budget spent: 1/1 model calls", defer=True)
    assert RefusedKeyLatch(lambda: None, "KEY", print)() is None
    assert RefusedKeyLatch(lambda: spent, "KEY", print)() == spent


@pytest.mark.slow
def test_a_batch_asks_a_model_with_a_refused_key_once(tmp_path: Path) -> None:
    """Three tickets whose check fails, a model that refuses its key: the first decision
    asks (and is charged), the other two wait for the next batch, uncharged, and the
    batch says why once."""
    make_origin(tmp_path)
    failing = '[[stages]]\nname = "check"\ncwd = "clone"\ncommand = ["bash", "-c", "exit 1"]\n'
    config = write_pipeline(tmp_path, failing)
    for ticket in ("T-1", "T-2", "T-3"):
        write_ticket(tmp_path / "t", ticket, repository="../origin.git")
    asked: list[ModelRequest] = []

    def refusing(request: ModelRequest) -> ModelReply:
        asked.append(request)
        return REFUSED

    out = io.StringIO()
    batch(
        config, None, tmp_path / "t", jobs=1, as_json=False, worker=False, out=out,
        environ={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "DRY_RUN": "false"},
        gateway_factory=lambda: ScriptedGateway([refusing] * 10),
    )  # fmt: skip
    assert len(asked) == 1
    assert out.getvalue().count("the model refused its key") == 1
    budgets = BudgetStore(tmp_path / "state")
    charged = {t: budgets.load(t).spent("diagnosis") for t in ("T-1", "T-2", "T-3")}
    assert sorted(charged.values()) == [0, 0, 1]


def test_a_key_refused_before_any_call_defers_every_decision_of_the_batch() -> None:
    """The factory asked once and was refused (``services.model_gateway_factory``): no
    gateway is built, nothing is charged, and the batch says so once."""
    said: list[str] = []
    refused = Unavailable(
        "the model refused its key ($ANTHROPIC_API_KEY): authentication failed (401)",
        halt=HaltReason.AUTH_ERROR,
    )
    asked: list[int] = []

    def inner() -> Unavailable:
        asked.append(1)
        return refused

    latch = RefusedKeyLatch(inner, "ANTHROPIC_API_KEY", said.append)
    first, second = latch(), latch()
    assert (
        first
        == second
        == Unavailable(
            "the model refused its key ($ANTHROPIC_API_KEY): not asked again in this batch",
            defer=True,
        )
    )
    assert len(asked) == 1 and len(said) == 1
    # A missing key is not a refusal: it passes through as it is, for every decision.
    missing = Unavailable("no model key: $ANTHROPIC_API_KEY is not set", halt=HaltReason.NO_MODEL)
    other = RefusedKeyLatch(lambda: missing, "ANTHROPIC_API_KEY", said.append)
    assert other() == missing and other() == missing and len(said) == 1


class KeyedFake:
    """What ``gateway_from_config`` builds, for a key the API refuses (or accepts): asked
    about its key, never asked to complete while it is refused."""

    model_name = "fake"

    def __init__(self, refusal: str | None) -> None:
        self.refusal = refusal
        self.key_questions = 0

    def key_refusal(self) -> str | None:
        self.key_questions += 1
        return self.refusal

    def complete(self, request: ModelRequest) -> ModelReply:
        raise AssertionError("a refused key is never used for a call")


def _run_with_key(tmp_path: Path, monkeypatch, key: str | None, fake: KeyedFake):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    from orchestrator.app import services as app_services
    from orchestrator.app.replay import replay
    from orchestrator.recovery import anthropic_gateway

    from support.harness import Harness

    monkeypatch.setattr(app_services, "_KEY_REFUSALS", {})
    monkeypatch.setattr(anthropic_gateway, "gateway_from_config", lambda model, environ: fake)
    make_origin(tmp_path)
    failing = '[[stages]]\nname = "check"\ncwd = "clone"\ncommand = ["bash", "-c", "exit 1"]\n'
    h = Harness(write_pipeline(tmp_path, failing), None)
    environ = {"ANTHROPIC_API_KEY": key} if key is not None else {}
    factory = app_services.model_gateway_factory(h.loaded.config.model, environ)
    h.services = replace(h.services, gateway_factory=factory)
    record = h.run(write_ticket(tmp_path / "t"))
    results = replay(h.services.storage.runs, h.loaded, record.run_id, None)
    return h, record, results


def test_a_refused_key_ends_the_run_auth_error_before_a_diagnosis_is_charged(
    tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    fake = KeyedFake("authentication failed (401)")
    h, record, results = _run_with_key(tmp_path, monkeypatch, "sk-ant-wrong", fake)
    assert record.halt is not None and record.halt.reason is HaltReason.AUTH_ERROR
    assert "the model refused its key ($ANTHROPIC_API_KEY): authentication failed (401)" in (
        record.halt.detail
    )
    assert h.budget() == (0, 0) and fake.key_questions == 1
    assert [r.identical for r in results] == [True]


def test_a_missing_key_names_its_variable(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    fake = KeyedFake(None)
    h, record, results = _run_with_key(tmp_path, monkeypatch, None, fake)
    assert record.halt is not None and record.halt.reason is HaltReason.NO_MODEL
    assert "no model key: $ANTHROPIC_API_KEY is not set" in record.halt.detail
    assert h.budget() == (0, 0) and fake.key_questions == 0
    assert [r.identical for r in results] == [True]
