"""The failure-reading scorecard (issue 25): the offline results as found and padded,
side by side, by tool family and by failure class, with the totals the goals are stated
in and every miss with its reason. Pure: it reads results, nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Literal

from orchestrator.domain.validation import Frozen
from orchestrator.eval.offline import CaseResult, percentile

NO_FAMILY: Final = "(no family)"


class Goals(Frozen):
    """What failure reading should reach on logs nobody here wrote (issue 44), as shares
    of the corpus (95 %, 90 %, 95 %) and as counts. Precision first: not one failure of
    the code may be read as infrastructure (it would be retried or abandoned, never
    fixed), so a class is named only on a mechanism's evidence."""

    first_root_cause_found: float = 0.95
    first_root_cause_padded: float = 0.90
    class_right: float = 0.95
    max_unwarranted_calls: int = 5  # as found, and again padded
    max_bundle_tokens_p95: int = 3_000
    max_code_read_as_infra: int = 0  # as found, and again padded


GOALS: Final = Goals()


class GroupRow(Frozen):
    """One family's or one class's figures; the padded ones are None without a padded run."""

    group: str
    cases: int
    first_root_cause_found: int
    first_root_cause_padded: int | None
    class_right_found: int
    class_right_padded: int | None
    calls_found: int
    unwarranted_found: int
    calls_padded: int | None
    unwarranted_padded: int | None
    tokens_p50_found: int
    tokens_p95_found: int
    tokens_p50_padded: int | None
    tokens_p95_padded: int | None


class Totals(Frozen):
    cases: int
    first_root_cause_found: int
    first_root_cause_padded: int | None
    any_root_cause_found: int
    any_root_cause_padded: int | None
    class_right_found: int
    class_right_padded: int | None
    unwarranted_calls_found: int
    unwarranted_calls_padded: int | None
    bundle_tokens_p95_found: int
    bundle_tokens_p95_padded: int | None
    # Failures labelled ``code`` read as a class of infrastructure (precision's misses).
    code_read_as_infra_found: int = 0
    code_read_as_infra_padded: int | None = None


MissKind = Literal["class", "root cause", "unwarranted call"]


class Miss(Frozen):
    id: str
    padded: bool
    kind: MissKind
    reason: str


class Scorecard(Frozen):
    padded: bool
    by_family: tuple[GroupRow, ...]
    by_class: tuple[GroupRow, ...]
    totals: Totals
    misses: tuple[Miss, ...]
    goals: Goals
    goals_missed: tuple[str, ...]


def _count(results: Sequence[CaseResult], test: Callable[[CaseResult], bool]) -> int:
    return sum(1 for r in results if test(r))


def _unwarranted(result: CaseResult) -> bool:
    return result.model_call_made and not result.model_call_warranted


def _code_read_as_infra(result: CaseResult) -> bool:
    return result.label_class == "code" and result.observed_class != "code"


def _row(group: str, found: Sequence[CaseResult], padded: Sequence[CaseResult] | None) -> GroupRow:
    tokens = [r.bundle_tokens for r in found]
    padded_tokens = [r.bundle_tokens for r in padded] if padded else []

    def on_padded(test: Callable[[CaseResult], bool]) -> int | None:
        return None if padded is None else _count(padded, test)

    return GroupRow(
        group=group,
        cases=len(found),
        first_root_cause_found=_count(found, lambda r: r.root_cause_in_bundle),
        first_root_cause_padded=on_padded(lambda r: r.root_cause_in_bundle),
        class_right_found=_count(found, lambda r: r.class_correct),
        class_right_padded=on_padded(lambda r: r.class_correct),
        calls_found=_count(found, lambda r: r.model_call_made),
        unwarranted_found=_count(found, _unwarranted),
        calls_padded=on_padded(lambda r: r.model_call_made),
        unwarranted_padded=on_padded(_unwarranted),
        tokens_p50_found=percentile(tokens, 50),
        tokens_p95_found=percentile(tokens, 95),
        tokens_p50_padded=percentile(padded_tokens, 50) if padded_tokens else None,
        tokens_p95_padded=percentile(padded_tokens, 95) if padded_tokens else None,
    )


def _groups(
    found: Sequence[CaseResult],
    padded: dict[str, CaseResult] | None,
    key: Callable[[CaseResult], str],
) -> tuple[GroupRow, ...]:
    members: dict[str, list[CaseResult]] = {}
    for result in found:
        members.setdefault(key(result), []).append(result)
    return tuple(
        _row(group, rows, None if padded is None else [padded[r.id] for r in rows])
        for group, rows in sorted(members.items())
    )


