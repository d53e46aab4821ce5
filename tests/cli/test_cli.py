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
    # The halt names what the failed program said, not only its exit code.
    assert "halt     stage_failed at check: stage 'check' exited 2: nope; see " in text
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
        f"state error: no run 'NOPE-1-20261130T000000Z-0000' under {state / 'runs'} "
        "(neither a recorded run id nor a ticket id with runs)\n"
        "state error: '../../etc/passwd' is neither a run id nor a ticket id\n"
    )


@pytest.mark.parametrize("command", ["show", "replay", "approve", "reject"])
@pytest.mark.parametrize("given", ["NOPE-1-20261130T000000Z-0000", "NOPE-1", "../../etc/passwd"])
def test_an_unknown_run_exits_7_from_every_command_that_takes_one(
    finished_runs: tuple[Path, Path], command: str, given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config, state = finished_runs
    before = sorted(p.relative_to(state) for p in state.rglob("*") if "locks" not in p.parts)
    assert main(["--config", str(config), command, given]) == 7
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("state error: ") and repr(given) in captured.err
    assert (
        sorted(p.relative_to(state) for p in state.rglob("*") if "locks" not in p.parts) == before
    )


def test_a_ticket_id_names_its_latest_run(
    finished_runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, state = finished_runs
    ticket = config.parent / "t" / "A-1.md"
    assert main(["--config", str(config), "run", "--rerun", str(ticket)]) == 4
    runs_of_a = sorted(
        (json.loads(p.read_text())["created_at"], p.stem)
        for p in (state / "runs").glob("A-1-*.json")
    )
    assert len(runs_of_a) == 2
    latest = runs_of_a[-1][1]
    capsys.readouterr()
    assert main(["--config", str(config), "show", "A-1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == latest
    assert main(["--config", str(config), "replay", "A-1"]) == 0
    assert capsys.readouterr().out == f"run {latest} made no decisions: nothing to replay\n"
    # approve resolves the same way: the refusal names the latest run, not an unknown id.
    assert main(["--config", str(config), "approve", "A-1"]) == 2
    assert capsys.readouterr().err == f"run {latest} is failed, not awaiting approval\n"
    # A full run id still names exactly that run, the older one included.
    oldest = runs_of_a[0][1]
    assert main(["--config", str(config), "show", oldest, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == oldest


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
    from orchestrator.storage.ledger import Ledger, LedgerRow, ledger_path

    ledger = Ledger(ledger_path(tmp_path))
    for n in range(3):
        ledger.append(LedgerRow(
            kind="decision", decision_id=f"d{n}", ticket="T-1", run="R", capability="c",
            inputs_hash="0" * 64, model_version="none", prompt_version="v", source="playbook",
            decision={"verdict": {"action": "retry"}},
        ))  # fmt: skip
    assert main(["--state-dir", str(tmp_path), "ledger", "verify"]) == 0
    assert capsys.readouterr().out == "OK: 3 entries\n"
    lines = ledger_path(tmp_path).read_bytes().splitlines(keepends=True)
    ledger_path(tmp_path).write_bytes(lines[0] + lines[2] + lines[1])
    assert main(["--state-dir", str(tmp_path), "ledger", "verify"]) == 7
    assert capsys.readouterr().out.startswith("FAILED at line 2: ")


@pytest.mark.parametrize(
    "argv",
    [
        ["--config", "{config}", "runs", "--json"],
        ["runs", "--config", "{config}", "--json"],
        ["runs", "--json", "--config", "{config}"],
        ["--state-dir", "{state}", "runs", "--json"],
        ["runs", "--json", "--state-dir", "{state}"],
        # Given twice, the later one counts, as with any repeated option.
        ["--state-dir", "{elsewhere}", "runs", "--state-dir", "{state}", "--json"],
    ],
)
def test_global_options_go_before_or_after_the_subcommand(
    finished_runs: tuple[Path, Path],
    tmp_path: Path,
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    config, state = finished_runs
    paths = {"config": str(config), "state": str(state), "elsewhere": str(tmp_path / "none")}
    assert main([arg.format(**paths) for arg in argv]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["ticket_id"] for r in rows] == ["A-1", "B-2"]


def test_global_options_after_nested_and_acting_subcommands(
    finished_runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, state = finished_runs
    run_id = next((state / "runs").glob("B-2-*.json")).stem
    assert main(["show", run_id, "--config", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == run_id
    assert main(["ledger", "verify", "--state-dir", str(state)]) == 0
    assert capsys.readouterr().out == "OK: 0 entries\n"
    ticket = write_ticket(config.parent / "t", "C-3")
    assert main(["run", str(ticket), "--config", str(config)]) == 4
    assert any((state / "runs").glob("C-3-*.json"))


def test_one_state_dir_resolver_for_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--state-dir '~/s'`` is $HOME/s for the commands that act (run, approve, batch)
    and for those that read (runs, show): the same directory, not ``./~/s``."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    config = write_config(tmp_path / "cfg", bash_stage("a", "exit 0"))
    ticket = write_ticket(tmp_path / "t")
    assert main(["--config", str(config), "--state-dir", "~/s", "run", str(ticket)]) == 0
    [record] = (home / "s" / "runs").glob("T-1-*.json")
    assert not (work / "~").exists()
    capsys.readouterr()
    assert main(["--config", str(config), "--state-dir", "~/s", "runs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == record.stem
    assert main(["--config", str(config), "--state-dir", "~/s", "show", "T-1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == record.stem
    batch_dir = tmp_path / "queue"
    write_ticket(batch_dir, "Q-1")
    assert (
        main(["--config", str(config), "--state-dir", "~/s", "batch", "--tickets", str(batch_dir)])
        == 0
    )
    assert any((home / "s" / "runs").glob("Q-1-*.json"))
    # A relative --state-dir is relative to the current directory, for both kinds.
    assert main(["--config", str(config), "--state-dir", "rel", "run", str(ticket)]) == 0
    capsys.readouterr()
    assert main(["--config", str(config), "--state-dir", "rel", "runs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ticket_id"] == "T-1"
    assert any((work / "rel" / "runs").glob("T-1-*.json"))


def test_resolve_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.storage.locate import resolve_state_dir, state_dir

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    cfg_dir = tmp_path / "etc"
    assert resolve_state_dir(cfg_dir, ".state", None) == cfg_dir / ".state"
    assert resolve_state_dir(cfg_dir, "~/st", None) == tmp_path / "home" / "st"
    assert resolve_state_dir(cfg_dir, "/abs/st", None) == Path("/abs/st")
    assert resolve_state_dir(cfg_dir, ".state", "x/y") == tmp_path / "x" / "y"
    assert resolve_state_dir(cfg_dir, ".state", "~/s") == tmp_path / "home" / "s"
    # The fast path (no pydantic) reads the config key the same way.
    cfg_dir.mkdir()
    (cfg_dir / "config.toml").write_text('state_dir = "~/from-config"\n')
    assert state_dir(cfg_dir / "config.toml", None) == tmp_path / "home" / "from-config"


def _closed_pipe_run(argv: list[str], tmp_path: Path) -> tuple[int, str, list[Path]]:
    """Run the CLI with stdout on a pipe whose reader has already gone."""
    import os

    crash_dir = tmp_path / "tmp"
    crash_dir.mkdir(exist_ok=True)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            orchestrator_cmd(*argv),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=subprocess_env(TMPDIR=str(crash_dir)),
            timeout=60,
        )
    finally:
        os.close(write_end)
    return proc.returncode, proc.stderr, sorted(crash_dir.iterdir())


@pytest.mark.parametrize("command", [["runs", "--json"], ["runs"], ["show", "A-1"]])
def test_a_closed_pipe_ends_quietly_with_141(
    finished_runs: tuple[Path, Path], tmp_path: Path, command: list[str]
) -> None:
    config, _ = finished_runs
    code, err, crash_files = _closed_pipe_run(["--config", str(config), *command], tmp_path)
    assert (code, err, crash_files) == (141, "", [])


def test_a_reader_that_stops_after_one_line_ends_it_quietly(
    finished_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    """``orchestrator runs --json | head -1`` with more output than a pipe holds."""
    _, state = finished_runs
    record = next((state / "runs").glob("A-1-*.json"))
    raw = json.loads(record.read_text())
    for n in range(3000):  # ~600 KB of listing: the writer must block, then meet EPIPE
        run_id = f"Z-{n}-20261130T000000Z-{n % 65536:04x}"
        (state / "runs" / f"{run_id}.json").write_text(
            json.dumps({**raw, "run_id": run_id, "ticket_id": f"Z-{n}"})
        )
    crash_dir = tmp_path / "tmp"
    crash_dir.mkdir()
    env = subprocess_env(TMPDIR=str(crash_dir))
    proc = subprocess.run(
        ["bash", "-c", 'set -o pipefail; "$@" | head -1', "-", *orchestrator_cmd(
            "--state-dir", str(state), "runs", "--json"
        )],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )  # fmt: skip
    assert proc.returncode == 141
    assert json.loads(proc.stdout)["ticket_id"] in {"A-1", "B-2"} | {f"Z-{n}" for n in range(3000)}
    assert proc.stderr == ""
    assert list(crash_dir.iterdir()) == []
