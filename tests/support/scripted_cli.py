"""The real ``orchestrator`` CLI in its own process, with the model answered from a
script (a gateway like ``ScriptedGateway``, whose script and call count are files), so
nothing leaves the machine. For tests that drive (and kill) the orchestrator as cron
would; the SDK's own path is tested through a MockTransport elsewhere.

    python tests/support/scripted_cli.py --config ... run TICKET

``$ORCH_TEST_MODEL_SCRIPT`` is a JSON file: the reply texts, in order. Every request is
counted in ``$ORCH_TEST_MODEL_CALLS`` (one line each) before it is answered, so the count
holds across processes, including one killed right after the call; request n (0-based,
across processes) gets reply n. A request beyond the script gets an error reply.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from orchestrator.recovery.gateway import ModelGateway, ModelReply, ModelRequest

SCRIPT_ENV = "ORCH_TEST_MODEL_SCRIPT"
CALLS_ENV = "ORCH_TEST_MODEL_CALLS"


def requests_made(calls: Path) -> int:
    try:
        return len(calls.read_text().splitlines())
    except FileNotFoundError:
        return 0


class FileScriptedGateway:
    """Answers request n (counted across processes) with the script's reply n."""

    model_name = "scripted"

    def __init__(self, script: Path, calls: Path) -> None:
        self.script = json.loads(script.read_text())
        self.calls = calls

    def complete(self, request: ModelRequest) -> ModelReply:
        number = requests_made(self.calls)
        with self.calls.open("a") as fh:  # counted before it is answered
            fh.write(f"{len(request.prompt)}\n")
        if number >= len(self.script):
            return ModelReply(text=None, model=self.model_name, error="not scripted")
        text = self.script[number]
        return ModelReply(
            text=text, model=self.model_name, stop_reason="end_turn",
            input_tokens=len(request.prompt) // 4, output_tokens=len(text) // 4,
        )  # fmt: skip


def scripted_factory(model: object, environ: Mapping[str, str]) -> Callable[[], ModelGateway]:
    def build() -> ModelGateway:
        return FileScriptedGateway(Path(environ[SCRIPT_ENV]), Path(environ[CALLS_ENV]))

    return build


def run_here(
    root: Path, argv: list[str], env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """This script's ``main`` with ARGV, in the calling test's process: the environment
    exactly ``env``, the working directory ``root``, the scripted model; its exit code and
    output as a finished process's. An interpreter start (a second of CPU) saved per call,
    for every step nobody kills."""
    import pytest

    from orchestrator.app import services

    from support.cli_here import cli_here

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(services, "model_gateway_factory", scripted_factory)
        return cli_here(argv, env, cwd=root)


def run_forked(
    root: Path,
    argv: list[str],
    env: Mapping[str, str],
    *,
    timeout_s: float = 60.0,
    as_entry: bool = False,
) -> subprocess.CompletedProcess[str]:
    """This script's ``main`` with ARGV in a process of its own, forked from the calling
    test's process rather than started afresh: the same CLI, environment (exactly
    ``env``), working directory (``root``) and scripted model, and a process that a
    crash point's SIGKILL ends alone (its return code is then -9), without an
    interpreter start and the orchestrator's imports (most of a second of CPU) per
    kill. Its crash-point hit counts start at zero and its temp dir is its $TMPDIR, as
    in a new process. ``as_entry``: as ``python -m orchestrator`` starts instead (its
    ``entry``: the key shield first, then ``main``; the model its config names). Output
    goes through files (file descriptors 1 and 2, as a child's), read back once it has
    ended; one still running after ``timeout_s`` is killed and the call fails."""
    import contextlib
    import gc
    import os
    import select
    import signal
    import sys
    import tempfile
    import traceback

    from orchestrator.app import services
    from orchestrator.cli.main import main as cli_main
    from orchestrator.execution.key_shield import shield
    from orchestrator.storage import crash_points

    with tempfile.TemporaryDirectory(prefix="forked-cli-") as folder:
        out_path, err_path = Path(folder) / "stdout", Path(folder) / "stderr"
        # The child need not walk (and so copy) every object it inherits in its garbage
        # collections: they are frozen for it; this process thaws them at once.
        gc.freeze()
        pid = os.fork()
        if pid != 0:
            gc.unfreeze()
        if pid == 0:  # the child: never returns into the test
            code = 70
            try:
                for fd, path, mode in (
                    (0, os.devnull, os.O_RDONLY),
                    (1, out_path, os.O_WRONLY | os.O_CREAT),
                    (2, err_path, os.O_WRONLY | os.O_CREAT),
                ):
                    opened = os.open(path, mode, 0o600)
                    os.dup2(opened, fd)
                    os.close(opened)
                sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
                sys.stderr = open(2, "w", encoding="utf-8", closefd=False)
                os.chdir(root)
                os.environ.clear()
                os.environ.update(env)
                tempfile.tempdir = None  # found again from this TMPDIR, as a new process would
                crash_points._hits.clear()
                if as_entry:
                    shield()
                else:
                    services.model_gateway_factory = scripted_factory  # type: ignore[assignment]
                code = cli_main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # noqa: BLE001 (the child must reach os._exit, whatever it met)
                traceback.print_exc()
            finally:
                with contextlib.suppress(BaseException):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        pidfd = os.pidfd_open(pid)
        try:
            ended, _, _ = select.select([pidfd], [], [], timeout_s)
        finally:
            os.close(pidfd)
        if not ended:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        out, err = out_path.read_text(errors="replace"), err_path.read_text(errors="replace")
    assert ended, f"orchestrator {argv} still running after {timeout_s} s:\n{out}{err}"
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return subprocess.CompletedProcess(argv, code, out, err)


def main() -> int:
    from orchestrator.app import services
    from orchestrator.cli import main as cli

    services.model_gateway_factory = scripted_factory  # type: ignore[assignment]
    return cli.main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
