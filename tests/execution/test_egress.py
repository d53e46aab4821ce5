"""Egress by allow-list (issue 40, item 4): a sandboxed engine's network namespace has no
route out; its one way to a host is the bridge to the egress proxy outside the sandbox,
which connects only to the hosts the stage is allowed and records every refusal.

The allow-list itself (pure), the proxy fed by hand over its channel (garbage included),
and under the real bubblewrap a command that tries the host directly, reaches an
allowed loopback server through the proxy, is refused another one, and exits or dies as
it would without the bridge, leaving nothing behind."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.domain.config import parse_config
from orchestrator.domain.egress import (
    ENGINE_HOSTS,
    EgressPolicy,
    HostRule,
    egress_policy,
    host_of_url,
    network_access,
    parse_rule,
)
from orchestrator.domain.errors import ConfigError
from orchestrator.domain.stage_hosts import egress_hosts
from orchestrator.execution.egress_proxy import (
    BRIDGE_PORT,
    MALFORMED,
    NOT_A_CONNECTION,
    EgressProxy,
)
from orchestrator.execution.executor import LocalExecutor
from orchestrator.execution.process import ProcessRequest
from orchestrator.execution.sandbox import SandboxedExecutor, SandboxSpec

from support.sandbox_required import require_sandbox

# ---------------------------------------------------------------------------- the list


def test_an_entry_allows_its_host_on_the_default_ports_or_on_the_one_it_names() -> None:
    policy = egress_policy(["api.anthropic.com", "git.example.org:8443", "*.example.com"])
    assert policy.allows("api.anthropic.com", 443)
    assert policy.allows("api.anthropic.com", 80)
    assert not policy.allows("api.anthropic.com", 22)
    assert not policy.allows("api.anthropic.com.evil.net", 443)
    assert not policy.allows("evil-api.anthropic.com", 443)
    assert policy.allows("git.example.org", 8443)
    assert not policy.allows("git.example.org", 443)
    assert policy.allows("a.b.example.com", 443)
    assert not policy.allows("example.com", 443)  # a wildcard is what lies below
    assert not policy.allows("notexample.com", 443)
    assert egress_policy(["[::1]:80"]).allows("::1", 80)
    assert egress_policy(["API.Example.COM."]).allows("api.example.com", 443)
    assert egress_policy(["a.com", "*"]) == EgressPolicy(open=True)
    assert parse_rule("*.example.com:8443") == HostRule("example.com", True, 8443)


@pytest.mark.parametrize(
    "entry",
    ["bad host", "a.com:0", "a.com:99999", "a.com:http", "http://a.com", "::1", "*.1.2.3.4",
     "a..com", "-a.com", "*", ""],
)  # fmt: skip
def test_a_bad_entry_is_refused_at_load_naming_the_key_and_the_file(entry: str) -> None:
    if entry == "*":  # the opt-out is a valid entry
        parse_config(
            f'[[stages]]\nname = "a"\ncommand = ["x"]\negress = ["{entry}"]\n', Path("c.toml")
        )
        return
    with pytest.raises(ConfigError) as caught:
        parse_config(
            f'[[stages]]\nname = "a"\ncommand = ["x"]\negress = ["{entry}"]\n', Path("/p/c.toml")
        )
    assert "/p/c.toml" in str(caught.value) and "stages[0].egress" in str(caught.value)


def test_an_engine_reaches_its_provider_by_default_and_a_command_stage_nothing() -> None:
    assert ENGINE_HOSTS["claude-code"] == ("api.anthropic.com",)
    assert "api.openai.com" in ENGINE_HOSTS["codex"]
    assert {"api.anthropic.com", "api.openai.com"} <= set(ENGINE_HOSTS["aider"])
    assert ENGINE_HOSTS["command"] == ENGINE_HOSTS["patch"] == ()
    config = parse_config(
        '[engines.cc]\nkind = "claude-code"\negress = ["mcp.example.com"]\n'
        '[[stages]]\nname = "implement"\nengine = "cc"\n'
        '[[stages]]\nname = "build"\ncommand = ["make"]\n'
        '[[stages]]\nname = "off"\nengine = "cc"\nnetwork = false\n'
        '[[stages]]\nname = "open"\nengine = "cc"\negress = ["*"]\n',
        Path("c.toml"),
    )
    implement, build, off, opened = config.stages
    hosts = egress_hosts(implement, config, "cc", "/srv/repo.git", {})
    assert hosts == ("api.anthropic.com", "mcp.example.com")
    access = network_access(
        implement.network, engine=True, declared=implement.egress, implied=hosts
    )
    assert access.mode == "proxy" and access.policy is not None
    assert access.policy.allows("api.anthropic.com", 443)
    assert not access.policy.allows("api.openai.com", 443)
    built = egress_hosts(build, config, "", "/srv/repo.git", {})
    assert (
        network_access(build.network, engine=False, declared=build.egress, implied=built).mode
        == "none"
    )
    assert network_access(off.network, engine=True, declared=(), implied=hosts).mode == "none"
    assert network_access(None, engine=True, declared=opened.egress, implied=hosts).mode == "open"


def test_a_clone_reaches_its_repository_and_an_open_pr_its_forge_but_never_what_a_ticket_names() -> (
    None
):
    config = parse_config(
        '[[stages]]\nname = "clone"\ncommand = ["{python}", "-m", "orchestrator.stages.clone"]\n'
        "network = true\n"
        '[[stages]]\nname = "open-pr"\n'
        'command = ["{python}", "-P", "-m", "orchestrator.stages.open_pr_github"]\n'
        "network = true\nside_effectful = true\n",
        Path("c.toml"),
    )
    clone, open_pr = config.stages
    repo = "https://user:pw@github.com/o/r.git"
    assert egress_hosts(clone, config, "", repo, {}) == ("github.com:443",)
    assert egress_hosts(clone, config, "", "git@github.com:o/r.git", {}) == ()
    assert egress_hosts(open_pr, config, "", repo, {}) == ("github.com:443", "api.github.com:443")
    env = {"ORCHESTRATOR_GITHUB_API_URL": "http://127.0.0.1:8081/api/v3"}
    assert "127.0.0.1:8081" in egress_hosts(open_pr, config, "", repo, env)
    assert host_of_url("http://[::1]:9/x") == "[::1]:9"
    assert host_of_url("/srv/repo.git") is None


# ---------------------------------------------------------------------------- the proxy


class _Streamer(http.server.BaseHTTPRequestHandler):
    """``GET /N`` answers N bytes of a fixed pattern, in chunks, as a model's stream."""

    def do_GET(self) -> None:
        size = int(self.path.strip("/") or 0)
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        sent = 0
        while sent < size:
            chunk = _pattern(sent, min(65536, size - sent))
            self.wfile.write(chunk)
            sent += len(chunk)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _pattern(offset: int, size: int) -> bytes:
    return bytes((offset + i) * 7 % 251 for i in range(size))


