"""The sandbox's first step where no reaper starts it (``capture_head``: the
orchestrator's own bounded git reads), run by path as ``python -I -S sandbox_launch.py``
so it imports nothing of ours: it sets the resource limits that bubblewrap has no option
for, hands bwrap a seccomp filter over a pipe, and execs bwrap. Everything bwrap starts
inherits both. A stage or check is started by the reaper, which does the same in its
child before the exec (``sandbox.confinement``), so it pays for no extra interpreter.
``seccomp_filter`` is the one definition of the filter for both.

    sandbox_launch.py MAX_PROCESSES MAX_MEMORY_BYTES MAX_FILE_BYTES SECCOMP -- BWRAP ARGS...

A limit of 0 leaves that limit as it was; SECCOMP is 0 (no filter), 1 (the filter) or 2
(the filter with unix datagram sockets allowed, below).

The filter refuses ``socket(AF_UNIX, ...)`` (EACCES): with the host's file system bound
read-only a sandboxed command can still *see* a unix socket somewhere on it (a Redis, a
Docker daemon, an ssh agent) and connecting needs no write permission, so the only place
to stop it is the socket's creation. ``socketpair`` stays allowed (pipes between a
program's own processes use it). ``io_uring_setup`` is refused too (ENOSYS, so programs
fall back to plain calls): io_uring could open a socket without the ``socket`` call the
filter looks at. Abstract-namespace unix sockets are per network namespace, so a command
without network cannot reach the host's anyway; the filter covers the ones that keep it.

``unix_datagrams`` (a coding engine's sandbox, issue 42) lets ``socket(AF_UNIX,
SOCK_DGRAM)`` through, and only that type: an agent's own sandbox needs it (Codex's
bundled bwrap sets up the loopback of its network namespace with ``if_nametoindex``,
which opens one to ask the kernel). A stream socket (a Docker daemon, a Redis, an ssh
agent, a database) stays refused at its creation. A datagram socket reaches only a
datagram socket, and only one it can see: abstract ones live in the network namespace,
which is the sandbox's own (``sandbox.confinement`` gives datagrams only to a sandbox
without the host's network), and a path one must be on a path the sandbox shows — the
host's (syslog's ``/dev/log``, journald's and systemd's under ``/run``) are not.
"""

import _signal  # type: ignore[import-not-found]  # ``signal`` without its enum wrappers
import posix
import resource
import sys

# struct seccomp_data: nr at 0, arch at 4, args[0] at 16 (its low half, little-endian).
_LD_W_ABS = 0x20
_AND_K = 0x54
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_EACCES = 13
_ENOSYS = 38
_AF_UNIX = 1
_SOCK_DGRAM = 2
_SOCK_TYPE_MASK = 0xF  # the type, without SOCK_NONBLOCK and SOCK_CLOEXEC
_X32_BIT = 0x40000000

# arch → (AUDIT_ARCH value, socket syscall, io_uring_setup syscall, socketcall or -1)
_ARCHES = {
    "x86_64": (0xC000003E, 41, 425, -1),
    "i386": (0x40000003, 359, 425, 102),
    "aarch64": (0xC00000B7, 198, 425, -1),
    "arm": (0x40000028, 281, 425, -1),
}
# Which arches a process may run as on this machine: the native one, and its 32-bit
# compat arch (a 32-bit binary would otherwise slip past a filter keyed on native numbers).
_MACHINE_ARCHES = {"x86_64": ("x86_64", "i386"), "aarch64": ("aarch64", "arm")}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return code.to_bytes(2, "little") + bytes((jt, jf)) + (k & 0xFFFFFFFF).to_bytes(4, "little")


