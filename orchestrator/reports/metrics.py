"""A batch's figures in the Prometheus text exposition format (version 0.0.4), for
node_exporter's textfile collector: tickets by outcome, model calls, tokens, estimated
cost against the caps, decisions, infrastructure retries, what waits for a person, and
stage durations. Pure: report data in, text out.

Every figure describes the last batch (gauges, not counters: each batch rewrites the
file). A figure the state dir did not record (the cost of calls at a price the config
does not know) is left out rather than written as zero.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Final

from orchestrator.reports.report_data import (
    ReportData,
    Spend,
    awaiting,
    infra_retries,
    latest_of_each_ticket,
    outcome_counts,
    stage_durations,
    total_spend,
)

PREFIX: Final = "orchestrator_batch_"


def _label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items())
    return "{" + inner + "}"


class _Family:
    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name = PREFIX + name
        self.lines = [f"# HELP {self.name} {_help(help_text)}", f"# TYPE {self.name} {kind}"]

    def sample(self, value: float, suffix: str = "", **labels: str) -> None:
        self.lines.append(f"{self.name}{suffix}{_labels(labels)} {_number(value)}")


def _seconds(moment: datetime) -> float:
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return round(aware.timestamp(), 3)


def _spend(data: ReportData) -> Spend:
    """The batch's model use as its budget recorded it, else the sum of its decisions."""
    if data.budget is not None and data.budget.spent is not None:
        return data.budget.spent
    return total_spend(data.runs)


def render_metrics(data: ReportData) -> str:
    families: list[_Family] = []

    def family(name: str, kind: str, help_text: str) -> _Family:
        found = _Family(name, kind, help_text)
        families.append(found)
        return found

    info = family("info", "gauge", "The batch these figures describe (always 1).")
    if data.batch is not None:
        info.sample(1, batch=data.batch.batch_id, backend=data.batch.backend)
        started = family("start_time_seconds", "gauge", "When the batch began (Unix time).")
        started.sample(_seconds(data.batch.started_at))
        if data.batch.ended_at is not None:
            ended = family("end_time_seconds", "gauge", "When the batch ended (Unix time).")
            ended.sample(_seconds(data.batch.ended_at))
        outcomes: Mapping[str, int] = Counter(t.status for t in data.batch.tickets)
    else:
        info.sample(1, batch="", backend="")
        outcomes = outcome_counts(data.runs)
    tickets = family("tickets", "gauge", "Tickets by the outcome the batch reported.")
    for outcome, count in sorted(outcomes.items()):
        tickets.sample(count, outcome=outcome)
    spend = _spend(data)
    family("model_calls", "gauge", "Model calls the batch made.").sample(spend.calls)
    tokens = family("model_tokens", "gauge", "Model tokens the batch used, by direction.")
    tokens.sample(spend.input_tokens, direction="input")
    tokens.sample(spend.output_tokens, direction="output")
    if spend.cost_usd is not None:
        family(
            "estimated_cost_usd", "gauge", "Estimated model cost in US dollars ([prices])."
        ).sample(float(spend.cost_usd))
    if data.budget is not None:
        caps = family("budget_cap", "gauge", "The batch's model budget caps ([batch]; 0: none).")
        caps.sample(data.budget.max_model_calls, meter="calls")
        caps.sample(data.budget.max_tokens, meter="tokens")
        caps.sample(float(data.budget.max_cost_usd), meter="cost_usd")
    decisions = family("decisions", "gauge", "Recovery decisions in the batch's runs.")
    mix = Counter((d.action, d.source) for r in data.runs for d in r.decisions)
    for (action, source), count in sorted(mix.items()):
        decisions.sample(count, action=action, source=source)
    family(
        "infra_retries", "gauge", "Re-runs decided by rule after an infrastructure failure."
    ).sample(infra_retries(data.runs))
    family(
        "awaiting_approval", "gauge", "Decisions waiting for a person's approve or reject."
    ).sample(len(awaiting(latest_of_each_ticket(data))))
    durations = family("stage_duration_seconds", "summary", "Time spent in each stage's attempts.")
    for stage, (count, seconds) in stage_durations(data.runs).items():
        durations.sample(round(seconds, 3), "_sum", stage=stage)
        durations.sample(count, "_count", stage=stage)
    return _joined(f.lines for f in families)


def _joined(blocks: Iterable[list[str]]) -> str:
    return "".join(line + "\n" for block in blocks for line in block)
