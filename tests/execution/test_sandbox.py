"""The bubblewrap sandbox on its own: the argv it builds (pure), and, under the real bwrap,
what a command inside it can and cannot do — write outside the writable paths, reach the
network, see the caller's environment, share /tmp."""

from __future__ import annotations

import json
import os
import resource
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.execution.executor import LocalExecutor
from orchestrator.execution.process import HeadRequest, ProcessRequest
from orchestrator.execution.recipes import recipe_spec
from orchestrator.execution.sandbox import (
    INSTALLATION,
    SANDBOX_HOME,
    SandboxedExecutor,
    SandboxSpec,
    bwrap_argv,
    sandbox_available,
    unreachable_executable,
)

from support.gitrepo import commit_files, init_repo
from support.sandbox_required import require_sandbox

BWRAP = Path("/opt/bwrap")


# A merged-/usr system, as ``_system_mounts`` finds one.
SYSTEM = (("--ro-bind", "/usr", "/usr"), ("--symlink", "usr/bin", "/bin"),
          ("--ro-bind", "/etc", "/etc"))  # fmt: skip


def test_the_argv_shows_the_system_directories_read_only_and_only_the_writable_paths_read_write(
) -> None:  # fmt: skip
    """An allow-list (issue 40): never the host's root, only the system's directories
    (a merged-/usr link made as the same link) and the paths the spec names."""
    spec = SandboxSpec(writable=(Path("/tmp/x/clone"), Path("/srv/cache")), hidden=())
    argv = bwrap_argv(
        spec, ("git", "status"), bwrap=BWRAP, cwd=Path("/tmp/x/clone"), installation=(),
        system=SYSTEM,
    )  # fmt: skip
    assert argv == (
        "/opt/bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
        "--ro-bind", "/etc", "/etc", "--dev", "/dev", "--proc", "/proc",
        "--tmpfs", "/tmp", "--dir", SANDBOX_HOME,
        "--bind", "/srv/cache", "/srv/cache", "--bind", "/tmp/x/clone", "/tmp/x/clone",
        "--remount-ro", "/",  # the root bwrap made: a write there is refused, not lost
        "--unshare-all", "--new-session", "--die-with-parent",
        "--chdir", "/tmp/x/clone", "--", "git", "status",
    )  # fmt: skip
    # A path under /tmp that must stay readable is bound read-only before the writable ones.
    seen = bwrap_argv(
        SandboxSpec(writable=(Path("/tmp/r/clone"),), readable=(Path("/tmp/r"),), hidden=()),
        ("true",), bwrap=BWRAP, cwd=Path("/tmp/r/clone"), installation=(), system=(),
    )  # fmt: skip
    assert seen[9:15] == (
        "--ro-bind-try", "/tmp/r", "/tmp/r", "--bind", "/tmp/r/clone", "/tmp/r/clone",
    )  # fmt: skip
    shared = bwrap_argv(
        SandboxSpec(writable=(), network=True), ("true",), bwrap=BWRAP, cwd=Path("/")
    )
    assert shared[shared.index("--unshare-all") + 1] == "--share-net"
    # As built on this machine: no root bind, whatever the spec.
    real = " ".join(bwrap_argv(recipe_spec(Path("/c")), ("true",), bwrap=BWRAP, cwd=Path("/c")))
    assert "--ro-bind / /" not in real and "--ro-bind-try / /" not in real
    assert "--ro-bind /usr /usr" in real or "--symlink" in real


