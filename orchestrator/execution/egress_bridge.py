"""The sandbox's one way out, run by path inside it as ``python -I -S egress_bridge.py`` so
it imports nothing of ours: it listens on the sandbox's own loopback, hands every
connection it accepts to the egress proxy outside, and execs the command it was given.

    egress_bridge.py CHANNEL_FD PORT -- COMMAND ARGS...

The sandbox has a network namespace of its own with no route out. The orchestrator hands
in one end of a ``socketpair`` as descriptor CHANNEL_FD (the sandbox may not create unix
sockets, but an inherited one works). A grandchild of ours accepts on 127.0.0.1:PORT and
sends each accepted socket's descriptor over CHANNEL_FD (``SCM_RIGHTS``); the proxy reads
the request from it and decides, outside, whether to connect anywhere. This process then
drops both sockets and execs COMMAND, so the command's exit status and signals are its
own and the helper is not its child (nothing for it to wait for); the helper dies with
the sandbox's PID namespace when the command ends. It ignores TERM: a stop's TERM goes to
every process inside the sandbox, and the command's cleanup may still need its way out
during the grace; the KILL at the grace's end ends it, if the command's end did not.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # ``signal`` without its enum wrappers
import _socket
import posix
import sys

_BACKLOG = 128
_NOT_FOUND = 127
_CANNOT_EXECUTE = 126


def _serve(listener: _socket.socket, channel: _socket.socket) -> None:  # pragma: no cover
    """Accept for ever; each connection's descriptor goes to the proxy, then ours is
    closed. A proxy that is gone (the channel broken) ends us."""
    null = posix.open("/dev/null", posix.O_RDWR)
    for fd in (0, 1, 2):  # hold no end of the stage's log pipe
        posix.dup2(null, fd)
    while True:
        try:
            fd, _address = listener._accept()  # type: ignore[attr-defined]
        except OSError:
            continue
        try:
            rights = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fd.to_bytes(4, sys.byteorder))]
            channel.sendmsg([b"c"], rights)
        except OSError:
            posix._exit(0)
        finally:
            posix.close(fd)


def _exec(command: list[str]) -> None:
    """``execvp``: a name without a slash is looked for along PATH."""
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
    sys.stderr.write(f"egress_bridge: cannot execute {name}\n")
    posix._exit(_CANNOT_EXECUTE if denied else _NOT_FOUND)


def main(argv: list[str]) -> None:
    if len(argv) < 5 or argv[3] != "--":
        raise SystemExit("egress_bridge: usage: CHANNEL_FD PORT -- COMMAND ARGS...")
    channel_fd, port, command = int(argv[1]), int(argv[2]), argv[4:]
    channel = _socket.socket(fileno=channel_fd)
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(_BACKLOG)  # listening before the command starts: no race to connect
    child = posix.fork()
    if child == 0:  # pragma: no cover - the helper's side
        try:
            _signal.signal(_signal.SIGTERM, _signal.SIG_IGN)  # the command's grace is ours
            if posix.fork() == 0:
                _serve(listener, channel)
        finally:
            posix._exit(0)
    posix.waitpid(child, 0)
    listener.close()
    channel.close()
    # Python ignores these, and an ignored signal stays ignored across exec.
    for ignored in (_signal.SIGPIPE, _signal.SIGXFSZ):
        _signal.signal(ignored, _signal.SIG_DFL)
    _exec(command)


if __name__ == "__main__":
    main(sys.argv)
