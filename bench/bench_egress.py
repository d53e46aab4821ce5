"""Benchmark: what the egress proxy (issue 40, item 4) costs a sandboxed engine's
connection: its set-up, and a streaming response's throughput.

    python bench/bench_egress.py           # 5 rounds: 200 set-ups, a 256 MiB and a 2 s stream
    python bench/bench_egress.py --quick   # 3 rounds: 50 set-ups, a 32 MiB and a 1 s stream

A loopback server (a process of its own) streams what it is asked for: ``GET /N/0`` N
bytes as fast as it can, ``GET /N/R`` N bytes at R bytes a second in 4 KiB events (as a
model streams its answer, at a rate far above any model's). The same client program runs
in the sandbox twice per round, interleaved: with the host's network (``network`` on:
the baseline, a direct connection, the sandbox's own cost included) and with egress
through the proxy (no route out; the bridge inside hands each connection to the proxy in
this process, which checks the host and relays). Each run times its connections' set-up
— connect (and, through the proxy, CONNECT and its 200) plus one 1-byte request's round
trip — then reads one unpaced and one paced stream to their ends.

Targets: the median set-up at most ``SETUP_TARGET_MS`` above the direct one; the paced
stream's throughput at least ``THROUGHPUT_TARGET`` of the direct one (medians of the
rounds). The unpaced stream is printed with no target: it measures the machine's CPU, and
through the proxy every byte crosses the loopback twice (server → proxy, proxy → the
sandbox's own loopback → the client) where a direct connection crosses it once, so on a
busy two-core machine it reads about half the direct rate.
Prints PASS/FAIL; the exit code is 0 unless the benchmark itself could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/bench_egress.py` puts bench/ on sys.path
    sys.path.insert(0, str(ROOT))

from orchestrator.domain.egress import egress_policy  # noqa: E402
from orchestrator.execution.egress_proxy import BRIDGE_PORT  # noqa: E402
from orchestrator.execution.executor import LocalExecutor  # noqa: E402
from orchestrator.execution.process import ProcessRequest  # noqa: E402
from orchestrator.execution.sandbox import (  # noqa: E402
    SandboxedExecutor,
    SandboxSpec,
    sandbox_available,
)

SETUP_TARGET_MS = 5.0
THROUGHPUT_TARGET = 0.9
MIB = 1 << 20
# The paced stream: far above any model's (a few hundred tokens a second is a few KiB).
PACED_RATE = 8 * MIB

# The client, run inside the sandbox: ``direct`` or ``proxy``, the server's port, how many
# set-ups, how many bytes to stream. Prints one JSON line.
CLIENT = r"""
import json, socket, sys, time
mode, port, set_ups, size, paced, rate = sys.argv[1], *(int(a) for a in sys.argv[2:7])
PROXY = ("127.0.0.1", PROXY_PORT)

def opened():
    if mode == "direct":
        return socket.create_connection(("127.0.0.1", port))
    conn = socket.create_connection(PROXY)
    conn.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % port)
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += conn.recv(4096)
    assert reply.startswith(b"HTTP/1.1 200"), reply
    return conn

def fetch(conn, n, per_s=0):
    conn.sendall(b"GET /%d/%d HTTP/1.0\r\n\r\n" % (n, per_s))
    buf = bytearray(1 << 20)
    got = 0
    while True:
        k = conn.recv_into(buf)
        if not k:
            return got
        got += k

set_up = []
for _ in range(set_ups):
    began = time.perf_counter()
    conn = opened()
    fetch(conn, 1)
    set_up.append(time.perf_counter() - began)
    conn.close()
seen = {"set_up": set_up}
for name, n, per_s in (("stream", size, 0), ("paced", paced, rate)):
    conn = opened()
    began = time.perf_counter()
    seen[name + "_bytes"] = fetch(conn, n, per_s)
    seen[name + "_seconds"] = time.perf_counter() - began
    conn.close()
print(json.dumps(seen))
""".replace("PROXY_PORT", str(BRIDGE_PORT))


class BenchError(Exception):
    """A measured run did not do what it should: its timings mean nothing."""


# The loopback server, a process of its own (as a model's host is): in this process its
# threads would contend for the GIL with the proxy's, which a real run never has.
SERVER = r"""
import os, socket, sys, threading, time
EVENT = 4096
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(256)
print(listener.getsockname()[1], flush=True)
block = memoryview(os.urandom(1 << 20))

def answer(conn):
    with conn:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk:
                return
            head += chunk
        size, rate = (int(n) for n in head.split(b" ")[1].strip(b"/").split(b"/"))
        conn.sendall(b"HTTP/1.0 200 OK\r\n\r\n")
        if not rate:  # as fast as it goes
            while size > 0:
                size -= conn.send(block[: min(size, len(block))])
            return
        # Paced as a model streams: an event at a time, each at its due time.
        began, sent = time.monotonic(), 0
        while sent < size:
            wait = began + sent / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            step = min(EVENT, size - sent)
            conn.sendall(block[:step])
            sent += step