@pytest.fixture
def server() -> Iterator[int]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Streamer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def _handed(proxy: EgressProxy) -> socket.socket:
    """A connection to ``proxy`` as the bridge makes one: our end of a fresh pair, the
    other end's descriptor sent over the channel."""
    ours, theirs = socket.socketpair()
    channel = socket.socket(fileno=os.dup(proxy.sandbox_fd))
    socket.send_fds(channel, [b"c"], [theirs.fileno()])
    channel.close()
    theirs.close()
    ours.settimeout(10)
    return ours


def _answer(conn: socket.socket) -> bytes:
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_the_proxy_tunnels_to_an_allowed_host_and_refuses_another(server: int) -> None:
    with EgressProxy(egress_policy([f"127.0.0.1:{server}"])) as proxy:
        conn = _handed(proxy)
        conn.sendall(f"CONNECT 127.0.0.1:{server} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert conn.recv(100).startswith(b"HTTP/1.1 200")
        conn.sendall(b"GET /300000 HTTP/1.0\r\n\r\n")
        body = _answer(conn).partition(b"\r\n\r\n")[2]
        assert body == _pattern(0, 300000)
        refused = _handed(proxy)
        refused.sendall(b"CONNECT 127.0.0.2:6379 HTTP/1.1\r\n\r\n")
        answer = _answer(refused)
        assert answer.startswith(b"HTTP/1.1 403 Forbidden")
        assert b"egress to 127.0.0.2:6379 is not allowed" in answer
    assert proxy.denied() == [("127.0.0.2:6379", 1)]


def test_garbage_over_the_channel_only_gets_refused_and_the_proxy_keeps_serving(
    server: int,
) -> None:
    """What else a process holding the channel could send: bytes without a descriptor,
    a pipe, a datagram socket, a listening socket, a connection speaking nonsense, a
    request for a userinfo URL or a huge head. Each is refused (and recorded where it is a
    connection attempt); an allowed request still works after all of them."""
    with EgressProxy(egress_policy([f"127.0.0.1:{server}"])) as proxy:
        channel = socket.socket(fileno=os.dup(proxy.sandbox_fd))
        channel.sendall(b"\x00garbage" * 1000)  # no descriptor: nothing to serve
        read_end, write_end = os.pipe()
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        listening = socket.socket()
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        socket.send_fds(channel, [b"x"], [read_end, write_end, udp.fileno(), listening.fileno()])
        for text in (
            b"\xff\xfe\r\n\r\n",
            b"GET http://user@127.0.0.1:%d/ HTTP/1.1\r\n\r\n" % server,
            b"CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n",
            b"GET /relative HTTP/1.1\r\n\r\n",
            b"A" * 20000,
        ):
            conn = _handed(proxy)
            conn.sendall(text)
            conn.shutdown(socket.SHUT_WR)
            assert _answer(conn).startswith(b"HTTP/1.1 400"), text[:40]
        allowed = _handed(proxy)
        allowed.sendall(f"GET http://127.0.0.1:{server}/5 HTTP/1.1\r\nHost: h\r\n\r\n".encode())
        assert _answer(allowed).endswith(_pattern(0, 5))
        for fd in (read_end, write_end):
            os.close(fd)
        udp.close()
        listening.close()
        channel.close()
    denied = dict(proxy.denied())
    assert denied[NOT_A_CONNECTION] == 3  # the pipe's two ends and the datagram socket
    assert denied[MALFORMED] == 6  # the listening socket and the five nonsense requests


# ---------------------------------------------------------------------------- sandboxed

# Run inside the sandbox: tries the host's loopback listener directly, then the proxy
# for the allowed server (hashing a streamed answer) and for a refused port; reports JSON.
INSIDE = r"""
import hashlib, json, os, socket, sys
host_port, allowed, refused = (int(a) for a in sys.argv[1:4])
seen = {"proxy_env": os.environ.get("HTTPS_PROXY"), "no_proxy": os.environ.get("NO_PROXY")}
try:
    socket.create_connection(("127.0.0.1", host_port), timeout=5).close()
    seen["direct"] = "connected"
except OSError as exc:
    seen["direct"] = type(exc).__name__
try:
    socket.create_connection(("192.0.2.1", 80), timeout=5).close()
    seen["route"] = "connected"
except OSError as exc:
    seen["route"] = exc.strerror

def through(port, path):
    conn = socket.create_connection(("127.0.0.1", PROXY_PORT), timeout=20)
    conn.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % port)
    reply = conn.recv(4096)
    if not reply.startswith(b"HTTP/1.1 200"):
        return reply.split(b"\r\n")[0].decode()
    conn.sendall(b"GET /%s HTTP/1.0\r\n\r\n" % path.encode())
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    return hashlib.sha256(data.partition(b"\r\n\r\n")[2]).hexdigest()

seen["allowed"] = through(allowed, "2000000")
seen["refused"] = through(refused, "10")
# A name that carries what it read: refused, and never written down as it was sent.
conn = socket.create_connection(("127.0.0.1", PROXY_PORT), timeout=20)
conn.sendall(b"CONNECT " + sys.argv[4].encode() + b":443 HTTP/1.1\r\n\r\n")
seen["secret"] = conn.recv(4096).split(b"\r\n")[0].decode()
print(json.dumps(seen))
""".replace("PROXY_PORT", str(BRIDGE_PORT))


def _run(tmp_path: Path, spec: SandboxSpec, argv: tuple[str, ...], **kw: float) -> tuple[
    object, SandboxedExecutor, str
]:  # fmt: skip
    executor = SandboxedExecutor(LocalExecutor(), spec)
    log = tmp_path / "stage.log"
    outcome = executor.run(
        ProcessRequest(
            argv, cwd=tmp_path, env={"PATH": os.environ["PATH"]}, log_path=log,
            timeout_s=kw.get("timeout_s", 60.0), kill_after_s=1.0,
        )
    )  # fmt: skip
    return outcome, executor, log.read_text()


def test_a_sandboxed_engine_reaches_only_its_allowed_host_through_the_proxy(
    tmp_path: Path, server: int
) -> None:
    require_sandbox()
    host_listener = socket.socket()
    host_listener.bind(("127.0.0.1", 0))
    host_listener.listen()
    host_listener.setblocking(False)
    refused = host_listener.getsockname()[1]
    spec = SandboxSpec(writable=(tmp_path,), egress=egress_policy([f"127.0.0.1:{server}"]))
    secret = "sk-ant-api03-" + "k3y" * 14
    argv = (
        sys.executable,
        "-c",
        INSIDE,
        str(refused),
        str(server),
        str(refused),
        f"{secret}.x.example",
    )
    outcome, executor, log = _run(tmp_path, spec, argv)
    assert outcome.exit_code == 0, log  # type: ignore[attr-defined]
    seen = json.loads(next(line for line in log.splitlines() if line.startswith("{")))
    assert seen["proxy_env"] == f"http://127.0.0.1:{BRIDGE_PORT}" and seen["no_proxy"] == ""
    assert seen["direct"] == "ConnectionRefusedError"  # its own loopback: nothing there
    assert seen["route"] == "Network is unreachable"
    assert seen["allowed"] == hashlib.sha256(_pattern(0, 2000000)).hexdigest()
    assert seen["refused"] == "HTTP/1.1 403 Forbidden"
    with pytest.raises(BlockingIOError):
        host_listener.accept()  # nothing from inside ever reached the host's listener
    host_listener.close()
    assert seen["secret"] == "HTTP/1.1 403 Forbidden"
    assert executor.egress_denied == {f"127.0.0.1:{refused}": 1, "[REDACTED].x.example:443": 1}
    assert "# orchestrator: egress denied: [REDACTED].x.example:443;" in log
    assert f"# orchestrator: egress denied: 127.0.0.1:{refused}; allowed: 127.0.0.1:{server}" in log


def _bridges(marker: str) -> list[int]:
    """Processes running the egress bridge for a command whose argv holds ``marker``
    (another test's bridges, in other workers, are theirs)."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"egress_bridge.py" in cmdline and marker.encode() in cmdline and pid.isdigit():
            found.append(int(pid))
    return found


@pytest.mark.parametrize(
    ("script", "exit_code"), [("exit 7", 7), ("kill -TERM $$", 128 + signal.SIGTERM), ("sleep 30", 124)]
)  # fmt: skip
def test_the_bridge_keeps_the_commands_exit_and_leaves_nothing_behind(
    tmp_path: Path, script: str, exit_code: int
) -> None:
    """The command's status is its own (the bridge execs it): the same as without the
    bridge, an exit, a death by signal (128+N, and the signal: issue 41) or our timeout;
    and once it has ended no helper is left."""
    require_sandbox()
    marker = f"egress-test-{tmp_path.name}"  # in the command's argv: its bridge shows it
    timeout = 2.0 if script.startswith("sleep") else 60.0
    plain = SandboxSpec(writable=(tmp_path,))
    filtered = SandboxSpec(writable=(tmp_path,), egress=egress_policy([]))
    outcomes = [
        _run(tmp_path, spec, ("sh", "-c", script, marker), timeout_s=timeout)[0]
        for spec in (plain, filtered)
    ]
    seen = [(o.exit_code, o.signal, o.timed_out) for o in outcomes]  # type: ignore[attr-defined]
    assert seen[0] == seen[1]
    assert seen[1][0] == exit_code
    assert seen[1][1] == (exit_code - 128 if exit_code > 128 else None)
    assert _bridges(marker) == []