def test_a_deeper_path_is_mounted_after_the_one_it_lies_in_whatever_its_kind(
    tmp_path: Path,
) -> None:
    """A state dir hidden inside a readable config root, a clone writable inside the
    hidden state dir, its .git read-only inside the writable clone: each shows as its own
    kind only if it is mounted after the path that contains it."""
    root, state = tmp_path / "project", tmp_path / "project" / ".state"
    clone = state / "runs" / "r" / "clone"
    (clone / ".git").mkdir(parents=True)
    spec = SandboxSpec(
        writable=(clone,), readable=(root,), hidden=(state, tmp_path / "absent"),
        read_only=(clone / ".git",),
    )  # fmt: skip
    argv = bwrap_argv(spec, ("true",), bwrap=BWRAP, cwd=clone, installation=(), system=())
    mounts = argv[argv.index(SANDBOX_HOME) + 1 : argv.index("--unshare-all") - 2]
    assert mounts == (
        "--ro-bind-try", str(root), str(root),
        "--perms", "0555", "--tmpfs", str(state),
        "--bind", str(clone), str(clone),
        "--ro-bind-try", str(clone / ".git"), str(clone / ".git"),
        "--remount-ro", str(state),  # what shows through is bound first; a missing one hides nothing
    )  # fmt: skip


def test_a_secret_file_is_masked_even_inside_a_path_the_spec_names_and_hides_only_what_shows(
    tmp_path: Path,
) -> None:
    """The env file ``init`` writes under a readable config directory is bound over with
    an empty file, after the directory (even a stage that names the file itself gets it
    empty); a key directory becomes an empty read-only one. A hide or mask of a place
    nothing shown holds is not made: nothing of the host is there to hide."""
    project = tmp_path / "project"
    keys = project / "keys"
    keys.mkdir(parents=True)
    env_file = project / "orchestrator.env"
    env_file.write_text("ANTHROPIC_API_KEY=sk-ant-x\n")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "home").mkdir(parents=True)
    (elsewhere / "pgpass").write_text("h:5432:db:u:pw\n")
    spec = SandboxSpec(
        writable=(), readable=(project, env_file),
        hidden=(elsewhere / "home",), masked=(env_file, keys, elsewhere / "pgpass"),
    )  # fmt: skip
    argv = bwrap_argv(spec, ("true",), bwrap=BWRAP, cwd=project, installation=(), system=())
    mounts = argv[argv.index(SANDBOX_HOME) + 1 : argv.index("--unshare-all") - 2]
    assert mounts == (
        "--ro-bind-try", str(project), str(project),
        "--ro-bind-try", str(env_file), str(env_file),
        "--perms", "0555", "--tmpfs", str(keys),
        "--ro-bind", os.devnull, str(env_file),
        "--remount-ro", str(keys),
    )  # fmt: skip


def test_a_masked_env_file_is_unreadable_inside_even_through_a_link(tmp_path: Path) -> None:
    """Under the real bwrap: a directory declared readable shows its files but not the env
    file in it; an env file that is a link to elsewhere is no way round (where the target
    is not shown the link dangles, where it is shown the target is masked too)."""
    require_sandbox()
    project, keep = tmp_path / "project", tmp_path / "keep"
    project.mkdir()
    keep.mkdir()
    (project / "config.toml").write_text("state_dir = 'x'\n")
    (keep / "orch.env").write_text("GITHUB_TOKEN=canary-masked-0000\n")
    (project / "orchestrator.env").symlink_to(keep / "orch.env")
    masked = (project / "orchestrator.env", keep / "orch.env")
    for readable in ((project,), (project, keep)):
        log = tmp_path / f"log-{len(readable)}"
        SandboxedExecutor(
            LocalExecutor(), SandboxSpec(writable=(), readable=readable, masked=masked)
        ).run(
            ProcessRequest(
                ("sh", "-c", f"cat {project}/config.toml; cat {project}/orchestrator.env"),
                cwd=project, env={"PATH": "/usr/bin:/bin"}, log_path=log, timeout_s=30,
                kill_after_s=1,
            )
        )  # fmt: skip
        said = log.read_text()
        assert "state_dir" in said and "canary-masked" not in said, said
        assert "orchestrator.env: " in said  # No such file (dangling) or Permission denied


