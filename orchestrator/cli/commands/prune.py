"""``orchestrator prune --older-than 30d [--dry-run] [--also-resumable]``: delete the
clones and logs of finished runs older than that, the worker logs of batches and the base
checks that old; keep what says what was decided (records, verdicts, bundles, approvals,
reply texts, hand-offs) and the ledger. A run still waiting for something keeps its clone
whatever its age: one not finished (awaiting approval, cut short, deferred), and a
stopped one ``resume`` could go on with (its ticket's latest run; ``--also-resumable``
frees those, and their resume then starts again from the clone stage). Built for cron:
one line per run it freed, kept (and why) or skipped, then the total."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from orchestrator.cli.arguments import human_bytes, parse_duration
from orchestrator.domain import errors
from orchestrator.storage import open_state
from orchestrator.storage.layout import StateLayout
from orchestrator.storage.retention import prune_base_checks, prune_batch_logs, prune_runs


def prune(
    state_dir: Path,
    older_than: str,
    out: TextIO,
    *,
    dry_run: bool,
    also_resumable: bool = False,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """0, or 7 when a run record could not be read (it is named; nothing of it is
    removed) or a clone or log could not be removed (named, with the reason). A run whose
    ticket is locked is skipped and named, and does not change the exit code: the next
    prune takes it."""
    age = parse_duration(older_than)
    now = clock()
    verb = "would free" if dry_run else "freed"
    runs = total = kept = 0
    trouble = False
    layout = StateLayout(state_dir)
    storage = open_state(state_dir)
    for pruned in prune_runs(
        layout, now - age, now, dry_run=dry_run, also_resumable=also_resumable
    ):
        if pruned.kept is not None:
            kept += 1
            out.write(f"kept {pruned.run_id}: {pruned.kept}\n")
            continue
        if pruned.skipped is not None:
            trouble = trouble or not pruned.locked
            out.write(f"skipped {pruned.run_id}: {pruned.skipped}\n")
            if not pruned.removed:
                continue
        if not dry_run:
            # Gone from the record too (the database's copy), or the next machine to
            # bring its state dir up to date would bring the logs back.
            storage.forget(pruned.removed)
        runs += 1
        total += pruned.bytes
        what = ", ".join(p.name for p in pruned.removed)
        out.write(f"{verb} {pruned.run_id}: {what} ({human_bytes(pruned.bytes)})\n")
    batches = 0
    for batch in prune_batch_logs(StateLayout(state_dir), now - age, dry_run=dry_run):
        if batch.skipped is not None:
            trouble = True
            out.write(f"skipped batch {batch.batch_id}: {batch.skipped}\n")
            if not batch.removed:
                continue
        if not dry_run:
            storage.forget(batch.removed)  # the ticket copies' rows too (PostgreSQL)
        batches += 1
        total += batch.bytes
        what = ", ".join(p.name for p in batch.removed)
        out.write(f"{verb} batch {batch.batch_id}: {what} ({human_bytes(batch.bytes)})\n")
    cache = prune_base_checks(StateLayout(state_dir), now - age, dry_run=dry_run)
    if cache.skipped is not None:
        trouble = True
        out.write(f"skipped base checks: {cache.skipped}\n")
    if cache.removed:
        total += cache.bytes
        out.write(
            f"{verb} {len(cache.removed)} base-check file(s) "
            f"({human_bytes(cache.bytes)}): checked again when a ticket needs them\n"
        )
    of_batches = f" and the worker logs of {batches} batch(es)" if batches else ""
    waiting = f", the clones of {kept} run(s) still waiting" if kept else ""
    out.write(
        f"prune{' (dry run)' if dry_run else ''}: {verb} {runs} run(s){of_batches} older than "
        f"{older_than}, {total} bytes ({human_bytes(total)}); kept records, verdicts, "
        f"bundles, approvals, replies, hand-offs{waiting} and the ledger\n"
    )
    return errors.EXIT_STATE if trouble else errors.EXIT_COMPLETED
