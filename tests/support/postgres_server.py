"""A real PostgreSQL server for the tests, and the fixtures that hand it out: a pytest
plugin (``pytest_plugins`` in tests/conftest.py), so any test may ask for ``pg_url``.

* ``postgres_server`` (session): one server per pytest-xdist worker, its own process
  group, a free loopback port, its socket in its own temp dir, ``fsync=off``. The cluster
  is made by ``initdb`` once per run and copied for each worker.
* ``pg_url`` (function): a fresh database on it (``CREATE DATABASE t_<random>``), its URL
  ``postgresql://postgres:<password>@127.0.0.1:<port>/<db>``; dropped after the test.

Password authentication (SCRAM), with a random password made for the run: a test can
then prove a wrong password is refused and that no message carries the right one (with
``trust`` any password gets in, and a leaked one would look like any other string).

Readiness is waited for, not slept on: the server's own "ready to accept connections"
line, read from its log with a deadline. ``restart()`` stops it (a fast shutdown) and
starts it again on the same port, as an operator restarting PostgreSQL would.

``initdb`` and ``postgres`` refuse to run as root, and CI runs as root: there both run
as ``nobody`` (``Popen(user=, group=, extra_groups=[])``, no helper binary), in a temp dir
outside pytest's own (which is root's, mode 0700) and handed to that user.

Where PostgreSQL is not installed the tests skip, and the session's summary says so in
one line; under ``CI=true`` they fail instead (``.ci/run`` installs it).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.once import built_once
from support.server_output import free_loopback_port, start_until_ready

READY = "database system is ready to accept connections"
START_DEADLINE_S = 20.0
STOP_DEADLINE_S = 10.0
# Where Debian's packages put the binaries (postgresql-<version>), and a source build's.
SEARCHED = ("/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin", "/usr/local/bin")

MISSING = (
    "PostgreSQL is not installed: the PostgreSQL storage tests need a real server "
    "(initdb and postgres; Debian/Ubuntu: apt-get install postgresql; .ci/run installs it in CI)"
)
NO_PSYCOPG = (
    "psycopg is not installed: the PostgreSQL storage tests need it "
    "(pip install -e '.[postgres]'; scripts/dev.sh setup installs it)"
)


def _version(bindir: Path) -> tuple[int, ...]:
    match = re.search(r"/postgresql/(\d+(?:\.\d+)*)/", f"{bindir}/")
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


def postgres_bindir(
    *, path: str | None = None, searched: tuple[str, ...] = SEARCHED
) -> Path | None:
    """The directory holding both ``initdb`` and ``postgres``: the one on PATH (or
    ``path``) first, then the newest of Debian's versioned directories, then the others."""
    candidates: list[Path] = []
    on_path = shutil.which("postgres", path=path)
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for pattern in searched:
        candidates += sorted(map(Path, glob.glob(pattern)), key=_version, reverse=True)
    for bindir in candidates:
        if all(os.access(bindir / name, os.X_OK) for name in ("initdb", "postgres")):
            return bindir
    return None


class PostgresServerError(RuntimeError):
    pass


class RunAs:
    """Who the server's processes run as: this process's user, or ``nobody`` for root
    (PostgreSQL refuses root)."""

    def __init__(self) -> None:
        self.ids: tuple[int, int] | None = None
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            self.ids = (nobody.pw_uid, nobody.pw_gid)

    def popen_kwargs(self) -> dict[str, object]:
        if self.ids is None:
            return {}
        uid, gid = self.ids
        return {"user": uid, "group": gid, "extra_groups": []}

    def hand_over(self, top: Path) -> None:
        """Make ``top`` and everything under it the server user's."""
        if self.ids is None:
            return
        uid, gid = self.ids
        os.chown(top, uid, gid)
        for parent, dirs, files in os.walk(top):
            for name in (*dirs, *files):
                os.chown(os.path.join(parent, name), uid, gid, follow_symlinks=False)


def _server_env() -> dict[str, str]:
    # Nothing of the caller's (PGPASSWORD, PGHOST, a locale the machine lacks).
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C"}


