"""Replay: today's code reaches the same decision and the same dispatch from what was
persisted — with no model call, nothing executed and nothing written — and a tampered
reply, a changed threshold or an edited confidence is reported field by field."""

from __future__ import annotations

import ast
import inspect
import io
import json
import os
import shutil
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from orchestrator.app.driver import run_ticket
from orchestrator.app.replay import Difference, ReplayResult, replay
from orchestrator.cli.commands.replay import EXIT_DIFFERENT
from orchestrator.cli.commands.replay import replay as replay_command
from orchestrator.demo.run import build_demo
from orchestrator.domain.config import load_config
from orchestrator.domain.errors import UsageError
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.tickets import load_ticket
from orchestrator.execution.attempts import Services
from orchestrator.recovery.gateway import ModelGateway, ModelReply, ModelRequest, ScriptedGateway
from orchestrator.reports.display import PlainReporter
from orchestrator.storage.decisions import read_verdict
from orchestrator.storage.runs import RunRecord, RunStore

from conftest import ROOT, write_ticket
from gitrepo import bare_clone, commit_files, init_repo

pytestmark = pytest.mark.slow

ACTIONS = ("retry", "escalate-model", "switch-engine", "split", "abandon-human", "mechanical-fix")
ENVIRON = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "DRY_RUN": "false"}


def reply(obj: dict[str, Any]) -> str:
    return json.dumps(obj)


def drive(
    config: Path, state: Path, ticket: Path, gateway: ModelGateway | None = None
) -> RunRecord:
    services = Services(
        loaded=load_config(config),
        store=RunStore(state),
        reporter=PlainReporter(io.StringIO()),
        environ=dict(ENVIRON),
        gateway_factory=lambda: gateway,
    )
    return run_ticket(load_ticket(ticket), services)


def derived_config(path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """The real config.toml, changed, written to ``path`` ({root} pinned to the repo, so
    its stage scripts still resolve)."""
    raw = tomllib.loads((ROOT / "config.toml").read_text().replace("{root}", str(ROOT)))
    change(raw)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tomli_w.dumps(raw).encode())
    return path


def model_pipeline(raw: dict[str, Any]) -> None:
    # Every action auto at threshold 0, a judge on every model verdict, room in the cap
    # for two diagnoses and their two judge calls.
    raw["routing"] = {a: 0.0 for a in ACTIONS}
    raw["judge"] = {"sample_rate": 1.0}
    raw["recovery"]["max_diag_invocations_per_ticket"] = 4


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (state, clones and their refs, logs, the origin)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@dataclass(frozen=True)
class Runs:
    root: Path
    state: Path  # the demo's three tickets, the real config, no model
    demo: dict[str, RunRecord]
    model_state: Path  # CARDS-3 again, a scripted model (retry, then abandon-human)
    model_config: Path
    model_run: RunRecord
    gateway: ScriptedGateway


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    root = tmp_path_factory.mktemp("replay")
    layout = build_demo(root / "demo")
    state = root / "state"
    demo = {
        ticket: drive(ROOT / "config.toml", state, path)
        for ticket, path in sorted(layout.tickets.items())
    }
    assert [r.state for r in demo.values()] == [
        RunState.COMPLETED,
        RunState.COMPLETED,
        RunState.NEEDS_HUMAN,
    ]
    gateway = ScriptedGateway(
        [
            reply({"action": "retry", "summary": "the test run looks flaky; run it again"}),
            reply({"agree": True, "reason": "worth one more try"}),
            reply({"action": "abandon-human", "summary": "the fix is incomplete; a person must finish it"}),
            reply({"agree": False, "reason": "could have escalated"}),
        ]
    )  # fmt: skip
    model_config = derived_config(root / "model" / "config.toml", model_pipeline)
    model_state = root / "model" / "state"
    model_run = drive(model_config, model_state, layout.tickets["CARDS-3"], gateway)
    assert model_run.state is RunState.NEEDS_HUMAN, model_run.halt
    assert [(v.source, v.action) for v in model_run.verdicts] == [
        ("model", "retry"),
        ("model", "abandon-human"),
    ]
    assert gateway.calls == 4  # two diagnoses, each reviewed by the judge
    for ref in model_run.verdicts:
        evidence = read_verdict(Path(ref.path)).proposal["evidence"]
        assert [e["sampled"] for e in evidence if e["kind"] == "judge"] == [True]
    return Runs(root, state, demo, model_state, model_config, model_run, gateway)


