"""What a RUN_ID argument names: a run id as given, or a ticket id's latest run.

One function for every command that takes a run (show, replay, approve, reject), so an
id that names no run fails the same way, with the same exit code, everywhere.
"""

from __future__ import annotations

import re

from orchestrator.domain.errors import UnknownRun
from orchestrator.storage.layout import is_run_id
from orchestrator.storage.runs import RunStore

# The ticket id shape (``domain.validation.Name``): letters, digits, '.', '_', '-', never a
# path separator, so a hostile argument cannot make the lookup glob outside runs/.
TICKET_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def resolve_run_id(store: RunStore, given: str) -> str:
    """The run ``given`` names: itself when a run of that id is recorded, else the latest
    run of the ticket with that id. Raises UnknownRun (exit 7) when neither exists."""
    if is_run_id(given) and store.record_path(given).is_file():
        return given
    if TICKET_ID.match(given) is None:
        raise UnknownRun(f"state error: {given!r} is neither a run id nor a ticket id")
    latest = store.latest_for_ticket(given)
    if latest is None:
        raise UnknownRun(
            f"state error: no run {given!r} under {store.runs_dir} "
            "(neither a recorded run id nor a ticket id with runs)"
        )
    return latest.run_id
