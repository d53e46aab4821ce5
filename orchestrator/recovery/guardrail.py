"""The output guardrail: what the model said is scrubbed before anything stores it, and a
proposal that points outside the clone is blocked (turned into a refusal, never run).

Scrubbing a text — secrets and personal data — and refusing a recipe command the
scrubber would rewrite (``rewrite_refusal``) are ``orchestrator/redaction/personal.py``;
here, scrubbing a whole proposal however deep it nests, and the paths it points at.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from orchestrator.domain.jsonwalk import map_strings
from orchestrator.redaction import scrub

PATH_TOKEN = re.compile(r"(?<![\w<])(/[^\s'\"`]+)")


def scrub_object(value: Any) -> tuple[Any, int]:
    """Scrub every string inside a JSON-like value (keys are left as they are), however
    deep it nests."""
    return map_strings(value, scrub)


def paths_outside(verdict: Any, clone: Path) -> list[str]:
    """Absolute paths in the proposal's actionable fields that are not inside the clone.
    Whatever shape ``verdict`` has: a field of the wrong type holds no path."""
    plan = verdict.get("repair_plan") if isinstance(verdict, dict) else None
    if not isinstance(plan, dict):
        return []
    commands = plan.get("commands")
    check = plan.get("verification_check")
    fields = [
        *(
            c
            for c in (commands if isinstance(commands, list | tuple) else ())
            if isinstance(c, str)
        ),
        *((check,) if isinstance(check, str) else ()),
    ]
    clone = clone.resolve()
    outside = []
    for text in fields:
        for match in PATH_TOKEN.finditer(text.replace("<clone>", str(clone))):
            try:
                candidate = Path(match.group(1)).resolve()
            except (ValueError, OSError, RuntimeError):
                # A NUL byte, a name too long, a symlink loop: not a path inside the clone.
                outside.append(match.group(1)[:200])
                continue
            if not (candidate == clone or candidate.is_relative_to(clone)):
                outside.append(match.group(1))
    return outside
