"""``orchestrator reset TICKET --reason "…" [--by WHO]``: clear a ticket's per-ticket caps
(diagnoses, retries, infrastructure retries) after a person decided so. Recorded in the
ledger with who and why before anything changes; the ticket's next run has fresh caps."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from orchestrator.app.ledger_link import ledger_for
from orchestrator.app.reset import reset_caps
from orchestrator.storage.approvals import os_user

SPENT_NAMES = {"diagnosis": "diagnoses", "retry": "retries", "infra-retry": "infra retries"}


def reset(
    state_dir: Path,
    ticket_id: str,
    *,
    reason: str | None,
    by: str | None,
    out: TextIO,
    environ: Mapping[str, str] = os.environ,
    now: datetime | None = None,
) -> int:
    result = reset_caps(
        state_dir,
        ledger_for(state_dir, environ),
        ticket_id,
        by=by or os_user(),
        reason=reason,
        at=now or datetime.now(UTC),
    )
    if result.reset is None:
        out.write(f"reset: {ticket_id} has spent nothing against its caps; nothing to reset\n")
        return 0
    cleared = ", ".join(
        f"{SPENT_NAMES.get(kind, kind)} {n}" for kind, n in result.reset.cleared.items()
    )
    out.write(
        f"reset: {ticket_id}'s caps cleared ({cleared}) by {result.reset.by}: "
        f"{result.reset.reason}\n  recorded in the ledger (entry {result.ledger_hash})\n"
    )
    return 0
