"""The offline evaluation over the corpus: what the deterministic layers decide about real
tools' failures, case by case.

Three requirements hold for every case: its class is told correctly; an infrastructure or
resource failure never costs a model call; the labelled root-cause line reaches the bundle
the model would see (padded cases included: a megabyte of ordinary output before and after
the failure). No case is exempt.

The whole corpus (built by running mypy, ruff, pytest and more over tiny projects: about
20 s of CPU) is the full tier's; the quick tier reads two of its shapes
(``few_cases``) through the same evaluation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.domain.config import ContextLimits
from orchestrator.eval.corpus import load_corpus
from orchestrator.eval.offline import CaseResult, Summary, evaluate

from corpus.build import SHAPES
from corpus.fixtures import FEW

CASE_IDS = tuple(i for s in SHAPES for i in (s.id, f"{s.id}-padded"))


def _result(offline: tuple[dict[str, CaseResult], Summary], case_id: str) -> CaseResult:
    results, _ = offline
    if case_id not in results:
        pytest.skip(f"{case_id} was not built on this machine (see the corpus lines above)")
    return results[case_id]


@pytest.mark.slow
@pytest.mark.parametrize("case_id", CASE_IDS)
def test_each_failure_is_classified_as_labelled(
    offline: tuple[dict[str, CaseResult], Summary], case_id: str
) -> None:
    result = _result(offline, case_id)
    assert result.observed_class == result.label_class


INFRA_IDS = tuple(i for s in SHAPES if not s.model_call_warranted for i in (s.id, f"{s.id}-padded"))


@pytest.mark.slow
@pytest.mark.parametrize("case_id", INFRA_IDS)
def test_no_model_call_where_none_is_warranted(
    offline: tuple[dict[str, CaseResult], Summary], case_id: str
) -> None:
    result = _result(offline, case_id)
    assert not result.model_call_made, (
        f"{case_id} ({result.label_class}) would be sent to the model (observed class "
        f"{result.observed_class})"
    )


@pytest.mark.slow
@pytest.mark.parametrize("case_id", CASE_IDS)
def test_root_cause_reaches_the_bundle(
    offline: tuple[dict[str, CaseResult], Summary], case_id: str
) -> None:
    result = _result(offline, case_id)
    assert result.root_cause_in_bundle


@pytest.mark.slow
def test_every_verdict_decided_without_the_model_is_acceptable(
    offline: tuple[dict[str, CaseResult], Summary],
) -> None:
    results, summary = offline
    decided = [r for r in results.values() if not r.model_call_made]
    # Engines' rate limits and bad keys, a missing program, the squash: decided here.
    assert len(decided) >= 15
    assert summary.deterministic_action_misses == ()
    squash = results["commit-order-squash"]
    assert (squash.decided_by, squash.playbook_entry, squash.action) == (
        "playbook", "commit-order-squash", "mechanical-fix",
    )  # fmt: skip
    # Two violations are not the squash the playbook knows: the model is asked.
    assert results["commit-order-two"].model_call_made


@pytest.mark.slow
def test_the_summary_reports_recall_and_bundle_size(
    offline: tuple[dict[str, CaseResult], Summary],
) -> None:
    results, summary = offline
    print(
        f"root-cause recall: {summary.root_cause_recall} "
        f"(padded cases: {summary.root_cause_recall_padded}); "
        f"bundle tokens p50 {summary.bundle_tokens_p50}, p95 {summary.bundle_tokens_p95}"
    )
    assert summary.cases == len(results) >= 80
    assert summary.padded_cases == summary.cases // 2
    misses = {r.id for r in results.values() if not r.root_cause_in_bundle}
    assert set(summary.root_cause_misses) == misses == set()
    assert summary.root_cause_recall == summary.root_cause_recall_padded == 1.0
    assert summary.classifier_misses == summary.playbook_misses == ()
    assert summary.unwarranted_model_calls == ()
    # The bundle is capped (96 KiB by default), whatever the log's size.
    assert 0 < summary.bundle_tokens_p50 <= summary.bundle_tokens_p95 <= 96 * 1024 // 4 + 1024


def test_a_few_cases_are_read_as_labelled_without_the_whole_corpus(few_cases: Path) -> None:
    """The three requirements on two shapes and their padded twins, through the same
    layers: what a run gets that builds only these (a few seconds, not the whole corpus's
    half minute of CPU). The squash is the playbook's to decide; two violations are not."""
    results, summary = evaluate(load_corpus(few_cases), few_cases, ContextLimits())
    found = {r.id: r for r in results}
    assert set(found) == {i for c in FEW for i in (c, f"{c}-padded")}
    for result in results:
        assert result.observed_class == result.label_class, result.id
        assert result.root_cause_in_bundle, result.id
    assert summary.root_cause_recall == summary.root_cause_recall_padded == 1.0
    for padded in ("", "-padded"):
        squash = found[f"commit-order-squash{padded}"]
        assert (squash.decided_by, squash.action, squash.model_call_made) == (
            "playbook", "mechanical-fix", False,
        )  # fmt: skip
        assert found[f"commit-order-two{padded}"].model_call_made
