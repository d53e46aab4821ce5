"""What an attempt is told of its egress at every start, and what became of the
connections it was refused: the parts of an attempt about egress, apart from
``attempts.py``. Which hosts it may reach is ``domain/stage_hosts.py``'s answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.domain.egress import NetworkAccess
from orchestrator.domain.runs import Attempt
from orchestrator.domain.sandbox import SandboxOptions
from orchestrator.execution.reporter import Reporter

# At most this many distinct refused destinations are kept on an attempt (all counted).
MAX_DENIED_KEPT = 32


def warn_at_start(
    reporter: Reporter, label: str, options: SandboxOptions | None, access: NetworkAccess | None
) -> None:
    """A stage or check opted out of the sandbox (``options``; None: not said here) or
    of the egress proxy is said every time it starts: what it runs can reach everything
    the orchestrator can, or any host (see docs/architecture/sandbox.md)."""
    if options is not None and options.sandbox == "none":
        reporter.note(
            f'warning: {label} runs outside the sandbox (sandbox = "none" in its config): '
            "it can read and write whatever this user can"
        )
    if access is not None and access.mode == "open":
        reporter.note(
            f'warning: {label} reaches the whole network (egress = ["*"] in its config): '
            "nothing checks which host it connects to"
        )


def with_denials(attempt: Attempt, denied: Mapping[str, int]) -> Attempt:
    """``attempt`` with the destinations its egress proxy refused (none: unchanged)."""
    if not denied:
        return attempt
    return attempt.revised(**denial_fields(denied))


def denial_fields(denied: Mapping[str, int]) -> dict[str, Any]:
    """The record's ``egress_denied`` and ``egress_denials`` (an attempt's, a check's)."""
    return {
        "egress_denied": tuple(list(denied)[:MAX_DENIED_KEPT]),
        "egress_denials": sum(denied.values()),
    }
