"""Approvals: the only thing besides a Proposal that the substrate accepts.

A proposal routed ``auto`` gets an automatic approval; one routed ``hitl_*`` waits for a
person (``orchestrator approve RUN_ID`` / ``orchestrator reject RUN_ID --reason …``).
Each approval records who (the OS user, or ``auto``) and when, in
``runs/<run-id>.approval-<n>.json``, written once.
"""

from __future__ import annotations

import getpass
import os
from datetime import datetime
from pathlib import Path

from orchestrator.domain.errors import StateError
from orchestrator.domain.validation import Frozen, read_model
from orchestrator.storage.atomic import atomic_write
from orchestrator.storage.crash_points import CrashPoint, crash_point
from orchestrator.storage.layout import StateLayout

AUTO = "auto"


class Approval(Frozen):
    decision_id: str
    run_id: str
    verdict: int
    approved: bool
    by: str  # "auto", or the OS user who answered
    at: datetime
    routing: str  # the routing the answer was given for
    reason: str | None = None


def os_user() -> str:
    """Who is at the keyboard (or which account cron runs as)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def approval_path(runs_dir: Path, run_id: str, number: int) -> Path:
    """Kept for callers holding a runs dir; ``StateLayout.approval_path`` names the file."""
    return StateLayout(runs_dir.parent).approval_path(run_id, number)


def write_approval(path: Path, approval: Approval) -> None:
    """Write once: an approval, once given, is a record and is not replaced."""
    if path.exists():
        raise StateError(f"state error: {path}: decision {approval.verdict} was already answered")
    atomic_write(path, approval.model_dump_json(indent=2).encode())
    crash_point(CrashPoint.APPROVAL)


def read_approval(path: Path) -> Approval | None:
    return read_model(path, Approval, "approval")
