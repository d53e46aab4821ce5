"""What a RUN_ID argument names: a run id as given, or a ticket id's latest run.

One function for every command that takes a run (show, replay, approve, reject), so an
id that names no run fails the same way, with the same exit code, everywhere.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from orchestrator.domain.errors import StateError, UnknownRun
from orchestrator.storage.layout import is_run_id, run_record_paths, ticket_of

if TYPE_CHECKING:
    from orchestrator.storage.protocols import Runs

# The ticket id shape (``domain.validation.Name``): letters, digits, '.', '_', '-', never a
# path separator, so a hostile argument cannot make the lookup glob outside runs/.
TICKET_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def resolve_run_id(store: Runs, given: str) -> str:
    """The run ``given`` names: itself when a run of that id is recorded, else the latest
    run of the ticket with that id. Raises UnknownRun (exit 7) when neither exists."""
    if is_run_id(given) and store.record_path(given).is_file():
        return given
    if TICKET_ID.match(given) is None:
        raise UnknownRun(f"state error: {given!r} is neither a run id nor a ticket id")
    # Only the run's id is wanted (the command reads and validates the record itself):
    # the ticket's records are looked at as plain JSON, from one listing.
    found = store.latest_runs((given,))
    if given in found.unreadable:
        raise StateError(found.unreadable[given])
    latest = found.run_ids.get(given)
    if latest is None:
        known = [path.stem for path in run_record_paths(store.layout.runs_dir)]
        guesses = close_ids(given, known)
        hint = f"; did you mean {' or '.join(map(repr, guesses))}?" if guesses else ""
        raise UnknownRun(
            f"state error: no run {given!r} under {store.layout.runs_dir} "
            f"(neither a recorded run id nor a ticket id with runs){hint}"
        )
    return latest


def close_ids(given: str, run_ids: list[str]) -> list[str]:
    """The recorded ids nearest to a mistyped one: run ids for a run id, ticket ids
    (from the run ids) for anything else. A run id must be nearly the same (its date
    and time make any two look alike), a short ticket id off by a character or two."""
    import difflib

    if is_run_id(given):
        return difflib.get_close_matches(given, run_ids, n=2, cutoff=0.9)
    tickets = list(dict.fromkeys(t for t in map(ticket_of, run_ids) if t is not None))
    return difflib.get_close_matches(given, tickets, n=2, cutoff=0.6)