def initdb(bindir: Path, data: Path, password: str, run_as: RunAs) -> None:
    """A new cluster in ``data`` whose superuser ``postgres`` logs in with ``password``,
    over TCP and the socket alike."""
    top = data.parent
    pwfile = top / "pwfile"
    pwfile.write_text(password + "\n")
    pwfile.chmod(0o600)
    run_as.hand_over(top)
    try:
        proc = subprocess.run(
            [
                str(bindir / "initdb"), "-D", str(data), "-U", "postgres",
                "--pwfile", str(pwfile), "--auth", "scram-sha-256",
                "-E", "UTF8", "--locale", "C", "--no-sync", "--no-instructions",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=_server_env(),
            stdin=subprocess.DEVNULL,
            **run_as.popen_kwargs(),  # type: ignore[arg-type]
        )  # fmt: skip
    finally:
        pwfile.unlink(missing_ok=True)
    if proc.returncode != 0:
        raise PostgresServerError(f"initdb exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")


_NOT_DURABLE = ("-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")


class PostgresServer:
    """A server on the cluster in ``<top>/data``, its socket in ``<top>/socket``."""

    def __init__(
        self, bindir: Path, top: Path, password: str, run_as: RunAs, *, durable: bool = False
    ) -> None:
        self.bindir = bindir
        # The tests' server commits without flushing (fsync off): nothing a test proves
        # needs a power cut survived. A benchmark's is ``durable``, as a user's would be.
        self.durable = durable
        self.top = top
        self.password = password
        self.run_as = run_as
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.output: list[str] = []
        self._drain: threading.Thread | None = None

    def url(self, database: str = "postgres", *, password: str | None = None) -> str:
        secret = self.password if password is None else password
        return f"postgresql://postgres:{secret}@127.0.0.1:{self.port}/{database}"

    def _argv(self, port: int) -> list[str]:
        return [
            str(self.bindir / "postgres"),
            "-D", str(self.top / "data"),
            "-p", str(port),
            "-k", str(self.top / "socket"),
            "-c", "listen_addresses=127.0.0.1",
            *(() if self.durable else _NOT_DURABLE),
            "-c", "max_connections=50",
        ]  # fmt: skip

    def start(self) -> None:
        """Start on the port chosen at the first start (a free one), and wait until ready."""
        (self.top / "socket").mkdir(exist_ok=True)
        self.run_as.hand_over(self.top / "socket")
        attempts = 3 if self.port is None else 1
        for _ in range(attempts):
            port = self.port if self.port is not None else free_loopback_port()
            if self._start_on(port):
                self.port = port
                return
        raise PostgresServerError("postgres did not start:\n" + "".join(self.output[-30:]))

    def _start_on(self, port: int) -> bool:
        self.output = []
        started = start_until_ready(
            self._argv(port), READY, START_DEADLINE_S, self.output,
            name=f"postgres on port {port}", error=PostgresServerError,
            env=_server_env(), **self.run_as.popen_kwargs(),
        )  # fmt: skip
        if started is None:
            return False
        self.process, self._drain = started
        return True

    def _kill(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        """A fast shutdown (SIGINT to the postmaster: sessions are ended, the cluster is
        left clean), bounded; then SIGKILL to the whole group, whatever is left of it."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                pass
        self._kill()  # also the backends of a postmaster that died without ending them
        if self._drain is not None:
            self._drain.join(timeout=STOP_DEADLINE_S)
        if process.stdout is not None:
            process.stdout.close()

    def restart(self) -> None:
        self.stop()
        self.start()


def _template(bindir: Path, password: str, run_as: RunAs) -> Path:
    """A fresh cluster in a temp dir the server user owns (not under pytest's)."""
    top = Path(tempfile.mkdtemp(prefix="orchestrator-pg-"))
    initdb(bindir, top / "data", password, run_as)
    return top


def _copy_cluster(template: Path, run_as: RunAs) -> Path:
    top = Path(tempfile.mkdtemp(prefix="orchestrator-pg-"))
    shutil.copytree(template / "data", top / "data", symlinks=True)
    run_as.hand_over(top)
    return top


def require_postgres() -> Path:
    bindir = postgres_bindir()
    if bindir is not None:
        return bindir
    if os.environ.get("CI"):
        pytest.fail(f"CI must exercise the PostgreSQL storage, but {MISSING}")
    pytest.skip(MISSING)


def require_psycopg() -> None:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"CI must exercise the PostgreSQL storage, but {NO_PSYCOPG}")
        pytest.skip(NO_PSYCOPG)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # Counted from the skip reports, which reach the controller under pytest-xdist too.
    for reason in (MISSING, NO_PSYCOPG):
        skipped = [
            r for r in terminalreporter.stats.get("skipped", []) if reason in str(r.longrepr)
        ]
        if skipped:
            terminalreporter.write_line(
                f"PostgreSQL tests skipped ({len(skipped)}): {reason}", yellow=True
            )


@pytest.fixture(scope="session")
def postgres_server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[PostgresServer]:
    """One server per worker, on a copy of the run's one cluster (``initdb`` runs once)."""
    bindir = require_postgres()
    require_psycopg()
    run_as = RunAs()

    def build(where: Path) -> None:
        password = secrets.token_urlsafe(18)
        made = _template(bindir, password, run_as)
        try:
            where.mkdir(parents=True)
            shutil.copytree(made / "data", where / "data", symlinks=True)
        finally:
            shutil.rmtree(made, ignore_errors=True)
        (where / "password").write_text(password)

    template = built_once(tmp_path_factory, request.config, "postgres-cluster", build)
    top = _copy_cluster(template, run_as)
    server = PostgresServer(bindir, top, (template / "password").read_text(), run_as)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, empty database on the worker's server; dropped after the test, with
    whatever connections the test left open."""
    import psycopg

    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(postgres_server.url(), autocommit=True, connect_timeout=10) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    yield postgres_server.url(name)
    if postgres_server.process is None or postgres_server.process.poll() is not None:
        postgres_server.start()  # a test that stopped the server leaves it running again
    with psycopg.connect(postgres_server.url(), autocommit=True, connect_timeout=10) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