def test_a_program_outside_the_allow_list_is_hidden_and_its_directory_is_the_fix(
    tmp_path: Path,
) -> None:
    """``unreachable_executable`` tells the truth about the allow-list: a tool under a
    directory no one named (the home, /srv, the host's /tmp) is not there inside, and
    the message says to add its directory to ``readable``; named, it is found; a system
    program is always there; a masked file never."""
    tools = tmp_path / "tools"
    tools.mkdir()
    tool = tools / "my-linter"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    env = {"PATH": f"{tools}:/usr/bin:/bin"}
    said = unreachable_executable(SandboxSpec(writable=(), hidden=()), ("my-linter",), env, ())
    assert said == (
        f"executable not found: my-linter is {tool}, which the sandbox hides; add its "
        'directory to the stage\'s readable = [...] (or run it with sandbox = "none")'
    )
    named = SandboxSpec(writable=(), readable=(tools,), hidden=())
    assert unreachable_executable(named, ("my-linter",), env, ()) is None
    assert unreachable_executable(SandboxSpec(writable=()), ("git",), env, ()) is None
    masked = SandboxSpec(writable=(), readable=(tools,), masked=(tool,))
    assert unreachable_executable(masked, (str(tool),), env, ()) is not None


def test_this_installation_stays_readable_even_under_the_private_tmp() -> None:
    """A checkout or venv under /tmp (a CI clone, a throwaway venv) must not vanish behind
    the private /tmp: a sandboxed ``{python}`` needs its interpreter and this package."""
    argv = bwrap_argv(
        SandboxSpec(writable=(Path("/tmp/c/clone"),), hidden=()), ("true",), bwrap=BWRAP,
        cwd=Path("/tmp/c/clone"), installation=(Path("/tmp/ci/.venv"), Path("/tmp/ci")),
        system=(),
    )  # fmt: skip
    assert argv[9:18] == (
        "--ro-bind-try", "/tmp/ci", "/tmp/ci", "--ro-bind-try", "/tmp/ci/.venv", "/tmp/ci/.venv",
        "--bind", "/tmp/c/clone", "/tmp/c/clone",
    )  # fmt: skip
    assert Path(sys.prefix) in INSTALLATION and Path(sys.executable).parent in INSTALLATION


def test_the_environment_is_an_explicit_list_and_never_on_the_command_line() -> None:
    caller = {
        "PATH": "/usr/bin", "HOME": "/home/me", "MY_API_TOKEN": "s3cret", "EDITOR": "vi",
        "GIT_CONFIG_COUNT": "1", "ORCH_CLONE_DIR": "/c",
    }  # fmt: skip
    spec = recipe_spec(Path("/c"))
    assert spec.environment(caller) == {
        "PATH": "/usr/bin", "ORCH_CLONE_DIR": "/c", "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_GLOBAL": "/home/me/.gitconfig", "HOME": SANDBOX_HOME, "TMPDIR": "/tmp",
    }  # fmt: skip
    # A value on bwrap's command line would be in the log and in /proc/*/cmdline.
    argv = bwrap_argv(spec, ("true",), bwrap=BWRAP, cwd=Path("/c"))
    assert not any("s3cret" in a or "/home/me" in a for a in argv)
    assert SandboxSpec(writable=()).environment(caller) == {
        **caller,
        "HOME": SANDBOX_HOME,
        "TMPDIR": "/tmp",
    }


def test_a_missing_bwrap_is_a_reason_not_an_exception(tmp_path: Path) -> None:
    missing = tmp_path / "no-bwrap"
    assert sandbox_available(LocalExecutor(), lambda: missing) == f"no bwrap binary at {missing}"
    # A binary that cannot make a sandbox is found out by running it.
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    reason = sandbox_available(LocalExecutor(), lambda: fake)
    assert reason == (
        "bwrap cannot start a sandbox here (bwrap: setting up uid map: Permission denied)"
    )


