"""An attempt in one line: the console, ``show`` and the report page say it (apart from
the report's read model, which a command that runs a ticket has no need to load)."""

from __future__ import annotations

from orchestrator.domain.runs import Attempt


def attempt_summary(attempt: Attempt) -> str:
    """``exit 0 in 0.41s`` / ``timed out (exit 124) after 5.00s`` / ``check x exited 1``."""
    took = f"{attempt.duration_s:.2f}s" if attempt.duration_s is not None else "?"
    if attempt.failing_check is not None:
        check = attempt.failing_check
        how = "timed out" if check.timed_out else f"exited {check.exit_code}"
        if check.signal and not check.timed_out:
            how = f"killed by signal {check.signal}"
        return f"check {check.name} {how} after {took}"
    if attempt.error:
        return f"failed: {attempt.error}"
    if attempt.timed_out:
        return f"timed out (exit 124) after {took}"
    if attempt.signal:
        return f"killed by signal {attempt.signal} after {took}"
    return f"exit {attempt.exit_code} in {took}"
