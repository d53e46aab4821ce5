"""What ``orchestrator eval`` prints and writes: a table for people, JSON for tools."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.eval.live import LiveSummary
from orchestrator.eval.offline import CaseResult, Summary


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


def render_table(summary: Summary, live: LiveSummary | None = None) -> str:
    rows = _rows(summary) + (_live_rows(live) if live is not None else [])
    width = max(len(name) for name, _ in rows)
    lines = [f"{name:<{width}}  {value}" for name, value in rows]
    for title, items in (
        ("classifier misses", summary.classifier_misses),
        ("playbook misses", summary.playbook_misses),
        ("deterministic verdicts not acceptable", summary.deterministic_action_misses),
        ("unwarranted model calls", summary.unwarranted_model_calls),
        ("root cause not in the bundle", summary.root_cause_misses),
    ):
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
    summary: Summary, results: Sequence[CaseResult], live: LiveSummary | None = None
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
    }
