"""``orchestrator playbook list|show|promote|retire``: the project's playbook (issue 44),
one TOML file per entry in ``playbook/`` beside config.toml, and the built-in entries no
project file takes the place of.

    list [--status S] [--json]
                      one line per entry: id, status, agreeing outcomes, stage/check,
                      class, action, description (a built-in entry is marked); a file
                      that is not an entry is named on stderr with its bad key (exit 2)
    show ID [--json]  the entry's file as it is, then its provenance in words and its
                      rows in the ledger
    promote ID [--by WHO]
                      the entry decides the next matching failure with no model call
                      (WHO default: the OS user)
    retire ID --reason TEXT [--by WHO]
                      the entry decides nothing more

Promoting or retiring a built-in entry writes the project's own file of that id, which
then takes its place. Each change is appended to the decision ledger first (a
``playbook`` row: ``orchestrator ledger show``). An unknown id is a usage error (exit 2)
naming the playbook directory.

``--json`` fields of ``list`` (one object per entry, per line): ``id``, ``status``,
``agreeing``, ``stage``, ``check``, ``failure_class``, ``action``, ``description``,
``builtin``, ``path`` (the project's file; null for a built-in entry). ``show --json``:
``path``, ``builtin``, ``entry`` (the file's fields), ``ledger`` (its rows as stored).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from orchestrator.domain.errors import EXIT_USAGE, UsageError

if TYPE_CHECKING:
    from orchestrator.domain.errors import ConfigError
    from orchestrator.domain.playbook import PlaybookEntry
    from orchestrator.storage import DecisionLedger
    from orchestrator.storage.playbook import PlaybookStore

STATUSES: Final = ("proposed", "promoted", "retired")
COLUMNS: Final = ("ID", "STATUS", "AGREE", "WHERE", "CLASS", "ACTION", "DESCRIPTION")
DESCRIPTION_CHARS: Final = 60


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "playbook",
        help="list, show, promote or retire the playbook's entries (known failures decided "
        "with no model call)",
        description="The project's playbook: one TOML file per entry in playbook/ beside "
        "config.toml, learned from decisions that proved right, and the built-in entries.",
    )
    actions = parser.add_subparsers(dest="playbook_command", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="every entry, one line each")
    listing.add_argument("--status", choices=STATUSES, metavar="S", help="one of: %(choices)s")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    show = actions.add_parser("show", help="one entry's file and its provenance")
    show.add_argument("entry_id", metavar="ID", help="the entry's id (its file's name)")
    show.add_argument("--json", action="store_true", help="the entry and its ledger rows")
    promote = actions.add_parser(
        "promote", help="the entry decides the next matching failure with no model call"
    )
    promote.add_argument("entry_id", metavar="ID", help="the entry's id")
    promote.add_argument("--by", metavar="WHO", help="who promoted it (default: the OS user)")
    retire = actions.add_parser("retire", help="the entry decides nothing more")
    retire.add_argument("entry_id", metavar="ID", help="the entry's id")
    retire.add_argument("--reason", metavar="TEXT", required=True, help="why (recorded)")
    retire.add_argument("--by", metavar="WHO", help="who retired it (default: the OS user)")


def _cell(value: object) -> str:
    """One table cell: '-' for nothing, no control characters (an entry file is a
    teammate's text; an escape sequence must not act on the terminal)."""
    if value is None or value == "":
        return "-"
    text = " ".join(str(value).split())
    return "".join(c if c.isprintable() else "?" for c in text)


def _where(entry: PlaybookEntry) -> str:
    return f"{entry.match.stage or '*'}/{entry.match.check or '*'}"


def _fields(entry: PlaybookEntry, path: Path | None) -> dict[str, Any]:
    return {
        "id": entry.id,
        "status": entry.status.value,
        "agreeing": entry.agreeing,
        "stage": entry.match.stage,
        "check": entry.match.check,
        "failure_class": entry.match.failure_class,
        "action": entry.decision.get("action"),
        "description": entry.description,
        "builtin": path is None,
        "path": str(path) if path is not None else None,
    }


def _file_of(store: PlaybookStore, entry: PlaybookEntry) -> Path | None:
    from orchestrator.storage.playbook import is_builtin

    return None if is_builtin(entry) else store.path(entry.id)


def _list(store: PlaybookStore, status: str | None, as_json: bool, out: TextIO, err: TextIO) -> int:
    bad: list[ConfigError] = []
    store.index(on_error=lambda _exc: None, rescan=True)  # files edited in place: seen now
    entries = [
        e for e in store.entries(on_error=bad.append) if status is None or e.status.value == status
    ]
    if as_json:
        for entry in entries:
            out.write(json.dumps(_fields(entry, _file_of(store, entry)), ensure_ascii=False) + "\n")
    elif not entries:
        out.write(f"no entries in {store.dir}" + (f" with status {status}\n" if status else "\n"))
    else:
        table = [COLUMNS]
        for entry in entries:
            description = " ".join(entry.description.split())
            if len(description) > DESCRIPTION_CHARS:
                description = description[: DESCRIPTION_CHARS - 1] + "…"
            builtin = " (built-in)" if _file_of(store, entry) is None else ""
            table.append(
                (
                    _cell(entry.id + builtin),
                    entry.status.value,
                    str(entry.agreeing),
                    _cell(_where(entry)),
                    _cell(entry.match.failure_class),
                    _cell(entry.decision.get("action")),
                    _cell(description),
                )
            )
        widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
        for row in table:
            out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
            out.write("\n")
    for problem in bad:
        err.write(f"playbook: {problem}\n")
    return EXIT_USAGE if bad else 0


def _ledger_rows(ledger: DecisionLedger, entry: PlaybookEntry) -> list[dict[str, Any]]:
    """The entry's rows in the ledger, oldest first: each event is keyed by the revision
    it made, so these are a few indexed look-ups, not a scan."""
    from orchestrator.app.playbook import EVENTS, KIND

    rows: list[dict[str, Any]] = []
    for revision in range(1, entry.revision + 1):
        for event in EVENTS:
            found = ledger.rows_of(f"playbook:{entry.id}:{event}:{revision}")
            rows += [r for r in found if r.get("kind") == KIND]
    return sorted(rows, key=lambda r: r["seq"] if type(r.get("seq")) is int else 0)


def _provenance_lines(entry: PlaybookEntry) -> list[str]:
    lines = [f"provenance of {entry.id} ({entry.agreeing} agreeing outcome(s)):"]
    for p in entry.provenance:
        ticket = f", ticket {p.ticket_id}" if p.ticket_id else ""
        verdict = f", verdict {p.verdict}" if p.verdict is not None else ""
        approved = f", approved by {p.approved_by}" if p.approved_by else ""
        lines.append(
            f"  {p.at.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z  run {p.run_id}{ticket}{verdict}: "
            f"decided by {p.source}{approved}; {_cell(p.outcome)}"
        )
    if not entry.provenance:
        lines.append("  (none: written by a person)")
    if entry.promoted_by is not None:
        when = f" at {entry.promoted_at:%Y-%m-%d %H:%M:%S%z}" if entry.promoted_at else ""
        lines.append(f"promoted by {_cell(entry.promoted_by)}{when}")
    if entry.retired_reason is not None:
        when = f" at {entry.retired_at:%Y-%m-%d %H:%M:%S%z}" if entry.retired_at else ""
        lines.append(f"retired{when}: {_cell(entry.retired_reason)}")
    return lines


def _show(
    store: PlaybookStore, ledger: DecisionLedger, entry_id: str, as_json: bool, out: TextIO
) -> int:
    from orchestrator.app.playbook import get_entry
    from orchestrator.starter import builtin_playbook_texts

    entry = get_entry(store, entry_id)
    path = _file_of(store, entry)
    rows = _ledger_rows(ledger, entry)
    if as_json:
        shown = {
            "path": str(path) if path is not None else None,
            "builtin": path is None,
            "entry": entry.model_dump(mode="json", exclude_none=True),
            "ledger": rows,
        }
        out.write(json.dumps(shown, ensure_ascii=False) + "\n")
        return 0
    if path is not None:
        out.write(f"# {path}\n")
        out.write(path.read_text(encoding="utf-8"))
    else:
        name, text = next((n, t) for n, t in builtin_playbook_texts() if n == f"{entry.id}.toml")
        out.write(f"# built in (orchestrator/starter/playbook/{name}); a file {store.path(entry.id)}"
                  " takes its place\n")  # fmt: skip
        out.write(text)
    out.write("\n" + "\n".join(_provenance_lines(entry)) + "\n")
    if rows:
        out.write("ledger:\n")
        for row in rows:
            out.write(f"  seq {row.get('seq')}  {row.get('ts')}  {_cell(row.get('outcome'))}"
                      f"  ({_cell(row.get('decision_id'))})\n")  # fmt: skip
    return 0


def run(
    args: argparse.Namespace,
    config_file: Path,
    state_dir: Path,
    out: TextIO,
    err: TextIO,
    environ: Mapping[str, str],
    *,
    now: datetime | None = None,
) -> int:
    from orchestrator.app.ledger_link import ledger_for
    from orchestrator.app.playbook import get_entry, promote, retire, store_for
    from orchestrator.domain.playbook import EntryStatus
    from orchestrator.storage.approvals import os_user

    if not config_file.is_file():
        raise UsageError(
            f"usage error: no config file at {config_file}: the playbook is the playbook/ "
            "directory beside it"
        )
    store = store_for(config_file.resolve().parent)
    command = args.playbook_command
    if command == "list":
        return _list(store, args.status, args.json, out, err)
    ledger = ledger_for(state_dir, environ)
    if command == "show":
        return _show(store, ledger, args.entry_id, args.json, out)
    at = now or datetime.now(UTC)
    by = args.by or os_user()
    if command == "promote":
        before = get_entry(store, args.entry_id)
        if before.status is EntryStatus.PROMOTED:
            out.write(f"{before.id}: already promoted (by {_cell(before.promoted_by)})\n")
            return 0
        entry = promote(store, args.entry_id, by=by, at=at, ledger=ledger)
        out.write(
            f"{entry.id}: promoted by {entry.promoted_by}; it decides the next matching "
            f"failure with no model call ({store.path(entry.id)})\n"
        )
        return 0
    if command == "retire":
        if not " ".join(args.reason.split()):
            raise UsageError('usage error: retire needs --reason "…": say why')
        before = get_entry(store, args.entry_id)
        if before.status is EntryStatus.RETIRED:
            out.write(f"{before.id}: already retired ({_cell(before.retired_reason)})\n")
            return 0
        entry = retire(store, args.entry_id, reason=args.reason, at=at, ledger=ledger, by=by)
        out.write(
            f"{entry.id}: retired ({_cell(entry.retired_reason)}); it decides nothing more "
            f"({store.path(entry.id)})\n"
        )
        return 0
    raise AssertionError(f"unhandled playbook command {command}")