def seccomp_filter(machine: str, *, unix_datagrams: bool = False) -> bytes | None:
    """The BPF program (bytes of ``struct sock_filter``), or None on a machine whose
    syscall numbers are not known here (then no filter: the mounts still hold).
    ``unix_datagrams``: ``socket(AF_UNIX, SOCK_DGRAM)`` is allowed (see the module's doc)."""
    arches = _MACHINE_ARCHES.get(machine)
    if arches is None:
        return None
    blocks: list[tuple[int, list[tuple[int, int, int, int]]]] = []
    for name in arches:
        audit, socket_nr, uring_nr, socketcall_nr = _ARCHES[name]
        body = [
            (_LD_W_ABS, 0, 0, 0),  # A = nr
        ]
        if name == "x86_64":
            body.append((_JGE_K, 0, 1, _X32_BIT))  # the x32 ABI: refused whole
            body.append((_RET_K, 0, 0, _ERRNO | _ENOSYS))
        body.append((_JEQ_K, 0, 1, uring_nr))
        body.append((_RET_K, 0, 0, _ERRNO | _ENOSYS))
        if socketcall_nr >= 0:  # socketcall's arguments are behind a pointer: refuse it
            body.append((_JEQ_K, 0, 1, socketcall_nr))
            body.append((_RET_K, 0, 0, _ERRNO | _EACCES))
        if unix_datagrams:
            body.append((_JEQ_K, 0, 6, socket_nr))
            body.append((_LD_W_ABS, 0, 0, 16))  # A = args[0] (the domain)
            body.append((_JEQ_K, 0, 4, _AF_UNIX))
            body.append((_LD_W_ABS, 0, 0, 24))  # A = args[1] (the type and its flags)
            body.append((_AND_K, 0, 0, _SOCK_TYPE_MASK))
            body.append((_JEQ_K, 1, 0, _SOCK_DGRAM))
        else:
            body.append((_JEQ_K, 0, 3, socket_nr))
            body.append((_LD_W_ABS, 0, 0, 16))  # A = args[0] (the domain)
            body.append((_JEQ_K, 0, 1, _AF_UNIX))
        body.append((_RET_K, 0, 0, _ERRNO | _EACCES))
        body.append((_RET_K, 0, 0, _ALLOW))
        blocks.append((audit, body))
    program: list[tuple[int, int, int, int]] = []
    for audit, body in blocks:
        program.append((_LD_W_ABS, 0, 0, 4))  # A = arch
        # Not this arch: skip this block (to the next block, or to the final allow).
        program.append((_JEQ_K, 0, len(body), audit))
        program.extend(body)
    program.append((_RET_K, 0, 0, _ALLOW))  # an arch this machine cannot run anyway
    return b"".join(_insn(*insn) for insn in program)


def _limit(which: int, value: int) -> None:
    if value <= 0:
        return
    _soft, hard = resource.getrlimit(which)
    # Never above what we were given: a limit can be lowered, not raised.
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def main(argv: list[str]) -> None:
    processes, memory, file_size, seccomp = (int(a) for a in argv[1:5])
    if argv[5] != "--":
        raise SystemExit("sandbox_launch: usage: N MEM FSIZE SECCOMP -- BWRAP ARGS...")
    command = list(argv[6:])
    _limit(resource.RLIMIT_NPROC, processes)
    _limit(resource.RLIMIT_AS, memory)
    _limit(resource.RLIMIT_FSIZE, file_size)
    machine = posix.uname().machine
    program = seccomp_filter(machine, unix_datagrams=seccomp == 2) if seccomp else None
    if program is not None:
        read_end, write_end = posix.pipe()
        posix.write(write_end, program)  # a few hundred bytes: within any pipe's buffer
        posix.close(write_end)
        posix.set_inheritable(read_end, True)
        command[1:1] = ["--seccomp", str(read_end)]
    # Python ignores these, and an ignored signal stays ignored across exec: the command
    # must find them as the system has them (``yes | head`` ends on SIGPIPE, not EPIPE).
    for ignored in (_signal.SIGPIPE, _signal.SIGXFSZ):
        _signal.signal(ignored, _signal.SIG_DFL)
    posix.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv)
