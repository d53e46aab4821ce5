"""The batch, as cron runs it: overlapping, interrupted, budgeted, with bad input. Two
batches at once, or one signalled, are fresh interpreters; a batch run to its end is a
process of its own forked from the test's (``run_forked``: as ``python -m orchestrator``
starts, without the interpreter start)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from orchestrator.cli.commands.batch import batch
from orchestrator.storage.decisions import read_verdict

from conftest import COUNTS, orchestrator_cmd, subprocess_env, untimed, write_ticket
from support.harness import SameAnswerModel
from support.scripted_cli import run_forked

pytestmark = pytest.mark.slow


def batch_of(config: Path, tickets: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``orchestrator batch`` to its end, in a process of its own forked from this one."""
    argv = ["--config", str(config), "batch", "--tickets", str(tickets)]
    return run_forked(Path.cwd(), argv, subprocess_env(**env), timeout_s=120, as_entry=True)


def counted(name: str, extra: str = "") -> str:
    return (
        f'[[stages]]\nname = "{name}"\ncwd = "run"\nwritable = ["{COUNTS}"]\n'
        f'command = ["bash", "-c", "echo x >> {COUNTS}/count-{name}-$ORCH_TICKET_ID{extra}"]\n'
    )


def setup(tmp_path: Path, stages: str, n: int = 10, header: str = "") -> tuple[Path, Path]:
    config = tmp_path / "config.toml"
    config.write_text('state_dir = "state"\n' + header + stages)
    tickets = tmp_path / "tickets"
    for i in range(n):
        write_ticket(tickets, f"T-{i:02d}")
    return config, tickets


def counts(tmp_path: Path, name: str) -> dict[str, int]:
    return {
        p.name.removeprefix(f"count-{name}-"): len(p.read_text().splitlines())
        for p in (tmp_path / "counts").glob(f"count-{name}-*")
    }


def test_two_batches_started_together_run_each_ticket_exactly_once(tmp_path: Path) -> None:
    config, tickets = setup(tmp_path, counted("a", "; sleep 0.2"))
    cmd = orchestrator_cmd(
        "--config", str(config), "batch", "--tickets", str(tickets), "--jobs", "2", "--json"
    )
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=subprocess_env())
    second = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=subprocess_env())
    outputs = [p.communicate(timeout=120)[0] for p in (first, second)]
    assert (first.returncode, second.returncode) == (0, 0), outputs
    assert counts(tmp_path, "a") == {f"T-{i:02d}": 1 for i in range(10)}
    ran = [
        row["ticket"]
        for out in outputs
        for row in map(json.loads, out.splitlines())
        if "ticket" in row and row["ran"]
    ]
    assert sorted(ran) == [f"T-{i:02d}" for i in range(10)]  # each ran in exactly one batch


def stopped_mid_batch(tmp_path: Path, *options: str) -> tuple[Path, Path, str, str]:
    """A batch of ten tickets (``options`` added) stopped by SIGTERM while T-03's stage
    ``b`` sleeps ten minutes; it must exit 130 at once. Its config, its tickets, what it
    printed and said on stderr. From then on ``b`` lets every ticket through."""
    # The stage's signals, in a directory it declares readable (it sees nothing else
    # beside the config): a FIFO it writes to, a file whose presence lets it through.
    signals = tmp_path / "signals"
    signals.mkdir()
    fifo = signals / "started"
    os.mkfifo(fifo)
    release = signals / "release"
    blocking = (
        f'[[stages]]\nname = "b"\ncwd = "run"\nkill_after_s = 1.0\nwritable = ["{COUNTS}"]\n'
        f'readable = ["{signals}"]\n'
        f'command = ["bash", "-c", "echo x >> {COUNTS}/count-b-$ORCH_TICKET_ID; '
        f'if [ ! -e {release} ] && [ $ORCH_TICKET_ID = T-03 ]; then echo go > {fifo}; exec sleep 600; fi"]\n'
    )
    config, tickets = setup(tmp_path, counted("a") + blocking)
    cmd = orchestrator_cmd("--config", str(config), "batch", "--tickets", str(tickets), *options)
    first = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env()
    )
    started: list[str] = []
    reader = threading.Thread(target=lambda: started.append(fifo.read_text()), daemon=True)
    reader.start()
    reader.join(timeout=60)
    assert started, "ticket T-03 never reached its blocking stage"
    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=60)
    assert first.returncode == 130, out + err
    release.touch()
    return config, tickets, out, err


def test_sigterm_mid_batch_then_a_second_batch_finishes_without_repeating_stages(
    tmp_path: Path,
) -> None:
    config, tickets, out, _ = stopped_mid_batch(tmp_path)
    assert "interrupted" in out

    second = batch_of(config, tickets)
    assert second.returncode == 0, second.stdout + second.stderr
    assert counts(tmp_path, "a") == {f"T-{i:02d}": 1 for i in range(10)}  # no completed stage again
    b = counts(tmp_path, "b")
    assert b.pop("T-03") == 2 and set(b.values()) == {1}  # only the interrupted stage ran twice
    assert "already-completed" in second.stdout


