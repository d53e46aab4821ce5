"""The sandbox's first process, its PID 1 (``bwrap --as-pid-1``), run by path as
``python -I -S sandbox_init.py`` so it imports nothing of ours: it starts the command,
reaps whatever is orphaned inside, and writes the command's raw wait status on a
descriptor the reaper outside reads.

    sandbox_init.py STATUS_FD -- COMMAND ARGS...

It exists because bwrap cannot say that a command was killed by a signal: its monitor
and its own init turn signal N into an ordinary exit 128+N (``propagate_exit_status``;
``--json-status-fd`` reports the same number), so outside, ``kill -SEGV $$`` and
``exit 139`` look alike. Only the process that waits for the command can tell them
apart, and that is this one. It takes the place of bwrap's own init (``--as-pid-1``
runs no other), so the sandbox holds as many processes as before and the command is
PID 2, as it was.

It exits with what bwrap would have made of the command's status (the status, or 128+N),
so bwrap's own exit is unchanged; the reaper trusts the status on STATUS_FD only where it
agrees with that exit (``reaper.inner_signal``): a command that wrote there itself could
claim only what killing itself with the same signal would have said. Its end ends the
sandbox: the kernel KILLs whatever is left in a PID namespace whose init is gone.

It installs no signal handler, on purpose: a namespace's init receives no signal it does
not handle (but KILL from outside), so nothing inside can kill it and the TERM of a stop
leaves it waiting; that TERM reaches the command anyway, since the reaper signals every
process inside the namespace one by one (they are in the host's /proc too, and an orphan
inside is re-parented here, so below the reaper), and passing it on from here would
deliver it twice. The reaper spares this process and bwrap's monitor outside: the
monitor's death would end the sandbox at once, and the command's grace with it.
"""

import _signal  # type: ignore[import-not-found]  # ``signal`` without its enum wrappers
import posix
import sys

_NOT_FOUND = 127
_CANNOT_EXECUTE = 126


def _exec(command: list[str]) -> None:  # pragma: no cover - in the child
    """``execvp``: a name without a slash is looked for along PATH; a failure is said on
    stderr (the stage's log) with the exit code the runner uses for it."""
    name = command[0]
    path = posix.environ.get(b"PATH", b"/bin:/usr/bin").decode()
    places = [name] if "/" in name else [f"{d}/{name}" if d else name for d in path.split(":")]
    denied = False
    for place in places:
        try:
            posix.execv(place, command)
        except PermissionError:
            denied = True
        except OSError:
            pass
    sys.stderr.write(f"sandbox_init: cannot execute {name}\n")
    sys.stderr.flush()
    posix._exit(_CANNOT_EXECUTE if denied else _NOT_FOUND)


def wait_for(command: int) -> int:
    """Reap every child until ``command`` is among them; its raw wait status. As the
    namespace's init, every orphan inside is re-parented to us, so none stays a zombie."""
    while True:
        pid, status = posix.waitpid(-1, 0)  # EINTR is retried (PEP 475)
        if pid == command:
            return int(status)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        raise SystemExit("sandbox_init: usage: STATUS_FD -- COMMAND ARGS...")
    status_fd, command = int(argv[1]), argv[3:]
    posix.set_inheritable(status_fd, False)  # the command never holds it
    child = posix.fork()
    if child == 0:  # pragma: no cover - the child's side of fork, ends in exec
        # Python ignores these, and an ignored signal stays ignored across exec.
        for ignored in (_signal.SIGPIPE, _signal.SIGXFSZ):
            _signal.signal(ignored, _signal.SIG_DFL)
        _exec(command)
    status = wait_for(child)
    try:
        posix.write(status_fd, b"%d\n" % status)
    except OSError:  # nobody reads it (the reaper is gone): the exit still says 128+N
        pass
    code = posix.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    # Nothing to flush or finalise; and a quick end is the sandbox's end.
    posix._exit(main(sys.argv))
