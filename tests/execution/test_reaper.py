"""Nothing a stage started outlives it, and its log stays under the cap: real processes,
real signals, through ``run_process`` (and so through the reaper it starts).

The escaper below is what a hostile or careless stage leaves behind: a process that
started its own session (``setsid``), was double-forked (its parent exited at once, so it
is an orphan), cleared its environment (``env -i``: no marker of ours), and ignores TERM.
It writes its pid to a file; the stage waits for that file before it goes on, so every
test knows the escaper exists before the stage ends. Tests wait on events (a pidfd, a
pipe, a process exiting), never on a sleep.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.domain.config import LogsConfig, parse_config
from orchestrator.domain.errors import ConfigError, Interrupted
from orchestrator.execution import process, runner
from orchestrator.execution.process import (
    EXIT_TIMEOUT,
    Cancelled,
    ProcessIdentity,
    ProcessOutcome,
    ProcessRequest,
)
from orchestrator.execution.process_groups import live_group_members
from orchestrator.execution.runner import run_process
from orchestrator.reading.error_lines import last_error_line

from conftest import ROOT, subprocess_env
from support.procfs import is_dead, proc_field, proc_state

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the reaper's guarantees are Linux's"
)


def escaper(pidfile: Path) -> str:
    """Shell that leaves an escaped descendant behind and waits until it has written its pid."""
    inner = f"trap '' TERM; echo $$ > {shlex.quote(str(pidfile))}; exec sleep 300"
    return (
        f"( setsid env -i /bin/sh -c {shlex.quote(inner)} & ); "
        f"while [ ! -s {shlex.quote(str(pidfile))} ]; do sleep 0.01; done"
    )


def read_pid(path: Path) -> int:
    text = path.read_text().strip()
    assert text.isdigit(), f"{path} holds {text!r}"
    return int(text)


def wait_exited(pid: int, timeout_s: float) -> bool:
    """True once ``pid`` has exited (a zombie counts), within ``timeout_s``."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(timeout_s * 1000))
    finally:
        os.close(fd)


def run(
    script: str, tmp_path: Path, *, timeout_s: float = 30.0, **kwargs: object
) -> ProcessOutcome:
    return run_process(
        ProcessRequest(
            ("sh", "-c", script),
            cwd=tmp_path,
            env=dict(os.environ),
            log_path=tmp_path / "stage.log",
            timeout_s=timeout_s,
            kill_after_s=kwargs.pop("kill_after_s", 0.5),  # type: ignore[arg-type]
            **kwargs,  # type: ignore[arg-type]
        )
    )


# --------------------------------------------------------------------------- nothing left running


@pytest.mark.parametrize(
    ("ending", "exit_code"),
    [
        ("exit 0", 0),
        ("exit 3", 3),
        ("kill -9 $$", 128 + 9),
        ("trap '' TERM; sleep 30", EXIT_TIMEOUT),
    ],
    ids=["success", "failure", "killed-by-signal", "timeout"],
)
def test_an_escaped_descendant_is_gone_when_the_stage_ends(
    tmp_path: Path, ending: str, exit_code: int
) -> None:
    pidfile = tmp_path / "escaper.pid"
    identities: list[ProcessIdentity] = []

    outcome = run(f"{escaper(pidfile)}; {ending}", tmp_path, timeout_s=2.0,
                  on_start=identities.append)  # fmt: skip

    assert outcome.exit_code == exit_code
    assert outcome.timed_out is (exit_code == EXIT_TIMEOUT)
    escaped = read_pid(pidfile)
    assert is_dead(escaped), f"escaper {escaped} is {proc_state(escaped)} after the stage"
    assert live_group_members(identities[0].pgid) == []


