"""``orchestrator worker`` with a scripted model, for the fleet budget test: every model
call is appended to a file shared by all workers (so the test counts them across
processes) and answered "retry". A third argument: the worker's concurrency (1)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from orchestrator.cli.commands.worker import worker
from orchestrator.recovery.gateway import ModelReply, ModelRequest


class CountedModel:
    model_name = "scripted"

    def __init__(self, calls: Path) -> None:
        self.calls = calls

    def complete(self, request: ModelRequest) -> ModelReply:
        with self.calls.open("a") as calls:
            calls.write("call\n")
        text = json.dumps({"action": "retry", "summary": "flaky build"})
        return ModelReply(text=text, model=self.model_name, stop_reason="end_turn",
                          input_tokens=100, output_tokens=10)  # fmt: skip


if __name__ == "__main__":
    config, calls = Path(sys.argv[1]), Path(sys.argv[2])
    model = CountedModel(calls)
    concurrency = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    code = worker(
        config,
        None,
        concurrency=concurrency,
        queues=None,
        out=sys.stdout,
        gateway_factory=lambda: model,
    )
    sys.exit(code)
