"""``orchestrator eval --live``: the model asked about the cases that reach it, under a cost
cap that is never exceeded. Only scripted gateways here: no network, no key."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from orchestrator.cli.commands.eval import run_eval
from orchestrator.domain.config import Config, ContextLimits, PriceConfig
from orchestrator.domain.errors import UsageError
from orchestrator.domain.proposals import facts_for
from orchestrator.eval import layers
from orchestrator.eval.corpus import load_corpus
from orchestrator.eval.live import LiveSettings, run_live, worst_case_usd
from orchestrator.eval.offline import evaluate
from orchestrator.recovery.gateway import ModelReply, ScriptedGateway
from orchestrator.recovery.prompt import build_prompt

from corpus.fixtures import corpus_holding, some_cases

RETRY = json.dumps({"action": "retry", "summary": "re-run the code stage with the failure"})
PRICES = {"scripted": PriceConfig(input_per_mtok=3.0, output_per_mtok=15.0)}
# Three that reach the model, one that never does (a bad key is a person's job).
PICKED = ("git-merge-conflict", "mypy-return-type", "pytest-assert", "claude-auth")


@pytest.fixture
def small_corpus(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return some_cases(corpus_holding(request, PICKED), tmp_path / "small", PICKED)


def _clock() -> itertools.count[float]:
    return itertools.count(start=100.0, step=0.25)


def _live(corpus: Path, gateway: ScriptedGateway, cap: float, max_reasks: int = 1):  # type: ignore[no-untyped-def]
    cases = load_corpus(corpus)
    results, _ = evaluate(cases, corpus, ContextLimits())
    ticks = _clock()
    return results, run_live(
        cases, results, gateway=gateway, prices=PRICES,
        settings=LiveSettings(max_cost_usd=cap, max_tokens=2048, max_reasks=max_reasks),
        clock=lambda: next(ticks),
    )  # fmt: skip


def test_every_eligible_case_is_asked_and_scored_against_its_label(small_corpus: Path) -> None:
    gateway = ScriptedGateway([RETRY] * 3)
    _, live = _live(small_corpus, gateway, cap=5.0)
    assert (live.eligible, live.asked, gateway.calls) == (3, 3, 3)
    assert [r.id for r in live.results] == [
        "git-merge-conflict",
        "mypy-return-type",
        "pytest-assert",
    ]
    assert live.agreement == 1.0 and live.stopped is None
    # Cost from the usage the gateway reported, at the configured price.
    expected = sum((r.input_tokens * 3.0 + r.output_tokens * 15.0) / 1e6 for r in live.results)
    assert live.spent_usd == pytest.approx(expected, abs=1e-6)
    assert live.cost_per_diagnosis_usd == pytest.approx(expected / 3, abs=1e-6)
    # The fake clock ticks once per read: each diagnosis took one tick.
    assert live.latency_p50_s == live.latency_p95_s == 0.25
    # The model saw the bundle the offline run built: the root cause is in its prompt.
    assert "assert 0 == 4" in gateway.requests[2].prompt


def test_it_stops_before_the_call_that_could_pass_the_cap(small_corpus: Path) -> None:
    cases = load_corpus(small_corpus)
    results, _ = evaluate(cases, small_corpus, ContextLimits())
    first, second, _ = (r for r in results if r.model_call_made)
    label = next(c.label for c in cases if c.label.id == first.id)
    ctx = layers.decision_context(label)
    prompt = build_prompt(facts_for(ctx, "CORPUS-1", "bug-fix"), first.bundle_text)
    worst_first = worst_case_usd(prompt, PRICES["scripted"], max_tokens=2048, max_reasks=1)
    # Room for the first diagnosis's worst case; once its real cost is spent, not for the
    # second one's worst case (each is dominated by max_tokens of output).
    cap = worst_first * 1.2
    full = ModelReply(
        text=RETRY, model="scripted", stop_reason="end_turn", input_tokens=1000,
        output_tokens=2048,
    )  # fmt: skip
    gateway = ScriptedGateway([full, full, full])
    _, live = _live(small_corpus, gateway, cap=cap)
    assert (live.asked, gateway.calls) == (1, 1)
    assert live.spent_usd == pytest.approx((1000 * 3.0 + 2048 * 15.0) / 1e6)
    assert live.spent_usd <= cap
    assert live.stopped is not None and f"stopped before {second.id}" in live.stopped

    # A cap below the first diagnosis's worst case: no call at all.
    gateway = ScriptedGateway([full])
    _, live = _live(small_corpus, gateway, cap=worst_first * 0.99)
    assert (live.asked, gateway.calls, live.spent_usd) == (0, 0, 0.0)
    assert live.stopped is not None and f"stopped before {first.id}" in live.stopped


def test_an_invalid_reply_counts_as_the_abandon_it_becomes(small_corpus: Path) -> None:
    gateway = ScriptedGateway(["not json", "still not json", RETRY, RETRY])
    _, live = _live(small_corpus, gateway, cap=5.0)
    first = live.results[0]
    assert (first.action, first.valid, first.agreed, first.calls) == (
        "abandon-human", False, False, 2,
    )  # fmt: skip
    assert live.agreement == pytest.approx(2 / 3, abs=1e-4)


def test_a_model_without_a_price_is_refused_before_any_call(small_corpus: Path) -> None:
    gateway = ScriptedGateway([RETRY], model_name="unpriced-model")
    cases = load_corpus(small_corpus)
    results, _ = evaluate(cases, small_corpus, ContextLimits())
    with pytest.raises(UsageError, match="no price for model 'unpriced-model'"):
        run_live(
            cases, results, gateway=gateway, prices=PRICES,
            settings=LiveSettings(max_cost_usd=1.0, max_tokens=2048, max_reasks=1),
            clock=lambda: 0.0,
        )  # fmt: skip
    assert gateway.calls == 0


def test_the_cli_live_path_reports_agreement_and_cost(
    small_corpus: Path, tmp_path: Path, project_root: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    config = tmp_path / "config.toml"
    starter = (project_root / "orchestrator" / "starter" / "config.toml").read_text()
    config.write_text(
        starter + '\n[prices."scripted"]\ninput_per_mtok = 3.0\noutput_per_mtok = 15.0\n'
    )
    gateway = ScriptedGateway([RETRY] * 3)
    seen: list[Config] = []

    def build(cfg: Config, environ: object) -> ScriptedGateway:
        seen.append(cfg)
        return gateway

    ticks = _clock()
    code = run_eval(
        small_corpus, config, capsys_out := _Out(), as_json_output=True, live=True,
        max_cost_usd=2.0, environ={}, build_gateway=build, clock=lambda: next(ticks),
    )  # fmt: skip
    assert code == 0 and len(seen) == 1
    document = json.loads(capsys_out.text)
    assert document["live"]["asked"] == 3
    assert document["live"]["agreement"] == 1.0
    assert document["summary"]["model_calls_made"] == 3
    # The live verdicts (a retry each, which the labels accept) are what is learned: the
    # second pass asks about none of them.
    assert document["learning"]["offline"] is False
    learned = document["learning"]["found"]
    assert (learned["first"]["calls"], learned["second"]["calls"]) == (3, 0)
    decisions = [p["decision"]["action"] for p in learned["proofs"] if p["decision"]]
    assert decisions == ["retry"] * 3

    with pytest.raises(UsageError, match="no model key"):
        run_eval(
            small_corpus, config, _Out(), live=True, max_cost_usd=2.0, environ={},
            build_gateway=lambda cfg, env: None,
        )  # fmt: skip


class _Out:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)
