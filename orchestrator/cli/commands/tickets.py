"""``orchestrator tickets [--tickets DIR] [--json]``: what each ticket source yields, and
for each ticket whether a batch would run it or why not (closed, already has our pull
request, finished, running elsewhere, malformed, duplicate id). Reads the forges; writes
nothing. Without ``[[sources]]``, the one source is ``--tickets`` (default ./tickets).

Text: one line per source (``source gh-octo-widgets (github): 3 issue(s)``, or ``source
gh-octo-widgets (github): FAILED: why``), then one per ticket: ``  run   ID  title`` or
``  skip  ID  title  (why)``. Exit 0, or 75 when a source could not be read.

``--json`` fields (one object per source, per line):

- ``source``: the source's name
- ``kind``: its kind (directory, github, gitlab)
- ``error``: why it could not be read, one line, or null
- ``entries``: its tickets, in order, each with:
- ``entries[].ticket_id``: the ticket id
- ``entries[].title``: its title
- ``entries[].status``: whether a batch would run it: queued or skipped
- ``entries[].reason``: why (or why not)
- ``entries[].url``: the issue's address, or "" for a file
- ``entries[].path``: the ticket file, or null when there is none yet
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TextIO


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "tickets", help="list what each ticket source yields, and why a ticket would not run"
    )
    parser.add_argument(
        "--tickets", metavar="DIR", default="tickets",
        help="the tickets directory when the config has no [[sources]] (default: ./tickets)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="one JSON object per source")


def tickets(
    config_file: Path,
    state_dir_override: str | None,
    tickets_dir: Path,
    out: TextIO,
    *,
    as_json: bool,
    environ: Mapping[str, str] = os.environ,
) -> int:
    from orchestrator.app.intake import QUEUED, gather, sources_of
    from orchestrator.domain.config import load_config
    from orchestrator.domain.errors import EXIT_LOCKED
    from orchestrator.storage import open_state, state_dir

    loaded = load_config(config_file)
    storage = open_state(state_dir(config_file, state_dir_override))
    sources, root = sources_of(loaded, tickets_dir)
    reports = gather(sources, root, storage, environ=environ, write=False,
                     max_wait_s=loaded.config.recovery.forge_max_wait_s)  # fmt: skip
    for report in reports:
        if as_json:
            row = {
                "source": report.source, "kind": report.kind, "error": report.error,
                "entries": [
                    {**asdict(entry), "path": str(entry.path) if entry.path else None}
                    for entry in report.entries
                ],
            }  # fmt: skip
            out.write(json.dumps(row) + "\n")
            continue
        if report.error is not None:
            out.write(f"source {report.source} ({report.kind}): FAILED: {report.error}\n")
            continue
        out.write(f"source {report.source} ({report.kind}): {len(report.entries)} ticket(s)\n")
        for entry in report.entries:
            if entry.status == QUEUED:
                out.write(f"  run   {entry.ticket_id}  {entry.title}  ({entry.reason})\n")
            else:
                out.write(f"  skip  {entry.ticket_id}  {entry.title}  ({entry.reason})\n")
    return EXIT_LOCKED if any(r.error is not None for r in reports) else 0
