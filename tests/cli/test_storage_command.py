"""``orchestrator storage export|import``, the real CLI in its own process: the database
from ``--to``/``--from``, ``$ORCHESTRATOR_STORAGE_URL`` or ``[storage] url``; what moved
and the ledger's verify printed; refusals and an unreachable server as exit codes; the
URL's password in no output, ever."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from orchestrator.storage.budget import BudgetStore
from orchestrator.storage.ledger import Ledger

from conftest import subprocess_env
from support.ledger_rows import conclude, decide
from support.scripted_cli import run_forked

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def cli(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = subprocess_env(**env)
    if "ORCHESTRATOR_STORAGE_URL" not in env:
        environ.pop("ORCHESTRATOR_STORAGE_URL", None)
    # Its own process, forked from this one: ``python -m orchestrator`` less the start.
    return run_forked(cwd, list(args), environ, timeout_s=120, as_entry=True)


def a_state_dir(state: Path) -> Path:
    """A ledger of several rows, and a ticket's budget with a charge and a reset."""
    ledger = Ledger(state / "ledger.jsonl")
    first = decide(ledger, 0, "sig-a", "retry")
    decide(ledger, 1, "sig-b", "mechanical-fix")
    conclude(ledger, first, "retry: re-running build")
    store = BudgetStore(state)
    store.charge("T-1", "retry", "r-1", run_id="T-1-20260301T090000Z-ab12", at=T0)
    store.reset("T-1", by="alice", reason="runner replaced", at=T0)
    return state


@pytest.mark.quick
def test_without_a_database_named_anywhere_it_says_where_to_name_one(tmp_path: Path) -> None:
    proc = cli(tmp_path, "--state-dir", "state", "storage", "export")
    assert proc.returncode == 2
    assert proc.stderr == (
        "usage error: no database to export to: pass --to URL, set "
        f"$ORCHESTRATOR_STORAGE_URL, or set [storage] url in {tmp_path / 'config.toml'}\n"
    )
    proc = cli(tmp_path, "--state-dir", "state", "storage", "import", "--from", "mysql://x/y")
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage error: --from: 'mysql://x/y' is not a postgresql:// URL")


@pytest.mark.slow
def test_export_then_import_moves_the_state_and_never_prints_the_password(
    pg_url: str, tmp_path: Path
) -> None:
    pytest.importorskip("psycopg")
    password = urlsplit(pg_url).password
    assert password
    masked = pg_url.replace(password, "***")
    a_state_dir(tmp_path / "a")
    (tmp_path / "pg.toml").write_text(
        f'state_dir = "a"\n[storage]\nurl = "{pg_url}"\n'
        '[[stages]]\nname = "build"\ncommand = ["true"]\n'
    )
    outputs = []

    # The config's [storage] url.
    proc = cli(tmp_path, "--config", "pg.toml", "storage", "export")
    outputs.append(proc)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (
        f"exporting {tmp_path / 'a'} to {masked}\n"
        "  runs: 0\n  verdicts: 0\n  approvals: 0\n  ledger rows: 3\n"
        "  budgets: 1 ticket budget(s) (1 charge(s), 1 caps reset(s)), 0 batch budget(s)\n"
        "  files: 0\n  ledger verify (database): OK: 3 entries\n"
    )

    # $ORCHESTRATOR_STORAGE_URL, into another state dir.
    proc = cli(tmp_path, "--state-dir", "b", "storage", "import", ORCHESTRATOR_STORAGE_URL=pg_url)
    outputs.append(proc)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"importing {masked} into {tmp_path / 'b'}\n")
    assert proc.stdout.endswith("  ledger verify (files): OK: 3 entries\n")
    for name in ("ledger.jsonl", "ledger.head"):
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "a" / name).read_bytes()
    assert BudgetStore(tmp_path / "b").load("T-1") == BudgetStore(tmp_path / "a").load("T-1")
    proc = cli(tmp_path, "--state-dir", "b", "ledger", "verify")
    assert (proc.returncode, proc.stdout) == (0, "OK: 3 entries\n"), proc.stderr

    # --to (no password on the command line: $PGPASSWORD), into the database that now
    # holds it: refused, and said so.
    bare = pg_url.replace(f":{password}@", "@")
    proc = cli(tmp_path, "--state-dir", "a", "storage", "export", "--to", bare,
               PGPASSWORD=password)  # fmt: skip
    outputs.append(proc)
    assert proc.returncode == 7
    assert proc.stderr == (
        "state error: the PostgreSQL database: refusing to export into a database that is "
        "not empty (it holds 3 ledger row(s), 1 ticket budget(s))\n"
    )
    proc = cli(tmp_path, "--state-dir", "b", "storage", "import", "--from", bare,
               PGPASSWORD=password)  # fmt: skip
    outputs.append(proc)
    assert proc.returncode == 7
    assert "refusing to import into a state dir that is not empty" in proc.stderr

    # A wrong password: unreachable (try again later), and neither password printed.
    proc = cli(tmp_path, "--state-dir", "a", "storage", "export", "--to", bare,
               PGPASSWORD="not-the-password-x9")  # fmt: skip
    outputs.append(proc)
    assert proc.returncode == 75, proc.stderr
    assert "not-the-password-x9" not in proc.stdout + proc.stderr
    for done in outputs:
        assert password not in done.stdout + done.stderr
