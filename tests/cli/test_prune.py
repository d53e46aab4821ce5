"""``orchestrator prune``: the clones and logs of finished runs go; what says what was
decided stays, and ``show``, ``verdicts`` and ``replay`` still read a pruned run. Real
runs (a real clone of a real origin, real stage processes), the real CLI."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.cli.arguments import parse_duration
from orchestrator.cli.commands.prune import prune
from orchestrator.domain.errors import UsageError
from orchestrator.storage.runs import read_record_file, ticket_lock

from conftest import bash_stage, orchestrator_cmd, subprocess_env, write_ticket
from support.cli_here import cli_here
from support.harness import make_origin, write_pipeline

pytestmark = pytest.mark.slow


def cli(config: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI in this process (``support.cli_here``): what these tests read is what it
    prints and leaves on disk. The one run the fixture kills has a process of its own."""
    return cli_here(["--config", str(config), *args], subprocess_env(**env))


def record_of(state: Path, ticket_id: str) -> Path:
    [path] = (state / "runs").glob(f"{ticket_id}-*Z-????.json")
    return path


def kept_files(state: Path) -> dict[str, str]:
    """Every file retention must keep, by its path under the state dir, with its digest."""
    found = {}
    for path in sorted(state.rglob("*")):
        rel = path.relative_to(state)
        if not path.is_file() or rel.parts[0] == "locks":
            continue
        if len(rel.parts) > 2 and rel.parts[0] == "runs" and rel.parts[2] in ("clone", "logs"):
            continue
        found[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@pytest.fixture
def finished_and_live(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """Three tickets through a real clone: T-ok completes, T-bad fails and is decided
    (synthetic abandon-human, no model: a verdict, a bundle and a hand-off), and T-live's
    orchestrator was SIGKILLed mid-stage (its run stays ``running``)."""
    make_origin(tmp_path)
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    script = (
        'if [ "$ORCH_TICKET_ID" = T-live ]; then echo $$ > ' + str(fifo) + "; exec sleep 60; fi; "
        'echo building; if [ "$ORCH_TICKET_ID" = T-bad ]; then echo "error: it broke" >&2; exit 1; fi'
    )
    # Outside the sandbox: the pid it writes must be the host's (inside, its own PID
    # namespace numbers it 2, and the test ends the stage's group by that number).
    config = write_pipeline(tmp_path, bash_stage("build", script, sandbox="none"))
    tickets = tmp_path / "t"
    for ticket_id in ("T-ok", "T-bad", "T-live"):
        write_ticket(tickets, ticket_id)
    assert cli(config, "run", str(tickets / "T-ok.md")).returncode == 0
    assert cli(config, "run", str(tickets / "T-bad.md")).returncode == 3

    live = subprocess.Popen(
        orchestrator_cmd("--config", str(config), "run", str(tickets / "T-live.md")),
        env=subprocess_env(), stdout=subprocess.DEVNULL,
    )  # fmt: skip
    started: list[str] = []
    reader = threading.Thread(target=lambda: started.append(fifo.read_text()), daemon=True)
    reader.start()
    reader.join(timeout=60)
    assert started, "T-live's stage never started"
    os.kill(live.pid, signal.SIGKILL)
    live.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(os.getpgid(int(started[0])), signal.SIGKILL)
    yield config, tmp_path / "state"


def test_prune_frees_clones_and_logs_of_finished_runs_and_keeps_what_was_decided(
    finished_and_live: tuple[Path, Path],
) -> None:
    config, state = finished_and_live
    runs = state / "runs"
    ok, bad, live = (record_of(state, t).stem for t in ("T-ok", "T-bad", "T-live"))
    for run_id in (ok, bad, live):
        assert (runs / run_id / "clone" / ".git").is_dir() and (runs / run_id / "logs").is_dir()
    kept = kept_files(state)
    assert f"runs/{bad}.verdict-1.json" in kept and f"runs/{bad}.bundle-1.json" in kept
    assert f"runs/{bad}.handoff.md" in kept and "ledger.jsonl" in kept

    dry = cli(config, "prune", "--older-than", "0s", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert (runs / ok / "clone").is_dir() and (runs / bad / "logs").is_dir()  # nothing removed
    assert f"would free {ok}: clone, logs (" in dry.stdout
    # T-bad stopped for a person and `resume` could go on with it: kept by default
    # (tests/cli/test_prune_keeps_waiting.py); --also-resumable frees it below.
    assert (
        f"kept {bad}: needs-human (no_model) and resumable; `orchestrator resume {bad}` "
        "goes on in its clone\n"
    ) in dry.stdout
    assert f"kept {live}: running, not finished; the next batch goes on in its clone\n" in (
        dry.stdout
    )

    done = cli(config, "prune", "--older-than", "0s", "--also-resumable")

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sorted(line.split(":")[0] for line in lines[:-1]) == sorted(
        [f"freed {ok}", f"freed {bad}", f"kept {live}"]
    )
    summary = re.fullmatch(
        r"prune: freed 2 run\(s\) older than 0s, (\d+) bytes \(.*\); kept records, verdicts, "
        r"bundles, approvals, replies, hand-offs, the clones of 1 run\(s\) still waiting and "
        r"the ledger",
        lines[-1],
    )
    assert summary is not None and int(summary.group(1)) > 10_000  # two clones' worth
    for run_id in (ok, bad):
        assert not (runs / run_id / "clone").exists() and not (runs / run_id / "logs").exists()
    # The run still going is never touched, old or not.
    assert (runs / live / "clone" / ".git").is_dir() and (runs / live / "logs").is_dir()
    # Everything that says what was decided is byte for byte what it was.
    after = kept_files(state)
    assert {k: v for k, v in after.items() if not k.endswith("pruned.json")} == kept
    assert sorted(k for k in after if k.endswith("pruned.json")) == sorted(
        [f"runs/{ok}/pruned.json", f"runs/{bad}/pruned.json"]
    )

    # The cause outlives the log: the hand-off (kept) carries the failed stage's last words.
    assert "    error: it broke" in (runs / f"{bad}.handoff.md").read_text().splitlines()

    shown = cli(config, "show", bad)
    assert shown.returncode == 0, shown.stderr
    assert "log pruned on " in shown.stdout and "(orchestrator prune)" in shown.stdout
    assert re.search(r"^pruned   clone, logs on \S+Z \(orchestrator prune\)$", shown.stdout, re.M)
    verdicts = cli(config, "verdicts")
    assert verdicts.returncode == 0 and bad in verdicts.stdout
    replayed = cli(config, "replay", bad)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "verdict 1: identical" in replayed.stdout

    again = cli(config, "prune", "--older-than", "0s", "--also-resumable")
    assert again.stdout.splitlines() == [
        f"kept {live}: running, not finished; the next batch goes on in its clone",
        "prune: freed 0 run(s) older than 0s, 0 bytes (0 B); kept records, verdicts, "
        "bundles, approvals, replies, hand-offs, the clones of 1 run(s) still waiting and "
        "the ledger",
    ]


def test_prune_leaves_young_runs_and_runs_whose_ticket_is_locked(
    finished_and_live: tuple[Path, Path],
) -> None:
    _, state = finished_and_live
    runs = state / "runs"
    ok, bad = (record_of(state, t).stem for t in ("T-ok", "T-bad"))
    finished = read_record_file(runs / f"{bad}.json").updated_at

    out = io.StringIO()
    assert prune(state, "1d", out, dry_run=False, clock=lambda: finished + timedelta(hours=23)) == 0
    assert out.getvalue().startswith("prune: freed 0 run(s) older than 1d")
    assert (runs / ok / "clone").is_dir() and (runs / bad / "clone").is_dir()

    out = io.StringIO()
    with ticket_lock(state, "T-bad"):
        code = prune(
            state, "1d", out, dry_run=False, also_resumable=True,
            clock=lambda: finished + timedelta(days=2),
        )  # fmt: skip
    assert code == 0
    assert f"skipped {bad}: T-bad is locked by pid {os.getpid()}\n" in out.getvalue()
    assert (runs / bad / "clone").is_dir() and (runs / bad / "logs").is_dir()
    assert not (runs / ok / "clone").exists()


def test_a_stage_that_left_read_only_directories_is_pruned_all_the_same(
    finished_and_live: tuple[Path, Path],
) -> None:
    _, state = finished_and_live
    ok = record_of(state, "T-ok").stem
    locked_in = state / "runs" / ok / "clone" / "ro" / "deeper"
    locked_in.mkdir(parents=True)
    (locked_in / "f").write_text("x")
    locked_in.chmod(0o500)
    locked_in.parent.chmod(0o500)
    out = io.StringIO()
    assert prune(state, "0s", out, dry_run=False) == 0
    assert not (state / "runs" / ok / "clone").exists()


def test_an_unreadable_run_record_is_named_and_left_and_the_rest_is_pruned(
    finished_and_live: tuple[Path, Path],
) -> None:
    config, state = finished_and_live
    broken = state / "runs" / "Z-1-20260101T000000Z-dead.json"
    broken.write_text('{"run_id": ')
    done = cli(config, "prune", "--older-than", "0s")
    assert done.returncode == 7, done.stdout
    assert (
        f"skipped Z-1-20260101T000000Z-dead: state error: {broken}: not a valid run record"
        in done.stdout
    )
    # T-ok is freed; T-bad (resumable) and T-live (not finished) keep their clones.
    assert broken.exists() and "freed 1 run(s)" in done.stdout
    assert "the clones of 2 run(s) still waiting" in done.stdout


@pytest.mark.parametrize("bad", ["30", "30x", "-1d", "d", "1.5d", ""])
def test_a_bad_duration_is_a_usage_error(tmp_path: Path, bad: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_duration(bad)
    assert str(info.value) == (
        f"prune: --older-than: {bad!r} is not a duration; give a whole number and a unit: "
        "s, m, h, d or w (e.g. 30d, 12h)"
    )
    config = tmp_path / "config.toml"
    config.write_text('state_dir = "state"\n')
    proc = cli(config, "prune", f"--older-than={bad}")
    assert proc.returncode == 2 and proc.stderr == str(info.value) + "\n"
    assert not (tmp_path / "state").exists()


def test_durations() -> None:
    assert parse_duration("30d") == timedelta(days=30)
    assert parse_duration("12h") == timedelta(hours=12)
    assert parse_duration("90m") == timedelta(minutes=90)
    assert parse_duration("2w") == timedelta(weeks=2)
    assert parse_duration("0s") == timedelta(0)
    assert datetime.now(UTC) - parse_duration("1d") < datetime.now(UTC)


def test_show_tells_a_log_lost_otherwise_from_a_pruned_one(
    finished_and_live: tuple[Path, Path],
) -> None:
    config, state = finished_and_live
    bad = record_of(state, "T-bad").stem
    [log] = (state / "runs" / bad / "logs").glob("*-build.log")
    log.unlink()
    shown = cli(config, "show", bad)
    assert shown.returncode == 0, shown.stderr
    assert f"      log missing: {log}" in shown.stdout.splitlines()
    assert "pruned" not in shown.stdout


def test_prune_frees_an_old_batchs_worker_logs_and_the_report_still_reads_it(
    tmp_path: Path,
) -> None:
    make_origin(tmp_path)
    config = write_pipeline(tmp_path, bash_stage("build", "echo building"))
    tickets = tmp_path / "t"
    for ticket_id in ("T-1", "T-2"):
        write_ticket(tickets, ticket_id)
    done = cli(config, "batch", "--tickets", str(tickets), "--jobs", "2", "--json")
    assert done.returncode == 0, done.stderr
    batches = tmp_path / "state" / "batches"
    [batch] = [p for p in batches.iterdir()]
    logs = sorted(p.name for p in batch.glob("worker-*.log"))
    assert logs == ["worker-1.log", "worker-2.log"]
    rest = sorted(p.name for p in batch.iterdir() if p.name not in logs)
    assert "batch.json" in rest
    # A batch from before batch records: its worker logs are the only trace of its runs.
    older = batches / "20200101T000000Z-0000"
    shutil.copytree(batch, older)
    (older / "batch.json").unlink()
    ended = max(p.stat().st_mtime for p in batch.iterdir())
    now = datetime.fromtimestamp(ended, UTC)

    out = io.StringIO()
    assert prune(tmp_path / "state", "1h", out, dry_run=False, clock=lambda: now) == 0
    assert "batch" not in out.getvalue()  # young: untouched
    out = io.StringIO()
    later = now + timedelta(hours=2)
    assert prune(tmp_path / "state", "1h", out, dry_run=True, clock=lambda: later) == 0
    assert f"would free batch {batch.name}: worker-1.log, worker-2.log (" in out.getvalue()
    assert sorted(p.name for p in batch.glob("worker-*.log")) == logs

    out = io.StringIO()
    assert prune(tmp_path / "state", "1h", out, dry_run=False, clock=lambda: later) == 0
    lines = out.getvalue().splitlines()
    assert f"freed batch {batch.name}: worker-1.log, worker-2.log (" in out.getvalue()
    assert lines[-1].startswith("prune: freed 2 run(s) and the worker logs of 1 batch(es)")
    assert sorted(p.name for p in batch.iterdir()) == rest
    assert sorted(p.name for p in older.glob("worker-*.log")) == logs  # no record: kept

    page = tmp_path / "page.html"
    shown = cli(config, "report", "--batch", batch.name, "--out", str(page))
    assert shown.returncode == 0, shown.stderr
    assert "report: 2 run(s)" in shown.stdout and "T-1" in page.read_text()


@pytest.mark.quick
def test_prune_removes_old_base_checks_and_keeps_young_ones(tmp_path: Path) -> None:
    """The base checks are a cache (``base_checks/``): old results and logs go, young
    ones stay; a later ticket on a pruned base checks it again."""
    state = tmp_path / "state"
    commit = state / "base_checks" / "repo-1234" / ("a" * 40)
    commit.mkdir(parents=True)
    old = [commit / "tests-0123456789abcdef.json", commit / "tests-0123456789abcdef.log"]
    young = commit / "lint-fedcba9876543210.json"
    for path in (*old, young):
        path.write_text("x" * 100)
    now = datetime.now(UTC)
    for path in old:
        stamp = (now - timedelta(days=40)).timestamp()
        os.utime(path, (stamp, stamp))
    out = io.StringIO()
    assert prune(state, "30d", out, dry_run=True, clock=lambda: now) == 0
    assert "would free 2 base-check file(s)" in out.getvalue()
    assert all(p.exists() for p in old)
    out = io.StringIO()
    assert prune(state, "30d", out, dry_run=False, clock=lambda: now) == 0
    assert "freed 2 base-check file(s) (200 B)" in out.getvalue()
    assert not any(p.exists() for p in old) and young.exists()


def test_prune_frees_an_old_batchs_queued_ticket_copies(tmp_path: Path) -> None:
    """A fleet batch with PostgreSQL copies each queued ticket under its batch directory
    (``tickets/``): a week of cron must not keep them all."""
    state = tmp_path / "state"
    batch = state / "batches" / "20261201T000000Z-ab12"
    copy = batch / "tickets" / "T-1"
    copy.mkdir(parents=True)
    (copy / "T-1.md").write_text("+++\nid = 'T-1'\n+++\n")
    (copy / "spec.txt").write_text("what it refers to")
    (batch / "batch.json").write_text("{}")
    now = datetime.now(UTC)
    old = (now - timedelta(days=2)).timestamp()
    os.utime(batch / "batch.json", (old, old))
    out = io.StringIO()
    assert prune(state, "1d", out, dry_run=False, clock=lambda: now) == 0
    assert f"freed batch {batch.name}: tickets (" in out.getvalue()
    assert sorted(p.name for p in batch.iterdir()) == ["batch.json"]  # its record stays
