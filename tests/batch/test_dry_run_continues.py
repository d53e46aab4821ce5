"""A run DRY_RUN stopped before its side-effectful stage is not done for a batch that may
run that stage: the first batch whose environment has ``DRY_RUN=false`` resumes it from
the blocked stage (no second clone, no second implement), once; a batch where DRY_RUN is
still armed leaves it, and its line says so, naming whose environment decides. Real
stage processes, the real batch (in this process)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from orchestrator.app.ledger_link import ledger_for
from orchestrator.batch.celery.backend import settled as _settled
from orchestrator.batch.queue import WORKER_ENVIRONMENT, run_one
from orchestrator.cli.commands.batch import batch
from orchestrator.cli.console import terminal_services
from orchestrator.domain.config import load_config
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.storage import FileStorage

from conftest import COUNTS, bash_stage, untimed, write_config, write_ticket


def counting(name: str) -> str:
    return f"echo x >> {COUNTS}/{name}"


PIPELINE = (
    bash_stage("clone", counting("clone"))
    + bash_stage("implement", counting("implement"))
    + bash_stage("publish", counting("publish"), side_effectful=True)
)


def ran(tmp_path: Path) -> dict[str, int]:
    return {
        name: len((tmp_path / "counts" / name).read_text().splitlines())
        if (tmp_path / "counts" / name).exists()
        else 0
        for name in ("clone", "implement", "publish")
    }


def setup(tmp_path: Path) -> Path:
    config = write_config(tmp_path, PIPELINE)
    (tmp_path / "counts").mkdir()
    write_ticket(tmp_path / "tickets", "T-1")
    return config


def run_batch(config: Path, **env: str) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = batch(
        config, None, config.parent / "tickets", jobs=1, as_json=False, worker=False,
        out=out, environ={"PATH": os.environ["PATH"], "HOME": str(config.parent), **env},
        stderr=out, preflight=False, gateway_factory=lambda: ScriptedGateway([]),
    )  # fmt: skip
    return code, [line for line in untimed(out.getvalue()) if line.startswith("T-1 ")]


def blocked_line(run_id: str, decides: str = "the batch's") -> str:
    return (
        f"blocked by DRY_RUN at 'publish': DRY_RUN is armed in {decides} environment, which "
        "decides; the next `DRY_RUN=false orchestrator batch` continues it from there, or "
        f"`DRY_RUN=false orchestrator resume {run_id}` now"
    )


@pytest.mark.quick
def test_a_blocked_run_waits_while_dry_run_is_armed_and_the_first_disarmed_batch_finishes_it(
    tmp_path: Path,
) -> None:
    config = setup(tmp_path)
    code, [line] = run_batch(config)
    assert code == 3
    record = FileStorage(tmp_path / "state").runs.latest_for_ticket("T-1")
    assert record is not None and record.halt is not None
    assert (record.state, record.halt.reason) == (RunState.NEEDS_HUMAN, HaltReason.DRY_RUN_BLOCK)
    assert " needs-human " in line and line.endswith(blocked_line(record.run_id))
    assert ran(tmp_path) == {"clone": 1, "implement": 1, "publish": 0}

    # Armed again (DRY_RUN=0 is not "false"): left alone, and the line says why and what
    # continues it.
    code, [line] = run_batch(config, DRY_RUN="0")
    assert code == 0
    assert " already-needs-human " in line and line.endswith(blocked_line(record.run_id))
    assert ran(tmp_path) == {"clone": 1, "implement": 1, "publish": 0}

    # DRY_RUN=false in the batch's environment: resumed from publish, nothing else again.
    code, [line] = run_batch(config, DRY_RUN="false")
    assert code == 0
    assert " completed " in line and record.run_id in line
    assert ran(tmp_path) == {"clone": 1, "implement": 1, "publish": 1}
    done = FileStorage(tmp_path / "state").runs.load(record.run_id)
    assert done.state is RunState.COMPLETED
    assert [a.stage for a in done.attempts] == ["clone", "implement", "publish"]
    [resume] = done.resumes
    assert (resume.by, resume.from_state, resume.stage) == (
        "batch", RunState.NEEDS_HUMAN, "publish",
    )  # fmt: skip
    rows = [r for r in ledger_for(tmp_path / "state", {}).rows() if r["capability"] == "resume-run"]
    assert [(r["decision"]["by"], r["decision"]["halt"]) for r in rows] == [
        ("batch", "dry_run_block")
    ]

    # Exactly once: a later disarmed batch finds it done.
    code, [line] = run_batch(config, DRY_RUN="false")
    assert " already-completed " in line
    assert ran(tmp_path) == {"clone": 1, "implement": 1, "publish": 1}


def test_a_blocked_run_another_process_holds_is_skipped_then_resumed_once(
    tmp_path: Path,
) -> None:
    config = setup(tmp_path)
    run_batch(config)
    storage = FileStorage(tmp_path / "state")
    with storage.locks.ticket("T-1"):
        _, [line] = run_batch(config, DRY_RUN="false")
    assert " skipped " in line
    assert ran(tmp_path)["publish"] == 0
    _, [line] = run_batch(config, DRY_RUN="false")
    assert " completed " in line
    _, [line] = run_batch(config, DRY_RUN="false")
    assert " already-completed " in line
    assert ran(tmp_path) == {"clone": 1, "implement": 1, "publish": 1}


def test_on_a_fleet_the_blocked_run_is_queued_and_the_workers_environment_decides(
    tmp_path: Path,
) -> None:
    config = setup(tmp_path)
    run_batch(config)
    record = FileStorage(tmp_path / "state").runs.latest_for_ticket("T-1")
    assert record is not None
    loaded = load_config(config)
    ticket = tmp_path / "tickets" / "T-1.md"

    # The celery batch does not settle it as "already-needs-human": it queues it, since
    # only the worker knows its own DRY_RUN.
    batch_side = terminal_services(loaded, None, io.StringIO(), {"PATH": os.environ["PATH"]})
    assert _settled(ticket, batch_side, {}) == "T-1"

    # A worker with DRY_RUN armed leaves it, saying it is the worker's environment.
    armed = terminal_services(loaded, None, io.StringIO(), {"PATH": os.environ["PATH"]})
    result = run_one(ticket, armed, decides=WORKER_ENVIRONMENT)
    assert (result.status, result.ran) == ("already-needs-human", False)
    assert result.detail == blocked_line(record.run_id, "the worker's")
    assert ran(tmp_path)["publish"] == 0

    # A worker with DRY_RUN=false carries it on from the blocked stage.
    disarmed = terminal_services(
        loaded, None, io.StringIO(), {"PATH": os.environ["PATH"], "DRY_RUN": "false"}
    )
    result = run_one(ticket, disarmed, decides=WORKER_ENVIRONMENT)
    assert (result.status, result.ran) == ("completed", True)
    assert ran(tmp_path) == {"clone": 1, "implement": 1, "publish": 1}
    # Done: the celery batch now settles it without a worker.
    settled = _settled(ticket, batch_side, {})
    assert not isinstance(settled, str) and settled.status == "already-completed"
