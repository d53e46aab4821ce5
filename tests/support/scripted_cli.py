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


def main() -> int:
    from orchestrator.app import services
    from orchestrator.cli import main as cli

    services.model_gateway_factory = scripted_factory  # type: ignore[assignment]
    return cli.main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
