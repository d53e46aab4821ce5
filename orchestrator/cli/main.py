"""Parse arguments, dispatch to one command module, map errors to exit codes. Nothing else.

Command modules are imported only when chosen: ``--help`` and ``runs`` must start fast
and never import pydantic's validators or the model SDK.

Conventions of the tools people pipe: the global options (``--config``, ``--state-dir``)
are accepted before or after the subcommand; a reader that goes away
(``orchestrator runs --json | head -1``) ends the command quietly with 141, the status a
shell reports for ``git log | head -1`` (128 + SIGPIPE).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from orchestrator import __version__
from orchestrator.domain.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_BUG,
    EXIT_INTERRUPTED,
    EXIT_MEANINGS,
    Interrupted,
    OrchestratorError,
    UsageError,
)

RUN_ID_HELP = "a run id, or a ticket id for that ticket's latest run"
NO_PREFLIGHT_HELP = "skip the preflight checks (`orchestrator doctor`) before the first stage"

EPILOG = "exit codes:\n" + "".join(
    f"  {code:<4} {meaning}\n" for code, meaning in EXIT_MEANINGS.items()
)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose "invalid choice" error (an unknown subcommand, a
    mistyped ``--backend``) also names the closest choice. Subparsers inherit it."""

    def error(self, message: str) -> NoReturn:
        super().error(message + did_you_mean(message))


