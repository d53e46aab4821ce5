"""A coding engine's sandbox may make a unix *datagram* socket, which an agent's own
sandbox needs (issue 42: Codex's bundled bwrap sets up its loopback with one), and still
reaches no unix socket of the host's: a stream socket (a Docker daemon, a Redis, an ssh
agent) is refused at its creation even where its path shows, a datagram sent to a
host's socket finds none (its path is not shown; abstract ones live in the host's network
namespace, not the sandbox's), and a sandbox given the host's network gets no datagram
socket at all. Every other role keeps the whole refusal."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.domain.egress import network_access
from orchestrator.domain.sandbox import SandboxConfig, SandboxOptions
from orchestrator.execution.executor import LocalExecutor
from orchestrator.execution.process import HeadRequest, ProcessRequest
from orchestrator.execution.sandbox import (
    SandboxedExecutor,
    SandboxSpec,
    confinement,
    launch_argv,
)
from orchestrator.execution.sandbox_launch import seccomp_filter
from orchestrator.execution.stage_sandbox import Role, RunPlaces, profile

from support.sandbox_required import require_sandbox

MACHINE = os.uname().machine

# What the engine tries, each reported as "made"/"sent"/"connected" or the errno.
PROBE = r"""
import errno, json, socket, sys
args = json.loads(sys.argv[1])
seen = {}

def attempt(name, fn):
    try:
        seen[name] = fn()
    except OSError as exc:
        seen[name] = errno.errorcode.get(exc.errno, str(exc.errno))

def made(family, kind):
    socket.socket(family, kind).close()
    return "made"

attempt("dgram", lambda: made(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC))
attempt("stream", lambda: made(socket.AF_UNIX, socket.SOCK_STREAM))
attempt("seqpacket", lambda: made(socket.AF_UNIX, socket.SOCK_SEQPACKET))
attempt("socketpair", lambda: [s.close() for s in socket.socketpair()] and "made")

def send(where):
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(b"pwned", where)
    return "sent"

def connect(where):
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.connect(where)
    return "connected"

