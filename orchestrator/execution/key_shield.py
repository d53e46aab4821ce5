"""Keep the orchestrator's own keys out of reach of the programs it runs.

A stage is never given our secrets (``stage_env.stage_environ`` withholds them), but it
runs as our user, and any process of that user can read another's ``/proc/PID/environ``
(the environment as it was at exec, which the kernel shows from the process's own
memory, whatever ``os.environ`` became since) and ``/proc/PID/mem``. So, first thing in
the process (``shield``, from the CLI's entry; the fleet worker is ``orchestrator
worker``, and its pool processes are forks that inherit both steps):

1. every secret's value in that exec-time block is overwritten, in place, with NUL bytes.
   Python copied the environment into ``os.environ`` at start-up, and that copy, which is
   what our code reads, is untouched; /proc/PID/environ shows ``NAME=`` and NULs from
   then on, and so does the C library's ``getenv``. libpq reads ``$PGPASSWORD`` that
   way (and ``$PGSSLKEY``), so ``storage/postgres/connect`` hands both to libpq from
   ``os.environ`` instead (issue 40).
2. the process is made non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): its /proc/PID/mem,
   /proc/PID/environ and ptrace are closed to every process of our user that is not root
   (root with CAP_SYS_PTRACE still reads memory; nothing a process does can stop that,
   which is why step 1 matters). Fork keeps the flag; exec resets it, so a stage is not
   affected.

Why not re-exec without the secrets and hand them over a pipe: that costs a second
interpreter start on every command (30 to 60 ms measured, the first process having
imported the CLI already), and an exec outside the runner. Overwriting in place costs a
fraction of a millisecond and leaves the pid, the exit status, stdio, signals and the
working directory as they are by construction.

Only the standard library, and nothing slow: this runs before ``--help`` prints. Linux
only; elsewhere ``shield`` does nothing.
"""

from __future__ import annotations

import os
import sys

from orchestrator.domain.keys import BROKER_URL_ENV, SECRET_NAME, STORAGE_URL_ENV

PR_SET_DUMPABLE = 4
# /proc/PID/stat, counted from the state letter (field 3): env_start and env_end are
# fields 50 and 51 (Linux 3.5+).
_ENV_START_INDEX = 47


def is_withheld(name: str) -> bool:
    return SECRET_NAME.search(name) is not None or name in (BROKER_URL_ENV, STORAGE_URL_ENV)


def secret_spans(block: bytes) -> list[tuple[str, int, bytes]]:
    """Where the withheld values sit in an environment block (``NAME=value`` entries,
    each ended by a NUL): (name, offset of the value, the value), for every non-empty one."""
    spans: list[tuple[str, int, bytes]] = []
    offset = 0
    for entry in block.split(b"\0"):
        raw_name, equals, value = entry.partition(b"=")
        name = os.fsdecode(raw_name)
        if equals and value and is_withheld(name):
            spans.append((name, offset + len(raw_name) + 1, value))
        offset += len(entry) + 1
    return spans


def _env_bounds() -> tuple[int, int] | None:
    try:
        with open("/proc/self/stat", "rb") as stat:
            raw = stat.read()
        fields = raw[raw.rfind(b")") + 2 :].split()
        start, end = int(fields[_ENV_START_INDEX]), int(fields[_ENV_START_INDEX + 1])
    except (OSError, IndexError, ValueError):
        return None
    return (start, end) if 0 < start < end else None


def blank_exec_environment() -> list[str]:
    """Overwrite the withheld values in our exec-time environment block with NULs; the
    names blanked. Each value is compared with the memory it is about to overwrite first,
    so a block that is not where /proc says is left alone rather than damaged."""
    import ctypes  # 2 ms, and only here

    bounds = _env_bounds()
    if bounds is None:
        return []
    start, end = bounds
    try:
        with open("/proc/self/environ", "rb") as environ:
            block = environ.read()
    except OSError:
        return []
    blanked = []
    for name, offset, value in secret_spans(block[: end - start]):
        address = start + offset
        if ctypes.string_at(address, len(value)) != value:
            continue
        ctypes.memset(address, 0, len(value))
        blanked.append(name)
    return blanked


def make_undumpable() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)``; False where it is not available."""
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (AttributeError, OSError):
        return False
    return int(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0


def shield() -> list[str]:
    """Both steps, in this order (a non-dumpable process can no longer open its own
    /proc/self/environ as a user other than root). Returns the names blanked."""
    if sys.platform != "linux":
        return []
    blanked = blank_exec_environment()
    make_undumpable()
    return blanked
