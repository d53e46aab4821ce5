"""``orchestrator baseline``: the baselines of green runs (``domain/baseline.py``).

    baseline CHECK [--repo R] [--runs N]
                      rebuild CHECK's baseline, in each repository (or R alone), from
                      the logs of its last N green runs still on disk (default 20), and
                      say what it learned; it replaces the stored one
    baseline --list   every stored baseline: repository, check, runs, templates, size,
                      when it was last written (and each damaged one, with why)
    baseline --prune DAYS
                      remove the baselines not written for DAYS days

Runs learn them by themselves, from each check that passes: this is for a state dir
whose baselines were pruned, damaged or never learned (runs from before baselines).

Storage is imported only when the command runs, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TextIO

from orchestrator.cli.arguments import human_bytes, positive
from orchestrator.domain import errors

if TYPE_CHECKING:
    from orchestrator.domain.runs import RunRecord

DEFAULT_RUNS = 20


class GreenLog(NamedTuple):
    """One passing run of the check, as a run record lists it."""

    repo: str
    created_at: datetime
    attempt: int
    log: Path


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of days: {text!r}") from None
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"must be 0 or more (got {text})")
    return value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "baseline",
        help="rebuild a check's baseline of green runs from the logs on disk (or --list, "
        "--prune DAYS)",
        description="The templates each check's green logs printed, per repository: a "
        "failing log's lines that no green run printed are read first. Learned from every "
        "check that passes; this rebuilds one from the green logs still on disk.",
    )
    parser.add_argument("check", nargs="?", metavar="CHECK", help="the check's name")
    parser.add_argument(
        "--repo", metavar="R", help="only this repository (as the ticket gives it, resolved)"
    )
    parser.add_argument(
        "--runs",
        metavar="N",
        type=positive,
        default=DEFAULT_RUNS,
        help=f"learn from the last N green runs (default {DEFAULT_RUNS})",
    )
    parser.add_argument("--list", action="store_true", help="list the stored baselines")
    parser.add_argument(
        "--prune", metavar="DAYS", type=_days, help="remove baselines not written for DAYS days"
    )


def run(args: argparse.Namespace, state_dir: Path, out: TextIO) -> int:
    chosen = [args.check is not None, args.list, args.prune is not None]
    if sum(chosen) != 1:
        raise errors.UsageError("baseline: give one of CHECK, --list or --prune DAYS")
    if args.list:
        return list_baselines(state_dir, out)
    if args.prune is not None:
        return prune(state_dir, args.prune, out)
    return rebuild(state_dir, args.check, out, repo=args.repo, runs=args.runs)


def green_logs(state_dir: Path, check: str, out: TextIO) -> list[GreenLog]:
    """Every passing run of ``check`` the run records list, oldest first. A record that
    does not read is named on ``out`` and passed over."""
    from orchestrator.domain.errors import StateError
    from orchestrator.storage.layout import StateLayout, run_record_paths
    from orchestrator.storage.runs import read_record_file

    found: list[GreenLog] = []
    for path in run_record_paths(StateLayout(state_dir).runs_dir):
        try:
            record = read_record_file(path)
        except StateError as exc:
            out.write(f"skipped {exc}\n")
            continue
        found.extend(_green_in(record, check))
    found.sort(key=lambda g: (g.created_at, g.attempt))
    return found


def _green_in(record: RunRecord, check: str) -> list[GreenLog]:
    return [
        GreenLog(record.repository, record.created_at, attempt.number, Path(result.log_path))
        for attempt in record.attempts
        for result in attempt.checks
        if result.name == check and result.passed and not result.skipped and result.log_path
    ]


def _repo_matches(wanted: str | None, repo: str) -> bool:
    if wanted is None:
        return True
    # As a ticket gives it: a URL as it is, a path resolved (the run record's form).
    return repo in (wanted, str(Path(wanted).resolve()))


def rebuild(
    state_dir: Path, check: str, out: TextIO, *, repo: str | None = None, runs: int = DEFAULT_RUNS
) -> int:
    """Rebuild ``check``'s baseline in each repository (or ``repo``) from its last
    ``runs`` green logs on disk, replacing the stored one. StateError when there is no
    green log of it to learn from."""
    from orchestrator.domain.baseline import Baseline, learn
    from orchestrator.storage.baselines import BaselineStore

    def warn(text: str) -> None:
        out.write(f"warning: {text}\n")

    store = BaselineStore(state_dir, warn=warn)
    by_repo: dict[str, list[GreenLog]] = defaultdict(list)
    for green in green_logs(state_dir, check, out):
        if _repo_matches(repo, green.repo):
            by_repo[green.repo].append(green)
    if not by_repo:
        where = f" of {repo}" if repo else ""
        raise errors.StateError(
            f"baseline: no run record{where} lists a green run of check {check!r}"
        )
    trouble = False
    for repo_name, greens in sorted(by_repo.items()):
        # ``orchestrator prune`` takes the logs of old runs: the last N still on disk.
        on_disk = [g for g in greens if g.log.is_file()]
        gone = len(greens) - len(on_disk)
        listed = f" of {len(greens)} listed ({gone} log(s) pruned)" if gone else ""
        baseline: Baseline | None = None
        for green in on_disk[-runs:]:
            try:
                baseline = learn(
                    baseline,
                    green.log,
                    check=check,
                    repo=repo_name,
                    max_log_bytes=store.max_log_bytes,
                    max_keys=store.max_keys,
                )
            except OSError as exc:
                trouble = True
                out.write(f"skipped {green.log}: {exc.strerror or exc}\n")
        if baseline is None:
            trouble = True
            out.write(
                f"baseline {check} of {repo_name}: no green log to learn from{listed}; "
                "the stored one is kept\n"
            )
            continue
        stored = store.load(repo_name, check)
        store.save(baseline)
        path = store.path(repo_name, check)
        size = path.stat().st_size
        out.write(
            f"baseline {check} of {repo_name}: learned {baseline.runs} green run(s){listed}, "
            f"{len(baseline)} templates, {human_bytes(size)}: {path}\n"
        )
        if stored is not None and stored.runs > baseline.runs:
            out.write(f"  it replaces one learned from {stored.runs} runs\n")
    return errors.EXIT_STATE if trouble else errors.EXIT_COMPLETED


def list_baselines(state_dir: Path, out: TextIO) -> int:
    """One line per stored baseline; a damaged one is named with why (exit 7)."""
    from orchestrator.storage.baselines import BaselineStore

    found = BaselineStore(state_dir).stored()
    if not found:
        out.write("no baselines yet: they are learned from each check that passes\n")
        return errors.EXIT_COMPLETED
    out.write(f"{'RUNS':>5} {'TEMPLATES':>9} {'SIZE':>9}  {'UPDATED':<17}  CHECK  REPOSITORY\n")
    damaged = False
    for entry in found:
        if entry.baseline is None:
            damaged = True
            out.write(f"damaged {entry.path}: {entry.problem}\n")
            continue
        baseline = entry.baseline
        updated = datetime.fromtimestamp(entry.updated, UTC).strftime("%Y-%m-%dT%H:%MZ")
        size = entry.path.stat().st_size if entry.path.exists() else 0
        out.write(
            f"{baseline.runs:>5} {len(baseline):>9} {human_bytes(size):>9}  {updated:<17}  "
            f"{baseline.check}  {baseline.repo}\n"
        )
    return errors.EXIT_STATE if damaged else errors.EXIT_COMPLETED


def prune(state_dir: Path, days: float, out: TextIO) -> int:
    from orchestrator.storage.baselines import BaselineStore

    removed = BaselineStore(state_dir).prune(older_than_days=days)
    for path in removed:
        out.write(f"removed {path}\n")
    out.write(
        f"baseline --prune: removed {len(removed)} baseline(s) not written for {days:g} days\n"
    )
    return errors.EXIT_COMPLETED