def fields(result: ReplayResult) -> dict[str, Difference]:
    return {d.field: d for d in result.differences}


def copy_state(source: Path, target: Path) -> RunStore:
    shutil.copytree(source, target, symlinks=True)
    return RunStore(target)


def edit_verdict(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=2))


# ---- identical --------------------------------------------------------------------------


def test_every_run_replays_identical_without_a_call_a_process_or_a_write(runs: Runs) -> None:
    before = snapshot(runs.root)
    calls_before = runs.gateway.calls
    cases = [(runs.state, ROOT / "config.toml", r) for r in runs.demo.values()]
    cases.append((runs.model_state, runs.model_config, runs.model_run))
    replayed = 0
    for state, config, record in cases:
        results = replay(RunStore(state), load_config(config), record.run_id, None)
        assert [r.number for r in results] == [v.number for v in record.verdicts]
        for result in results:
            assert result.identical, (record.run_id, result.differences, result.limitations)
            assert result.differences == [] and result.limitations == []
            verdict = read_verdict(RunStore(state).verdict_path(record.run_id, result.number))
            [judge] = [e for e in verdict.proposal["evidence"] if e["kind"] == "judge"]
            judged = 1 if judge["sampled"] else 0
            # Exactly the persisted replies (and the judge's answer) were replayed.
            assert result.calls_replayed == len(verdict.replies) + judged
            assert (result.action, result.routing) == (
                verdict.action,
                verdict.proposal["routing"],
            )
            replayed += 1
    assert replayed == 4  # CARDS-1 playbook, CARDS-3 synthetic, two model verdicts
    assert runs.gateway.calls == calls_before  # replay never sees a live gateway
    assert snapshot(runs.root) == before  # no new log, ref or record; none rewritten


def test_the_command_prints_one_identical_line_per_verdict(runs: Runs) -> None:
    out = io.StringIO()
    code = replay_command(
        runs.model_state, runs.model_config, runs.model_run.run_id, None, out, as_json=False
    )
    assert code == 0
    assert out.getvalue().splitlines() == [
        "verdict 1: identical (action retry, routing auto, dispatch re-run implement)",
        "verdict 2: identical (action abandon-human, routing auto, dispatch needs-human (abandoned))",
    ]
    cards1 = runs.demo["CARDS-1"].run_id
    out = io.StringIO()
    assert replay_command(runs.state, ROOT / "config.toml", cards1, 1, out, as_json=True) == 0
    [line] = out.getvalue().splitlines()
    result = json.loads(line)
    assert result["identical"] is True and result["run_id"] == cards1
    assert result["dispatch"]["action"] == "mechanical-fix"
    assert result["dispatch"]["verify_check"] == "lint-bug-commit-order"
    assert result["dispatch"]["rerun"] == "review" and result["dispatch"]["fallback"] == "implement"
    assert [argv[0] for argv in result["dispatch"]["recipe"]] == ["git"] * 5


def test_a_run_without_decisions_and_a_missing_verdict_number(runs: Runs) -> None:
    cards2 = runs.demo["CARDS-2"].run_id
    out = io.StringIO()
    assert replay_command(runs.state, ROOT / "config.toml", cards2, None, out, as_json=False) == 0
    assert out.getvalue() == f"run {cards2} made no decisions: nothing to replay\n"
    with pytest.raises(UsageError, match="has no verdict 7 \\(it has: 1, 2\\)"):
        replay(RunStore(runs.model_state), load_config(runs.model_config), runs.model_run.run_id, 7)


