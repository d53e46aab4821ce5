"""The scorecard and its table: figures by family and by class, found and padded side by
side, the goals' totals, and each miss with the reason a reader acts on."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.eval.offline import CaseResult
from orchestrator.eval.report import render_scorecard
from orchestrator.eval.scorecard import GOALS, Goals, scorecard


def _result(case_id: str, **changes: Any) -> CaseResult:
    fields: dict[str, Any] = {
        "id": case_id, "padded": False, "family": "pytest", "label_class": "code",
        "observed_class": "code", "model_call_warranted": True, "model_call_made": True,
        "decided_by": "model", "action": None, "action_acceptable": None,
        "expected_playbook_entry": None, "playbook_entry": None,
        "root_cause": f"cause of {case_id}", "root_cause_in_bundle": True,
        "any_root_cause_in_bundle": True, "bundle_bytes": 4000,
    }  # fmt: skip
    fields.update(changes)
    return CaseResult(**fields)


FOUND = (
    _result("01-py"),
    _result("02-py", root_cause_in_bundle=False, any_root_cause_in_bundle=True,
            bundle_bytes=8000),
    _result("03-net", family="curl", label_class="network", model_call_warranted=False,
            bundle_bytes=2000),
    _result("04-oom", family="gcc", label_class="resource_exhausted",
            observed_class="resource_exhausted", model_call_warranted=False,
            model_call_made=False, decided_by="infra", action="abandon-human",
            action_acceptable=True, bundle_bytes=1000),
)  # fmt: skip
PADDED = (
    *(r.model_copy(update={"padded": True, "bundle_bytes": r.bundle_bytes + 400})
      for r in FOUND[:2]),
    FOUND[2].model_copy(update={"padded": True, "root_cause_in_bundle": False,
                                "any_root_cause_in_bundle": False}),
    FOUND[3].model_copy(update={"padded": True}),
)  # fmt: skip


def test_rows_by_family_and_class_put_found_and_padded_side_by_side() -> None:
    card = scorecard(FOUND, PADDED)
    py = next(row for row in card.by_family if row.group == "pytest")
    assert (py.cases, py.first_root_cause_found, py.first_root_cause_padded) == (2, 1, 1)
    assert (py.calls_found, py.unwarranted_found, py.calls_padded) == (2, 0, 2)
    assert (py.tokens_p50_found, py.tokens_p95_found) == (1000, 2000)
    assert (py.tokens_p50_padded, py.tokens_p95_padded) == (1100, 2100)
    network = next(row for row in card.by_class if row.group == "network")
    assert (network.class_right_found, network.class_right_padded) == (0, 0)
    assert (network.unwarranted_found, network.unwarranted_padded) == (1, 1)
    assert [row.group for row in card.by_class] == ["code", "network", "resource_exhausted"]
    t = card.totals
    assert (t.cases, t.first_root_cause_found, t.first_root_cause_padded) == (4, 3, 2)
    assert (t.any_root_cause_found, t.any_root_cause_padded) == (4, 3)
    assert (t.class_right_found, t.class_right_padded) == (3, 3)
    assert (t.unwarranted_calls_found, t.unwarranted_calls_padded) == (1, 1)
    assert (t.bundle_tokens_p95_found, t.bundle_tokens_p95_padded) == (2000, 2100)


def test_each_miss_names_its_reason() -> None:
    card = scorecard(FOUND, PADDED)
    misses = {(m.id, m.padded, m.kind): m.reason for m in card.misses}
    assert misses == {
        ("02-py", False, "root cause"):
            "not in the bundle: 'cause of 02-py' (a further root-cause line is)",
        ("02-py", True, "root cause"):
            "not in the bundle: 'cause of 02-py' (a further root-cause line is)",
        ("03-net", False, "class"): "observed code, label network",
        ("03-net", False, "unwarranted call"): "the model is asked about a network failure",
        ("03-net", True, "class"): "observed code, label network",
        ("03-net", True, "root cause"): "not in the bundle: 'cause of 03-net'",
        ("03-net", True, "unwarranted call"): "the model is asked about a network failure",
    }  # fmt: skip


def test_the_table_prints_every_group_the_totals_and_the_misses() -> None:
    table = render_scorecard(scorecard(FOUND, PADDED))
    lines = table.splitlines()
    assert lines[0].split("|")[1:-1] == [
        " family ", " cases ", " 1st cause found/padded ", " class right found/padded ",
        " calls (unwarranted) ", " padded calls (unwarranted) ", " tokens p50/p95 ",
        " padded tokens p50/p95 ",
    ]  # fmt: skip
    assert "| pytest |     2 |                    1/1 |                      2/2 |" in table
    assert "first root cause in the bundle  as found 3/4" in table
    assert "padded 2/4" in table
    assert "class told apart                as found 3/4 (75.0 %)" in table
    assert "unwarranted model calls         as found 1" in table
    assert "code read as infrastructure     as found 0                padded 0" in table
    assert "(goal ≤ 3,000)" in table
    assert "  03-net  padded    root cause: not in the bundle: 'cause of 03-net'" in table
    assert "misses (7):" in table


def test_without_a_padded_run_the_table_has_no_padded_columns() -> None:
    card = scorecard(FOUND)
    assert not card.padded and card.totals.first_root_cause_padded is None
    table = render_scorecard(card)
    assert "padded" not in table.split("\n\n")[0]
    assert "as found 3/4" in table and "padded 2/4" not in table


@pytest.mark.parametrize(
    ("found", "padded", "missed"),
    [
        (57, 54, ()),
        (56, 54, ("first root cause in the bundle as found: 56/60 (goal 95%)",)),
        (57, 53, ("first root cause in the bundle padded: 53/60 (goal 90%)",)),
    ],
)
def test_goals_hold_exactly_at_their_thresholds(
    found: int, padded: int, missed: tuple[str, ...]
) -> None:
    def results(hits: int, is_padded: bool) -> list[CaseResult]:
        return [
            _result(f"{n:02d}", padded=is_padded, root_cause_in_bundle=n < hits) for n in range(60)
        ]

    card = scorecard(results(found, False), results(padded, True))
    assert card.goals_missed == missed


def test_every_goal_is_checked() -> None:
    strict = Goals(first_root_cause_found=1.0, first_root_cause_padded=1.0, class_right=1.0,
                   max_unwarranted_calls=0, max_bundle_tokens_p95=500)  # fmt: skip
    card = scorecard(FOUND, PADDED, goals=strict)
    assert card.goals_missed == (
        "first root cause in the bundle as found: 3/4 (goal 100%)",
        "first root cause in the bundle padded: 2/4 (goal 100%)",
        "class right as found: 3/4 (goal 100%)",
        "class right padded: 3/4 (goal 100%)",
        "unwarranted model calls as found: 1 (goal ≤ 0)",
        "unwarranted model calls padded: 1 (goal ≤ 0)",
        "bundle tokens p95 as found: 2000 (goal ≤ 500)",
        "bundle tokens p95 padded: 2100 (goal ≤ 500)",
    )
    assert GOALS.max_bundle_tokens_p95 == 3_000


def test_a_code_failure_read_as_infrastructure_misses_its_goal() -> None:
    """Precision (issue 44): not one failure of the code may be read as infrastructure
    (it would be retried or abandoned, never fixed), as found or padded."""
    wrong = _result("05-py", observed_class="network", model_call_made=False)
    card = scorecard((*FOUND, wrong), (*PADDED, wrong.model_copy(update={"padded": True})))
    assert (card.totals.code_read_as_infra_found, card.totals.code_read_as_infra_padded) == (1, 1)
    assert "code failures read as infrastructure as found: 1 (goal ≤ 0)" in card.goals_missed
    assert "code failures read as infrastructure padded: 1 (goal ≤ 0)" in card.goals_missed
    # Infrastructure read as another class of infrastructure is a class miss, not this one.
    other = _result("06-net", label_class="network", observed_class="outage")
    assert scorecard((*FOUND, other)).totals.code_read_as_infra_found == 0
    assert (GOALS.class_right, GOALS.max_code_read_as_infra) == (0.95, 0)


def test_padded_results_must_be_the_same_cases() -> None:
    with pytest.raises(ValueError, match="not the same cases"):
        scorecard(FOUND, PADDED[:3])
