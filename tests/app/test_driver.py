"""Driving tickets through stages made of real (small) processes."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import select
import signal
import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.app.driver import Services, run_ticket
from orchestrator.domain.config import load_config
from orchestrator.domain.errors import TicketLocked
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import AttemptStatus, StageStatus
from orchestrator.domain.tickets import load_ticket
from orchestrator.execution.process import (
    CapturedHead,
    HeadRequest,
    ProcessOutcome,
    ProcessRequest,
)
from orchestrator.execution.process_groups import live_group_members
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.storage.runs import RunStore, read_record_file, ticket_lock

from conftest import (
    COUNTS,
    bash_stage,
    orchestrator_cmd,
    subprocess_env,
    write_config,
    write_ticket,
)
from support.recording_executor import RecordingExecutor
from support.services import make_services


def services_for(
    config_path: Path, environ: dict[str, str] | None = None
) -> tuple[Services, io.StringIO]:
    loaded = load_config(config_path)
    out = io.StringIO()
    return (
        make_services(
            loaded,
            loaded.root / loaded.config.state_dir,
            out=out,
            environ=environ if environ is not None else dict(os.environ),
        ),
        out,
    )


def counting(name: str) -> str:
    """A stage body that appends one line per execution to <config dir>/counts/count-<name>."""
    return f'echo run >> "{COUNTS}/count-{name}"'


def count(state: Path, name: str) -> int:
    path = state.parent / "counts" / f"count-{name}"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_ticket_runs_all_stages_to_completed(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        bash_stage("one", counting("one") + '; echo "hello from $ORCH_STAGE attempt $ORCH_ATTEMPT"')
        + bash_stage("two", counting("two")),
    )
    ticket = load_ticket(write_ticket(tmp_path / "tickets"))
    services, out = services_for(config)
    record = run_ticket(ticket, services)

    assert record.state is RunState.COMPLETED
    assert record.halt is None
    assert [s.status for s in record.stages] == [StageStatus.COMPLETED] * 2
    assert [(a.number, a.stage, a.exit_code, a.status) for a in record.attempts] == [
        (1, "one", 0, AttemptStatus.FINISHED),
        (2, "two", 0, AttemptStatus.FINISHED),
    ]
    on_disk = services.storage.runs.load(record.run_id)
    assert on_disk == record
    log = Path(record.attempts[0].log_path or "").read_text()
    assert "hello from one attempt 1" in log
    snapshot = Path(record.ticket_snapshot)
    assert snapshot.read_text() == ticket.path.read_text()
    assert snapshot.parent == Path(record.run_dir) / "ticket"
    assert "T-1: completed" in out.getvalue()


def test_a_failing_stage_halts_with_a_typed_reason(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        bash_stage("one", "echo broken >&2; exit 3") + bash_stage("two", counting("two")),
    )
    services, _ = services_for(config)
    record = run_ticket(load_ticket(write_ticket(tmp_path / "t")), services)
    assert record.state is RunState.FAILED
    assert record.halt is not None
    assert record.halt.reason is HaltReason.STAGE_FAILED
    assert record.halt.stage == "one"
    # What the stage said comes with its exit code: the first cause, on the console.
    assert record.halt.detail.startswith("stage 'one' exited 3: broken; see ")
    assert record.stage_status("two") is StageStatus.PENDING
    assert count(tmp_path / "state", "two") == 0
    assert "broken" in Path(record.attempts[0].log_path or "").read_text()


def test_a_timed_out_stage_halts_timed_out(tmp_path: Path) -> None:
    config = write_config(tmp_path, bash_stage("slow", "sleep 30", timeout_s=0.5, kill_after_s=0.5))
    services, _ = services_for(config)
    record = run_ticket(load_ticket(write_ticket(tmp_path / "t")), services)
    attempt = record.attempts[0]
    assert (attempt.exit_code, attempt.timed_out) == (124, True)
    assert record.halt is not None and record.halt.reason is HaltReason.TIMED_OUT


def test_a_missing_executable_is_a_failed_stage_not_a_traceback(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, '[[stages]]\nname = "x"\ncommand = ["no-such-tool-xyz"]\ncwd = "run"\n'
    )
    services, _ = services_for(config)
    record = run_ticket(load_ticket(write_ticket(tmp_path / "t")), services)
    assert record.state is RunState.FAILED
    assert record.attempts[0].exit_code == 127
    assert record.halt is not None
    assert record.halt.detail.startswith("stage 'x': executable not found: no-such-tool-xyz")


def test_failed_check_records_the_failing_check(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        """
        [[stages]]
        name = "review"
        cwd = "run"
        [[stages.checks]]
        name = "only-bugs"
        command = ["bash", "-c", "exit 9"]
        kinds = ["bug-fix"]
        [[stages.checks]]
        name = "passes"
        command = ["bash", "-c", "echo fine"]
        [[stages.checks]]
        name = "fails"
        command = ["bash", "-c", "echo 'check says no'; exit 1"]
        [[stages.checks]]
        name = "never-reached"
        command = ["bash", "-c", "exit 0"]
        """,
    )
    services, _ = services_for(config)
    record = run_ticket(load_ticket(write_ticket(tmp_path / "t", kind="feature")), services)
    assert record.state is RunState.FAILED
    assert record.halt is not None and record.halt.reason is HaltReason.CHECK_FAILED
    attempt = record.attempts[0]
    assert [(c.name, c.skipped, c.exit_code) for c in attempt.checks] == [
        ("only-bugs", True, None),
        ("passes", False, 0),
        ("fails", False, 1),
    ]
    failing = attempt.failing_check
    assert failing is not None
    assert (failing.name, failing.command, failing.exit_code) == (
        "fails",
        ("bash", "-c", "echo 'check says no'; exit 1"),
        1,
    )
    assert "check says no" in Path(failing.log_path or "").read_text()
    assert record.halt.detail.startswith("check 'fails' exited 1: check says no; see ")


def test_side_effectful_stage_is_blocked_while_dry_run_is_armed(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        bash_stage("build", counting("build"))
        + bash_stage("push", counting("push"), side_effectful=True),
    )
    ticket = load_ticket(write_ticket(tmp_path / "t"))
    services, _ = services_for(config, environ={"PATH": os.environ["PATH"], "DRY_RUN": "0"})
    record = run_ticket(ticket, services)
    assert record.state is RunState.NEEDS_HUMAN
    assert record.halt is not None and record.halt.reason is HaltReason.DRY_RUN_BLOCK
    assert record.halt.detail == (
        "stage 'push' is side-effectful and DRY_RUN is armed in the environment that ran "
        "it; the next `DRY_RUN=false orchestrator batch` continues it from there, or "
        f"`DRY_RUN=false orchestrator resume {record.run_id}` now"
    )
    assert record.stage_status("push") is StageStatus.BLOCKED
    assert count(tmp_path / "state", "push") == 0

    services, _ = services_for(config, environ={"PATH": os.environ["PATH"], "DRY_RUN": "FALSE"})
    record = run_ticket(ticket, services)
    assert record.state is RunState.COMPLETED
    assert count(tmp_path / "state", "push") == 1


def test_a_completed_ticket_is_not_run_again_unless_asked(tmp_path: Path) -> None:
    config = write_config(tmp_path, bash_stage("one", counting("one")))
    ticket = load_ticket(write_ticket(tmp_path / "t"))
    services, out = services_for(config)
    first = run_ticket(ticket, services)
    again = run_ticket(ticket, services)
    assert again.run_id == first.run_id
    assert count(tmp_path / "state", "one") == 1
    assert "already completed" in out.getvalue()
    rerun = run_ticket(ticket, services, rerun=True)
    assert rerun.run_id != first.run_id and rerun.state is RunState.COMPLETED
    assert count(tmp_path / "state", "one") == 2


def test_a_held_ticket_lock_refuses_a_second_driver(tmp_path: Path) -> None:
    config = write_config(tmp_path, bash_stage("one", counting("one")))
    ticket = load_ticket(write_ticket(tmp_path / "t"))
    services, _ = services_for(config)
    with ticket_lock(services.storage.runs.state_dir, ticket.id):
        # flock is per open file description: a second open in this process conflicts too.
        with pytest.raises(TicketLocked, match=f"skipped: T-1 is locked by pid {os.getpid()}"):
            run_ticket(ticket, services)
    assert count(tmp_path / "state", "one") == 0


def test_resume_refuses_when_the_configured_stages_changed(tmp_path: Path) -> None:
    config = write_config(tmp_path, bash_stage("one", "exit 0") + bash_stage("two", "exit 0"))
    ticket = load_ticket(write_ticket(tmp_path / "t"))
    services, _ = services_for(config)
    record = services.storage.runs.load(run_ticket(ticket, services).run_id)
    # Fake an unfinished run, then change the pipeline under it.
    services.storage.runs.save(record.model_copy(update={"state": RunState.RUNNING}))
    write_config(tmp_path, bash_stage("one", "exit 0"))
    services, _ = services_for(config)
    from orchestrator.domain.errors import StateError

    with pytest.raises(StateError, match=r"was started with stages \['one', 'two'\]"):
        run_ticket(ticket, services)


@pytest.mark.slow
def test_sigkill_mid_stage_leaves_a_resumable_run(tmp_path: Path) -> None:
    """Kill -9 the orchestrator while stage two runs: the record still parses, nothing is
    marked completed that did not complete, and a second run finishes the ticket without
    re-running stage one. The stage itself does not outlive the orchestrator: its reaper
    saw the orchestrator die and took everything the stage started down with it."""
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    release = tmp_path / "release"
    blocking = (
        counting("two") + f'; if [ ! -e "{release}" ]; then echo $$ > "{fifo}"; exec sleep 60; fi'
    )
    config = write_config(
        tmp_path,
        bash_stage("one", counting("one"))
        # Outside the sandbox: the test watches the stage by the pid it writes, which
        # must be the host's (the reaper's containment is the same either way).
        + bash_stage("two", blocking, sandbox="none")
        + bash_stage("three", counting("three")),
    )
    ticket = write_ticket(tmp_path / "t")
    cmd = orchestrator_cmd("--config", str(config), "run", str(ticket))
    orchestrator = subprocess.Popen(cmd, env=subprocess_env(), stdout=subprocess.DEVNULL)

    started: list[str] = []
    reader = threading.Thread(target=lambda: started.append(fifo.read_text()), daemon=True)
    reader.start()
    reader.join(timeout=60)
    assert started, "stage two never started"
    stage_pid = int(started[0])

    os.kill(orchestrator.pid, signal.SIGKILL)
    assert orchestrator.wait(timeout=30) == -signal.SIGKILL

    [record_path] = (tmp_path / "state" / "runs").glob("*.json")
    record = read_record_file(record_path)  # parses: written atomically
    assert record.state is RunState.RUNNING
    assert [s.status for s in record.stages] == [
        StageStatus.COMPLETED,
        StageStatus.RUNNING,
        StageStatus.PENDING,
    ]
    assert record.attempts[-1].status is AttemptStatus.RUNNING
    # (Its pgid may or may not have been saved yet: the kill can land in between.)
    try:
        stage_fd = os.pidfd_open(stage_pid)  # becomes readable when the stage has exited
    except ProcessLookupError:
        pass  # already gone and reaped
    else:
        try:
            assert select.select([stage_fd], [], [], 30)[0], "the stage outlived the orchestrator"
        finally:
            os.close(stage_fd)

    release.touch()
    proc = subprocess.run(cmd, env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"resuming run {record.run_id}" in proc.stdout
    assert "left by a dead run" not in proc.stdout  # there was nothing left to kill
    assert live_group_members(stage_pid) == []

    final = read_record_file(record_path)
    assert final.run_id == record.run_id and final.state is RunState.COMPLETED
    assert [(a.stage, a.status) for a in final.attempts] == [
        ("one", AttemptStatus.FINISHED),
        ("two", AttemptStatus.INTERRUPTED),
        ("two", AttemptStatus.FINISHED),
        ("three", AttemptStatus.FINISHED),
    ]
    state = tmp_path / "state"
    assert (count(state, "one"), count(state, "two"), count(state, "three")) == (1, 2, 1)


@pytest.mark.slow
def test_sigterm_stops_the_stage_saves_state_and_exits_130(tmp_path: Path) -> None:
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    config = write_config(
        tmp_path,
        bash_stage(
            "wait",
            f'echo $$ > "{fifo}"; trap "" TERM; sleep 60 & wait',
            kill_after_s=0.5,
            sandbox="none",  # its pid must be the host's: the test watches its group by it
        ),
    )
    ticket = write_ticket(tmp_path / "t")
    orchestrator = subprocess.Popen(
        orchestrator_cmd("--config", str(config), "run", str(ticket)),
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    stage_pid = int(fifo.read_text())
    orchestrator.send_signal(signal.SIGTERM)
    _, err = orchestrator.communicate(timeout=30)
    assert orchestrator.returncode == 130
    assert "interrupted: state saved" in err
    assert live_group_members(stage_pid) == []
    [record_path] = (tmp_path / "state" / "runs").glob("*.json")
    record = json.loads(record_path.read_text())
    assert record["state"] == "running"
    assert record["attempts"][0]["status"] == "interrupted"
    assert record["stages"][0]["status"] == "pending"


def test_secrets_reach_only_the_stages_that_name_them(tmp_path: Path) -> None:
    """An allow-list (issue 40): a variable reaches a stage only when it is in the base
    or the stage names it, whatever its name looks like."""
    dump = (
        'env | grep -E "^(ANTHROPIC_API_KEY|GITHUB_TOKEN|SSH_AUTH_SOCK|SLACK_WEBHOOK_URL|LANG)=" '
        f'| sort > "{COUNTS}/env-$ORCH_STAGE"'
    )
    config = write_config(
        tmp_path,
        bash_stage("tests", dump) + bash_stage("push", dump, pass_env=["GITHUB_TOKEN"]),
    )
    environ = {
        "PATH": os.environ["PATH"],
        "ANTHROPIC_API_KEY": "sk-ant-secret",
        "GITHUB_TOKEN": "ghp_secret",
        "SSH_AUTH_SOCK": "/tmp/agent.sock",
        "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/x",
        "LANG": "C.UTF-8",
    }
    services, _ = services_for(config, environ=environ)
    assert (
        run_ticket(load_ticket(write_ticket(tmp_path / "t")), services).state is RunState.COMPLETED
    )
    counts = tmp_path / "counts"
    assert (counts / "env-tests").read_text() == "LANG=C.UTF-8\n"
    assert (counts / "env-push").read_text() == "GITHUB_TOKEN=ghp_secret\nLANG=C.UTF-8\n"


@pytest.mark.slow
def test_sigterm_during_an_infra_back_off_stops_at_once(tmp_path: Path) -> None:
    """The back-off is the driver's wait, after the decision and its charge are saved:
    SIGTERM ends it promptly, and the run stays resumable."""
    from support.harness import CLAUDE, FAKES, Harness, make_origin, write_pipeline

    make_origin(tmp_path)
    config = write_pipeline(tmp_path, CLAUDE, recovery="infra_backoff_s = 3600.0\n")
    ticket = write_ticket(tmp_path / "t")
    env = subprocess_env(
        PATH=f"{FAKES}:{os.environ['PATH']}", HOME=str(tmp_path), DRY_RUN="false",
        FAKE_ENGINE_MODE="rate_limited", PYTHONUNBUFFERED="1",
    )  # fmt: skip
    orchestrator = subprocess.Popen(
        orchestrator_cmd("--config", str(config), "run", str(ticket)),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert orchestrator.stdout is not None
    # Reading the progress lines as they come: this waits for the back-off to begin.
    waiting = next(line for line in orchestrator.stdout if "before the retry" in line)
    assert "waiting 600s before the retry" in waiting  # the doubling back-off's cap
    started = time.monotonic()
    orchestrator.send_signal(signal.SIGTERM)
    _, err = orchestrator.communicate(timeout=30)
    assert "interrupted: state saved" in err
    assert orchestrator.returncode == 130, err
    assert time.monotonic() - started < 30  # not the 600 s it was waiting for
    record = RunStore(tmp_path / "state").latest_for_ticket("T-1")
    assert record is not None and record.state is RunState.RUNNING
    assert [(v.source, v.outcome) for v in record.verdicts] == [
        ("infra", "retry: re-running implement")
    ]
    budget = json.loads((tmp_path / "state" / "tickets" / "T-1.json").read_text())
    assert [c["kind"] for c in budget["charges"]] == ["infra-retry"]

    # Run again 100 s after the charge: the timer is on disk, so it waits what is left.
    charged_at = datetime.fromisoformat(budget["charges"][0]["at"])
    h = Harness(config, ScriptedGateway([]), environ=env)
    h.services = dataclasses.replace(h.services, clock=lambda: charged_at + timedelta(seconds=100))
    record = h.run(ticket)
    assert h.slept == [500.0, 600.0, 600.0]  # the rest of the first; then the next two
    # A rate limit is the world's: the back-off used up, the run waits (issue 43).
    assert record.state is RunState.WAITING_INFRA and record.halt is not None
    assert record.halt.reason is HaltReason.INFRA_UNAVAILABLE


class _RefusingExecutor:
    """Starts nothing: every process is answered as one that could not be started."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, ...]] = []

    def run(self, request: ProcessRequest) -> ProcessOutcome:
        self.asked.append(request.argv)
        now = datetime.now(UTC)
        log = request.log_path
        log.parent.mkdir(parents=True, exist_ok=True)
        return ProcessOutcome(
            argv=request.argv, exit_code=126, timed_out=False, signal=None, started_at=now,
            ended_at=now, duration_s=0.0, log_path=log, error="refused by this executor",
        )  # fmt: skip

    def capture_head(self, request: HeadRequest) -> CapturedHead:
        self.asked.append(request.argv)
        return CapturedHead(b"", False, None, error="refused by this executor")


