"""The attack, through the real CLI: a stage the orchestrator runs walks up its ancestors
(its reaper, then the orchestrator) and reads each one's /proc/PID/environ and memory,
writing what it found to a file and to its log. None of the orchestrator's keys may show
up in either, or anywhere under the state dir.

The environment part holds for every user, root included (the keys are gone from the
block /proc shows). The memory part rests on the orchestrator being non-dumpable, which
stops a process of the same user that lacks CAP_SYS_PTRACE: root with it reads any
memory. So when we are root that test runs the orchestrator without that capability.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import orchestrator_cmd, subprocess_env, write_config, write_ticket

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.platform != "linux", reason="/proc and prctl are Linux's"),
]

CANARIES = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-canary-7f3a9c1e",
    "ORCHESTRATOR_LEDGER_KEY": "canary-ledger-key-51d0",
    "GITHUB_TOKEN": "ghp_canary0token0c4b2",
    "ORCHESTRATOR_BROKER_URL": "redis://:canary-redis-pw-e61f@127.0.0.1:1/0",
}

# The hostile stage. It stops at the orchestrator (the first ancestor run as
# ``-m orchestrator``): above it is the test runner, whose memory holds the canaries.
PROBE = r"""
import json, os, re, sys

def ancestor(pid):
    raw = open(f"/proc/{pid}/stat", "rb").read()
    return int(raw[raw.rfind(b")") + 2 :].split()[1])

def memory(pid):
    hits, readable, error = [], 0, None
    try:
        with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
            for line in maps:
                span, perms = line.split()[:2]
                low, high = (int(x, 16) for x in span.split("-"))
                if perms[0] != "r" or high - low > 1 << 28:
                    continue
                try:
                    mem.seek(low)
                    chunk = mem.read(high - low)
                except (OSError, OverflowError, ValueError) as exc:
                    error = error or type(exc).__name__
                    continue
                readable += len(chunk)
                hits += [m.decode("latin-1") for m in re.findall(rb"[\w:/.@-]*canary[\w:/.@-]*", chunk)]
    except OSError as exc:
        error = f"{type(exc).__name__}: {exc.strerror}"
    return hits, readable, error

report = []
pid = os.getppid()
while pid > 1:
    cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    try:
        environ = open(f"/proc/{pid}/environ", "rb").read().decode("latin-1")
    except OSError as exc:
        environ = f"unreadable: {exc.strerror}"
    hits, readable, error = memory(pid)
    orchestrator = b"orchestrator" in cmdline
    report.append({"pid": pid, "orchestrator": orchestrator, "environ": environ,
                   "mem_hits": sorted(set(hits)), "mem_bytes": readable, "mem_error": error})
    if orchestrator:
        break
    pid = ancestor(pid)
text = json.dumps(report)
open("found.json", "w").write(text)  # in the run dir, where it works
print(text)
"""


def outside_the_sandbox() -> str:
    """The stage option that runs it outside the sandbox: the attack is an unsandboxed
    stage's (a sandboxed one has a PID namespace of its own and sees no ancestor). Every
    stage is sandboxed unless it says ``sandbox = "none"``; before that, none was, and
    "none" was not a value."""
    from pydantic import ValidationError

    from orchestrator.domain.sandbox import SandboxOptions

    try:
        SandboxOptions.model_validate({"sandbox": "none"})
    except ValidationError:
        return ""
    return 'sandbox = "none"\n'


def attack(
    workdir: Path, preexec_fn: Callable[[], None] | None = None
) -> tuple[list[dict[str, Any]], str]:
    """Run one ticket whose only stage is the probe, with the canaries in the CLI's
    environment; the probe's report, and every byte the run left (output, logs, state)."""
    probe = workdir / "probe.py"
    probe.write_text(PROBE)
    stage = (
        '[[stages]]\nname = "check"\n'
        f'command = ["{{python}}", "{probe}"]\ncwd = "run"\n{outside_the_sandbox()}'
    )
    config = write_config(workdir, stage)
    ticket = write_ticket(workdir / "t")
    proc = subprocess.run(
        orchestrator_cmd("--config", str(config), "run", str(ticket)),
        capture_output=True, text=True, timeout=90, cwd=workdir,
        env=subprocess_env(**CANARIES), preexec_fn=preexec_fn,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    everything = proc.stdout + proc.stderr
    for path in workdir.rglob("*"):
        if path.is_file() and path != probe:  # its source names what it looks for
            everything += path.read_bytes().decode("latin-1")
    (found,) = workdir.rglob("found.json")
    return json.loads(found.read_text()), everything


def assert_no_canary(text: str) -> None:
    for name, value in CANARIES.items():
        assert value not in text, f"{name}'s value leaked"
    assert "canary" not in text


@pytest.mark.slow
def test_a_stage_finds_no_key_in_the_orchestrators_environment(tmp_path: Path) -> None:
    report, everything = attack(tmp_path)
    reaper, orchestrator = report[0], report[-1]
    assert [row["orchestrator"] for row in report] == [False, True], report
    assert "ORCH_PROCESS_MARK=" in str(reaper["environ"])  # the probe does read environs
    assert_no_canary(json.dumps([{k: v for k, v in row.items() if k != "mem_hits"}
                                 for row in report]))  # fmt: skip
    environ = str(orchestrator["environ"])
    if os.geteuid() == 0:  # root reads it, flag or not: what it finds is blanked
        assert "PATH=" in environ and "ANTHROPIC_API_KEY=\x00" in environ, environ[:300]
    else:
        assert environ.startswith("unreadable"), environ[:300]
    if os.geteuid() != 0:  # root reads the orchestrator's heap: the next test's case
        assert_no_canary(everything)


PR_CAPBSET_DROP = 24
CAP_SYS_PTRACE = 19


def _without_ptrace_capability() -> None:
    """In the child before exec: CAP_SYS_PTRACE out of the bounding set, so root's next
    program (and all it starts) runs without it."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE)")


@pytest.fixture
def as_a_plain_user() -> Callable[[], None] | None:
    """How to start the orchestrator so that its stages read /proc as a process of the
    same user that is not root would: as ourselves when we are not root; as root without
    CAP_SYS_PTRACE when we are (for /proc/PID/mem and ptrace, that is the same: a process
    of the same uid with no more capabilities than its target may read it when, and only
    when, the target is dumpable)."""
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    if scope.exists() and scope.read_text().strip() != "0":
        pytest.skip(
            f"Yama ptrace_scope is {scope.read_text().strip()}: a stage cannot read the memory "
            "of its ancestors here whatever the orchestrator does, so this cannot show the "
            "difference the dumpable flag makes (test_key_shield.py checks the flag itself)"
        )
    return _without_ptrace_capability if os.geteuid() == 0 else None


def test_a_stage_of_the_same_user_cannot_read_the_orchestrators_memory(
    tmp_path: Path, as_a_plain_user: Callable[[], None] | None
) -> None:
    report, everything = attack(tmp_path, as_a_plain_user)
    reaper, orchestrator = report[0], report[-1]
    assert orchestrator["orchestrator"] is True, report
    assert int(reaper["mem_bytes"]) > 0, reaper  # the probe does read a dumpable process
    assert orchestrator["mem_bytes"] == 0 and orchestrator["mem_error"], orchestrator
    assert_no_canary(everything)