def test_a_sandboxed_command_that_cannot_start_is_refused_and_nothing_runs(
    tmp_path: Path,
) -> None:
    canary = tmp_path / "canary"
    executor = SandboxedExecutor(
        LocalExecutor(), SandboxSpec(writable=(tmp_path,)), locate=lambda: tmp_path / "nope"
    )
    outcome = executor.run(
        ProcessRequest(
            ("touch", str(canary)), cwd=tmp_path, env={"PATH": "/usr/bin:/bin"},
            log_path=tmp_path / "log", timeout_s=10, kill_after_s=1,
        )
    )  # fmt: skip
    assert (outcome.exit_code, outcome.ok) == (126, False)
    assert outcome.error is not None
    assert outcome.error.startswith(f"sandbox unavailable: no bwrap binary at {tmp_path / 'nope'}")
    assert "nothing was run" in outcome.error
    assert not canary.exists()


# ---- under the real bwrap ---------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP port on this machine's loopback that nothing inside the sandbox may reach."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.setblocking(False)
    yield server
    server.close()


PROBE = """
import json, os, socket, sys
out, canary, port, host_tmp = sys.argv[1:5]
seen = {"env": dict(os.environ), "tmp": sorted(os.listdir("/tmp"))}
for name, path in (("canary", canary), ("tmp_file", "/tmp/orch-sandbox-left-this")):
    try:
        open(path, "w").write("escaped")
        seen[name] = "written"
    except OSError as exc:
        seen[name] = type(exc).__name__
try:
    socket.create_connection(("127.0.0.1", int(port)), timeout=2).close()
    seen["connect"] = "connected"
except OSError as exc:
    seen["connect"] = type(exc).__name__
seen["host_tmp_visible"] = os.path.exists(host_tmp)
open(out, "w").write(json.dumps(seen))
"""


def probe_in_sandbox(
    tmp_path: Path, spec: SandboxSpec, clone: Path, port: int, env: dict[str, str]
) -> dict[str, object]:
    (clone / "probe.py").write_text(PROBE)
    host_tmp = tmp_path / "host-file"
    host_tmp.write_text("on the host")
    outcome = SandboxedExecutor(LocalExecutor(), spec).run(
        ProcessRequest(
            (sys.executable, "probe.py", "seen.json", str(tmp_path / "canary"), str(port),
             str(host_tmp)),
            cwd=clone, env=env, log_path=tmp_path / "probe.log", timeout_s=30, kill_after_s=1,
        )
    )  # fmt: skip
    assert outcome.ok, (tmp_path / "probe.log").read_text()
    seen: dict[str, object] = json.loads((clone / "seen.json").read_text())
    return seen


def test_a_recipe_command_writes_only_the_clone_reaches_no_network_and_sees_only_its_env(
    tmp_path: Path, listener: socket.socket
) -> None:
    require_sandbox()
    clone = tmp_path / "clone"
    commit_files(init_repo(clone), {"README.md": "hi\n"}, "initial")
    env = {
        "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8",
        "ORCH_CLONE_DIR": str(clone), "SOME_SETTING": "outside only",
        "MY_API_TOKEN": "s3cret",
    }  # fmt: skip
    port = listener.getsockname()[1]
    seen = probe_in_sandbox(tmp_path, recipe_spec(clone), clone, port, env)
    # Outside the clone nothing was written: the canary's directory is read-only (it
    # is under the private /tmp here, so the write "succeeds" only in the sandbox).
    assert not (tmp_path / "canary").exists()
    assert not Path("/tmp/orch-sandbox-left-this").exists()
    assert seen["tmp_file"] == "written" and seen["host_tmp_visible"] is False
    assert seen["connect"] != "connected"
    with pytest.raises(BlockingIOError):
        listener.accept()  # no connection ever arrived
    assert seen["env"] == {
        "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "ORCH_CLONE_DIR": str(clone),
        "GIT_CONFIG_GLOBAL": f"{tmp_path}/.gitconfig", "HOME": SANDBOX_HOME, "TMPDIR": "/tmp",
        "ORCH_PROCESS_MARK": seen["env"]["ORCH_PROCESS_MARK"],  # type: ignore[index]
        "PWD": str(clone),  # bwrap's --chdir sets it
    }  # fmt: skip
    # /tmp inside is private: it holds the sandbox's home, and the bound clone's path and
    # this installation where they live under /tmp (the suite's temp dir may be elsewhere,
    # a CI checkout there) — nothing else.
    under_tmp = {
        p.parts[2]
        for p in (clone, *INSTALLATION)
        if p.parts[:2] == ("/", "tmp") and len(p.parts) > 2
    }
    assert seen["tmp"] == sorted({SANDBOX_HOME.split("/")[2], *under_tmp})


