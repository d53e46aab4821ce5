"""Prompt size on the demo's failures, under each prompt version this code knows.

    python bench/bench_prompt.py [--quick]     (--quick changes nothing: the demo is small)

Runs the demo's three tickets through the real config (CARDS-3 with a scripted model
that retries once, then gives up, so both of its failures are diagnosed), then rebuilds
the user message of every persisted decision under ``recovery-v1`` (the verdict schema in
the text) and the current version (the schema only in the request's structured-output
format). Prints bytes and tokens (bytes / 4) per decision, and for the whole request
(system + prompt + schema), with the ratio against v1 measured in the same run. Exit 0
unless it crashed.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tomli_w  # noqa: E402

from orchestrator.app.driver import run_ticket  # noqa: E402
from orchestrator.app.services import Services  # noqa: E402
from orchestrator.cli.console import PlainReporter  # noqa: E402
from orchestrator.demo.run import build_demo  # noqa: E402
from orchestrator.domain.config import load_config  # noqa: E402
from orchestrator.domain.tickets import load_ticket  # noqa: E402
from orchestrator.domain.verdicts import verdict_json_schema  # noqa: E402
from orchestrator.recovery.context import ContextBundle  # noqa: E402
from orchestrator.recovery.gateway import ScriptedGateway  # noqa: E402
from orchestrator.recovery.prompt import PROMPT_VERSION, SYSTEM, build_prompt  # noqa: E402
from orchestrator.reports.handoff import MARKDOWN  # noqa: E402
from orchestrator.storage.decisions import read_verdict  # noqa: E402
from orchestrator.storage.files import FileStorage  # noqa: E402
from orchestrator.storage.layout import verdict_files  # noqa: E402
from orchestrator.storage.runs import RunStore  # noqa: E402

ACTIONS = ("retry", "escalate-model", "switch-engine", "split", "abandon-human", "mechanical-fix")
BASELINE = "recovery-v1"


def _config(work: Path) -> Path:
    raw = tomllib.loads((ROOT / "config.toml").read_text().replace("{root}", str(ROOT)))
    raw["routing"] = {a: 0.0 for a in ACTIONS}
    raw["recovery"]["max_diag_invocations_per_ticket"] = 4
    path = work / "config.toml"
    path.write_bytes(tomli_w.dumps(raw).encode())
    return path


def _run_demo(work: Path) -> RunStore:
    layout = build_demo(work / "demo")
    store = RunStore(work / "state")
    replies = [
        {"action": "retry", "summary": "the test run looks flaky; run it again"},
        {"action": "abandon-human", "summary": "the fix is incomplete; a person must finish it"},
    ]
    gateway = ScriptedGateway([json.dumps(r) for r in replies])
    environ = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/tmp"),
        "DRY_RUN": "false",
    }
    services = Services(
        loaded=load_config(_config(work)), storage=FileStorage(work / "state"),
        reporter=PlainReporter(io.StringIO()), handoffs=MARKDOWN, environ=environ,
        gateway_factory=lambda: gateway,
    )  # fmt: skip
    for _, ticket in sorted(layout.tickets.items()):
        run_ticket(load_ticket(ticket), services)
    return store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="accepted, like every bench")
    parser.parse_args(argv)
    schema = json.dumps(verdict_json_schema())
    with tempfile.TemporaryDirectory() as tmp:
        store = _run_demo(Path(tmp))
        rows = []
        for found in verdict_files(store.runs_dir):
            verdict = read_verdict(found.path)
            if verdict.inputs is None or verdict.bundle_path is None:
                continue
            bundle = ContextBundle.model_validate_json(Path(verdict.bundle_path).read_text())
            text = bundle.render()
            sizes = {
                version: len(build_prompt(verdict.inputs.facts, text, version=version).encode())
                for version in (BASELINE, PROMPT_VERSION)
            }
            rows.append((f"{verdict.decision_id} ({verdict.source})", sizes))
    if not rows:
        print("no decision with a bundle was persisted")
        return 1
    overhead = len(SYSTEM.encode()) + len(schema.encode())
    print(f"{'decision':58} {BASELINE:>14} {PROMPT_VERSION:>14}   ratio")
    for name, sizes in rows:
        old, new = sizes[BASELINE], sizes[PROMPT_VERSION]
        print(f"{name:58} {old:>7} B {old // 4:>4} t {new:>7} B {new // 4:>4} t   {new / old:.2f}")
    for label, extra in (
        ("prompt only", 0),
        ("whole request (system + prompt + schema)", overhead),
    ):
        old = sorted(s[BASELINE] + extra for _, s in rows)
        new = sorted(s[PROMPT_VERSION] + extra for _, s in rows)
        median_old, median_new = old[len(old) // 2], new[len(new) // 2]
        print(
            f"median, {label}: {median_old // 4} → {median_new // 4} tokens "
            f"(ratio {median_new / median_old:.2f} against {BASELINE})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