def escaped_stage(tmp_path: Path, on_ready: Callable[[int], None], cancel: threading.Event) -> int:
    """Start a stage that leaves an escaper and runs on; call ``on_ready(escaper)`` from the
    first tick that finds it (and checks it really escaped). Returns the escaper's pid."""
    pidfile = tmp_path / "escaper.pid"
    seen: list[int] = []

    def on_tick(_: float) -> None:
        if seen or not pidfile.exists() or not pidfile.read_text().strip():
            return
        escaped = read_pid(pidfile)
        seen.append(escaped)
        stage = stages[0]
        # It really is out of reach of a group or a marker: own session, not a child of
        # the stage, none of the environment it was given (no marker of ours).
        assert os.getsid(escaped) == escaped != os.getsid(stage)
        assert proc_field(escaped, 1) == proc_field(stage, 1)  # re-parented to the reaper
        environ = Path(f"/proc/{escaped}/environ").read_bytes().split(b"\0")
        assert not [v for v in environ if v.startswith((b"ORCH_", b"PATH="))], environ
        on_ready(escaped)

    stages: list[int] = []
    with pytest.raises((Cancelled, Interrupted)):
        run(
            f"{escaper(pidfile)}; trap '' TERM; sleep 30",
            tmp_path,
            on_start=lambda identity: stages.append(identity.pgid),
            on_tick=on_tick,
            tick_s=0.02,
            cancel=cancel,
        )
    assert seen, "the escaper never showed up"
    return seen[0]


def test_an_escaped_descendant_is_gone_after_a_cancel(tmp_path: Path) -> None:
    cancel = threading.Event()  # what a batch sets from its main thread on SIGTERM
    escaped = escaped_stage(tmp_path, lambda _: cancel.set(), cancel)
    assert is_dead(escaped), proc_state(escaped)


def test_an_escaped_descendant_is_gone_after_an_interruption(tmp_path: Path) -> None:
    def interrupted(_: int) -> None:
        raise Interrupted(signal.SIGTERM)  # what the CLI's SIGTERM handler raises

    escaped = escaped_stage(tmp_path, interrupted, threading.Event())
    assert is_dead(escaped), proc_state(escaped)


_DRIVER = """
import os, sys
from pathlib import Path
from orchestrator.execution.process import ProcessRequest
from orchestrator.execution.runner import run_process

work = Path(sys.argv[1])
pidfile = work / "escaper.pid"
said = []

def on_tick(_):
    if not said and pidfile.exists() and pidfile.read_text().strip():
        said.append(1)
        print("ready", flush=True)

run_process(ProcessRequest(
    ("sh", "-c", sys.argv[2]), cwd=work, env=dict(os.environ), log_path=work / "stage.log",
    timeout_s=120, kill_after_s=0.5, on_start=lambda i: print("stage", i.pgid, flush=True),
    on_tick=on_tick, tick_s=0.02,
))
print("returned", flush=True)
"""


def test_everything_goes_when_the_orchestrator_itself_is_killed(tmp_path: Path) -> None:
    """SIGKILL leaves the orchestrator no chance to clean up: the reaper does it."""
    script = f"{escaper(tmp_path / 'escaper.pid')}; trap '' TERM; sleep 300"
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, str(tmp_path), script],
        cwd=ROOT, env=subprocess_env(), stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert driver.stdout is not None
    try:
        stage_line = driver.stdout.readline().split()
        assert stage_line[0] == "stage", stage_line
        assert driver.stdout.readline() == "ready\n"
        stage = int(stage_line[1])
        escaped = read_pid(tmp_path / "escaper.pid")
        reaper = proc_field(stage, 1)
        assert proc_field(escaped, 1) == reaper  # the orphan was handed to the reaper
        driver.kill()
        assert driver.wait(timeout=30) == -signal.SIGKILL
        for pid, what in ((escaped, "escaper"), (stage, "stage"), (reaper, "reaper")):
            assert wait_exited(pid, 30.0), f"the {what} ({pid}) outlived the orchestrator"
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        driver.stdout.close()


def live_with(name: str, value: str) -> list[int]:
    """Live processes whose environment holds ``name=value``."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and not is_dead(int(entry)):
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if needle in environ.split(b"\0"):
                found.append(int(entry))
    return found


def test_a_stage_that_keeps_forking_new_sessions_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forker in a session of its own goes on starting sessions while the stage exits
    and while the reaper kills: the reaper kills until no descendant is left, so the
    runner's sweep behind it (``end_orphans``) is handed nothing.

    The forker, not a clock, ends the stage (TERM after its 200th fork), and it forks
    at most 1,000 times: timed by the clock, a stage starved under load let it fork
    ~1,200 sessions a second for as long as the starvation lasted (24 s of killing on
    CI, and the machine's pids run out at 32,768)."""
    tag = f"{os.getpid()}-{tmp_path.name}"
    forker = (
        'i=0; while [ "$i" -lt 1000 ]; do setsid sleep 300 & i=$((i + 1)); '
        '[ "$i" -ne 200 ] || kill -TERM "$1"; done; exec sleep 300'
    )
    script = f"trap 'exit 0' TERM; setsid sh -c {shlex.quote(forker)} forker $$ & wait"
    swept: list[int] = []

    def end_orphans(since: int | None) -> list[int]:
        ended = real_end_orphans(since)
        swept.extend(ended)
        return ended

    real_end_orphans = runner.end_orphans
    monkeypatch.setattr(runner, "end_orphans", end_orphans)
    outcome = run_process(
        ProcessRequest(
            ("sh", "-c", script), cwd=tmp_path, env={**os.environ, "ORCH_TEST_FORKER": tag},
            log_path=tmp_path / "stage.log", timeout_s=60, kill_after_s=0.5,
        )
    )  # fmt: skip

    assert outcome.exit_code == 0
    assert swept == []
    assert live_with("ORCH_TEST_FORKER", tag) == []