def test_a_read_only_root_stops_writes_next_to_the_clone(tmp_path: Path) -> None:
    require_sandbox()
    # A workspace outside /tmp (where the private tmpfs would hide the write anyway).
    work = Path(__file__).resolve().parent / f".sandbox-{tmp_path.name}"
    clone = work / "clone"
    clone.mkdir(parents=True)
    try:
        outcome = SandboxedExecutor(LocalExecutor(), recipe_spec(clone)).run(
            ProcessRequest(
                ("sh", "-c", f"touch {clone}/inside; touch {work}/canary"),
                cwd=clone, env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "log",
                timeout_s=30, kill_after_s=1,
            )
        )  # fmt: skip
        assert outcome.exit_code == 1
        assert (clone / "inside").exists() and not (work / "canary").exists()
        assert "Read-only file system" in (tmp_path / "log").read_text()
    finally:
        import shutil

        shutil.rmtree(work)


def test_network_is_shared_only_when_the_spec_allows_it(
    tmp_path: Path, listener: socket.socket
) -> None:
    require_sandbox()
    clone = tmp_path / "clone"
    clone.mkdir()
    port = listener.getsockname()[1]
    env = {"PATH": "/usr/bin:/bin"}
    seen = probe_in_sandbox(tmp_path, SandboxSpec((clone,), network=True), clone, port, env)
    assert seen["connect"] == "connected"


def test_a_timeout_kills_the_sandboxed_command_and_nothing_inside_survives(
    tmp_path: Path,
) -> None:
    require_sandbox()
    clone = tmp_path / "clone"
    clone.mkdir()
    pid_file = clone / "pid"
    # A duration no other process on this machine is likely to sleep, to find it by.
    duration = f"60.{os.getpid()}"
    outcome = SandboxedExecutor(LocalExecutor(), recipe_spec(clone)).run(
        ProcessRequest(
            ("sh", "-c", f"sleep {duration} & echo $! > {pid_file}; wait"),
            cwd=clone, env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "log",
            timeout_s=1.0, kill_after_s=0.5,
        )
    )  # fmt: skip
    assert (outcome.exit_code, outcome.timed_out) == (124, True)
    # The pid it wrote is from inside the sandbox's pid namespace: look for it by name.
    assert pid_file.exists()
    survivors = [
        entry
        for entry in os.listdir("/proc")
        if entry.isdigit() and _cmdline(entry) == f"sleep\0{duration}\0".encode()
    ]
    assert survivors == []


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_limits_and_the_seccomp_program_ride_to_the_reaper_not_on_the_command_line() -> None:
    from orchestrator.execution.sandbox import SECCOMP_FD, SandboxLimits, confinement

    spec = SandboxSpec(writable=(), limits=SandboxLimits(max_processes=64, max_file_bytes=1 << 20))
    confine = confinement(spec, machine="x86_64")
    assert dict(confine.rlimits) == {
        resource.RLIMIT_NPROC: 64, resource.RLIMIT_FSIZE: 1 << 20,  # 0: left as it is
    }  # fmt: skip
    assert confine.fd == SECCOMP_FD and len(confine.data) % 8 == 0 and confine.data
    argv = bwrap_argv(spec, ("true",), bwrap=BWRAP, cwd=Path("/"), seccomp_fd=confine.fd)
    assert argv[argv.index("--seccomp") + 1] == str(SECCOMP_FD)
    assert confinement(SandboxSpec(writable=(), seccomp=False)).data == b""
    # An arch whose syscall numbers are not known here gets no filter (the mounts hold).
    assert confinement(spec, machine="riscv64").data == b""


