"""A real pipeline to recover in: an origin repository, a config around the given stages,
and the services a run needs, with a scripted model and back-offs recorded instead of
waited for. Shared by the end-to-end tests and the tests of what they build on."""

from __future__ import annotations

import io
import json
import os
from dataclasses import replace
from pathlib import Path

from orchestrator.app.driver import run_ticket
from orchestrator.demo.run import build_demo
from orchestrator.domain.config import load_config
from orchestrator.domain.runs import RunRecord
from orchestrator.domain.tickets import load_ticket
from orchestrator.recovery.gateway import ModelGateway, ModelReply, ModelRequest
from orchestrator.storage.budget import BudgetStore
from orchestrator.storage.files import FileStorage

from conftest import COUNTS, ROOT
from support.gitrepo import bare_clone, commit_files, init_repo
from support.services import make_services

CLONE_STAGE = """
[[stages]]
name = "clone"
command = ["{python}", "-P", "-m", "orchestrator.stages.clone"]
cwd = "run"
"""


def make_origin(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    work = init_repo(tmp_path / "work")
    commit_files(work, files or {"README.md": "hello\n"}, "initial")
    return bare_clone(tmp_path / "work", tmp_path / "origin.git")


# These tests are about carrying out each action; routing and approval have their own.
ALL_AUTO = (
    '[routing]\nretry = 0.0\n"escalate-model" = 0.0\n"switch-engine" = 0.0\n'
    'split = 0.0\n"abandon-human" = 0.0\n"mechanical-fix" = 0.0\n'
)


def write_pipeline(tmp_path: Path, body: str, recovery: str = "", routing: str = ALL_AUTO) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(
        'state_dir = "state"\n'
        + routing
        + "[recovery]\nmax_diag_invocations_per_ticket = 2\nmax_retries_per_ticket = 2\n"
        + recovery
        + CLONE_STAGE
        + body
    )
    return config


class Harness:
    def __init__(
        self, config: Path, gateway: ModelGateway | None, environ: dict[str, str] | None = None
    ) -> None:
        self.loaded = load_config(config)
        self.gateway = gateway
        self.builds = 0
        self.slept: list[float] = []
        self.out = io.StringIO()
        self.services = make_services(
            self.loaded,
            self.loaded.root / "state",
            out=self.out,
            environ=environ
            or {
                "PATH": os.environ["PATH"],
                "HOME": os.environ.get("HOME", "/tmp"),
                "DRY_RUN": "false",
            },
            gateway_factory=self.factory,
            sleep=self.slept.append,  # back-offs are recorded, never waited for
        )

    def factory(self) -> ModelGateway | None:
        self.builds += 1
        return self.gateway

    def run(self, ticket: Path) -> RunRecord:
        return run_ticket(load_ticket(ticket), self.services)

    def verdicts(self, record: RunRecord) -> list[dict[str, object]]:
        return [json.loads(Path(v.path).read_text()) for v in record.verdicts]

    def budget(self, ticket_id: str = "T-1") -> tuple[int, int]:
        b = BudgetStore(self.services.storage.runs.state_dir).load(ticket_id)
        return b.spent("diagnosis"), b.spent("retry")


def flaky(name: str, fails: int) -> str:
    """A stage that fails its first ``fails`` runs (counted in ``counts/`` beside the
    state dir, which the sandbox hides from stages)."""
    return (
        f'[[stages]]\nname = "{name}"\ncwd = "clone"\nwritable = ["{COUNTS}"]\n'
        f'command = ["bash", "-c", "n=$(cat {COUNTS}/{name}.n 2>/dev/null || echo 0); '
        f'echo $((n+1)) > {COUNTS}/{name}.n; echo attempt $((n+1)); [ $n -ge {fails} ]"]\n'
    )


def reply(obj: dict[str, object]) -> str:
    return json.dumps(obj)


class SameAnswerModel:
    """A model that answers every request with the same verdict and counts the requests:
    for batches where the budget, not a script, decides how often it is asked."""

    model_name = "scripted"

    def __init__(
        self, verdict: dict[str, object], input_tokens: int = 10, output_tokens: int = 10
    ) -> None:
        self.text = reply(verdict)
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.calls = 0

    def complete(self, request: ModelRequest) -> ModelReply:
        self.calls += 1
        return ModelReply(
            text=self.text, model=self.model_name, stop_reason="end_turn",
            input_tokens=self.input_tokens, output_tokens=self.output_tokens,
        )  # fmt: skip


def demo_harness(
    tmp_path: Path, gateway: ModelGateway | None
) -> tuple[Harness, dict[str, Path], Path]:
    layout = build_demo(tmp_path / "demo")
    h = Harness(ROOT / "config.toml", gateway)
    h.services = replace(h.services, storage=FileStorage(tmp_path / "state"))
    return h, dict(layout.tickets), layout.origin


FAKES = ROOT / "tests" / "fakes"
CLAUDE = (
    '[engines.claude]\nkind = "claude-code"\nmodels = ["claude-haiku-4-5", "claude-sonnet-4-6"]\n'
    'settings = { permission_mode = "acceptEdits", max_turns = 20 }\n'
    # What the fake engine does is told by a variable: named, as a user names one.
    'pass_env = ["FAKE_ENGINE_MODE"]\n'
    '[[stages]]\nname = "implement"\nengine = "claude"\ntimeout_s = 30\n'
)
