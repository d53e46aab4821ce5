"""Known failures with known repairs, consulted before any model is asked.

Each entry matches on the failing check's name and its output, and builds a verdict as
plain data. A playbook verdict costs no model call and goes through exactly the same
validation and execution as a model's: the table can propose, never bypass.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.domain.config import ContextLimits
from orchestrator.domain.proposals import Failure
from orchestrator.reading.last_words import regions_up
from orchestrator.recovery.context import tail_bytes
from orchestrator.redaction import redact


@dataclass(frozen=True)
class PlaybookEntry:
    name: str
    check: str
    pattern: re.Pattern[str]
    build: Callable[[re.Match[str], Failure], dict[str, Any]]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "") + "'"


def _split_squashed_commit(match: re.Match[str], failure: Failure) -> dict[str, Any]:
    # Undo the squashed commit (keeping its changes), commit the
    # production part under the original subject, then the tests on their own.
    subject = match.group("subject")
    return {
        "action": "mechanical-fix",
        "summary": (
            "bug-fix ticket squashed the code fix and its test into one commit; "
            "lint-bug-commit-order needs the non-test commit to land first"
        ),
        "repair_plan": {
            "verification_check": "bash scripts/dev.sh lint-bug-commit-order",
            "commands": [
                "git -C <clone> reset --soft HEAD~1",
                "git -C <clone> restore --staged -- tests/",
                f"git -C <clone> commit -m {_quote(subject)}",
                "git -C <clone> add -- tests/",
                f"git -C <clone> commit -m {_quote('test: pin ' + subject)}",
            ],
        },
    }


PLAYBOOK: tuple[PlaybookEntry, ...] = (
    PlaybookEntry(
        name="commit-order-squash",
        check="lint-bug-commit-order",
        # Exactly one violation, and it is the squash of fix and test into one commit.
        pattern=re.compile(
            r'^[0-9a-f]{7,40} "(?P<subject>[^"\n]{1,200})": touches both production code and tests'
            r".*\n(?:.*\n)*?lint-bug-commit-order: FAILED \(1 violation\(s\)\)",
            re.MULTILINE,
        ),
        build=_split_squashed_commit,
    ),
)


def match_playbook(failure: Failure) -> tuple[str, dict[str, Any]] | None:
    """The first entry whose check and pattern match: (entry name, verdict object)."""
    if failure.check is None:
        return None
    for entry in PLAYBOOK:
        if entry.check != failure.check:
            continue
        for text in (failure.output, failure.output_further_up):
            found = entry.pattern.search(text) if text else None
            if found:
                return entry.name, entry.build(found, failure)
    return None


def check_output_of(log_path: Path, limits: ContextLimits) -> tuple[str, str | None]:
    """What the playbook reads of a failed check's log, redacted: its tail, and when the log
    is longer than that, the region around its lowest root-cause line (None otherwise, or
    when the log has none or cannot be read)."""
    tail = tail_bytes(log_path, limits.max_check_output_bytes)
    if not tail.truncated:
        return tail.text, None
    try:
        region = next(regions_up(log_path, limits.evidence_scan_bytes), None)
    except OSError:
        region = None
    return tail.text, redact(region) if region is not None else None