UNIX_PROBE = (
    "import socket, resource\n"
    "try:\n    socket.socket(socket.AF_UNIX); print('unix allowed')\n"
    "except OSError as exc:\n    print('unix refused', exc.errno)\n"
    "print('nproc', resource.getrlimit(resource.RLIMIT_NPROC)[0])\n"
)


@pytest.mark.parametrize("how", ["run", "capture_head"])
def test_both_ways_in_refuse_unix_sockets_and_set_the_limits(tmp_path: Path, how: str) -> None:
    """A stage starts through the reaper (which confines it), a git read through the
    launcher: both must end in the same sandbox."""
    require_sandbox()
    from orchestrator.execution.sandbox import SandboxLimits

    spec = SandboxSpec(writable=(tmp_path,), limits=SandboxLimits(max_processes=77))
    executor = SandboxedExecutor(LocalExecutor(), spec)
    argv = (sys.executable, "-c", UNIX_PROBE)
    env = {"PATH": "/usr/bin:/bin"}
    if how == "run":
        outcome = executor.run(
            ProcessRequest(
                argv, cwd=tmp_path, env=env, log_path=tmp_path / "log", timeout_s=30, kill_after_s=1
            )
        )
        assert outcome.ok
        said = (tmp_path / "log").read_text()
    else:
        captured = executor.capture_head(
            HeadRequest(argv, cwd=tmp_path, env=env, max_bytes=4096, timeout_s=30)
        )
        assert captured.exit_code == 0
        said = captured.data.decode()
    assert "unix refused 13" in said and "nproc 77" in said


def test_what_this_interpreter_imports_from_stays_visible_but_never_a_whole_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pip install --user`` puts GitPython under the home, a ``.pth`` or PYTHONPATH can
    put anything under /tmp: a sandboxed stage program must still import it."""
    from orchestrator.execution.sandbox import _installation

    user_site = tmp_path / "home" / ".local" / "lib" / "site-packages"
    user_site.mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(user_site), str(Path.home()), "/", ""])
    found = _installation()
    assert user_site in found
    assert Path.home() not in found and Path("/") not in found


def test_a_recipe_sees_its_clone_and_not_the_state_dir_around_it(tmp_path: Path) -> None:
    """The approval key, the ledger and other tickets' clones live in the state dir."""
    require_sandbox()
    # Outside /tmp, which the sandbox's private /tmp would hide anyway.
    work = Path(__file__).resolve().parent / f".sandbox-{tmp_path.name}"
    state = work / "state"
    clone = state / "runs" / "T-1-r" / "clone"
    clone.mkdir(parents=True)
    (state / "keys").mkdir()
    (state / "keys" / "approval.key").write_text("k" * 64)
    try:
        outcome = SandboxedExecutor(LocalExecutor(), recipe_spec(clone, hidden=(state,))).run(
            ProcessRequest(
                ("sh", "-c", f"cat {state}/keys/approval.key; touch {clone}/mine"),
                cwd=clone, env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "log",
                timeout_s=30, kill_after_s=1,
            )
        )  # fmt: skip
        said = (tmp_path / "log").read_text()
        assert "k" * 64 not in said and "No such file" in said
        assert (clone / "mine").exists() and outcome.exit_code == 0
    finally:
        import shutil

        shutil.rmtree(work)


def test_the_probe_starts_bwrap_as_every_command_will_with_its_seccomp_filter(
    tmp_path: Path,
) -> None:
    """A bwrap or kernel that cannot load the filter is found once, by the probe, and
    said in a sentence, instead of failing every stage."""
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/bash\n"  # dash reads no descriptor above 9
        'case " $* " in *" --seccomp 100 "*)\n'
        '  head -c 8 <&100 >/dev/null && echo "bwrap: loading seccomp: Invalid argument" >&2\n'
        "  exit 1;;\n"
        "esac\nexit 0\n"
    )
    fake.chmod(0o755)
    assert sandbox_available(LocalExecutor(), lambda: fake) == (
        "bwrap cannot start a sandbox here (bwrap: loading seccomp: Invalid argument)"
    )
