"""A run killed on one machine after its implement stage goes on on another whose state
dir has the run record but no clone (issue 30: a fleet shares no disk): the stages run
again from the one that makes the clone, recorded on the run, and the run completes.
A real orchestrator process is killed (SIGKILL, ``$ORCHESTRATOR_CRASH_AT``); the clone is
a real git repository the first stage makes."""

from __future__ import annotations

import io
import os
import shutil
import signal
from pathlib import Path

from orchestrator.app.driver import run_ticket
from orchestrator.domain.config import load_config
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.tickets import load_ticket
from orchestrator.storage.crash_points import CRASH_ENV, CrashPoint
from orchestrator.storage.files import FileStorage

from conftest import (
    COUNTS,
    bash_stage,
    subprocess_env,
    write_config,
    write_ticket,
)
from support.scripted_cli import run_forked
from support.services import make_services

IDENTITY = {
    "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "a",
    "GIT_COMMITTER_EMAIL": "a@x",
}  # fmt: skip
MAKE_CLONE = (
    f"echo x >> {COUNTS}/make && "
    'git init -q "$ORCH_CLONE_DIR" && git -C "$ORCH_CLONE_DIR" commit -q --allow-empty -m base'
)


def in_clone(name: str, script: str) -> str:
    return bash_stage(name, script).replace('cwd = "run"', 'cwd = "clone"')


PIPELINE = (
    bash_stage("make", MAKE_CLONE)
    + in_clone("implement", f"echo x >> {COUNTS}/implement && touch implemented")
    # Works only in a clone the implement stage wrote to.
    + in_clone("review", f"echo x >> {COUNTS}/review && test -f implemented")
)


def count(tmp_path: Path, name: str) -> int:
    path = tmp_path / "counts" / name
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_run_resumed_without_its_clone_runs_again_from_the_clone_stage(tmp_path: Path) -> None:
    (tmp_path / "counts").mkdir()
    config = write_config(tmp_path, PIPELINE)
    ticket = write_ticket(tmp_path / "t")
    # Machine A: killed right after the implement attempt's result is on disk.
    # In a process of its own, forked as `python -m orchestrator` starts (``run_forked``).
    killed = run_forked(
        Path.cwd(), ["--config", str(config), "run", str(ticket)],
        subprocess_env(
            HOME=str(tmp_path), **IDENTITY,
            **{CRASH_ENV: f"{CrashPoint.ATTEMPT_FINISHED}:2"},
        ),
        timeout_s=120, as_entry=True,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    state_dir = tmp_path / "state"
    was = FileStorage(state_dir).runs.latest_for_ticket("T-1")
    assert was is not None
    assert was.state is RunState.RUNNING
    assert [a.stage for a in was.attempts] == ["make", "implement"]
    # Machine B: the run's record and files, not its clone.
    shutil.rmtree(was.clone_dir)

    loaded = load_config(config)
    told = io.StringIO()
    services = make_services(
        loaded, state_dir, out=told,
        environ={"PATH": os.environ["PATH"], "HOME": str(tmp_path), **IDENTITY},
    )  # fmt: skip
    done = run_ticket(load_ticket(ticket), services)

    assert done.run_id == was.run_id and done.state is RunState.COMPLETED
    assert [a.stage for a in done.attempts] == ["make", "implement", "make", "implement", "review"]
    assert done.attempts[:2] == was.attempts  # the history is kept
    assert (count(tmp_path, "make"), count(tmp_path, "implement"), count(tmp_path, "review")) == (
        2, 2, 1,
    )  # fmt: skip
    (reclone,) = done.reclones
    assert (reclone.needed_by, reclone.from_stage, reclone.after_attempt) == ("review", "make", 2)
    assert reclone.from_state is RunState.RUNNING
    assert (
        f"workspace not on this machine: the clone {was.clone_dir} is missing and 'review' "
        "works in it; stages re-run from 'make'"
    ) in told.getvalue()
    assert (Path(done.clone_dir) / "implemented").exists()
