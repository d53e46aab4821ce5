"""``orchestrator storage export|import``: move the state dir's record into a PostgreSQL
database, or bring a database's record down into an empty state dir (issue 30).

    export [--to URL]   the state dir's ledger, budgets, runs, verdicts, approvals,
                        batches and stage logs into the database, in one transaction;
                        refused when the database already holds state
    import [--from URL] the database's record into the state dir; refused when the state
                        dir already has a ledger, runs or budgets

The database is ``--to``/``--from``, else ``$ORCHESTRATOR_STORAGE_URL``, else the config's
``[storage] url``. A URL on the command line may hold no password (issue 40: every user
reads a command line): refused, saying what to use instead. The password, when the URL
holds none, is ``$PGPASSWORD``, else the one in ``$ORCHESTRATOR_STORAGE_URL`` when it names
the same server, else a pgpass file (libpq's own), else — on a terminal, when the server
asks for one — a prompt. Either prints what moved and the verify of the ledger where it arrived,
and exits 0 when that verify is OK, 7 when not (or when refused); an unreachable database
is 75. The URL is shown masked: its password is never printed. The ledger's HMAC key, if
the ledger is keyed, comes from ``$ORCHESTRATOR_LEDGER_KEY``.

Stop every orchestrator using the state dir or the database first.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from orchestrator.domain.errors import EXIT_STATE, UsageError
from orchestrator.domain.keys import STORAGE_URL_ENV

if TYPE_CHECKING:
    from orchestrator.domain.storage_url import StorageUrl
    from orchestrator.storage.postgres import ConnectionFactory


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "storage",
        help="move the state dir's record into a PostgreSQL database, or back",
        description="Move a whole state dir into a PostgreSQL database (export) or a "
        "database into an empty state dir (import). The database: the URL given, else "
        f"${STORAGE_URL_ENV}, else the config's [storage] url. Stop every orchestrator "
        "using either first.",
    )
    actions = parser.add_subparsers(dest="storage_command", metavar="ACTION", required=True)
    export = actions.add_parser(
        "export",
        help="the state dir's files into the database (refused unless it holds no state)",
    )
    export.add_argument(
        "--to",
        metavar="URL",
        help="the database (postgresql://…, no password: $PGPASSWORD, ~/.pgpass or a prompt)",
    )
    imported = actions.add_parser(
        "import",
        help="the database into the state dir (refused unless it has no ledger, runs or budgets)",
    )
    imported.add_argument(
        "--from", dest="from_url", metavar="URL", help="the database (no password in it)"
    )


def database_url(
    given: str | None, option: str, config_file: Path, environ: Mapping[str, str]
) -> StorageUrl:
    """The URL given, else ``$ORCHESTRATOR_STORAGE_URL``, else the config's
    ``[storage] url``; a UsageError naming all three when none is set."""
    from orchestrator.domain.storage_url import StorageUrl, storage_url_from

    if given is not None:
        from orchestrator.domain.storage_url import command_line_password_problem

        try:
            url = StorageUrl(given)
        except ValueError as exc:
            raise UsageError(f"usage error: {option}: {exc}") from None
        problem = command_line_password_problem(option, url)
        if problem is not None:
            raise UsageError(f"usage error: {problem}")
        return url
    configured = None
    if config_file.is_file():
        from orchestrator.domain.config import load_config

        configured = load_config(config_file).config.storage.url
    found = storage_url_from(configured, environ)
    if found is None:
        raise UsageError(
            f"usage error: no database to {'export to' if option == '--to' else 'import from'}:"
            f" pass {option} URL, set ${STORAGE_URL_ENV}, or set [storage] url in "
            f"{config_file}"
        )
    return found


def connections(
    url: StorageUrl,
    environ: Mapping[str, str],
    *,
    stdin: TextIO | None = None,
    ask: Callable[[str], str] = getpass.getpass,
) -> ConnectionFactory:
    """How to connect to ``url``: with the password from the environment (see the module
    docstring), else libpq's pgpass file; when neither gives one and the server asks for
    it, the person at the terminal is asked once (never when stdin is no terminal)."""
    from orchestrator.domain.storage_url import password_for
    from orchestrator.storage.postgres import PostgresUnavailable, connect

    password = password_for(url, environ)
    terminal = sys.stdin if stdin is None else stdin
    if password is None and terminal.isatty():
        try:
            connect(url.reveal(), environ=environ).close()
        except PostgresUnavailable as exc:
            if "no password supplied" not in exc.reason:
                raise
            password = ask(f"Password for {url.masked}: ") or None
    return lambda: connect(url.reveal(), password=password, environ=environ)


def run(
    args: argparse.Namespace,
    config_file: Path,
    state_dir: Path,
    out: TextIO,
    environ: Mapping[str, str],
    *,
    stdin: TextIO | None = None,
    ask: Callable[[str], str] = getpass.getpass,
) -> int:
    from orchestrator.storage.ledger import key_from_env
    from orchestrator.storage.postgres import export_state, import_state

    key = key_from_env(environ)
    if args.storage_command == "export":
        url = database_url(args.to, "--to", config_file, environ)
        factory = connections(url, environ, stdin=stdin, ask=ask)
        out.write(f"exporting {state_dir} to {url.masked}\n")
        report = export_state(state_dir, factory, key=key)
    else:
        url = database_url(args.from_url, "--from", config_file, environ)
        factory = connections(url, environ, stdin=stdin, ask=ask)
        out.write(f"importing {url.masked} into {state_dir}\n")
        report = import_state(factory, state_dir, key=key)
    out.write("".join(f"  {line}\n" for line in report.lines()))
    return 0 if report.verify.ok else EXIT_STATE