def did_you_mean(message: str) -> str:
    """``"; did you mean 'batch'?"`` for argparse's ``invalid choice: 'bach' (choose
    from ...)``; empty for any other error or when nothing is close."""
    import difflib
    import re

    match = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if match is None:
        return ""
    choices = re.findall(r"'([^']*)'", match.group(2))
    found = difflib.get_close_matches(match.group(1), choices, n=2)
    return "; did you mean " + " or ".join(repr(c) for c in found) + "?" if found else ""


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = _Parser(
        prog="orchestrator",
        description="Run coding tickets through build stages; recover failed stages with one "
        "bounded, typed model decision.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"orchestrator {__version__}")
    add_global_options(parser, default=None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = sub.add_parser("run", help="run one ticket (resumes its unfinished run)")
    run.add_argument("ticket", metavar="TICKET", help="path to the ticket file")
    run.add_argument(
        "--rerun", action="store_true", help="start a new run even if the ticket completed"
    )
    run.add_argument("--no-preflight", action="store_true", help=NO_PREFLIGHT_HELP)

    runs = sub.add_parser("runs", help="list runs, one line each")
    runs.add_argument("--json", action="store_true", help="one JSON object per line")
    runs.add_argument("--state", metavar="S", help="only runs in this state (e.g. needs-human)")
    runs.add_argument("--ticket", metavar="T", help="only this ticket's runs")

    batch = sub.add_parser(
        "batch", help="run every unfinished ticket in a queue directory (for cron)"
    )
    batch.add_argument("--tickets", metavar="DIR", default="tickets", help="default: ./tickets")
    batch.add_argument("--jobs", metavar="N", type=int, default=1, help="tickets at a time")
    batch.add_argument("--json", action="store_true", help="one JSON object per ticket")
    batch.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    batch.add_argument(
        "--backend",
        choices=("local", "celery"),
        default="local",
        help="local (default): run here; celery: queue for `orchestrator worker`s",
    )
    batch.add_argument(
        "--no-wait", action="store_true", help="celery: queue the tickets and exit (for cron)"
    )
    batch.add_argument(
        "--report", metavar="PATH", help="at the end, write the batch's HTML report here"
    )
    batch.add_argument(
        "--metrics",
        metavar="PATH",
        help="at the end, write the batch's figures here in the Prometheus text format",
    )
    batch.add_argument("--no-preflight", action="store_true", help=NO_PREFLIGHT_HELP)
    batch.add_argument(
        "--log",
        metavar="FILE",
        help="append every line the batch prints, errors included, to FILE (for cron; "
        "over 10 MiB at the start of a batch, it becomes FILE.1)",
    )

    worker = sub.add_parser("worker", help="run tickets a `batch --backend celery` queued")
    worker.add_argument("--concurrency", metavar="N", type=int, default=1, help="tickets at a time")
    worker.add_argument("--queues", metavar="Q,...", help="Celery queues to take tickets from")

    approve = sub.add_parser(
        "approve",
        help="approve the decision a run is waiting on; the next batch carries it out",
    )
    approve.add_argument("run_id", metavar="RUN_ID", help=RUN_ID_HELP)
    approve.add_argument(
        "--now",
        action="store_true",
        help="carry it out here, in this shell (whose DRY_RUN and tools then decide)",
    )
    reject = sub.add_parser(
        "reject", help="reject the decision a run is waiting on (→ needs-human)"
    )
    reject.add_argument("run_id", metavar="RUN_ID", help=RUN_ID_HELP)
    reject.add_argument("--reason", help="why, for the record and the hand-off")

    resume = sub.add_parser(
        "resume", help="go on with a stopped run from the stage that stopped it (or --from-stage)"
    )
    resume.add_argument("run_id", metavar="RUN_ID", help=RUN_ID_HELP)
    resume.add_argument(
        "--from-stage", metavar="S", help="go on from stage S (it and every later stage run again)"
    )
    resume.add_argument("--by", metavar="WHO", help="who resumed it (default: the OS user)")
    resume.add_argument(
        "--here",
        action="store_true",
        help="with a fleet configured, drive it in this shell instead of handing it to a worker",
    )
    resume.add_argument("--no-preflight", action="store_true", help=NO_PREFLIGHT_HELP)

    reset = sub.add_parser(
        "reset", help="clear a ticket's per-ticket caps (recorded in the ledger with who and why)"
    )
    reset.add_argument("ticket_id", metavar="TICKET", help="the ticket id")
    reset.add_argument("--reason", help="why the caps are cleared (required)")
    reset.add_argument("--by", metavar="WHO", help="who decided (default: the OS user)")

    show = sub.add_parser("show", help="show one run: stages, attempts, halt, paths")
    show.add_argument("run_id", metavar="RUN_ID", help=RUN_ID_HELP)
    show.add_argument("--json", action="store_true", help="print the run record as stored")

    report = sub.add_parser(
        "report",
        help="write one self-contained HTML page about a batch's runs (or runs since a date, "
        "or named runs): outcomes, timelines, decisions, spend, what waits for a person",
    )
    report.add_argument("run_ids", nargs="*", metavar="RUN_ID", help=RUN_ID_HELP)
    report.add_argument(
        "--batch", metavar="ID", help="the runs of this batch (latest: the one that started last)"
    )
    report.add_argument(
        "--since",
        metavar="DATE",
        help="runs active at or after DATE (ISO date or datetime; UTC if no zone)",
    )
    report.add_argument(
        "--out", metavar="PATH", default="report.html", help="where (default: ./report.html)"
    )
    report.add_argument(
        "--metrics",
        metavar="PATH",
        help="also write the figures in Prometheus text format (for node_exporter's textfile "
        "collector)",
    )

    verdicts = sub.add_parser("verdicts", help="list persisted decisions across runs, oldest first")
    from orchestrator.cli import choices  # the vocabulary's names, read lazily: cheap

    # A metavar keeps argparse from listing the choices (loading them) while it builds.
    verdicts.add_argument(
        "--action", choices=choices.ACTIONS, metavar="ACTION", help="one of: %(choices)s"
    )
    verdicts.add_argument(
        "--source", choices=choices.SOURCES, metavar="SOURCE", help="one of: %(choices)s"
    )
    verdicts.add_argument(
        "--since",
        metavar="DATE",
        help="decisions at or after DATE (ISO date or datetime; UTC if no zone)",
    )
    verdicts.add_argument("--json", action="store_true", help="one JSON object per line")

    replay = sub.add_parser(
        "replay",
        help="re-decide a run's failures from what was persisted: no model call, nothing run",
    )
    replay.add_argument("run_id", metavar="RUN_ID", help=RUN_ID_HELP)
    replay.add_argument("--verdict", type=int, metavar="N", help="only decision N")
    replay.add_argument("--json", action="store_true", help="one JSON object per decision")

    prune = sub.add_parser(
        "prune", help="delete clones and logs of finished runs; keep what was decided"
    )
    prune.add_argument(
        "--older-than",
        metavar="AGE",
        required=True,
        help="runs finished longer ago than this: a number and s, m, h, d or w (e.g. 30d)",
    )
    prune.add_argument(
        "--dry-run", action="store_true", help="say what would be freed; remove nothing"
    )
    prune.add_argument(
        "--also-resumable",
        action="store_true",
        help="also free stopped runs `resume` could go on with (it then needs --from-stage "
        "of the clone stage); runs not finished always keep their clone",
    )

    from orchestrator.cli.commands import baseline, fleet, ledger, playbook, storage, tickets

    for command in (ledger, baseline, tickets, storage, fleet, playbook):  # argparse only: cheap
        command.add_parser(sub)

    evaluate = sub.add_parser(
        "eval",
        help="measure the classifier, playbook and bundle (and, --live, the model) on a "
        "labelled failure corpus",
    )
    from orchestrator.cli.commands import eval as eval_command  # argparse only: cheap

    eval_command.add_arguments(evaluate)

    doctor = sub.add_parser(
        "doctor",
        help="check this machine and config before a run: programs, variables, tokens, "
        "sandbox, state dir, broker (exit 2: a run cannot succeed)",
    )
    doctor.add_argument("--json", action="store_true", help="the checklist as one JSON object")

    init = sub.add_parser(
        "init", help="write a commented starter config.toml and a tickets/ directory here"
    )
    init.add_argument("--force", action="store_true", help="overwrite an existing config.toml")

    demo = sub.add_parser(
        "demo", help="build a small project with real bugs and run its tickets (offline)"
    )
    demo.add_argument(
        "--dir",
        metavar="DIR",
        help="where to build it (default: ./.state/demo; rebuilt on every run)",
    )
    demo.add_argument(
        "--with-model",
        action="store_true",
        help="let the recovery loop ask the configured model (uses $ANTHROPIC_API_KEY)",
    )
    completion = sub.add_parser(
        "completion",
        help="print a shell completion script (bash: source <(orchestrator completion bash))",
    )
    completion.add_argument("shell", choices=("bash", "zsh"), help="bash or zsh")
    for subparser in _subparsers(parser):
        # init and demo work on the current directory only; completion reads nothing.
        if subparser not in (init, demo, completion):
            add_global_options(subparser, default=argparse.SUPPRESS)
    return parser


def add_global_options(parser: argparse.ArgumentParser, *, default: object) -> None:
    """``--config``, ``--state-dir`` and ``-v``. The top level defaults them to None; every
    subcommand accepts them too, defaulting to SUPPRESS so that an option given before
    the subcommand is not overwritten by the subcommand's own default."""
    parser.add_argument(
        "--config",
        metavar="PATH",
        default=default,
        help="config file (default: $ORCHESTRATOR_CONFIG, else the first config.toml in the "
        "current directory or a parent, else $XDG_CONFIG_HOME/orchestrator/config.toml)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=False if default is None else default,
        help="say on stderr which config file is used",
    )
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        default=default,
        help="where runs are recorded (default: the config's state_dir, relative to the "
        "config file; this option's value is relative to the current directory)",
    )


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every subcommand's parser, nested ones (``ledger verify``) included."""
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # aliases share a parser
                found.append(child)
                found.extend(_subparsers(child))
    return found


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def _prices(config_file: Path) -> dict[str, Any]:
    """The price table for cost estimates; a missing or broken config just means none."""
    from orchestrator.domain.config import load_config

    try:
        return dict(load_config(config_file).config.prices)
    except OrchestratorError:
        return {}


def _published(args: argparse.Namespace) -> tuple[Path | None, Path | None]:
    """``batch --report PATH`` and ``--metrics PATH``: what to write when it ends."""
    return (
        Path(args.report) if args.report else None,
        Path(args.metrics) if args.metrics else None,
    )


def _config_file(cli_value: str | None, *, verbose: bool) -> Path:
    """``--config``, else $ORCHESTRATOR_CONFIG, else the discovered config.toml; when
    none is found, ./config.toml (whose absence the command then reports)."""
    from orchestrator import storage
    from orchestrator.cli.discovery import discover_config

    # $ORCHESTRATOR_CONFIG is read by storage alone: it is set when it changes the answer.
    named_by_env = storage.config_path(None, os.environ) != storage.config_path(None, {})
    if cli_value or named_by_env:
        config_file = storage.config_path(cli_value, os.environ)
        source = "--config" if cli_value else "$ORCHESTRATOR_CONFIG"
    else:
        found = discover_config(Path.cwd(), os.environ, Path.is_file)
        config_file = found.resolve() if found else storage.config_path(None, os.environ)
        source = "found" if found else "none found; the default"
    if verbose:
        print(f"orchestrator: config {config_file} ({source})", file=sys.stderr)
    return config_file


def _refuse_a_file_as_state_dir(config_file: Path, cli_value: str | None) -> None:
    """A state dir that is (or lies under) a file: exit 2 now, not a crash where a
    command first writes there. A config that cannot be read is left to the command."""
    from orchestrator import storage

    try:
        state_dir = storage.state_dir(config_file, cli_value)
    except OrchestratorError:
        return
    existing = state_dir
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        where = "" if existing == state_dir else f": {existing}"
        raise UsageError(f"state dir {state_dir}{where} is not a directory")


def _existing_state_dir(config_file: Path, cli_value: str | None) -> Path:
    """The state dir of a command that only reads it: one that does not exist is a
    mistyped path or the wrong config far more often than a place with no runs yet."""
    from orchestrator import storage

    state_dir = storage.state_dir(config_file, cli_value)
    if not state_dir.is_dir():
        raise UsageError(f"state dir {state_dir} does not exist")
    return state_dir


# The commands that read or write the state: with ``[storage] url`` set, each first opens
# the database and brings this machine's copy of the state dir up to date from it.
STATE_COMMANDS = frozenset(
    {
        "runs",
        "batch",
        "report",
        "verdicts",
        "replay",
        "show",
        "approve",
        "reject",
        "resume",
        "reset",
        "run",
        "prune",
        "baseline",
        "tickets",
        "ledger",
        "playbook",
    }
)


def _names_a_database(config_file: Path) -> bool:
    """Whether a state store is named (``$ORCHESTRATOR_STORAGE_URL``, or ``[storage] url``
    in the config's TOML), read without validating the config: the files backend's
    commands (``runs`` among them) must not load pydantic to learn there is none. A
    config that cannot be read is the command's to report."""
    import tomllib

    from orchestrator.domain.keys import STORAGE_URL_ENV

    if os.environ.get(STORAGE_URL_ENV):
        return True
    try:
        storage = tomllib.loads(config_file.read_text(encoding="utf-8")).get("storage")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return isinstance(storage, dict) and storage.get("url") is not None


def _open_state(config_file: Path, state_dir_override: str | None) -> None:
    """With a PostgreSQL state store configured: open it for the state dir (so what the
    command writes there is published to it) and bring down what other machines wrote.
    A config that cannot be read is left to the command, which reports it. Without one,
    nothing more is imported (the files backend's start-up stays as it was)."""
    if not _names_a_database(config_file):
        return
    from orchestrator.domain.config import load_config
    from orchestrator.domain.errors import ConfigError
    from orchestrator.storage import FileStorage, open_configured, state_dir

    try:
        loaded = load_config(config_file)
    except ConfigError:
        return
    opened = open_configured(loaded, state_dir(config_file, state_dir_override), os.environ)
    if not isinstance(opened, FileStorage):  # ``[storage] url`` could be unset after all
        opened.hydrate()


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "init":
        from orchestrator.cli.commands import init

        return init.init(Path.cwd(), sys.stdout, force=args.force)
    if args.command == "completion":
        from orchestrator.cli.completion import completion

        return completion(args.shell, build_parser(), sys.stdout)
    if args.command == "demo":
        from orchestrator.cli.commands import demo

        # The demo drives this entry point, handed in: it imports no CLI code.
        return demo.demo(args.dir, with_model=args.with_model, cli=main)
    config_file = _config_file(args.config, verbose=args.verbose)
    if args.command == "runs":  # prints what was redacted when kept, and must start fast
        return _dispatch_with(args, config_file)
    from orchestrator.app.held_secrets import holding_secrets

    # Every secret of the environment and the config is redacted by its value from what
    # this command prints, keeps or sends (redaction/held.py); a Celery worker's pool
    # processes are its forks, and hold it too.
    with holding_secrets(config_file, os.environ):
        return _dispatch_with(args, config_file)


def _dispatch_with(args: argparse.Namespace, config_file: Path) -> int:
    from orchestrator import storage

    # doctor, and the preflight before a run's first stage, report it among their checks.
    preflight = not getattr(args, "no_preflight", True) and not getattr(args, "worker", False)
    if args.command != "doctor" and not preflight:
        _refuse_a_file_as_state_dir(config_file, args.state_dir)
    if args.command in STATE_COMMANDS:
        _open_state(config_file, args.state_dir)
    if args.command == "doctor":
        from orchestrator.cli.commands import doctor

        return doctor.doctor(config_file, args.state_dir, sys.stdout, as_json=args.json)
    if args.command == "runs":
        from orchestrator.cli.commands import runs

        return runs.runs(
            _existing_state_dir(config_file, args.state_dir),
            sys.stdout,
            as_json=args.json,
            state=args.state,
            ticket=args.ticket,
        )
    if args.command == "worker" or (args.command == "batch" and args.backend == "celery"):
        from orchestrator.cli.extras import require_distributed

        require_distributed("worker" if args.command == "worker" else "batch --backend celery")
    if args.command == "batch" and args.backend == "celery":
        from orchestrator.cli.commands import batch_celery

        if args.jobs != 1 or args.worker:
            raise UsageError("batch --backend celery: --jobs is the workers' --concurrency")
        return batch_celery.celery_batch(
            config_file,
            args.state_dir,
            Path(args.tickets),
            wait=not args.no_wait,
            as_json=args.json,
            out=sys.stdout,
            published=_published(args),
            preflight=not args.no_preflight,
        )
    if args.command == "worker":
        from orchestrator.cli.commands import worker

        return worker.worker(
            config_file,
            args.state_dir,
            concurrency=args.concurrency,
            queues=args.queues,
            out=sys.stdout,
        )
    if args.command == "batch":
        if args.no_wait:
            raise UsageError("batch: --no-wait needs --backend celery")
        from orchestrator.cli.commands import batch

        return batch.batch(
            config_file,
            args.state_dir,
            Path(args.tickets),
            jobs=args.jobs,
            as_json=args.json,
            worker=args.worker,
            out=sys.stdout,
            published=_published(args),
            preflight=not args.no_preflight and not args.worker,
        )
    if args.command == "report":
        from orchestrator.cli.commands import report

        return report.report(
            _existing_state_dir(config_file, args.state_dir),
            config_file,
            report.selection_of(args.batch, args.since, args.run_ids),
            Path(args.out),
            sys.stdout,
            metrics_path=Path(args.metrics) if args.metrics else None,
        )
    if args.command == "verdicts":
        from orchestrator.cli.arguments import parse_since
        from orchestrator.cli.commands import verdicts

        return verdicts.verdicts(
            _existing_state_dir(config_file, args.state_dir),
            sys.stdout,
            action=args.action,
            source=args.source,
            since=parse_since(args.since) if args.since is not None else None,
            as_json=args.json,
        )
    if args.command == "replay":
        from orchestrator.cli.commands import replay

        return replay.replay(
            storage.state_dir(config_file, args.state_dir),
            config_file,
            args.run_id,
            args.verdict,
            sys.stdout,
            as_json=args.json,
        )
    if args.command == "show":
        from orchestrator.cli.commands import show

        return show.show(
            _existing_state_dir(config_file, args.state_dir),
            args.run_id,
            sys.stdout,
            as_json=args.json,
            prices=_prices(config_file),
        )
    if args.command in ("approve", "reject"):
        from orchestrator.cli.commands import approve

        return approve.answer(
            config_file,
            args.state_dir,
            args.run_id,
            approved=args.command == "approve",
            reason=getattr(args, "reason", None),
            out=sys.stdout,
            now=getattr(args, "now", False),
        )
    if args.command == "resume":
        from orchestrator.cli.commands import resume

        return resume.resume(
            config_file,
            args.state_dir,
            args.run_id,
            from_stage=args.from_stage,
            by=args.by,
            out=sys.stdout,
            preflight=not args.no_preflight,
            here=args.here,
        )
    if args.command == "reset":
        from orchestrator.cli.commands import reset

        return reset.reset(
            storage.state_dir(config_file, args.state_dir),
            args.ticket_id,
            reason=args.reason,
            by=args.by,
            out=sys.stdout,
        )
    if args.command == "run":
        from orchestrator.cli.commands import run

        return run.run(
            config_file, args.state_dir, args.ticket, rerun=args.rerun, out=sys.stdout,
            preflight=not args.no_preflight,
        )  # fmt: skip
    if args.command == "prune":
        from orchestrator.cli.commands import prune

        return prune.prune(
            storage.state_dir(config_file, args.state_dir),
            args.older_than,
            sys.stdout,
            dry_run=args.dry_run,
            also_resumable=args.also_resumable,
        )
    if args.command == "eval":
        from orchestrator.cli.commands import eval as eval_command

        return eval_command.run(args, config_file, sys.stdout, os.environ)
    if args.command == "baseline":
        from orchestrator.cli.commands import baseline

        return baseline.run(args, storage.state_dir(config_file, args.state_dir), sys.stdout)
    if args.command == "tickets":
        from orchestrator.cli.commands import tickets

        return tickets.tickets(
            config_file, args.state_dir, Path(args.tickets), sys.stdout, as_json=args.json
        )
    if args.command == "ledger":
        from orchestrator.cli.commands import ledger

        return ledger.run(
            args, _existing_state_dir(config_file, args.state_dir), sys.stdout, os.environ
        )
    if args.command == "storage":
        from orchestrator.cli.commands import storage as storage_command

        return storage_command.run(
            args, config_file, storage.state_dir(config_file, args.state_dir), sys.stdout,
            os.environ,
        )  # fmt: skip
    if args.command == "playbook":
        from orchestrator.cli.commands import playbook as playbook_command

        return playbook_command.run(
            args, config_file, storage.state_dir(config_file, args.state_dir), sys.stdout,
            sys.stderr, os.environ,
        )  # fmt: skip
    if args.command == "fleet":
        from orchestrator.cli.commands import fleet as fleet_command

        return fleet_command.run(args, config_file, sys.stdout)
    raise AssertionError(f"unhandled command {args.command}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    log = getattr(args, "log", None)
    if log is None:
        return _main(args)
    from orchestrator.cli.batch_log import logging_to

    try:
        with logging_to(Path(log).expanduser()):
            return _main(args)
    except UsageError as exc:  # the log itself cannot be written: said where cron sees it
        print(str(exc), file=sys.stderr)
        return exc.exit_code


def _main(args: argparse.Namespace) -> int:
    # SIGTERM (cron's kill, a batch's stop) unwinds exactly like Ctrl-C: stages are
    # terminated through the runner, the attempt is recorded, the run stays resumable.
    previous = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = _dispatch(args)
        # Inside the try: output still buffered would otherwise meet a closed pipe at
        # interpreter exit, where it can only be reported as a stray traceback.
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except OrchestratorError as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_code
    except (Interrupted, KeyboardInterrupt):
        print("interrupted: state saved; run the same command again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception:
        # Imported here: only the crash path needs them, and start-up time matters.
        import tempfile
        import traceback

        said = traceback.format_exc()
        with contextlib.suppress(Exception):  # (a crash of the redaction keeps its trace)
            said = _redacted_crash(said)
        fd, crash_log = tempfile.mkstemp(prefix="orchestrator-crash-", suffix=".log")
        with os.fdopen(fd, "w") as fh:
            fh.write(said)
        print(
            f"orchestrator: internal error (a bug); traceback written to {crash_log}",
            file=sys.stderr,
        )
        return EXIT_BUG
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _redacted_crash(said: str) -> str:
    """A crash's traceback as the log kept in /tmp says it: an exception's message may
    quote a URL with its password or a key, so it is redacted, by shape and by the value
    of every secret the environment holds (the command's holding has ended by now)."""
    from orchestrator.domain.held_secrets import held_values
    from orchestrator.redaction import HeldSecrets, redact

    return redact(said, held=HeldSecrets(held_values(os.environ)))


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the flush at exit cannot fail on the closed pipe
    again (the recipe in the ``signal`` module's documentation)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test's buffer): nothing will flush into a pipe
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def entry() -> None:
    """The program's entry (``orchestrator`` and ``python -m orchestrator``). Before
    anything runs: the stages we start run as our user, so our keys must not be readable
    from our /proc (``main`` alone, as tests call it, leaves the calling process as it is)."""
    from orchestrator.execution.key_shield import shield

    shield()
    raise SystemExit(main())
