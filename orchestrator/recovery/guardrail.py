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
from orchestrator.domain.recipes import CLONE_PLACEHOLDER, split_arguments
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
    arguments = [
        *(
            argument
            for c in (commands if isinstance(commands, list | tuple) else ())
            if isinstance(c, str)
            for argument in _arguments(c)
        ),
        *((check,) if isinstance(check, str) else ()),
    ]
    clone = clone.resolve()
    outside = []
    for argument in arguments:
        for named in _paths_named(argument, clone):
            try:
                candidate = Path(named).resolve()
            except (ValueError, OSError, RuntimeError):
                # A NUL byte, a name too long, a symlink loop: not a path inside the clone.
                outside.append(named[:200])
                continue
            if not (candidate == clone or candidate.is_relative_to(clone)):
                outside.append(named)
    return outside


def _arguments(command: str) -> list[str]:
    """A recipe command as the arguments it will run with (``domain/recipes``' split,
    ``<clone>`` not yet put in). One that cannot be split (an open quote) is read word
    by word; the recipe's own vetting refuses it anyway."""
    try:
        return split_arguments(command)
    except ValueError:
        return command.split()


def _paths_named(argument: str, clone: Path) -> list[str]:
    """The absolute paths one argument names. A path right after ``<clone>`` continues the
    clone's path (``<clone>/src`` is the clone's ``src``); the clone's own path is put in
    whole, never searched for paths itself."""
    named = []
    for n, piece in enumerate(argument.split(CLONE_PLACEHOLDER)):
        for match in PATH_TOKEN.finditer(piece):
            continues_clone = n > 0 and match.start() == 0
            named.append(f"{clone}{match.group(1)}" if continues_clone else match.group(1))
    return named