def test_orphans_are_reaped_while_the_stage_runs(tmp_path: Path) -> None:
    """A double-forked child that exits is re-parented to the reaper, which reaps it at
    once: no zombie piles up during a long stage."""
    pidfile = tmp_path / "orphan.pid"
    script = (
        f"( sh -c 'echo $$ > {shlex.quote(str(pidfile))}' & ); "
        f"while [ ! -s {shlex.quote(str(pidfile))} ]; do sleep 0.01; done; sleep 30"
    )
    stop = threading.Event()
    states: list[str | None] = []

    def on_tick(_: float) -> None:
        if pidfile.exists() and pidfile.read_text().strip():
            state = proc_state(read_pid(pidfile))
            states.append(state)
            if state is None:  # reaped (not a zombie of nobody's)
                stop.set()

    with pytest.raises(Cancelled):
        run(script, tmp_path, on_tick=on_tick, tick_s=0.02, cancel=stop, timeout_s=60.0)
    assert states and states[-1] is None, states


def test_a_reaper_killed_from_outside_still_leaves_nothing_and_says_so(tmp_path: Path) -> None:
    """The runner's own sweeps back the reaper: its stage dies with it (PDEATHSIG), the
    group is swept, and the outcome says the reaper gave no report."""
    reapers: list[int] = []

    def kill_the_reaper(identity: ProcessIdentity) -> None:
        reapers.append(proc_field(identity.pgid, 1))
        os.kill(reapers[0], signal.SIGKILL)

    outcome = run("trap '' TERM; sleep 30", tmp_path, on_start=kill_the_reaper)

    assert outcome.error is not None
    assert outcome.error.startswith("the stage's reaper ended without a report"), outcome.error
    assert outcome.pgid is not None and live_group_members(outcome.pgid) == []
    assert is_dead(outcome.pgid)


def kill_its_reaper(pidfile: Path) -> str:
    """Shell of a stage that leaves an escaper behind, then SIGKILLs its reaper (its
    parent): what the reaper held is re-parented, and nobody is left to end it but us."""
    return f"{escaper(pidfile)}; kill -9 $PPID; sleep 30"


def test_a_stage_that_kills_its_reaper_leaves_no_escaped_descendant(tmp_path: Path) -> None:
    pidfile = tmp_path / "escaper.pid"
    try:
        outcome = run(kill_its_reaper(pidfile), tmp_path)

        assert outcome.error is not None
        assert outcome.error.startswith("the stage's reaper ended without a report")
        escaped = read_pid(pidfile)
        # Gone the moment the runner returns: not even a zombie (it was reaped here).
        assert proc_state(escaped) is None, f"escaper {escaped} is {proc_state(escaped)}"
        assert outcome.pgid is not None and live_group_members(outcome.pgid) == []
    finally:
        if pidfile.exists() and not is_dead(read_pid(pidfile)):
            os.kill(read_pid(pidfile), signal.SIGKILL)


def after_the_tick_of(pid: int) -> None:
    """Return once the clock is past the tick ``pid`` started in (/proc gives start times
    in clock ticks): whatever starts from now on started later, to /proc as well."""
    per_second = os.sysconf("SC_CLK_TCK")
    started = proc_field(pid, 19)
    while time.clock_gettime(time.CLOCK_BOOTTIME) * per_second < started + 2:
        time.sleep(1 / per_second)


