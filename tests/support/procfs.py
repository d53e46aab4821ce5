"""What /proc says about a process, for the tests that prove nothing a stage started
outlives it.

PID 1 on some machines (containers) does not reap orphans, so an orphan that died stays a
zombie: "dead" here means gone from /proc or in state Z/X, never "kill(pid, 0) fails".
"""

from __future__ import annotations

from pathlib import Path


def proc_field(pid: int, index: int) -> int:
    """Field ``index`` (0 = state) after the command name of /proc/PID/stat."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    return int(raw[raw.rfind(")") + 2 :].split()[index])


def proc_state(pid: int) -> str | None:
    """The state letter of /proc/PID/stat, None when the pid is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()[0]


def is_dead(pid: int) -> bool:
    return proc_state(pid) in (None, "Z", "X")
