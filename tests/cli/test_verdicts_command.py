"""``orchestrator verdicts``: every persisted decision across runs, oldest first, filtered
by action, source and time; a damaged verdict file is reported and skipped."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.cli.arguments import parse_since
from orchestrator.cli.commands.verdicts import verdicts
from orchestrator.domain.errors import UsageError
from orchestrator.domain.proposals import Proposal
from orchestrator.domain.verdicts import VERDICT_ADAPTER
from orchestrator.storage.decisions import TokenUsage, VerdictRecord, write_verdict

RUN_A = "CARDS-1-20261130T010000Z-aaaa"
RUN_B = "CARDS-3-20261201T090000Z-bbbb"


def record(
    run_id: str,
    number: int,
    *,
    source: str,
    action: str,
    at: datetime,
    summary: str = "done",
    calls: int = 0,
) -> VerdictRecord:
    fields: dict[str, object] = {"action": action, "summary": summary}
    if action == "mechanical-fix":
        fields["repair_plan"] = {"verification_check": "project-tests", "commands": ["git status"]}
    verdict = VERDICT_ADAPTER.validate_json(json.dumps(fields))
    decision_id = f"{run_id}:attempt-3:verdict-{number}"
    proposal = Proposal.model_validate(
        {
            "decision_id": decision_id,
            "capability": "stage-recovery",
            "action": verdict,
            "confidence": 0.8722,
            "routing": "auto",
            "reasoning": ["model verdict"],
            "evidence": {
                "source": {"source": source, "valid": True},
                "failure": {"stage": "review", "attempt": 3, "signature": "review/project-tests"},
                "bundle": {"inputs_hash": "0" * 64},
            },
        }
    )
    return VerdictRecord(
        number=number,
        decision_id=decision_id,
        run_id=run_id,
        ticket_id=run_id.rsplit("-", 2)[0],
        attempt=3,
        failing_stage="review",
        failing_check="project-tests",
        source=source,
        action=action,
        valid=True,
        reason="model verdict" if source == "model" else f"{source} reason",
        halt=None,
        verdict=verdict,
        prompt_version="recovery-v1",
        usage=TokenUsage(calls=calls, input_tokens=1000 * calls, output_tokens=20 * calls),
        created_at=at,
        proposal=proposal,
    )


@pytest.fixture
def state(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    runs.mkdir()
    long = "the squashed commit mixes the fix and its test; split it into two commits, fix first"
    written = [
        record(RUN_B, 1, source="model", action="retry", at=datetime(2026, 12, 1, 9, 5, tzinfo=UTC), calls=1),
        record(RUN_A, 1, source="playbook", action="mechanical-fix", at=datetime(2026, 11, 30, 1, 1, tzinfo=UTC), summary=long),
        record(RUN_B, 2, source="synthetic", action="abandon-human", at=datetime(2026, 12, 1, 9, 9, tzinfo=UTC), summary="no model configured"),
    ]  # fmt: skip
    for r in written:
        write_verdict(runs / f"{r.run_id}.verdict-{r.number}.json", r)
    # Not verdict files: a run record and a bundle sit beside them.
    (runs / f"{RUN_A}.json").write_text("{}")
    (runs / f"{RUN_A}.bundle-1.json").write_text("{}")
    return tmp_path


def listed(state: Path, **filters: object) -> tuple[list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    options: dict[str, object] = {"action": None, "source": None, "since": None, "as_json": False}
    options.update(filters)
    assert verdicts(state, out, errors=err, **options) == 0  # type: ignore[arg-type]
    return out.getvalue().splitlines(), err.getvalue()


def test_one_line_per_verdict_sorted_by_time(state: Path) -> None:
    lines, err = listed(state)
    assert err == ""
    assert lines[0].split() == [
        "WHEN", "RUN", "#", "SOURCE", "ACTION", "ROUTING", "CONF", "CALLS/TOK", "SUMMARY",
    ]  # fmt: skip
    first, second, third = lines[1:]
    assert first.split()[:9] == [
        "2026-11-30", "01:01:00Z", RUN_A, "1", "playbook", "mechanical-fix", "auto", "0.8722", "0/0",
    ]  # fmt: skip
    # The summary is cut to 60 characters: 59 and an ellipsis.
    assert first.endswith("the squashed commit mixes the fix and its test; split it in…")
    assert second.split()[2:10] == [
        RUN_B,
        "1",
        "model",
        "retry",
        "auto",
        "0.8722",
        "1/1020",
        "done",
    ]
    assert third.split()[2:6] == [RUN_B, "2", "synthetic", "abandon-human"]
    assert third.endswith("no model configured")


def test_filters_by_action_source_and_time(state: Path) -> None:
    def runs_of(**filters: object) -> list[tuple[str, str]]:
        lines, _ = listed(state, **filters)
        return [(line.split()[2], line.split()[3]) for line in lines[1:]]

    assert runs_of(action="retry") == [(RUN_B, "1")]
    assert runs_of(source="playbook") == [(RUN_A, "1")]
    assert runs_of(source="model", action="abandon-human") == []
    assert runs_of(since=parse_since("2026-12-01")) == [(RUN_B, "1"), (RUN_B, "2")]
    assert runs_of(since=parse_since("2026-12-01T09:06:00Z")) == [(RUN_B, "2")]
    assert runs_of(since=parse_since("2026-12-01T10:06:00+01:00")) == [(RUN_B, "2")]
    lines, _ = listed(state, action="split")
    assert lines == [f"no verdicts under {state} match"]


def test_no_verdicts_at_all(tmp_path: Path) -> None:
    assert listed(tmp_path) == ([f"no verdicts under {tmp_path}"], "")


def test_json_is_the_tables_row_plus_its_path(state: Path) -> None:
    lines, _ = listed(state, as_json=True, source="model")
    [line] = lines
    data = json.loads(line)
    assert data["path"] == str(state / "runs" / f"{RUN_B}.verdict-1.json")
    assert (data["run_id"], data["number"], data["action"], data["source"]) == (
        RUN_B,
        1,
        "retry",
        "model",
    )
    assert (data["calls"], data["tokens"], data["routing"]) == (1, 1020, "auto")


def test_a_corrupt_verdict_file_is_reported_and_skipped(state: Path) -> None:
    broken = state / "runs" / f"{RUN_A}.verdict-2.json"
    broken.write_text('{"number": 2, "run_id": ')
    edited = state / "runs" / f"{RUN_B}.verdict-3.json"
    edited.write_text(json.dumps({"number": "three"}))
    lines, err = listed(state)
    assert len(lines) == 4  # the header and the three good ones
    warnings = err.splitlines()
    assert len(warnings) == 2
    assert warnings[0].startswith(f"warning: state error: {broken}: not a valid verdict file: ")
    assert warnings[1].startswith(f"warning: state error: {edited}: not a valid verdict file: ")
    assert all(w.endswith("; skipped") for w in warnings)


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01", "30/11/2026", ""])
def test_a_bad_since_is_a_usage_error_naming_the_value(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_since(text)
    assert str(caught.value).startswith(f"usage error: --since {text!r}: not an ISO date")
    assert caught.value.exit_code == 2


def test_since_accepts_dates_and_datetimes_naive_meaning_utc() -> None:
    assert parse_since("2026-11-30") == datetime(2026, 11, 30, tzinfo=UTC)
    assert parse_since("2026-11-30T14:00") == datetime(2026, 11, 30, 14, tzinfo=UTC)
    assert parse_since("2026-11-30T14:00:00Z") == datetime(2026, 11, 30, 14, tzinfo=UTC)


def test_an_unknown_action_or_source_is_a_usage_error(state: Path) -> None:
    with pytest.raises(UsageError, match="--action 'reboot': must be one of retry, "):
        listed(state, action="reboot")
    with pytest.raises(
        UsageError, match=r"--source 'oracle': must be one of model, playbook, synthetic, infra$"
    ):
        listed(state, source="oracle")


def test_infra_decisions_are_listed_and_filtered_like_the_others(state: Path) -> None:
    """Every source the table prints is one the filter accepts: they are one enum."""
    infra = record(
        RUN_B, 3, source="infra", action="retry", at=datetime(2026, 12, 1, 9, 20, tzinfo=UTC)
    )
    write_verdict(state / "runs" / f"{RUN_B}.verdict-3.json", infra)
    lines, _ = listed(state, source="infra")
    assert [line.split()[2:6] for line in lines[1:]] == [[RUN_B, "3", "infra", "retry"]]