def test_orphans_of_a_killed_reaper_are_ended_in_a_process_with_other_threads(
    tmp_path: Path,
) -> None:
    """The fleet worker's case: the stage runs in a thread while another thread runs a
    stage of its own, and this process has a child of its own in a session of its own.
    The sweep ends the orphans and nothing else: the other stage runs to its end, the
    helper lives on."""
    helper = subprocess.Popen(["sleep", "300"], start_new_session=True)
    after_the_tick_of(helper.pid)
    gate = tmp_path / "go"
    (tmp_path / "bystander").mkdir()
    (tmp_path / "attacker").mkdir()
    pidfile = tmp_path / "attacker" / "escaper.pid"
    outcomes: dict[str, ProcessOutcome] = {}
    bystander_started = threading.Event()

    def bystander() -> None:
        outcomes["bystander"] = run(
            f"while [ ! -e {shlex.quote(str(gate))} ]; do sleep 0.01; done; exit 7",
            tmp_path / "bystander", timeout_s=60.0, on_start=lambda _: bystander_started.set(),
        )  # fmt: skip

    def attacker() -> None:
        outcomes["attacker"] = run(kill_its_reaper(pidfile), tmp_path / "attacker")

    threads = [threading.Thread(target=bystander), threading.Thread(target=attacker)]
    try:
        threads[0].start()
        assert bystander_started.wait(30)
        threads[1].start()
        threads[1].join(60)
        assert "attacker" in outcomes and outcomes["attacker"].error is not None
        escaped = read_pid(pidfile)
        assert proc_state(escaped) is None, f"escaper {escaped} is {proc_state(escaped)}"
        assert helper.poll() is None, "the sweep ended a child that was not an orphan"
        gate.touch()
        threads[0].join(60)
        assert outcomes["bystander"].exit_code == 7, outcomes["bystander"]
    finally:
        gate.touch()
        for thread in threads:
            if thread.ident is not None:
                thread.join(60)
        if pidfile.exists() and not is_dead(read_pid(pidfile)):
            os.kill(read_pid(pidfile), signal.SIGKILL)
        helper.kill()
        helper.wait()


# --------------------------------------------------------------------------- the log cap


# Prints ``wanted`` lines (10 bytes each) as fast as it can, 10,000 to a write, and after
# each write looks at what the log and its tail segments take on disk: the samples come
# with the bytes printed, not with the clock, so a slow machine takes as many. At its end
# it says how many lines it printed, the most it saw on disk and how many looks it took.
_PRODUCER = """
import os, sys
wanted, log, done = int(sys.argv[1]), sys.argv[2], sys.argv[3]
directory, name = os.path.split(log)
out = sys.stdout.buffer
lines = most = looks = 0
while lines < wanted:
    out.write(b"".join(b"%09d\\n" % i for i in range(lines, lines + 10000)))
    lines += 10000
    used = 0
    for entry in os.listdir(directory):
        if entry == name or entry.startswith("." + name + "."):
            try:
                used += os.stat(os.path.join(directory, entry)).st_size
            except FileNotFoundError:  # a segment rotated away between listing and stat
                pass
    most, looks = max(most, used), looks + 1
out.flush()
open(done, "w").write(f"{lines} {most} {looks}")
"""


def printed(start: int, end: int) -> bytes:
    """Bytes ``start:end`` of what the producer prints: line i is ``%09d\\n`` at 10 * i."""
    first, last = start // 10, (end + 9) // 10
    text = b"".join(b"%09d\n" % i for i in range(first, last))
    return text[start - first * 10 : end - first * 10]


_MARKER = re.compile(
    rb"# orchestrator: (\d+) bytes of output dropped here "
    rb"\(log capped at (\d+) bytes: head and tail kept\)\n"
)


