"""Every hand-off names the command that continues its run, by why it stopped."""

from __future__ import annotations

import pytest

from orchestrator.reports.handoff import next_steps

RUN, TICKET = "T-1-20261203T000000Z-abcd", "T-1"


@pytest.mark.parametrize(
    ("halt", "says"),
    [
        ("dry_run_block", f"`DRY_RUN=false orchestrator resume {RUN}`"),
        ("cap_exhausted", f'`orchestrator reset {TICKET} --reason "…"`, then `orchestrator resume {RUN}`'),
        ("human_rejected", "`orchestrator run TICKET_FILE --rerun`"),
        ("base_red", "`orchestrator run TICKET_FILE --rerun`"),
        ("abandoned", f"`orchestrator resume {RUN}`: it goes on from the stage that stopped"),
        ("no_model", f"`orchestrator resume {RUN}`"),
        ("", f"`orchestrator resume {RUN}`"),
    ],
)  # fmt: skip
def test_each_stop_names_what_continues_it(halt: str, says: str) -> None:
    text = "\n".join(next_steps(halt, RUN, TICKET))
    assert says in text
    assert all(line.startswith("- ") for line in next_steps(halt, RUN, TICKET))
