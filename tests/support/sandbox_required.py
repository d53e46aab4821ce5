"""The sandbox tests need a working bwrap. Where it cannot run they skip with the reason
printed — except in CI (CI=true), where a sandbox that cannot start is a failure: the
suite must prove the sandbox holds, not quietly stop looking."""

from __future__ import annotations

import os

import pytest

from orchestrator.execution.executor import LocalExecutor
from orchestrator.execution.sandbox import sandbox_available


def require_sandbox() -> None:
    reason = sandbox_available(LocalExecutor())
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must exercise the sandbox, but it cannot start here: {reason}")
    print(f"sandbox tests skipped: {reason}")
    pytest.skip(f"the bubblewrap sandbox cannot start here: {reason}")