def test_a_stage_printing_without_pause_keeps_running_and_its_log_keeps_head_and_tail(
    tmp_path: Path,
) -> None:
    cap = 256 * 1024
    producer = tmp_path / "producer.py"
    producer.write_text(_PRODUCER)
    done = tmp_path / "done"
    log = tmp_path / "stage.log"
    # Twelve times the cap: a log that kept up with the first cap's worth only, or held
    # the stage back once it was full, would never see the end of it.
    wanted = 12 * cap // 10

    outcome = run_process(
        ProcessRequest(
            (sys.executable, str(producer), str(wanted), str(log), str(done)), cwd=tmp_path,
            env=dict(os.environ), log_path=log, timeout_s=60, kill_after_s=1, max_log_bytes=cap,
        )
    )  # fmt: skip

    assert (outcome.exit_code, outcome.timed_out, outcome.error) == (0, False, None)
    # The producer ran to its end and says how much it printed and what it saw on disk.
    lines, most_on_disk, looks = (int(n) for n in done.read_text().split())
    total = lines * 10
    assert total >= 12 * cap
    assert looks == lines // 10000
    data = log.read_bytes()
    lines = data.split(b"\n")
    header = len(lines[0]) + len(lines[1]) + 2
    assert lines[0].startswith(b"# orchestrator: ") and lines[1].startswith(b"# $ ")
    footer = data.rindex(b"# orchestrator: exit 0 after ")
    body = data[header:footer]
    [marker] = list(_MARKER.finditer(body))
    dropped, stated_cap = int(marker.group(1)), int(marker.group(2))
    head, tail = body[: marker.start()], body[marker.end() :]
    if not printed(0, len(head)) == head:  # the marker starts on a line of its own
        assert head.endswith(b"\n")
        head = head[:-1]
    assert head == printed(0, len(head))
    assert tail == printed(total - len(tail), total)
    assert dropped == total - len(head) - len(tail)  # exactly what is missing
    assert stated_cap == cap
    assert len(head) + len(tail) <= cap
    assert len(head) >= cap // 2 - 10 and len(tail) >= cap // 4
    assert most_on_disk <= cap + header, most_on_disk
    assert list(tmp_path.glob(".stage.log.*")) == []  # the tail segments were assembled away
    assert os.stat(log).st_mode & 0o777 == 0o600


def test_output_under_the_cap_is_kept_whole_without_a_marker(tmp_path: Path) -> None:
    outcome = run(
        "head -c 5000 /dev/zero | tr '\\0' a", tmp_path, max_log_bytes=process.MIN_LOG_BYTES * 2
    )
    assert outcome.exit_code == 0
    data = (tmp_path / "stage.log").read_bytes()
    assert b"a" * 5000 + b"# orchestrator: exit 0" in data
    assert b"dropped" not in data


def test_the_last_error_line_of_a_capped_log_comes_from_its_tail(tmp_path: Path) -> None:
    script = "yes filler | head -n 30000; echo 'fatal: the real reason'; exit 1"
    outcome = run(script, tmp_path, max_log_bytes=process.MIN_LOG_BYTES * 4)
    assert outcome.exit_code == 1
    text = (tmp_path / "stage.log").read_text()
    assert _MARKER.search(text.encode())
    assert last_error_line(text) == "fatal: the real reason"


def test_stage_logs_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    older = tmp_path / "stage.log"
    older.write_text("an older attempt's log\n")
    older.chmod(0o644)

    run("echo secret-looking output", tmp_path)
    run("echo again", tmp_path, max_log_bytes=None)

    assert older.stat().st_mode & 0o777 == 0o600
    assert older.read_text().startswith("an older attempt's log\n")
    fresh = tmp_path / "fresh.log"
    run_process(
        ProcessRequest(
            ("true",), cwd=tmp_path, env={}, log_path=fresh, timeout_s=10, kill_after_s=1
        )
    )
    assert fresh.stat().st_mode & 0o777 == 0o600


def test_a_cap_too_small_to_hold_a_head_and_a_tail_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_log_bytes must be at least 4096"):
        run("true", tmp_path, max_log_bytes=100)


def test_the_log_cap_is_read_from_config_and_a_bad_one_names_the_key_and_the_file(
    tmp_path: Path,
) -> None:
    stages = '[[stages]]\nname = "build"\ncommand = ["true"]\n'
    assert parse_config(stages, tmp_path / "c.toml").logs.max_bytes == 64 * 1024 * 1024
    assert LogsConfig().max_bytes == process.DEFAULT_MAX_LOG_BYTES
    ok = parse_config("[logs]\nmax_bytes = 1048576\n" + stages, tmp_path / "c.toml")
    assert ok.logs.max_bytes == 1048576
    with pytest.raises(ConfigError) as bad:
        parse_config("[logs]\nmax_bytes = 100\n" + stages, tmp_path / "c.toml")
    message = str(bad.value)
    assert str(tmp_path / "c.toml") in message and "logs.max_bytes" in message, message


