"""What ``orchestrator eval`` prints and writes: a table for people, JSON for tools."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from orchestrator.eval.learning import CrossCase, Learning, PassFigures
from orchestrator.eval.live import LiveSummary
from orchestrator.eval.offline import CaseResult, Summary
from orchestrator.eval.scorecard import GroupRow, Scorecard


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f} %"


def _rows(summary: Summary) -> list[tuple[str, str]]:
    s = summary
    return [
        ("cases (padded)", f"{s.cases} ({s.padded_cases})"),
        ("classifier accuracy", _pct(s.classifier_accuracy)),
        ("playbook accuracy", f"{_pct(s.playbook_accuracy)} of {s.playbook_cases}"),
        (
            "deterministic verdicts acceptable",
            f"{_pct(s.deterministic_action_accuracy)} of {s.deterministic_decisions}",
        ),
        ("model calls warranted", str(s.model_calls_warranted)),
        ("model calls made", str(s.model_calls_made)),
        ("model calls avoided", str(s.model_calls_avoided)),
        ("unwarranted model calls", str(len(s.unwarranted_model_calls))),
        ("root-cause recall in the bundle", _pct(s.root_cause_recall)),
        ("  of padded cases", _pct(s.root_cause_recall_padded)),
        (
            "bundle tokens p50 / p95 / max",
            f"{s.bundle_tokens_p50} / {s.bundle_tokens_p95} / {s.bundle_tokens_max}",
        ),
    ]


def _live_rows(live: LiveSummary) -> list[tuple[str, str]]:
    money = "n/a" if live.cost_per_diagnosis_usd is None else f"${live.cost_per_diagnosis_usd:.4f}"
    latency = (
        "n/a"
        if live.latency_p50_s is None
        else f"{live.latency_p50_s:.2f} s / {live.latency_p95_s:.2f} s"
    )
    return [
        ("live model", live.model),
        ("diagnoses asked / eligible", f"{live.asked} / {live.eligible}"),
        ("verdict agreement with labels", _pct(live.agreement)),
        ("spent / cap", f"${live.spent_usd:.4f} / ${live.max_cost_usd:.4f}"),
        ("cost per diagnosis", money),
        ("latency p50 / p95", latency),
    ]


def render_table(
    summary: Summary, live: LiveSummary | None = None, *, with_misses: bool = True
) -> str:
    """The summary's figures, then (``with_misses``) the cases behind each miss; a
    scorecard printed below lists those itself, each marked as found or padded."""
    rows = _rows(summary) + (_live_rows(live) if live is not None else [])
    width = max(len(name) for name, _ in rows)
    lines = [f"{name:<{width}}  {value}" for name, value in rows]
    misses = (
        ("classifier misses", summary.classifier_misses),
        ("playbook misses", summary.playbook_misses),
        ("deterministic verdicts not acceptable", summary.deterministic_action_misses),
        ("unwarranted model calls", summary.unwarranted_model_calls),
        ("root cause not in the bundle", summary.root_cause_misses),
    )
    for title, items in misses if with_misses else ():
        if items:
            lines.append(f"{title} ({len(items)}):")
            lines.extend(f"  {item}" for item in items)
    if live is not None:
        disagreed = [r for r in live.results if not r.agreed]
        if disagreed:
            lines.append(f"live verdicts not acceptable ({len(disagreed)}):")
            lines.extend(f"  {r.id}: {r.action} ({r.reason})" for r in disagreed)
        if live.stopped:
            lines.append(live.stopped)
    return "\n".join(lines) + "\n"


def as_json(
    summary: Summary,
    results: Sequence[CaseResult],
    live: LiveSummary | None = None,
    card: Scorecard | None = None,
    learning: Learning | None = None,
) -> dict[str, Any]:
    cases = []
    for result in results:
        row = result.model_dump(mode="json")
        row["class_correct"] = result.class_correct
        row["bundle_tokens"] = result.bundle_tokens
        cases.append(row)
    return {
        "summary": summary.model_dump(mode="json"),
        "cases": cases,
        "live": live.model_dump(mode="json") if live is not None else None,
        "scorecard": card.model_dump(mode="json") if card is not None else None,
        "learning": learning.model_dump(mode="json") if learning is not None else None,
    }


def _pair(found: int, padded: int | None) -> str:
    return str(found) if padded is None else f"{found}/{padded}"


def _calls(calls: int | None, unwarranted: int | None) -> str:
    return "-" if calls is None else f"{calls} ({unwarranted})"


def _tokens(p50: int | None, p95: int | None) -> str:
    return "-" if p50 is None else f"{p50}/{p95}"


def _group_table(title: str, rows: Sequence[GroupRow], padded: bool) -> list[str]:
    """A pipe table (it pastes into an issue as it is); the padded columns only when
    there was a padded run."""
    header = [title, "cases", "1st cause", "class right", "calls (unwarranted)", "tokens p50/p95"]
    if padded:
        header = [title, "cases", "1st cause found/padded", "class right found/padded",
                  "calls (unwarranted)", "padded calls (unwarranted)", "tokens p50/p95",
                  "padded tokens p50/p95"]  # fmt: skip
    table = [header]
    for row in rows:
        cells = [
            row.group, str(row.cases),
            _pair(row.first_root_cause_found, row.first_root_cause_padded),
            _pair(row.class_right_found, row.class_right_padded),
            _calls(row.calls_found, row.unwarranted_found),
        ]  # fmt: skip
        if padded:
            cells.append(_calls(row.calls_padded, row.unwarranted_padded))
        cells.append(_tokens(row.tokens_p50_found, row.tokens_p95_found))
        if padded:
            cells.append(_tokens(row.tokens_p50_padded, row.tokens_p95_padded))
        table.append(cells)
    return _markdown_table(table)


def _share(count: int, cases: int) -> str:
    return f"{count}/{cases} ({count / cases * 100:.1f} %)"


def _measure(name: str, found: str, padded: str | None, goal: str = "") -> str:
    text = f"{name:<31} as found {found:<16}"
    if padded is not None:
        text += f" padded {padded:<16}"
    return (text + (f" (goal {goal})" if goal else "")).rstrip()


def _at_least(share: float, cases: int) -> int:
    """The fewest of ``cases`` that reach ``share`` (95 % of 114 is 109, not 108)."""
    return math.ceil(share * cases - 1e-9)


def render_scorecard(card: Scorecard) -> str:
    """The scorecard for people: by family, by class, the totals beside their goals, the
    goals missed and every miss with its reason."""
    t, g, n = card.totals, card.goals, card.totals.cases

    def of_n(count: int | None) -> str | None:
        return None if count is None else f"{count}/{n}"

    lines = [
        *_group_table("family", card.by_family, card.padded),
        "",
        *_group_table("class", card.by_class, card.padded),
        "",
        _measure(
            "first root cause in the bundle", f"{t.first_root_cause_found}/{n}",
            of_n(t.first_root_cause_padded),
            f"≥ {_at_least(g.first_root_cause_found, n)} as found, "
            f"≥ {_at_least(g.first_root_cause_padded, n)} padded",
        ),
        _measure("any root cause in the bundle", f"{t.any_root_cause_found}/{n}",
                 of_n(t.any_root_cause_padded)),
        _measure(
            "class told apart", _share(t.class_right_found, n),
            None if t.class_right_padded is None else _share(t.class_right_padded, n),
            f"≥ {g.class_right:.0%}",
        ),
        _measure(
            "code read as infrastructure", str(t.code_read_as_infra_found),
            None if t.code_read_as_infra_padded is None else str(t.code_read_as_infra_padded),
            f"≤ {g.max_code_read_as_infra} each",
        ),
        _measure(
            "unwarranted model calls", str(t.unwarranted_calls_found),
            None if t.unwarranted_calls_padded is None else str(t.unwarranted_calls_padded),
            f"≤ {g.max_unwarranted_calls} each",
        ),
        _measure(
            "bundle tokens p95", str(t.bundle_tokens_p95_found),
            None if t.bundle_tokens_p95_padded is None else str(t.bundle_tokens_p95_padded),
            f"≤ {g.max_bundle_tokens_p95:,}",
        ),
    ]  # fmt: skip
    lines.append(f"goals missed ({len(card.goals_missed)}):" if card.goals_missed else "goals met")
    lines.extend(f"  {missed}" for missed in card.goals_missed)
    if card.misses:
        lines.append(f"misses ({len(card.misses)}):")
        width = max(len(m.id) for m in card.misses)
        lines.extend(
            f"  {m.id:<{width}}  {'padded  ' if m.padded else 'as found'}  {m.kind}: {m.reason}"
            for m in card.misses
        )
    return "\n".join(lines) + "\n"


def _pass_table(passes: Sequence[PassFigures]) -> list[str]:
    header = ["pass", "cases", "class right", "root cause in bundle", "calls",
              "warranted", "unwarranted", "by playbook", "tokens to the model"]  # fmt: skip
    table = [header]
    for p in passes:
        counts = (p.cases, p.class_right, p.root_cause_in_bundle, p.calls, p.calls_warranted,
                  p.calls_unwarranted, p.decided_by_playbook)  # fmt: skip
        table.append([p.name, *map(str, counts), f"{p.tokens:,}"])
    return _markdown_table(table)


def _cross(found: Sequence[CrossCase]) -> str:
    wrong = sum(not c.acceptable for c in found)
    return f"{len(found)} ({wrong} deciding what the label does not accept)"


def render_learning(learning: Learning) -> str:
    """The learning passes for people: each pass's figures side by side, what was learned,
    the goal (no second-pass call for a proven failure) and what kept a failure from it."""
    pairs = [p for p in (learning.found, learning.padded) if p is not None]
    passes = [f for p in pairs for f in (p.first, p.second)]
    if learning.cross is not None:
        passes.append(learning.cross)
    lines = ["learning: the corpus decided twice, the first pass's proven decisions promoted"]
    if learning.offline:
        lines += [
            "  offline: a model call's decision is taken as the label's first acceptable re-run",
            "  (a right model's): the second pass measures whether the signature finds the same",
            "  failure again and the playbook decides it with no call, not the model",
        ]
    lines += _pass_table(passes)
    for pair in pairs:
        name = pair.first.name.removeprefix("1st ")
        proven = pair.proven
        by: dict[str, int] = {}
        for proof in proven:
            by[proof.source] = by.get(proof.source, 0) + 1
        sources = ", ".join(f"{source} {count}" for source, count in sorted(by.items()))
        lines.append(
            f"{name}: {len(proven)} of {pair.first.cases} first-pass decisions proven "
            f"({sources or 'none'}); {pair.entries_promoted} entries promoted"
        )
        calls = pair.second_calls_for_proven
        lines.append(f"  second-pass calls for proven failures: {len(calls)} (goal 0)")
        lines.extend(f"    {case_id}" for case_id in calls)
        lines.append(f"  cross-case matches: {_cross(pair.cross_case)}")
        lines.extend(
            f"    {c.case} decided by {c.entry} (learned from {', '.join(c.learned_from)})"
            for c in pair.cross_case
        )
        shared = pair.shared_signatures
        lines.append(f"  signatures two failures share: {len(shared)}")
        lines.extend(f"    {failures}" for failures in shared)
        not_learned = [p for p in proven if p.decision is not None and p.entry is None]
        unproven = [p for p in pair.proofs if not p.proven]
        for title, items in (("proven, not learned", not_learned), ("not proven", unproven)):
            if items:
                lines.append(f"  {title} ({len(items)}):")
                lines.extend(f"    {p.id}: {p.why}" for p in items)
        lines.extend(f"  {note}" for note in pair.notes)
    if learning.cross is not None:
        lines.append(
            f"cross pass: {learning.cross_matched} of {learning.cross_learned} failures "
            "learned as found decided by their entry when padded, with no call"
        )
        lines.append(f"  signatures changed by padding: {len(learning.signature_changed)}")
        lines.extend(f"    {changed}" for changed in learning.signature_changed)
        lines.append(f"  cross-case matches: {_cross(learning.cross_case_padded)}")
        lines.extend(
            f"    {c.case} decided by {c.entry} (learned from {', '.join(c.learned_from)})"
            for c in learning.cross_case_padded
        )
    return "\n".join(lines) + "\n"


def _markdown_table(table: list[list[str]]) -> list[str]:
    """``table`` (its header first) as Markdown lines: the first column left-aligned, the
    rest right-aligned, each as wide as its widest cell."""
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    out = []
    for n, line in enumerate(table):
        cells = [
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(line, widths, strict=True))
        ]
        out.append("| " + " | ".join(cells) + " |")
        if n == 0:
            out.append("|" + "|".join("-" * (width + 2) for width in widths) + "|")
    return out
