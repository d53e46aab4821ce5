from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest

from orchestrator.cli.commands.runs import humanize_age, runs
from orchestrator.cli.main import main

from conftest import bash_stage, orchestrator_cmd, subprocess_env, write_config, write_ticket


@pytest.fixture
def finished_runs(tmp_path: Path) -> tuple[Path, Path]:
    config = write_config(
        tmp_path, bash_stage("build", "echo built") + bash_stage("check", "echo nope; exit 2")
    )
    for ticket_id in ("A-1", "B-2"):
        ticket = write_ticket(tmp_path / "t", ticket_id)
        assert main(["--config", str(config), "run", str(ticket)]) == 4
    return config, tmp_path / "state"


def test_exit_codes_for_completed_failed_and_usage(tmp_path: Path) -> None:
    ok = write_config(tmp_path / "ok", bash_stage("a", "exit 0"))
    bad = write_config(tmp_path / "bad", bash_stage("a", "exit 1"))
    ticket = write_ticket(tmp_path / "t")
    assert main(["--config", str(ok), "run", str(ticket)]) == 0
    assert main(["--config", str(bad), "run", str(ticket)]) == 4
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2


def test_dry_run_block_exits_needs_human(tmp_path: Path) -> None:
    config = write_config(tmp_path, bash_stage("push", "exit 0", side_effectful=True))
    ticket = write_ticket(tmp_path / "t")
    assert main(["--config", str(config), "run", str(ticket)]) == 3


def test_runs_lists_one_line_per_run(finished_runs: tuple[Path, Path]) -> None:
    _, state = finished_runs
    out = io.StringIO()
    assert runs(state, out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["RUN", "TICKET", "STATE", "STAGE", "AGE"]
    assert [line.split()[1:4] for line in lines[1:]] == [
        ["A-1", "failed", "check"],
        ["B-2", "failed", "check"],
    ]
    assert all(line.split()[0].startswith(line.split()[1] + "-") for line in lines[1:])


def test_runs_reports_a_corrupt_record_and_lists_the_rest(finished_runs: tuple[Path, Path]) -> None:
    _, state = finished_runs
    broken = state / "runs" / "Z-9-20261130T000000Z-dead.json"
    broken.write_text('{"run_id": ')
    out, err = io.StringIO(), io.StringIO()
    assert runs(state, out, errors=err) == 0
    assert len(out.getvalue().splitlines()) == 3
    assert err.getvalue().startswith(f"warning: {broken}: unreadable run record:")


def test_runs_json_is_one_object_per_line(finished_runs: tuple[Path, Path]) -> None:
    _, state = finished_runs
    out = io.StringIO()
    runs(state, out, as_json=True)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["ticket_id"], r["state"]) for r in rows] == [("A-1", "failed"), ("B-2", "failed")]