def test_a_stage_log_is_capped_by_the_configured_key(tmp_path: Path) -> None:
    """From ``[logs] max_bytes`` in config.toml, through a real run, to the stage's log."""
    from orchestrator.cli.main import main

    from conftest import bash_stage, write_config, write_ticket

    line = b"line of a chatty stage\n"
    printer = "yes 'line of a chatty stage' | head -n 20000; echo last-line"
    expected = line * 20000 + b"last-line\n"
    config = write_config(
        tmp_path, bash_stage("chatty", printer), header="[logs]\nmax_bytes = 65536\n"
    )
    ticket = write_ticket(tmp_path / "tickets")

    assert main(["--config", str(config), "run", str(ticket)]) == 0

    [log] = (tmp_path / "state").rglob("*-chatty.log")
    data = log.read_bytes()
    [marker] = list(_MARKER.finditer(data))
    assert int(marker.group(2)) == 65536
    head = data[data.index(b"\n", data.index(b"# $ ")) + 1 : marker.start()]
    if not expected.startswith(head):  # the marker starts on a line of its own
        head = head[:-1]
    tail = data[marker.end() : data.rindex(b"# orchestrator: exit 0 after ")]
    assert expected.startswith(head) and expected.endswith(tail)
    assert tail.endswith(b"last-line\n")
    assert int(marker.group(1)) == len(expected) - len(head) - len(tail)
    assert log.stat().st_mode & 0o777 == 0o600


_FULL_DISK_DRIVER = """
import os, resource, sys
from pathlib import Path
from orchestrator.execution.process import ProcessRequest
from orchestrator.execution.runner import run_process

work = Path(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))  # as a full disk would
outcome = run_process(ProcessRequest(
    ("sh", "-c", sys.argv[2]), cwd=work, env=dict(os.environ), log_path=work / "stage.log",
    timeout_s=60, kill_after_s=1, max_log_bytes=None,
))
print(outcome.exit_code, outcome.error)
"""


def test_a_log_that_cannot_be_written_does_not_stop_the_stage(tmp_path: Path) -> None:
    """Past the file size limit every write fails (EFBIG): the reaper keeps reading and
    dropping, the stage runs to its end, and its status still reaches us."""
    script = f"yes | head -c 1000000; echo finished > {shlex.quote(str(tmp_path / 'done'))}; exit 7"
    result = subprocess.run(
        [sys.executable, "-c", _FULL_DISK_DRIVER, str(tmp_path), script],
        cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == "7 None\n"
    assert (tmp_path / "done").read_text() == "finished\n"
    assert (tmp_path / "stage.log").stat().st_size == 200_000


def test_a_missing_input_file_is_reported_not_run(tmp_path: Path) -> None:
    missing = tmp_path / "no-prompt.txt"
    outcome = run("echo should not run", tmp_path, stdin_path=missing)
    assert outcome.exit_code == 127 and outcome.pgid is None
    assert outcome.error == f"cannot open standard input {missing}: No such file or directory"
    assert "should not run\n" not in (tmp_path / "stage.log").read_text()


@pytest.mark.parametrize("splice", [True, False], ids=["splice", "read-write"])
def test_the_capped_log_keeps_head_and_tail_with_or_without_splice(
    tmp_path: Path, splice: bool
) -> None:
    """The reaper's log writer on its own: both ways of moving bytes (splice where the
    kernel has it, read and write elsewhere) give the same log."""
    from orchestrator.execution import reaper

    total = 30_000 * 10
    log_path = tmp_path / "unit.log"
    log_path.write_bytes(b"# header\n")
    fd = os.open(log_path, os.O_RDWR)
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    writer = threading.Thread(
        target=lambda: (os.write(write_end, printed(0, total)), os.close(write_end))
    )
    writer.start()
    log = reaper.CappedLog(fd, str(log_path), 65536)
    log.splice = splice
    poller = select.poll()
    poller.register(read_end, select.POLLIN)
    while poller.poll(10_000) and reaper.pump(read_end, log):
        pass
    writer.join()
    log.finish()
    os.close(fd)
    os.close(read_end)

    data = log_path.read_bytes()
    [marker] = list(_MARKER.finditer(data))
    head, tail = data[len(b"# header\n") : marker.start()], data[marker.end() :]
    assert head == printed(0, 32768) + b"\n"  # a line of its own for the marker
    assert tail == printed(total - len(tail), total)
    assert int(marker.group(1)) == total - 32768 - len(tail)
    # The tail half is kept in rotating segments, so it holds most of its share, never more.
    assert 32768 * 3 // 4 <= len(tail) <= 32768
    assert sorted(p.name for p in tmp_path.iterdir()) == ["unit.log"]
