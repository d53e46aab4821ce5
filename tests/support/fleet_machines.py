"""A fleet for the end-to-end tests: a config on a real Redis, a queue of tickets, and
``orchestrator worker`` processes, each in its own process group with its own HOME and
TMPDIR, sharing only the state dir (and the config beside it), as machines would."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from conftest import COUNTS, bash_stage, orchestrator_cmd, subprocess_env, write_ticket
from support.file_watch import wait_for
from support.fleet_keys import install_fleet_key


def counted(name: str, tail: str = "", **options: object) -> str:
    """A stage that appends a line to ``count-<stage>-<ticket>`` in ``counts/`` beside the
    state dir each time it runs, then runs ``tail`` (its exit status is the stage's)."""
    return bash_stage(
        name, f"echo x >> {COUNTS}/count-{name}-$ORCH_TICKET_ID; {tail or 'true'}", **options
    )


def hold_first(name: str, ticket_id: str, port: int) -> str:
    """A counted stage that, the first time it runs for ``ticket_id``, says so on a
    loopback port and then waits for the test's go-ahead on the same connection."""
    talk = f'exec 3<>/dev/tcp/127.0.0.1/{port}; echo started $$ >&3; read -r go <&3; [ "$go" = go ]'
    tail = (
        f'if [ "$ORCH_TICKET_ID" = {ticket_id} ] && '
        f"[ $(wc -l < {COUNTS}/count-{name}-$ORCH_TICKET_ID) = 1 ]; then {talk}; fi"
    )
    # It talks to the test on a loopback port, with bash's /dev/tcp: no proxy between.
    return counted(name, tail, network=True, egress=["*"])


def write_fleet_config(
    root: Path,
    url: str,
    namespace: str,
    stages: str,
    *,
    visibility_s: float = 3600.0,
    lease_s: float = 60.0,
    recovery: bool = False,
    distributed: str = "",
) -> Path:
    """``distributed``: more ``[distributed]`` lines."""
    root.mkdir(parents=True, exist_ok=True)
    config = root / "config.toml"
    switch = "" if recovery else "[recovery]\nenabled = false\n"
    config.write_text(
        'state_dir = "state"\n'
        f'[distributed]\nbroker_url = "{url}"\nnamespace = "{namespace}"\n'
        f"visibility_timeout_s = {visibility_s}\nlease_s = {lease_s}\n{distributed}"
        + switch
        + "\n"
        + stages
    )
    install_fleet_key(root)  # every task message is signed with it (issue 40)
    return config


def write_tickets(directory: Path, n: int) -> list[str]:
    ids = [f"T-{i:02d}" for i in range(n)]
    for ticket_id in ids:
        write_ticket(directory, ticket_id)
    return ids


def counts(state: Path, name: str) -> dict[str, int]:
    return {
        p.name.removeprefix(f"count-{name}-"): len(p.read_text().splitlines())
        for p in (state.parent / "counts").glob(f"count-{name}-*")
    }


class FleetWorkers:
    def __init__(self, root: Path, config: Path, *, env: dict[str, str] | None = None) -> None:
        """``env``: more environment for every worker (what each machine would set)."""
        self.root = root
        self.config = config
        self.env = env or {}
        self.started: dict[str, subprocess.Popen[bytes]] = {}

    def start(
        self, name: str, concurrency: int = 1, *, argv: list[str] | None = None
    ) -> subprocess.Popen[bytes]:
        """``orchestrator worker`` (or ``argv``) on a machine of its own."""
        home = self.root / "machines" / name
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        env = subprocess_env(HOME=str(home), TMPDIR=str(home / "tmp"), **self.env)
        log = (home / "worker.log").open("ab")
        process = subprocess.Popen(
            argv
            or orchestrator_cmd(
                "--config", str(self.config), "worker", "--concurrency", str(concurrency)
            ),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, cwd=home, start_new_session=True,
        )  # fmt: skip
        self.started[name] = process
        return process

    def wait_ready(self, name: str, deadline_s: float = 60.0) -> None:
        """Until the worker says in its log that it takes tasks."""
        self.wait_in_log(name, " ready.", deadline_s)

    def wait_in_log(self, name: str, text: str, deadline_s: float) -> None:
        """Until ``text`` is in the worker's log, while the worker lives (woken by its
        writes)."""
        process = self.started[name]
        wait_for(
            lambda: text in self.log(name),
            self.folder(name),
            f"{text!r} in worker {name}'s log",
            deadline_s=deadline_s,
            still_possible=lambda: process.poll() is None,
            explain=lambda: self.log(name),
        )

    def folder(self, name: str) -> Path:
        return self.root / "machines" / name

    def ran(self, name: str) -> int:
        """How many tickets the worker's tasks ran to an answer."""
        return self.log(name).count("succeeded in")

    def log(self, name: str) -> str:
        return (self.folder(name) / "worker.log").read_text(errors="replace")

    def stop_all(self) -> None:
        for process in self.started.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.started.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def batch_cmd(config: Path, tickets: Path, *extra: str) -> list[str]:
    return orchestrator_cmd(
        "--config", str(config), "batch", "--backend", "celery", "--tickets", str(tickets), *extra
    )


def run_batch(
    config: Path, tickets: Path, *extra: str, timeout_s: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """``orchestrator batch --backend celery`` to its end, from the config's directory."""
    return subprocess.run(
        batch_cmd(config, tickets, *extra), capture_output=True, text=True,
        env=subprocess_env(), cwd=config.parent, timeout=timeout_s,
    )  # fmt: skip


# A fleet that shares no directory (issue 30): each machine has its own folder, holding
# its own copy of the config (``state_dir = "state"``: a state dir of its own), its HOME,
# TMPDIR and the counts its stages write; only PostgreSQL and Redis are shared.


def write_database_fleet_config(
    root: Path,
    broker_url: str,
    namespace: str,
    storage_url: str,
    stages: str,
    **options: object,
) -> Path:
    """``write_fleet_config`` with ``[storage] url``: the state's record is the database.
    ``options`` are ``write_fleet_config``'s (``visibility_s``, ``lease_s``, …)."""
    distributed = str(options.pop("distributed", ""))
    config = write_fleet_config(
        root, broker_url, namespace, stages, **options,  # type: ignore[arg-type]
        distributed=f'{distributed}[storage]\nurl = "{storage_url}"\n',
    )  # fmt: skip
    return config


def machine_config(folder: Path, original: Path) -> Path:
    """``folder`` made a machine: a copy of the config file (same bytes) in it, and the
    folder its stages count in (a stage outside the sandbox does not make it)."""
    (folder / "counts").mkdir(parents=True, exist_ok=True)
    copy = folder / "config.toml"
    copy.write_bytes(original.read_bytes())
    install_fleet_key(folder)  # the fleet's one key pair, copied to each machine
    return copy


class SeparateMachines(FleetWorkers):
    """Workers each on a machine of its own (``machines/<name>/``): its own config copy
    beside its own state dir, HOME and TMPDIR; nothing of one is another's."""

    def config_of(self, name: str) -> Path:
        return machine_config(self.folder(name), self.config)

    def start(
        self, name: str, concurrency: int = 1, *, argv: list[str] | None = None
    ) -> subprocess.Popen[bytes]:
        """``orchestrator worker`` with this machine's config; in ``argv``, ``{config}``
        stands for it."""
        config = self.config_of(name)
        command = [part.replace("{config}", str(config)) for part in argv or []] or (
            orchestrator_cmd("--config", str(config), "worker", "--concurrency", str(concurrency))
        )
        return super().start(name, concurrency, argv=command)

    def state(self, name: str) -> Path:
        return self.folder(name) / "state"


def counts_over(states: list[Path], name: str) -> dict[str, int]:
    """``counts`` summed over machines: how often each ticket ran stage ``name`` anywhere
    (each machine counts in its own folder; the sum is the test's instrument)."""
    total: dict[str, int] = {}
    for state in states:
        for ticket_id, n in counts(state, name).items():
            total[ticket_id] = total.get(ticket_id, 0) + n
    return dict(sorted(total.items()))
