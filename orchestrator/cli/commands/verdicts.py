"""``orchestrator verdicts [--action A] [--source S] [--since DATE] [--json]``: every
persisted decision (``runs/<run-id>.verdict-<n>.json``) across runs, oldest first.

A verdict file that cannot be read is reported on stderr with its path and the reason,
and skipped: one damaged file must not hide the others.

``--json`` fields (one object per decision, per line; the table's columns, uncut):

- ``when``: when the decision was taken, ISO 8601 UTC (WHEN)
- ``run_id``: the run that took it (RUN)
- ``number``: its number within the run, from 1 (#)
- ``source``: who decided: model, playbook, synthetic, ... (SOURCE)
- ``action``: the verdict's action, one of the closed vocabulary (ACTION)
- ``routing``: auto or the hitl_* route it was given (ROUTING)
- ``confidence``: the composed confidence, 0 to 1 (CONF)
- ``calls``: model calls it spent (CALLS of CALLS/TOK)
- ``tokens``: input plus output tokens it spent (TOK of CALLS/TOK)
- ``summary``: the verdict's summary, else the reason, on one line (SUMMARY, not cut)
- ``path``: the verdict file, whose JSON is the whole record
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, TextIO

from orchestrator.cli.choices import ACTIONS, SOURCES
from orchestrator.domain.errors import StateError, UsageError
from orchestrator.storage import VerdictRecord, open_state
from orchestrator.storage.decisions import read_verdict

SUMMARY_CHARS: Final = 60


def _check_filters(action: str | None, source: str | None) -> None:
    if action is not None and action not in ACTIONS:
        raise UsageError(f"usage error: --action {action!r}: must be one of {', '.join(ACTIONS)}")
    if source is not None and source not in SOURCES:
        raise UsageError(f"usage error: --source {source!r}: must be one of {', '.join(SOURCES)}")


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _summary(record: VerdictRecord) -> str:
    text = " ".join((record.verdict.summary or record.reason).split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def _json_row(path: Path, record: VerdictRecord) -> dict[str, object]:
    """The table's row as JSON (``--json``): the same columns, named, and uncut."""
    usage = record.usage
    return {
        "when": f"{_aware(record.created_at).astimezone(UTC):%Y-%m-%dT%H:%M:%S}Z",
        "run_id": record.run_id,
        "number": record.number,
        "source": record.source,
        "action": record.action,
        "routing": str(record.proposal.routing),
        "confidence": record.proposal.confidence,
        "calls": usage.calls,
        "tokens": usage.input_tokens + usage.output_tokens,
        "summary": " ".join((record.verdict.summary or record.reason).split()),
        "path": str(path),
    }


def _row(record: VerdictRecord) -> tuple[str, ...]:
    usage = record.usage
    return (
        f"{_aware(record.created_at).astimezone(UTC):%Y-%m-%d %H:%M:%S}Z",
        record.run_id,
        str(record.number),
        record.source,
        record.action,
        record.proposal.routing,
        str(record.proposal.confidence),
        f"{usage.calls}/{usage.input_tokens + usage.output_tokens}",
        _summary(record),
    )


def read_all(state_dir: Path, errors: TextIO) -> list[tuple[Path, VerdictRecord]]:
    found = []
    for path in (v.path for v in open_state(state_dir).decisions.find()):
        try:
            found.append((path, read_verdict(path)))
        except StateError as exc:
            print(f"warning: {exc}; skipped", file=errors)
        except OSError as exc:
            print(f"warning: {path}: unreadable verdict file: {exc.strerror}; skipped", file=errors)
    found.sort(key=lambda pr: (_aware(pr[1].created_at), pr[1].run_id, pr[1].number))
    return found


def verdicts(
    state_dir: Path,
    out: TextIO,
    *,
    action: str | None,
    source: str | None,
    since: datetime | None,
    as_json: bool,
    errors: TextIO = sys.stderr,
) -> int:
    _check_filters(action, source)
    cutoff = _aware(since) if since is not None else None
    selected = [
        (path, record)
        for path, record in read_all(state_dir, errors)
        if (action is None or record.action == action)
        and (source is None or record.source == source)
        and (cutoff is None or _aware(record.created_at) >= cutoff)
    ]
    if as_json:
        for path, record in selected:
            out.write(json.dumps(_json_row(path, record)) + "\n")
        return 0
    if not selected:
        filtered = action is not None or source is not None or cutoff is not None
        out.write(f"no verdicts under {state_dir}{' match' if filtered else ''}\n")
        return 0
    rows: list[tuple[str, ...]] = [
        ("WHEN", "RUN", "#", "SOURCE", "ACTION", "ROUTING", "CONF", "CALLS/TOK", "SUMMARY")
    ]
    rows += [_row(record) for _, record in selected]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
    return 0