def test_every_stage_and_check_starts_through_the_services_executor(tmp_path: Path) -> None:
    """Swapping the executor swaps every process start: nothing runs behind its back.
    Outside the sandbox, so that the executor sees the commands themselves (a sandboxed
    stage's executor wraps this same one: tests/domain/test_sandbox_config.py)."""
    config = write_config(
        tmp_path,
        bash_stage("one", "echo run >> $ORCH_STATE_DIR/count-one", sandbox="none")
        + '[[stages]]\nname = "review"\ncwd = "run"\nsandbox = "none"\n'
        + '[[stages.checks]]\nname = "c"\ncommand = ["bash", "-c", "touch $ORCH_STATE_DIR/checked"]\n',
    )
    ticket = load_ticket(write_ticket(tmp_path / "tickets"))
    services, _ = services_for(config)
    refusing = _RefusingExecutor()
    record = run_ticket(ticket, dataclasses.replace(services, executor=refusing))
    assert refusing.asked == [("bash", "-c", "echo run >> $ORCH_STATE_DIR/count-one")]
    assert not (tmp_path / "state" / "count-one").exists()
    assert record.state is RunState.FAILED and record.attempts[0].exit_code == 126
    assert record.attempts[0].error == "refused by this executor"
    # The same pipeline with a recording executor runs everything, and shows it all.
    recording = RecordingExecutor()
    services, _ = services_for(config)
    record = run_ticket(ticket, dataclasses.replace(services, executor=recording), rerun=True)
    assert record.state is RunState.COMPLETED
    assert recording.ran == [
        ("bash", "-c", "echo run >> $ORCH_STATE_DIR/count-one"),
        ("bash", "-c", "touch $ORCH_STATE_DIR/checked"),
    ]
    assert (tmp_path / "state" / "checked").exists()
    assert (tmp_path / "state" / "count-one").read_text() == "run\n"
