"""No database password on a command line (issue 40): ``storage export|import`` refuses a
URL holding one and takes it from ``$PGPASSWORD`` (which the key shield blanks where
libpq would read it, so the orchestrator hands it over itself), from the password in
``$ORCHESTRATOR_STORAGE_URL`` for the same server, from a pgpass file, or from a prompt
on a terminal. While an export runs no process's command line holds the password, and the
orchestrator's own /proc/PID/environ shows it blanked."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from orchestrator.cli.commands import storage
from orchestrator.domain.errors import UsageError
from orchestrator.domain.storage_url import StorageUrl
from orchestrator.storage.ledger import Ledger
from orchestrator.storage.postgres import PostgresUnavailable
from orchestrator.storage.postgres.migrate import MIGRATION_LOCK

from conftest import orchestrator_cmd, subprocess_env
from support.ledger_rows import decide

DEADLINE_S = 60.0
VERIFIED = "  ledger verify (database): OK: 1 entries\n"


def cli(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = subprocess_env(HOME=str(cwd), **env)  # no ~/.pgpass of the machine's
    for name in ("ORCHESTRATOR_STORAGE_URL", "PGPASSWORD", "PGPASSFILE"):
        if name not in env:
            environ.pop(name, None)
    return subprocess.run(
        orchestrator_cmd(*args), cwd=cwd, capture_output=True, text=True, timeout=120,
        env=environ, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def a_state_dir(state: Path) -> Path:
    decide(Ledger(state / "ledger.jsonl"), 0, "sig-a", "retry")
    return state


def without_password(url: str) -> tuple[str, str]:
    """``url`` with its password taken out, and the password."""
    password = urlsplit(url).password
    assert password
    return url.replace(f":{password}@", "@"), password


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.mark.slow
@pytest.mark.quick
def test_a_password_in_the_url_on_the_command_line_is_refused_saying_what_to_use(
    tmp_path: Path,
) -> None:
    url = "postgresql://orchestrator:pw-on-the-line-7Q@db.internal:5432/orchestrator"
    for action, option in (("export", "--to"), ("import", "--from")):
        proc = cli(tmp_path, "--state-dir", "state", "storage", action, option, url)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == (
            f"usage error: {option}: postgresql://orchestrator:***@db.internal:5432/orchestrator "
            "holds a password, and a command line is readable by every user of this machine "
            "(ps, /proc/PID/cmdline); leave it out of the URL and give it as $PGPASSWORD, the "
            "password in $ORCHESTRATOR_STORAGE_URL (same host and port), a pgpass file "
            "($PGPASSFILE, else ~/.pgpass) or at the prompt (on a terminal)\n"
        )
        assert "pw-on-the-line-7Q" not in proc.stdout + proc.stderr
    assert not (tmp_path / "state").exists()


@pytest.mark.slow
def test_export_with_pgpassword_as_the_guide_shows_it(pg_url: str, tmp_path: Path) -> None:
    """The key shield blanks $PGPASSWORD in the exec-time environment libpq reads; the
    export logs in all the same, and import too."""
    pytest.importorskip("psycopg")
    bare, password = without_password(pg_url)
    a_state_dir(tmp_path / "a")

    proc = cli(tmp_path, "--state-dir", "a", "storage", "export", "--to", bare,
               PGPASSWORD=password)  # fmt: skip

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith(VERIFIED)
    proc = cli(tmp_path, "--state-dir", "b", "storage", "import", "--from", bare,
               PGPASSWORD=password)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "b" / "ledger.jsonl").read_bytes() == (
        tmp_path / "a" / "ledger.jsonl"
    ).read_bytes()
    assert password not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_export_with_a_pgpass_file(pg_url: str, tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    bare, password = without_password(pg_url)
    parts = urlsplit(pg_url)
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"{parts.hostname}:{parts.port}:*:{parts.username}:{password}\n")
    pgpass.chmod(0o600)
    a_state_dir(tmp_path / "a")

    proc = cli(tmp_path, "--state-dir", "a", "storage", "export", "--to", bare,
               PGPASSFILE=str(pgpass))  # fmt: skip

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith(VERIFIED)

    # Without it, nothing to log in with and no terminal to ask: said, never hangs.
    proc = cli(tmp_path, "--state-dir", "c", "storage", "import", "--from", bare)
    assert proc.returncode == 75
    assert "no password supplied" in proc.stderr


def command_lines() -> dict[int, bytes]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                found[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue  # gone meanwhile
    return found


@pytest.mark.slow
def test_while_an_export_runs_no_command_line_holds_the_password(
    pg_url: str, tmp_path: Path
) -> None:
    """The export is held on the schema's migration lock (taken here first), so what every
    process shows is read while it runs; then it is let go and finishes."""
    psycopg = pytest.importorskip("psycopg")
    bare, password = without_password(pg_url)
    a_state_dir(tmp_path / "a")
    environ = subprocess_env(PGPASSWORD=password, HOME=str(tmp_path))
    environ.pop("ORCHESTRATOR_STORAGE_URL", None)

    with psycopg.connect(pg_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
        held_by = holder.info.backend_pid
        export = subprocess.Popen(
            orchestrator_cmd("--state-dir", "a", "storage", "export", "--to", bare),
            cwd=tmp_path, env=environ, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            until(lambda: holder.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY (pg_blocking_pids(pid)) "
                "AND application_name = 'orchestrator'", (held_by,),
            ).fetchone() == (1,), "the export to wait on the migration lock")  # fmt: skip

            lines = command_lines()
            assert export.pid in lines
            assert [pid for pid, line in lines.items() if password.encode() in line] == []
            block = Path(f"/proc/{export.pid}/environ").read_bytes()
            [entry] = [e for e in block.split(b"\0PGPASSWORD=")[1:2]]
            assert entry.startswith(b"\0" * len(password))
            assert password.encode() not in block
        finally:
            holder.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
            out, err = export.communicate(timeout=DEADLINE_S)

    assert export.returncode == 0, err
    assert out.endswith(VERIFIED)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def export_args(url: str) -> argparse.Namespace:
    return argparse.Namespace(storage_command="export", to=url)


@pytest.mark.slow
def test_the_storage_url_s_password_for_the_same_server_else_a_prompt_on_a_terminal(
    pg_url: str, tmp_path: Path
) -> None:
    pytest.importorskip("psycopg")
    bare, password = without_password(pg_url)
    asked: list[str] = []

    def ask(prompt: str) -> str:
        asked.append(prompt)
        return password

    def export(state: str, environ: dict[str, str], stdin: io.StringIO) -> str:
        out = io.StringIO()
        code = storage.run(export_args(bare), tmp_path / "none.toml", a_state_dir(tmp_path / state),
                           out, environ, stdin=stdin, ask=ask)  # fmt: skip
        assert code == 0, out.getvalue()
        return out.getvalue()

    # $ORCHESTRATOR_STORAGE_URL names the same server: its password, no prompt.
    same = pg_url.replace("postgresql://", "postgres://")
    assert export("a", {"ORCHESTRATOR_STORAGE_URL": same}, Terminal()).endswith(VERIFIED)
    assert asked == []

    # Another server's URL lends nothing; with no terminal nobody is asked and the server's
    # refusal is said.
    other = pg_url.replace(f":{urlsplit(pg_url).port}/", ":1/")
    with pytest.raises(PostgresUnavailable, match="no password supplied"):
        export("b", {"ORCHESTRATOR_STORAGE_URL": other}, io.StringIO())
    assert asked == []

    # On a terminal, the person is asked once, naming the server masked.
    emptied(pg_url)
    assert export("c", {}, Terminal()).endswith(VERIFIED)
    assert asked == [f"Password for {StorageUrl(bare).masked}: "]


def emptied(url: str) -> None:
    """The database made empty again (its tables dropped), so another export is taken."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:s3cret@127.0.0.1:1/d",
        "postgresql://u@127.0.0.1:1/d?sslmode=disable&password=s3cret",  # libpq's parameter
        "postgres://:s3cret@127.0.0.1:1/d",
    ],
)
def test_a_url_with_a_password_given_as_the_option_is_refused_before_any_connection(
    tmp_path: Path, url: str
) -> None:
    with pytest.raises(UsageError, match=r"--to: postgres(ql)?://.*holds a password") as refused:
        storage.database_url(url, "--to", tmp_path, {})
    assert "s3cret" not in str(refused.value)
    assert storage.database_url("postgresql://u@127.0.0.1:1/d", "--to", tmp_path, {})


@pytest.mark.slow
def test_pgpassword_logs_every_command_in_not_only_storage(pg_url: str, tmp_path: Path) -> None:
    """The guide's setup: ``[storage] url`` without a password, ``$PGPASSWORD`` in the
    environment. ``doctor`` reaches the store through the same door as the fleet."""
    pytest.importorskip("psycopg")
    bare, password = without_password(pg_url)
    (tmp_path / "config.toml").write_text(
        f'state_dir = "state"\n[storage]\nurl = "{bare}"\n'
        '[[stages]]\nname = "build"\ncommand = ["true"]\n'
    )

    proc = cli(tmp_path, "doctor", "--json", PGPASSWORD=password)

    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["storage"]["status"] == "ok", checks["storage"]
    assert password not in proc.stdout + proc.stderr
