"""The placeholders a configured command may hold, per kind of command, and the mistakes
in them that are caught when the config loads rather than in a clone at run time.

A stage's or a check's command is expanded by ``execution/stage_env.expand_command``; a
``command`` engine's by ``engines/command.CommandAdapter``. Braces that are not
placeholders stay as written (``python -c 'print(f"{x}")'`` is a program's own text),
so only what is plainly a placeholder gone wrong is refused: one of another kind of
command (``{root}`` in an engine's), or a near miss of a known one (``{promptfile}``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Final, Literal

__all__ = ["ENGINE_PLACEHOLDERS", "STAGE_PLACEHOLDERS", "placeholder_problems"]

# Stage and check commands (and the sandbox's paths).
STAGE_PLACEHOLDERS: Final = ("python", "root", "clone", "run_dir")
# A ``command`` engine's argv template.
ENGINE_PLACEHOLDERS: Final = ("prompt_file", "model", "clone", "run_dir", "ticket_id", "python")
_EVERY: Final = frozenset(STAGE_PLACEHOLDERS) | frozenset(ENGINE_PLACEHOLDERS)
# ``{name}``, not ``${name}`` (a shell's variable) nor ``{{name}}`` (a template's).
_BRACED: Final = re.compile(r"(?<![${])\{([A-Za-z_][A-Za-z0-9_-]*)\}(?!\})")

CommandKind = Literal["stage", "engine"]


def placeholder_problems(argv: Sequence[str], kind: CommandKind) -> list[str]:
    """``[i]: ...`` for each argument holding a placeholder this kind of command does not
    expand, where it is plainly meant as one; empty when there is none."""
    known = STAGE_PLACEHOLDERS if kind == "stage" else ENGINE_PLACEHOLDERS
    listed = ", ".join(f"{{{name}}}" for name in known)
    problems = []
    for index, argument in enumerate(argv):
        for match in _BRACED.finditer(argument):
            name = match.group(1)
            if name in known:
                continue
            close = difflib.get_close_matches(name, [*known], n=1, cutoff=0.75)
            if name in _EVERY:
                why = (
                    f"is not expanded in {'a stage' if kind == 'stage' else 'an engine'}'s command"
                )
            elif close:
                why = f"is not a placeholder: did you mean {{{close[0]}}}?"
            else:
                continue  # braces of the program's own
            problems.append(f"[{index}]: {{{name}}} {why} (those are {listed})")
    return problems