def test_replay_cannot_be_handed_a_runner_and_imports_none() -> None:
    """Not a promise kept by care: there is no parameter through which a process could
    be started, and the module imports neither the runner nor the substrate's apply."""

    def run_process(*args: object, **kwargs: object) -> None:
        raise AssertionError("a process was started")

    assert list(inspect.signature(replay).parameters) == ["store", "loaded", "run_id", "number"]
    with pytest.raises(TypeError):
        replay(RunStore(Path("/nonexistent")), None, "x", None, run_process=run_process)  # type: ignore[arg-type, call-arg]
    tree = ast.parse((ROOT / "orchestrator" / "app" / "replay.py").read_text())
    imported = {
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    # The substrate's own pure plan, the one ``apply`` carries out: not a copy of it.
    assert ("orchestrator.app.substrate", "plan_dispatch") in imported
    assert not {m for m, name in imported if name in ("apply", "runner", "run_process")}
    plain = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert plain <= {"json", "re"}  # no subprocess, no runner, no SDK by another route


# ---- differences ------------------------------------------------------------------------


def test_a_reply_that_now_parses_to_another_action_is_listed(runs: Runs, tmp_path: Path) -> None:
    store = copy_state(runs.model_state, tmp_path / "state")
    run_id = runs.model_run.run_id
    edit_verdict(
        store.verdict_path(run_id, 1),
        lambda v: v["replies"].__setitem__(
            0,
            reply({"action": "abandon-human", "summary": "the test run looks flaky; run it again"}),
        ),
    )
    [result] = replay(store, load_config(runs.model_config), run_id, 1)
    assert not result.identical
    changed = fields(result)
    assert changed["action"] == Difference("action", "retry", "abandon-human")
    assert changed["dispatch.action"] == Difference("dispatch.action", "retry", "abandon-human")
    assert changed["dispatch.rerun"] == Difference("dispatch.rerun", "implement", None)
    assert changed["dispatch.terminal"] == Difference("dispatch.terminal", None, "needs-human")
    assert "verdict.summary" not in changed  # the same words: only what changed is listed
    out = io.StringIO()
    code = replay_command(tmp_path / "state", runs.model_config, run_id, 1, out, as_json=False)
    assert code == EXIT_DIFFERENT == 8
    lines = out.getvalue().splitlines()
    assert lines[0] == "verdict 1: DIFFERENT"
    assert "  action: retry → abandon-human" in lines
    assert "  dispatch.rerun: implement → null" in lines


def test_a_changed_threshold_changes_the_routing(runs: Runs, tmp_path: Path) -> None:
    def stricter_retry(raw: dict[str, Any]) -> None:
        model_pipeline(raw)
        raw["routing"]["retry"] = 0.9

    stricter = derived_config(tmp_path / "config.toml", stricter_retry)
    results = replay(RunStore(runs.model_state), load_config(stricter), runs.model_run.run_id, None)
    first, second = results
    changed = fields(first)
    assert changed["routing"] == Difference("routing", "auto", "hitl_recommended")
    assert changed["dispatch.approval"] == Difference("dispatch.approval", "auto", "person")
    assert changed["reasoning[3]"].now.endswith("(threshold for retry: 0.9)")
    assert "action" not in changed and "confidence" not in changed
    assert second.identical  # abandon-human's threshold did not change


def test_an_edited_confidence_is_listed_exactly(runs: Runs, tmp_path: Path) -> None:
    store = copy_state(runs.model_state, tmp_path / "state")
    run_id = runs.model_run.run_id
    path = store.verdict_path(run_id, 2)
    persisted = json.loads(path.read_text())["proposal"]["confidence"]
    edit_verdict(path, lambda v: v["proposal"].__setitem__("confidence", persisted + 1e-9))
    [result] = replay(store, load_config(runs.model_config), run_id, 2)
    assert result.differences == [Difference("confidence", persisted + 1e-9, persisted)]


def test_a_verdict_without_inputs_is_not_replayed(runs: Runs, tmp_path: Path) -> None:
    store = copy_state(runs.state, tmp_path / "state")
    run_id = runs.demo["CARDS-3"].run_id
    edit_verdict(store.verdict_path(run_id, 1), lambda v: v.pop("inputs"))
    out = io.StringIO()
    assert (
        replay_command(tmp_path / "state", ROOT / "config.toml", run_id, None, out, as_json=False)
        == EXIT_DIFFERENT
    )
    assert out.getvalue().splitlines()[0] == "verdict 1: NOT REPLAYED"
    assert "cannot be replayed" in out.getvalue()


# ---- failed calls and the investigation loop ----------------------------------------------

FLAKY = (
    '[[stages]]\nname = "build"\ncwd = "clone"\ncommand = ["bash", "-c", "echo it broke; exit 1"]\n'
)


def small_pipeline(tmp_path: Path, extra: str = "") -> tuple[Path, Path]:
    work = init_repo(tmp_path / "work")
    commit_files(work, {"README.md": "hello\ndef deal(): pass\n"}, "initial")
    bare_clone(tmp_path / "work", tmp_path / "origin.git")
    config = tmp_path / "config.toml"
    config.write_text(
        'state_dir = "state"\n[routing]\n'
        + "".join(f'"{a}" = 0.0\n' for a in ACTIONS)
        + extra
        + '[[stages]]\nname = "clone"\ncommand = ["{python}", "-P", "-m", "orchestrator.stages.clone"]\ncwd = "run"\n'
        + FLAKY
    )
    return config, write_ticket(tmp_path / "t", repository="../origin.git")


def _raise(request: ModelRequest) -> ModelReply:
    raise ConnectionResetError("the line dropped")


@pytest.mark.parametrize(
    "script",
    [
        [ModelReply(text=None, model="m-1", stop_reason="max_tokens", error="max_tokens")],
        ["not json at all", _raise],
        ["not json", reply({"action": "nonsense", "summary": "x"})],
    ],
    ids=["error-reply", "gateway-raises-after-a-bad-reply", "invalid-twice"],
)
def test_failed_and_invalid_calls_replay_exactly(tmp_path: Path, script: list[Any]) -> None:
    config, ticket = small_pipeline(tmp_path)
    gateway = ScriptedGateway(list(script), model_name="m-1")  # it pops what it answers
    record = drive(config, tmp_path / "state", ticket, gateway)
    assert record.state is RunState.NEEDS_HUMAN and gateway.calls == len(script)
    [result] = replay(RunStore(tmp_path / "state"), load_config(config), record.run_id, None)
    assert result.identical, result.differences
    assert result.calls_replayed == len(script)


def test_an_investigation_replays_from_its_replies_and_its_trace(tmp_path: Path) -> None:
    config, ticket = small_pipeline(tmp_path, '[diagnosis]\nmode = "investigate"\n')
    gateway = ScriptedGateway(
        [
            reply({"tool": "grep", "args": {"text": "deal"}}),
            reply({"tool": "read_file", "args": {"path": "README.md"}}),
            reply({"final": {"action": "abandon-human", "summary": "the build script is broken"}}),
        ]
    )
    record = drive(config, tmp_path / "state", ticket, gateway)
    assert record.state is RunState.NEEDS_HUMAN
    store = RunStore(tmp_path / "state")
    [result] = replay(store, load_config(config), record.run_id, None)
    assert result.identical, result.differences
    assert result.calls_replayed == 3
    [note] = result.limitations
    assert note.startswith("cannot replay an investigation's tool results")

    # The steps are compared with the ledger's trace; today's single mode is a difference.
    single = tmp_path / "single.toml"
    single.write_text(config.read_text().replace('mode = "investigate"', 'mode = "single"'))
    [result] = replay(store, load_config(single), record.run_id, None)
    assert not result.identical
    assert fields(result)["investigation.step[0].tool"] == Difference(
        "investigation.step[0].tool", "grep", "<absent>"
    )
    assert "decided by an investigation, but today's [diagnosis] mode is single" in (
        result.limitations
    )


def test_an_investigation_refused_for_an_off_list_tool_is_rebuilt_from_the_trace(
    tmp_path: Path,
) -> None:
    """That decision keeps none of its replies; the trace and the reason are enough."""
    config, ticket = small_pipeline(tmp_path, '[diagnosis]\nmode = "investigate"\n')
    gateway = ScriptedGateway(
        [
            reply({"tool": "grep", "args": {"text": "deal"}}),
            "not even json",  # an observation, no trace row: replay does without it
            reply({"tool": "rm_rf", "args": {"path": "/"}}),
        ]
    )
    record = drive(config, tmp_path / "state", ticket, gateway)
    verdict = read_verdict(Path(record.verdicts[0].path))
    # The refusal is accounted for like any call: its replies and usage are kept.
    assert len(verdict.replies) == 3 and verdict.usage.calls == 3
    assert verdict.halt == "invalid_verdict"
    [result] = replay(RunStore(tmp_path / "state"), load_config(config), record.run_id, None)
    assert result.identical, result.differences