while True:
    conn, _ = listener.accept()
    threading.Thread(target=answer, args=(conn,), daemon=True).start()
"""


def run_client(
    spec: SandboxSpec, mode: str, port: int, plan: tuple[int, int, int, int], scratch: Path
) -> dict[str, Any]:
    log = scratch / f"{mode}.log"
    log.unlink(missing_ok=True)
    executor = SandboxedExecutor(LocalExecutor(), spec)
    argv = (sys.executable, "-c", CLIENT, mode, str(port), *(str(n) for n in plan))
    outcome = executor.run(
        ProcessRequest(
            argv, cwd=scratch, env={"PATH": os.environ.get("PATH", os.defpath)},
            log_path=log, timeout_s=300, kill_after_s=1, max_log_bytes=None,
        )
    )  # fmt: skip
    text = log.read_text()
    line = next((x for x in text.splitlines() if x.startswith("{")), None)
    if not outcome.ok or line is None:
        raise BenchError(f"the {mode} client failed (exit {outcome.exit_code}):\n{text[-2000:]}")
    result: dict[str, Any] = json.loads(line)
    header = len(b"HTTP/1.0 200 OK\r\n\r\n")
    _, size, paced, _ = plan
    if (result["stream_bytes"], result["paced_bytes"]) != (size + header, paced + header):
        raise BenchError(f"the {mode} client read the wrong number of bytes: {result}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rounds, set_ups, size, paced_s = (3, 50, 32 << 20, 1) if args.quick else (5, 200, 256 << 20, 2)
    plan = (set_ups, size, PACED_RATE * paced_s, PACED_RATE)
    reason = sandbox_available(LocalExecutor())
    if reason is not None:
        print(f"egress bench: cannot run: {reason}")
        return 1
    server = subprocess.Popen(
        [sys.executable, "-I", "-c", SERVER], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    port = int(server.stdout.readline())
    set_up: dict[str, list[float]] = {"direct": [], "proxy": []}
    ceiling: dict[str, list[float]] = {"direct": [], "proxy": []}
    paced: dict[str, list[float]] = {"direct": [], "proxy": []}
    with tempfile.TemporaryDirectory(prefix="orch-bench-egress-", dir=ROOT) as tmp:
        scratch = Path(tmp)
        specs = {
            "direct": SandboxSpec(writable=(scratch,), network=True),
            "proxy": SandboxSpec(writable=(scratch,), egress=egress_policy([f"127.0.0.1:{port}"])),
        }
        try:
            for turn in range(rounds):
                order = ("direct", "proxy") if turn % 2 == 0 else ("proxy", "direct")
                for mode in order:
                    result = run_client(specs[mode], mode, port, plan, scratch)
                    set_up[mode] += [float(s) for s in result["set_up"]]
                    ceiling[mode].append(size / result["stream_seconds"] / MIB)
                    paced[mode].append(plan[2] / result["paced_seconds"] / MIB)
        except BenchError as exc:
            print(f"egress bench: {exc}")
            return 1
        finally:
            server.kill()
            server.wait()
    direct_ms = statistics.median(set_up["direct"]) * 1000
    proxy_ms = statistics.median(set_up["proxy"]) * 1000
    added = proxy_ms - direct_ms
    print(f"connection set-up (connect + 1-byte request, median of {len(set_up['proxy'])} each):")
    print(f"  direct {direct_ms:.3f} ms, through the proxy {proxy_ms:.3f} ms: {added:+.3f} ms")
    ratios = {}
    for name, rates, what in (
        ("paced", paced, f"a stream paced as a model's ({PACED_RATE // MIB} MiB/s, 4 KiB events)"),
        ("ceiling", ceiling, f"{size >> 20} MiB as fast as the loopback goes (no target)"),
    ):
        direct, proxied = statistics.median(rates["direct"]), statistics.median(rates["proxy"])
        ratios[name] = proxied / direct
        print(f"{what}, median of {rounds} rounds:")
        print(
            f"  direct {direct:.1f} MiB/s, through the proxy {proxied:.1f} MiB/s: "
            f"{ratios[name]:.2f}x (direct {', '.join(f'{r:.0f}' for r in rates['direct'])}; "
            f"proxy {', '.join(f'{r:.0f}' for r in rates['proxy'])})"
        )
    setup_ok = added <= SETUP_TARGET_MS
    rate_ok = ratios["paced"] >= THROUGHPUT_TARGET
    print(
        f"{'PASS' if setup_ok else 'FAIL'}: set-up adds {added:+.2f} ms (target <= {SETUP_TARGET_MS} ms)"
    )
    print(
        f"{'PASS' if rate_ok else 'FAIL'}: a streaming response keeps {ratios['paced']:.2f}x "
        f"its direct throughput (target >= {THROUGHPUT_TARGET}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
