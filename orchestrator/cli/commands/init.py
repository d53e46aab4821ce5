"""``orchestrator init [--force]``: a commented starter ``config.toml`` and a ``tickets/``
directory with an example ticket, in the current directory.

An existing ``config.toml`` is someone's work: it is replaced only with ``--force``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from orchestrator import starter
from orchestrator.domain.errors import UsageError

TICKETS_DIR = "tickets"


def init(directory: Path, out: TextIO, *, force: bool) -> int:
    config = directory / starter.CONFIG_NAME
    if config.exists() and not force:
        raise UsageError(
            f"init: {config} already exists; pass --force to overwrite it "
            "(your tickets/ are never touched)"
        )
    tickets = directory / TICKETS_DIR
    for path, kind in ((config, "a directory"), (tickets, "not a directory")):
        if path.exists() and path.is_dir() == (kind == "a directory"):
            raise UsageError(f"init: {path} is {kind}")
    # A plain write, not the state dir's atomic one: these are the user's files, and
    # should get the user's umask rather than a temp file's 0600.
    config.write_text(starter.config_text(), encoding="utf-8")
    out.write(f"wrote {config}\n")
    tickets.mkdir(exist_ok=True)
    example = tickets / starter.EXAMPLE_TICKET_NAME
    if not example.exists():
        example.write_text(starter.example_ticket_text(), encoding="utf-8")
        out.write(f"wrote {example}\n")
    out.write(
        "next: copy the example to tickets/<ID>.md and edit it, then\n"
        "  orchestrator run tickets/<ID>.md      one ticket, watched\n"
        "  orchestrator batch                    every ticket in tickets/ (for cron)\n"
        "  orchestrator demo                     see the whole pipeline on a built-in project\n"
    )
    return 0
