"""A ticket whose retry waits for a person: a clone, a build that fails its first run
only, and a side-effectful publish stage, each run counted in ``counts/`` beside the state
dir; the model (scripted) says "retry", which the default routing sends to a person. For
the tests of what ``approve`` and ``resume`` then do, here and on a fleet."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import git

from orchestrator.cli.commands.batch import batch
from orchestrator.domain.lifecycle import RunState
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.storage import FileStorage

from conftest import COUNTS, untimed, write_ticket
from support.harness import reply

# Fails its first run only: the model says "retry", which waits for a person.
FLAKY = f'n=$(cat {COUNTS}/build 2>/dev/null | wc -l); echo x >> {COUNTS}/build; [ "$n" -ge 1 ]'


def setup(tmp_path: Path) -> Path:
    git.Repo.init(tmp_path / "origin.git", bare=True).close()
    (tmp_path / "counts").mkdir()
    write_ticket(tmp_path / "tickets", "T-1")
    config = tmp_path / "config.toml"
    config.write_text(
        'state_dir = "state"\n[recovery]\nmax_diag_invocations_per_ticket = 2\n'
        "max_retries_per_ticket = 2\n\n"
        '[[stages]]\nname = "clone"\ncwd = "run"\ncommand = ["git", "init", "-q", "clone"]\n\n'
        f'[[stages]]\nname = "build"\ncommand = ["bash", "-c", {json.dumps(FLAKY)}]\n'
        f'writable = ["{COUNTS}"]\n\n'
        '[[stages]]\nname = "publish"\nside_effectful = true\n'
        f'command = ["bash", "-c", "echo x >> {COUNTS}/publish"]\nwritable = ["{COUNTS}"]\n'
    )
    return config


def env(**more: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": "/nonexistent", **more}


def run_batch(config: Path, gateway: ScriptedGateway, **more: str) -> list[str]:
    out = io.StringIO()
    batch(
        config, None, config.parent / "tickets", jobs=1, as_json=False, worker=False,
        out=out, environ=env(**more), stderr=out, preflight=False,
        gateway_factory=lambda: gateway,
    )  # fmt: skip
    return [line for line in untimed(out.getvalue()) if line.startswith("T-1 ")]


def ran(tmp_path: Path, name: str) -> int:
    path = tmp_path / "counts" / name
    return len(path.read_text().splitlines()) if path.exists() else 0


def paused(tmp_path: Path) -> tuple[Path, str]:
    config = setup(tmp_path)
    gateway = ScriptedGateway([reply({"action": "retry", "summary": "flaky build"})])
    [line] = run_batch(config, gateway)
    assert " awaiting-approval " in line, line
    record = FileStorage(tmp_path / "state").runs.latest_for_ticket("T-1")
    assert record is not None and record.state is RunState.AWAITING_APPROVAL
    return config, record.run_id