def _misses_of(result: CaseResult) -> list[Miss]:
    misses = []
    if not result.class_correct:
        reason = f"observed {result.observed_class}, label {result.label_class}"
        misses.append(Miss(id=result.id, padded=result.padded, kind="class", reason=reason))
    if not result.root_cause_in_bundle:
        also = " (a further root-cause line is)" if result.any_root_cause_in_bundle else ""
        reason = f"not in the bundle: {result.root_cause!r}{also}"
        misses.append(Miss(id=result.id, padded=result.padded, kind="root cause", reason=reason))
    if _unwarranted(result):
        reason = f"the model is asked about a {result.label_class} failure"
        misses.append(
            Miss(id=result.id, padded=result.padded, kind="unwarranted call", reason=reason)
        )
    return misses


def _goals_missed(totals: Totals, goals: Goals) -> tuple[str, ...]:
    t, missed = totals, []
    need_found = goals.first_root_cause_found * t.cases
    if t.first_root_cause_found < need_found - 1e-9:
        missed.append(
            f"first root cause in the bundle as found: {t.first_root_cause_found}/{t.cases} "
            f"(goal {goals.first_root_cause_found:.0%})"
        )
    need_padded = goals.first_root_cause_padded * t.cases
    if t.first_root_cause_padded is not None and t.first_root_cause_padded < need_padded - 1e-9:
        missed.append(
            f"first root cause in the bundle padded: {t.first_root_cause_padded}/{t.cases} "
            f"(goal {goals.first_root_cause_padded:.0%})"
        )
    for how, right in (("as found", t.class_right_found), ("padded", t.class_right_padded)):
        if right is not None and right < goals.class_right * t.cases - 1e-9:
            missed.append(f"class right {how}: {right}/{t.cases} (goal {goals.class_right:.0%})")
    # (what, its count as found and padded, the goal, how the goal is shown)
    at_most = (
        ("unwarranted model calls", t.unwarranted_calls_found, t.unwarranted_calls_padded,
         goals.max_unwarranted_calls, ""),
        ("code failures read as infrastructure", t.code_read_as_infra_found,
         t.code_read_as_infra_padded, goals.max_code_read_as_infra, ""),
        ("bundle tokens p95", t.bundle_tokens_p95_found, t.bundle_tokens_p95_padded,
         goals.max_bundle_tokens_p95, ","),
    )  # fmt: skip
    for what, found, padded, most, shown in at_most:
        for how, count in (("as found", found), ("padded", padded)):
            if count is not None and count > most:
                missed.append(f"{what} {how}: {count} (goal ≤ {most:{shown}})")
    return tuple(missed)


def scorecard(
    found: Sequence[CaseResult],
    padded: Sequence[CaseResult] | None = None,
    *,
    goals: Goals = GOALS,
) -> Scorecard:
    """The scorecard of one corpus's results as found and, when given, padded (the same
    cases, each once)."""
    if not found:
        raise ValueError("nothing to score: no cases")
    padded_by_id = None if padded is None else {r.id: r for r in padded}
    if padded_by_id is not None and set(padded_by_id) != {r.id for r in found}:
        raise ValueError("the padded results are not the same cases as found")
    overall = _row("all", found, None if padded is None else list(padded))
    totals = Totals(
        cases=overall.cases,
        first_root_cause_found=overall.first_root_cause_found,
        first_root_cause_padded=overall.first_root_cause_padded,
        any_root_cause_found=_count(found, lambda r: r.any_root_cause_in_bundle),
        any_root_cause_padded=(
            None if padded is None else _count(padded, lambda r: r.any_root_cause_in_bundle)
        ),
        class_right_found=overall.class_right_found,
        class_right_padded=overall.class_right_padded,
        unwarranted_calls_found=overall.unwarranted_found,
        unwarranted_calls_padded=overall.unwarranted_padded,
        bundle_tokens_p95_found=overall.tokens_p95_found,
        bundle_tokens_p95_padded=overall.tokens_p95_padded,
        code_read_as_infra_found=_count(found, _code_read_as_infra),
        code_read_as_infra_padded=None if padded is None else _count(padded, _code_read_as_infra),
    )
    misses = [m for r in found for m in _misses_of(r)]
    misses += [m for r in padded or () for m in _misses_of(r)]
    misses.sort(key=lambda m: (m.id, m.padded))
    return Scorecard(
        padded=padded is not None,
        by_family=_groups(found, padded_by_id, lambda r: r.family or NO_FAMILY),
        by_class=_groups(found, padded_by_id, lambda r: r.label_class),
        totals=totals,
        misses=tuple(misses),
        goals=goals,
        goals_missed=_goals_missed(totals, goals),
    )