def test_show_prints_stages_attempts_halt_and_paths(finished_runs: tuple[Path, Path]) -> None:
    config, state = finished_runs
    run_id = next((state / "runs").glob("A-1-*.json")).stem
    proc = subprocess.run(
        orchestrator_cmd("--config", str(config), "show", run_id),
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert f"run      {run_id}" in text
    assert "state    failed at check" in text
    assert "halt     stage_failed at check: stage 'check' exited 2; see " in text
    assert "stages   build=completed  check=failed" in text
    assert "#1 build [finished]" in text and "exit 0 in" in text
    assert "#2 check [finished]" in text and "exit 2 in" in text
    assert f"log: {state / 'runs' / run_id / 'logs' / '002-check.log'}" in text


def test_show_unknown_run_is_a_clear_error(finished_runs: tuple[Path, Path]) -> None:
    config, state = finished_runs
    err = io.StringIO()
    import contextlib

    with contextlib.redirect_stderr(err):
        code = main(["--config", str(config), "show", "NOPE-1-20261130T000000Z-0000"])
        bad_id = main(["--config", str(config), "show", "../../etc/passwd"])
    assert (code, bad_id) == (7, 7)
    assert err.getvalue() == (
        f"state error: {state / 'runs' / 'NOPE-1-20261130T000000Z-0000.json'}: no such run record\n"
        "state error: '../../etc/passwd' is not a run id\n"
    )


def test_show_reports_a_hand_edited_record(finished_runs: tuple[Path, Path]) -> None:
    config, state = finished_runs
    path = next((state / "runs").glob("A-1-*.json"))
    record = json.loads(path.read_text())
    record["state"] = "exploded"
    path.write_text(json.dumps(record))
    proc = subprocess.run(
        orchestrator_cmd("--config", str(config), "show", path.stem),
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
    )
    assert proc.returncode == 7
    assert proc.stderr.startswith(
        f"state error: {path}: not a valid run record: state: Input should be"
    )
    assert "Traceback" not in proc.stderr


def test_plain_output_when_not_a_tty_has_no_escape_codes(tmp_path: Path) -> None:
    config = write_config(tmp_path, bash_stage("a", "sleep 1.2") + bash_stage("b", "exit 1"))
    ticket = write_ticket(tmp_path / "t")
    proc = subprocess.run(
        orchestrator_cmd("--config", str(config), "run", str(ticket)),
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
    )
    assert proc.returncode == 4
    assert "\x1b" not in proc.stdout and "\r" not in proc.stdout
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("T-1: run T-1-") and lines[0].endswith(" started")
    assert lines[1:5] == [
        "  a: started (attempt 1)",
        lines[2],
        "  b: started (attempt 2)",
        lines[4],
    ]
    assert lines[2].startswith("  a: exit 0 in 1.")
    assert lines[4].startswith("  b: exit 1 in ")
    assert lines[5].startswith("T-1: failed (run T-1-")


def test_humanize_age() -> None:
    assert [humanize_age(s) for s in (0, 59, 119, 120, 7199, 7200, 172799, 172800)] == [
        "0s",
        "59s",
        "119s",
        "2m",
        "119m",
        "2h",
        "47h",
        "2d",
    ]


def test_on_a_terminal_the_running_stage_and_its_time_are_shown(tmp_path: Path) -> None:
    """Run the real CLI with stdout on a pseudo-terminal: the status line is redrawn
    in place while the stage runs, and NO_COLOR keeps colour codes out."""
    import os
    import pty

    config = write_config(tmp_path, bash_stage("slowish", "sleep 1.5"))
    ticket = write_ticket(tmp_path / "t")
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        orchestrator_cmd("--config", str(config), "run", str(ticket)),
        stdout=secondary,
        stderr=secondary,
        env=subprocess_env(TERM="xterm", NO_COLOR="1"),
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    assert proc.wait(timeout=30) == 0
    screen = b"".join(chunks).decode()
    assert "\r\x1b[2K  … slowish running for 1s" in screen
    assert "\x1b[32m" not in screen  # NO_COLOR
    assert "slowish: ok exit 0 in 1." in screen


def test_ledger_commands_are_wired(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from orchestrator.storage.ledger import Ledger, ledger_path

    ledger = Ledger(ledger_path(tmp_path))
    for n in range(3):
        ledger.append(
            kind="decision", decision_id=f"d{n}", ticket="T-1", run="R", capability="c",
            inputs_hash="0" * 64, model_version="none", prompt_version="v", source="playbook",
            decision={"verdict": {"action": "retry"}},
        )  # fmt: skip
    assert main(["--state-dir", str(tmp_path), "ledger", "verify"]) == 0
    assert capsys.readouterr().out == "OK: 3 entries\n"
    lines = ledger_path(tmp_path).read_bytes().splitlines(keepends=True)
    ledger_path(tmp_path).write_bytes(lines[0] + lines[2] + lines[1])
    assert main(["--state-dir", str(tmp_path), "ledger", "verify"]) == 7
    assert capsys.readouterr().out.startswith("FAILED at line 2: ")