attempt("host_dgram_path", lambda: send(args["dgram_path"]))
attempt("host_dgram_abstract", lambda: send("\0" + args["abstract"]))
attempt("host_stream_in_clone", lambda: connect(args["stream_path"]))
print("SEEN " + json.dumps(seen))
"""


@pytest.fixture
def host_sockets(tmp_path: Path) -> Iterator[dict[str, socket.socket | str]]:
    """The host's sockets: a stream one in the engine's own clone (the most visible place
    there is), a datagram one in a directory the sandbox does not show (as journald's
    and syslog's are, under /run), and an abstract datagram one. In a short directory of
    its own: a socket's path has at most 107 bytes, which a deep ``tmp_path`` (CI's
    basetemp, a long test name) passes."""
    short = Path(tempfile.mkdtemp(prefix="orch-us-", dir="/tmp"))
    try:
        yield from _host_sockets(short, tmp_path.name)
    finally:
        shutil.rmtree(short, ignore_errors=True)


def _host_sockets(tmp_path: Path, name: str) -> Iterator[dict[str, socket.socket | str]]:
    clone = tmp_path / "clone"
    clone.mkdir()
    hidden = tmp_path / "run"
    hidden.mkdir()
    stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stream.bind(str(clone / "daemon.sock"))
    stream.listen(1)
    stream.setblocking(False)
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dgram.bind(str(hidden / "journal.sock"))
    dgram.setblocking(False)
    abstract_name = f"orch-test-{os.getpid()}-{name}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    abstract.bind("\0" + abstract_name)
    abstract.setblocking(False)
    yield {
        "clone": str(clone), "stream": stream, "dgram": dgram, "abstract": abstract,
        "args": json.dumps({
            "stream_path": str(clone / "daemon.sock"),
            "dgram_path": str(hidden / "journal.sock"),
            "abstract": abstract_name,
        }),
    }  # fmt: skip
    for held in (stream, dgram, abstract):
        held.close()


def probe(spec: SandboxSpec, cwd: Path, args: str) -> dict[str, str]:
    log = cwd.parent / "probe.log"
    outcome = SandboxedExecutor(LocalExecutor(), spec).run(
        ProcessRequest(
            (sys.executable, "-c", PROBE, args), cwd=cwd, env={"PATH": "/usr/bin:/bin"},
            log_path=log, timeout_s=30, kill_after_s=1,
        )
    )  # fmt: skip
    said = log.read_text()
    assert outcome.ok, said
    line = next(line for line in said.splitlines() if line.startswith("SEEN "))
    seen: dict[str, str] = json.loads(line.removeprefix("SEEN "))
    return seen


def nothing_arrived(sockets: dict[str, socket.socket | str]) -> None:
    for name in ("dgram", "abstract"):
        held = sockets[name]
        assert isinstance(held, socket.socket)
        with pytest.raises(BlockingIOError):
            held.recv(100)
    stream = sockets["stream"]
    assert isinstance(stream, socket.socket)
    with pytest.raises(BlockingIOError):
        stream.accept()


def test_an_engine_makes_a_datagram_socket_and_reaches_no_host_socket(
    host_sockets: dict[str, socket.socket | str],
) -> None:
    require_sandbox()
    clone = Path(str(host_sockets["clone"]))
    spec = SandboxSpec(writable=(clone,), unix_datagrams=True)
    seen = probe(spec, clone, str(host_sockets["args"]))
    assert seen == {
        "dgram": "made",  # what Codex's own sandbox needs
        "stream": "EACCES",
        "seqpacket": "EACCES",
        "socketpair": "made",
        "host_dgram_path": "ENOENT",  # not shown inside
        "host_dgram_abstract": "ECONNREFUSED",  # the sandbox's own network namespace
        "host_stream_in_clone": "EPROTOTYPE",  # a datagram socket cannot talk to it
    }
    nothing_arrived(host_sockets)


def test_with_the_hosts_network_or_outside_an_engine_no_unix_socket_is_made(
    host_sockets: dict[str, socket.socket | str],
) -> None:
    """``egress = ["*"]`` shares the host's network namespace, and with it the host's
    abstract sockets: no datagram socket then. A stage or check never had one."""
    require_sandbox()
    clone = Path(str(host_sockets["clone"]))
    for spec in (
        SandboxSpec(writable=(clone,), unix_datagrams=True, network=True),
        SandboxSpec(writable=(clone,)),
    ):
        seen = probe(spec, clone, str(host_sockets["args"]))
        assert {k: v for k, v in seen.items() if k != "socketpair"} == dict.fromkeys(
            ("dgram", "stream", "seqpacket", "host_dgram_path", "host_dgram_abstract",
             "host_stream_in_clone"), "EACCES",
        )  # fmt: skip
        assert seen["socketpair"] == "made"
    nothing_arrived(host_sockets)


def test_only_the_engine_role_gets_datagrams_and_only_without_the_hosts_network() -> None:
    places = RunPlaces(
        state_dir=Path("/p/state"), run_dir=Path("/p/state/runs/r"),
        clone=Path("/p/state/runs/r/clone"), ticket_dir=Path("/p/state/runs/r/ticket"),
        repository="https://example.com/r.git", config_root=Path("/p"), home=None,
    )  # fmt: skip

    def spec(role: Role, egress: tuple[str, ...] = ()) -> SandboxSpec:
        options = SandboxOptions(egress=egress)
        access = network_access(
            options.network, engine=role == "engine", declared=egress, implied=("api.openai.com",)
        )
        return profile(
            options, role, cwd=places.clone, places=places, limits=SandboxConfig(), access=access
        )

    assert [spec(role).unix_datagrams for role in ("engine", "stage", "check")] == [
        True, False, False,
    ]  # fmt: skip
    assert seccomp_filter(MACHINE) != seccomp_filter(MACHINE, unix_datagrams=True)
    engine = spec("engine")
    assert confinement(engine).data == seccomp_filter(MACHINE, unix_datagrams=True)
    opened = spec("engine", ("*",))
    assert opened.network and confinement(opened).data == seccomp_filter(MACHINE)
    assert confinement(spec("check")).data == seccomp_filter(MACHINE)
    # A start without the reaper (a bounded read) gets the same filter from the launcher.
    seccomp_arg = [launch_argv(s, ("bwrap",))[7] for s in (engine, opened, spec("stage"))]
    assert seccomp_arg == ["2", "1", "1"]


def test_a_start_through_the_launcher_gets_the_same_filter(
    host_sockets: dict[str, socket.socket | str],
) -> None:
    """``capture_head`` (no reaper) starts bwrap through ``sandbox_launch``: same program."""
    require_sandbox()
    clone = Path(str(host_sockets["clone"]))
    executor = SandboxedExecutor(
        LocalExecutor(), SandboxSpec(writable=(clone,), unix_datagrams=True)
    )
    captured = executor.capture_head(HeadRequest(
        (sys.executable, "-c", PROBE, str(host_sockets["args"])), cwd=clone,
        env={"PATH": "/usr/bin:/bin"}, max_bytes=4096, timeout_s=30,
    ))  # fmt: skip
    assert captured.exit_code == 0, captured
    seen = json.loads(captured.data.decode().split("SEEN ", 1)[1])
    assert (seen["dgram"], seen["stream"], seen["host_dgram_abstract"]) == (
        "made", "EACCES", "ECONNREFUSED",
    )  # fmt: skip
    nothing_arrived(host_sockets)
