"""``orchestrator ledger verify|repair|show``: check, mend and read the decision ledger.

    verify [--require-signed]
                      OK: N entries (exit 0), or FAILED at line L: reason (exit 7); also
                      FAILED when a verdict file's decision has no row (a run killed
                      between the two), and when an approval file does not verify: its
                      HMAC (by the approval key), its names, or the digest of the verdict
                      file it answers (each such file named, with why)
    repair            move a torn last line (an interrupted write) to a quarantine file,
                      and append the rows of decisions persisted without them; anything
                      else is refused (exit 7): that is damage, not a crash
    show [-n N] [--json]
                      the last N rows (default 20), one line each, or as stored (JSON lines)

The HMAC key, if the ledger is keyed, comes from ``$ORCHESTRATOR_LEDGER_KEY``; the
approval key from ``$ORCHESTRATOR_APPROVAL_KEY``, else the state dir's key file (verify
never makes one).

Approval files written before approvals were signed carry neither a digest nor an HMAC.
``verify`` names them on stderr as "unsigned (written before approvals were signed)" and
still says OK: every state dir from before the upgrade has them, and they cannot have
done harm since, because no run carries out an unsigned approval (one written after the
upgrade only stops its run ``needs-human``). ``--require-signed`` fails on them, for a
state dir that began signed. An unsigned file that names a verdict digest is not of that
old shape and always fails.

``orchestrator.storage.ledger`` is imported only when the command runs, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from orchestrator.cli.arguments import positive
from orchestrator.domain.errors import EXIT_STATE
from orchestrator.storage.layout import LEDGER_FILE

if TYPE_CHECKING:
    from orchestrator.storage import DecisionLedger, StateStorage

SHOW_DEFAULT = 20
COLUMNS = ("SEQ", "TS", "KIND", "TICKET", "RUN", "SOURCE", "ACTION", "ROUTING", "CONF", "OUTCOME")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "ledger",
        help=f"verify, repair or show the decision ledger (STATE_DIR/{LEDGER_FILE})",
        description="The append-only, hash-chained decision ledger. Keyed ledgers need "
        "$ORCHESTRATOR_LEDGER_KEY.",
    )
    actions = parser.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)
    verify = actions.add_parser(
        "verify",
        help="check every line, the hash chain and the head file, and every approval file",
    )
    verify.add_argument(
        "--require-signed",
        action="store_true",
        help="also fail on approval files written before approvals were signed",
    )
    actions.add_parser(
        "repair", help="quarantine a torn last line (an interrupted write); nothing else"
    )
    show = actions.add_parser("show", help="print the most recent entries, oldest first")
    show.add_argument(
        "-n",
        type=positive,
        default=SHOW_DEFAULT,
        metavar="N",
        help=f"how many entries (default {SHOW_DEFAULT})",
    )
    show.add_argument("--json", action="store_true", help="print the rows as stored (JSON lines)")


def _cell(value: object) -> str:
    """One table cell: '-' for nothing, and no control characters (ticket names and
    verdict fields end up on a terminal; an escape sequence must not act on it)."""
    if value is None or value == "":
        return "-"
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else "?" for c in text)


def _table_row(row: Mapping[str, Any]) -> tuple[str, ...]:
    decision = row.get("decision")
    action = decision.get("action") if isinstance(decision, dict) else None
    if action is None and isinstance(decision, dict):
        # The recovery loop nests the verdict: {"verdict": {"action": ...}} or {"verdict": "retry"}.
        verdict = decision.get("verdict")
        action = verdict.get("action") if isinstance(verdict, dict) else verdict
    confidence = row.get("confidence")
    return (
        _cell(row.get("seq")),
        _cell(row.get("ts")),
        _cell(row.get("kind")),
        _cell(row.get("ticket")),
        _cell(row.get("run")),
        _cell(row.get("source")),
        _cell(action),
        _cell(row.get("routing")),
        f"{confidence:.2f}" if isinstance(confidence, float) else _cell(confidence),
        _cell(row.get("outcome")),
    )


def run(
    args: argparse.Namespace,
    state_dir: Path,
    out: TextIO,
    environ: Mapping[str, str],
    err: TextIO | None = None,
) -> int:
    from orchestrator.storage import open_state
    from orchestrator.storage.ledger import canonical, key_from_env

    storage = open_state(state_dir)
    ledger = storage.ledger(key_from_env(environ))
    command = args.ledger_command
    if command == "verify":
        result = ledger.verify()
        if not result.ok:
            where = f" at line {result.line}" if result.line is not None else ""
            out.write(f"FAILED{where}: {result.reason}\n")
            return EXIT_STATE
        from orchestrator.app.ledger_link import unrecorded  # here: `show` stays light
        from orchestrator.storage.approvals import UNSIGNED_BEFORE

        missing = unrecorded(ledger, storage.decisions.find())
        if missing:
            out.write(
                f"FAILED: {len(missing)} decision(s) persisted without a ledger row (a run "
                "killed in between); `orchestrator ledger repair` appends them, as does the "
                "ticket's next run:\n" + "".join(f"  {v.path}\n" for v in missing)
            )
        failed, unsigned = _approval_problems(storage, environ)
        if unsigned and args.require_signed:
            failed += [(path, UNSIGNED_BEFORE) for path in unsigned]
        elif unsigned:
            (err or sys.stderr).write(
                f"note: {len(unsigned)} approval file(s) {UNSIGNED_BEFORE}; no run carries "
                "one out (`ledger verify --require-signed` fails on them):\n"
                + "".join(f"  {path}\n" for path in unsigned)
            )
        if failed:
            out.write(
                f"FAILED: {len(failed)} approval file(s) do not verify; no run carries one "
                "out:\n" + "".join(f"  {path}: {why}\n" for path, why in failed)
            )
        if missing or failed:
            return EXIT_STATE
        out.write(f"OK: {result.count} entries\n")
        return 0
    if command == "repair":
        repaired = ledger.repair()  # refusals raise LedgerError: exit 7 from cli.main
        if repaired.quarantine is None:
            out.write(f"nothing to repair: {repaired.kept} entries verify\n")
        else:
            out.write(
                f"quarantined line {repaired.line} ({repaired.size} bytes, an interrupted "
                f"write) to {repaired.quarantine}\n"
                f"{ledger.path} now ends at entry {repaired.kept} and verifies\n"
            )
        if repaired.head_fixed:
            out.write(f"head file {ledger.head_path} updated to entry {repaired.kept}\n")
        return _mend_unrecorded(storage, ledger, out)
    if command == "show":
        rows = ledger.recent(args.n)
        if args.json:
            for row in rows:
                out.write(canonical(row).decode("utf-8") + "\n")  # byte-identical to the file
            return 0
        if not rows:
            out.write(f"no entries in {ledger.path}\n")
            return 0
        table = [COLUMNS, *(_table_row(row) for row in rows)]
        widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
        for line in table:
            out.write(
                "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
                + "\n"
            )
        return 0
    raise AssertionError(f"unhandled ledger command {command}")


def _approval_problems(
    storage: StateStorage, environ: Mapping[str, str]
) -> tuple[list[tuple[Path, str]], list[Path]]:
    """Every approval file checked against the approval key and the verdict file it
    answers: those that do not verify (with why), and those of the unsigned old shape."""
    from orchestrator.domain.errors import StateError
    from orchestrator.storage.approvals import UNSIGNED_BEFORE, ApprovalKeys, problem, read_approval

    found = storage.approvals.find()
    if not found:
        return [], []  # no key to look for
    keys = ApprovalKeys.of(storage.layout.approval_key_path, environ)
    key = keys.for_checking()
    failed: list[tuple[Path, str]] = []
    unsigned: list[Path] = []
    for run_id, number, path in found:
        try:
            approval = read_approval(path)
        except StateError as exc:
            failed.append((path, str(exc).removeprefix(f"state error: {path}: ")))
            continue
        if approval is None:  # removed since it was listed
            continue
        digest = storage.decisions.sha256(run_id, number)
        why = problem(approval, key=key, run_id=run_id, number=number, verdict_sha256=digest)
        if why == UNSIGNED_BEFORE:
            unsigned.append(path)
        elif why is not None:
            if key is None and approval.hmac is not None:
                why += f" ({keys.where()} does not exist)"
            failed.append((path, why))
    return failed, unsigned


def _mend_unrecorded(storage: StateStorage, ledger: DecisionLedger, out: TextIO) -> int:
    """Append the rows of decisions persisted without them, each under its ticket's lock
    (a run resuming that ticket would append them itself)."""
    from datetime import UTC, datetime

    from orchestrator.app.ledger_link import mend, unrecorded
    from orchestrator.domain.errors import TicketLocked

    code = 0
    for verdict in unrecorded(ledger, storage.decisions.find()):
        try:
            with storage.locks.ticket(verdict.ticket_id):
                why = mend(ledger, verdict, ts=datetime.now(UTC).isoformat())
        except TicketLocked:
            out.write(f"{verdict.path}: its ticket is being run; that run appends its row\n")
            continue
        if why is None:
            out.write(f"appended the ledger row of the decision in {verdict.path}\n")
        else:
            out.write(f"cannot append a row: {why}\n")
            code = EXIT_STATE
    return code