def test_sigterm_stops_a_batch_over_worker_processes_and_a_second_batch_finishes(
    tmp_path: Path,
) -> None:
    """``--jobs 2``: the batch's SIGTERM reaches its workers through the runner (each stops
    its stage and saves), and the batch exits 130 at once, not when a stage's ten-minute
    sleep ends; the next batch runs again only the stages the stop cut short."""
    config, tickets, out, err = stopped_mid_batch(tmp_path, "--jobs", "2")
    assert "interrupted" in out + err

    second = batch_of(config, tickets)
    assert second.returncode == 0, second.stdout + second.stderr
    ran = {(name, t): n for name in "ab" for t, n in counts(tmp_path, name).items()}
    assert set(ran) == {(name, f"T-{i:02d}") for name in "ab" for i in range(10)}
    assert ran.pop(("b", "T-03")) == 2
    # Beside it, only the stage the other worker had under way may have run again.
    again = [stage for stage, n in ran.items() if n != 1]
    assert len(again) <= 1 and all(ran[stage] == 2 for stage in again), ran


@pytest.mark.slow
@pytest.mark.quick
def test_once_the_batch_budget_is_spent_no_further_call_is_made(tmp_path: Path) -> None:
    failing = (
        '[[stages]]\nname = "clone"\ncwd = "run"\ncommand = ["git", "init", "-q", "clone"]\n'
        '[[stages]]\nname = "build"\ncommand = ["bash", "-c", "exit 1"]\n'
    )
    header = '[batch]\nmax_model_calls = 2\n[routing]\n"abandon-human" = 0.0\n'
    config, tickets = setup(tmp_path, failing, n=5, header=header)
    gateway = SameAnswerModel(
        {"action": "abandon-human", "summary": "no idea"}, input_tokens=1000, output_tokens=100
    )
    out = io.StringIO()
    code = batch(
        config, None, tickets, jobs=1, as_json=False, worker=False, out=out,
        environ={"PATH": os.environ["PATH"], "HOME": str(tmp_path)}, gateway_factory=lambda: gateway,
    )  # fmt: skip
    assert code == 3, out.getvalue()
    assert gateway.calls == 2
    reasons = sorted(
        read_verdict(p).reason for p in (tmp_path / "state" / "runs").glob("*.verdict-1.json")
    )
    assert reasons == ["model verdict", "model verdict"]  # the rest were not decided
    deferred = [line for line in out.getvalue().splitlines() if " deferred " in line]
    assert len(deferred) == 3  # they wait for the next batch's budget
    assert "model calls 2" in out.getvalue().splitlines()[-1]


def test_a_corrupt_state_file_is_reported_the_batch_goes_on_and_exits_7(tmp_path: Path) -> None:
    config, tickets = setup(tmp_path, counted("a"), n=3)
    runs = tmp_path / "state" / "runs"
    runs.mkdir(parents=True)
    corrupt = runs / "T-01-20261130T000000Z-dead.json"
    corrupt.write_text(
        '{"run_id": "T-01-20261130T000000Z-dead", "ticket_id": "T-01", "created_at": "x", "state": '
    )
    proc = batch_of(config, tickets)
    lines = untimed(proc.stdout)
    [bad] = [line for line in lines if line.startswith("T-01")]
    assert "state-error" in bad and f"state error: {corrupt}: not valid JSON" in bad
    assert proc.returncode == 7  # cron's monitoring must see that a person has to look
    assert any(line.startswith("T-00") and "completed" in line for line in lines)
    assert any(line.startswith("T-02") and "completed" in line for line in lines)
    assert counts(tmp_path, "a") == {"T-00": 1, "T-02": 1}
    assert corrupt.exists()  # left for a person; nothing else lost


def test_a_hand_edited_record_is_reported_with_its_path_and_skipped(tmp_path: Path) -> None:
    config, tickets = setup(tmp_path, counted("a"), n=2)
    first = batch_of(config, tickets)
    assert first.returncode == 0, first.stdout + first.stderr
    [record] = (tmp_path / "state" / "runs").glob("T-00-*Z-????.json")
    data = json.loads(record.read_text())
    data["state"] = "running"
    data["stages"] = "not a list"
    record.write_text(json.dumps(data))
    proc = batch_of(config, tickets)
    [line] = [line for line in untimed(proc.stdout) if line.startswith("T-00")]
    assert "state-error" in line and f"state error: {record}: not a valid run record" in line
    assert proc.returncode == 7
    assert any(
        line.startswith("T-01") and "already-completed" in line for line in untimed(proc.stdout)
    )


def test_output_when_not_a_tty_has_no_escape_codes(tmp_path: Path) -> None:
    config, tickets = setup(tmp_path, counted("a"), n=2)
    proc = batch_of(config, tickets, TERM="xterm")
    assert proc.returncode == 0
    assert "\x1b" not in proc.stdout + proc.stderr and "\r" not in proc.stdout
    assert len(proc.stdout.splitlines()) == 3  # one line per ticket, one summary
