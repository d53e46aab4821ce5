"""Replay: today's code, re-fed the recorded call transcript, reaches the same decision and
the same dispatch — with no model call, nothing executed and nothing written — and a
tampered reply, a changed request, a changed threshold or an edited confidence is
reported field by field, naming the call where the history diverged."""

from __future__ import annotations

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
from orchestrator.domain.runs import RunRecord
from orchestrator.domain.tickets import load_ticket
from orchestrator.recovery.gateway import ModelGateway, ModelReply, ModelRequest, ScriptedGateway
from orchestrator.storage.decisions import read_verdict
from orchestrator.storage.runs import RunStore

from conftest import ROOT, write_ticket
from support.gitrepo import bare_clone, commit_files, init_repo
from support.once import built_once
from support.services import make_services

pytestmark = pytest.mark.slow

ACTIONS = ("retry", "escalate-model", "switch-engine", "split", "abandon-human", "mechanical-fix")
ENVIRON = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "DRY_RUN": "false"}


def reply(obj: dict[str, Any]) -> str:
    return json.dumps(obj)


def drive(
    config: Path, state: Path, ticket: Path, gateway: ModelGateway | None = None
) -> RunRecord:
    services = make_services(
        load_config(config),
        state,
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


def build_runs(root: Path) -> None:
    """The runs every replay test reads, with the ids of each in ``runs.json``."""
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
    model_run = drive(model_config, root / "model" / "state", layout.tickets["CARDS-3"], gateway)
    assert model_run.state is RunState.NEEDS_HUMAN, model_run.halt
    assert [(v.source, v.action) for v in model_run.verdicts] == [
        ("model", "retry"),
        ("model", "abandon-human"),
    ]
    assert gateway.calls == 4  # two diagnoses, each reviewed by the judge
    for ref in model_run.verdicts:
        assert read_verdict(Path(ref.path)).proposal.evidence.judge.sampled
    ids = {"demo": {t: r.run_id for t, r in demo.items()}, "model": model_run.run_id}
    (root / "runs.json").write_text(json.dumps(ids))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Runs:
    # Built once per test run whichever worker asks first (a score of runs of the real
    # pipeline): no test writes under it; those that edit a run copy it first.
    root = built_once(tmp_path_factory, pytestconfig, "replay-runs", build_runs)
    ids = json.loads((root / "runs.json").read_text())
    state, model_state = root / "state", root / "model" / "state"
    return Runs(
        root=root,
        state=state,
        demo={t: RunStore(state).load(run_id) for t, run_id in ids["demo"].items()},
        model_state=model_state,
        model_config=root / "model" / "config.toml",
        model_run=RunStore(model_state).load(ids["model"]),
    )


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
            assert verdict.transcript is not None
            # Exactly the recorded calls (diagnosis, and the judge's) were re-fed.
            assert result.calls_replayed == len(verdict.transcript)
            assert (result.action, result.routing) == (verdict.action, verdict.proposal.routing)
            replayed += 1
    assert replayed == 4  # CARDS-1 playbook, CARDS-3 synthetic, two model verdicts
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


def _tree_digest(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_replay_starts_no_process_and_changes_no_file(
    runs: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replay re-decides from what is on disk: with every way of starting a process made
    to fail, it still replays each decision identically, and the state dir (clones,
    ledger and its index included) is byte for byte what it was."""

    def no_process(*args: object, **kwargs: object) -> None:
        raise AssertionError("replay started a process")

    import subprocess

    monkeypatch.setattr(subprocess.Popen, "__init__", no_process)
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve"):
        monkeypatch.setattr(os, name, no_process)
    before = _tree_digest(runs.model_state)
    results = replay(
        RunStore(runs.model_state), load_config(runs.model_config), runs.model_run.run_id, None
    )
    assert len(results) == 2 and all(r.identical for r in results), results
    assert _tree_digest(runs.model_state) == before


# ---- differences ------------------------------------------------------------------------


def replies_of(store: RunStore, run_id: str) -> Path:
    return store.runs_dir / f"{run_id}.replies"


def test_a_changed_reply_is_different_and_the_call_is_named(runs: Runs, tmp_path: Path) -> None:
    store = copy_state(runs.model_state, tmp_path / "state")
    run_id = runs.model_run.run_id
    verdict = read_verdict(store.verdict_path(run_id, 1))
    assert verdict.transcript is not None
    diagnosis = verdict.transcript[0]
    assert diagnosis.kind == "model" and diagnosis.reply_sha256 is not None
    blob = replies_of(store, run_id) / f"{diagnosis.reply_sha256}.txt"
    assert json.loads(blob.read_text())["action"] == "retry"
    changed = reply(
        {"action": "abandon-human", "summary": "the test run looks flaky; run it again"}
    )
    blob.write_text(changed)

    [result] = replay(store, load_config(runs.model_config), run_id, 1)
    assert not result.identical
    differences = fields(result)
    assert differences["transcript.call[0] (diagnosis).reply"].then == diagnosis.reply_sha256
    assert differences["action"] == Difference("action", "retry", "abandon-human")
    assert differences["dispatch.action"] == Difference("dispatch.action", "retry", "abandon-human")
    assert differences["dispatch.rerun"] == Difference("dispatch.rerun", "implement", None)
    assert differences["dispatch.terminal"] == Difference("dispatch.terminal", None, "needs-human")
    assert "verdict.summary" not in differences  # the same words: only what changed is listed
    out = io.StringIO()
    code = replay_command(tmp_path / "state", runs.model_config, run_id, 1, out, as_json=False)
    assert code == EXIT_DIFFERENT == 8
    lines = out.getvalue().splitlines()
    assert lines[0] == "verdict 1: DIFFERENT"
    assert "  action: retry → abandon-human" in lines
    assert "  dispatch.rerun: implement → null" in lines


def test_a_request_that_differs_from_the_recorded_one_is_a_divergence(
    runs: Runs, tmp_path: Path
) -> None:
    """Temporal-style: the judge's request today is not the one recorded (as when its
    prompt is reworded): the call is named, whatever its reply."""
    store = copy_state(runs.model_state, tmp_path / "state")
    run_id = runs.model_run.run_id
    path = store.verdict_path(run_id, 2)
    recorded = json.loads(path.read_text())["transcript"][1]
    assert recorded["purpose"] == "judge"
    edit_verdict(path, lambda v: v["transcript"][1].__setitem__("request_sha256", "0" * 64))
    [result] = replay(store, load_config(runs.model_config), run_id, 2)
    assert not result.identical
    [divergence] = result.differences
    assert divergence.field == "transcript.call[1] (judge).request"
    assert divergence.then == f"judge {'0' * 64}"
    assert divergence.now == f"judge {recorded['request_sha256']}"


def test_a_call_the_transcript_does_not_have_and_one_never_made(runs: Runs, tmp_path: Path) -> None:
    store = copy_state(runs.model_state, tmp_path / "state")
    run_id = runs.model_run.run_id
    edit_verdict(store.verdict_path(run_id, 1), lambda v: v["transcript"].pop())  # the judge's
    [result] = replay(store, load_config(runs.model_config), run_id, 1)
    assert fields(result)["transcript.call[1].missing"] == Difference(
        "transcript.call[1].missing", "<none>", "judge"
    )

    def no_judge(raw: dict[str, Any]) -> None:
        model_pipeline(raw)
        raw["judge"] = {"sample_rate": 0.0}

    config = derived_config(tmp_path / "no-judge.toml", no_judge)
    [result] = replay(RunStore(runs.model_state), load_config(config), run_id, 1)
    assert fields(result)["transcript.call[1] (judge).unused"].now == "<not made>"


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


def test_an_investigation_replays_exactly_from_its_transcript(tmp_path: Path) -> None:
    """The tools' results are in the transcript too: nothing is a placeholder."""
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
    verdict = read_verdict(Path(record.verdicts[0].path))
    assert verdict.transcript is not None
    assert [e.kind for e in verdict.transcript] == ["model", "tool", "model", "tool", "model"]
    [result] = replay(store, load_config(config), record.run_id, None)
    assert result.identical, result.differences
    assert result.calls_replayed == 3 and result.limitations == []

    # Today's single mode asks another question than the recorded investigation step.
    single = tmp_path / "single.toml"
    single.write_text(config.read_text().replace('mode = "investigate"', 'mode = "single"'))
    [result] = replay(store, load_config(single), record.run_id, None)
    assert not result.identical
    assert result.differences[0].field == "transcript.call[0] (investigation).request"
    assert result.differences[0].now.startswith("diagnosis ")


def test_an_investigation_refused_for_an_off_list_tool_replays_exactly(tmp_path: Path) -> None:
    config, ticket = small_pipeline(tmp_path, '[diagnosis]\nmode = "investigate"\n')
    gateway = ScriptedGateway(
        [
            reply({"tool": "grep", "args": {"text": "deal"}}),
            "not even json",  # an observation, no tool call
            reply({"tool": "rm_rf", "args": {"path": "/"}}),
        ]
    )
    record = drive(config, tmp_path / "state", ticket, gateway)
    verdict = read_verdict(Path(record.verdicts[0].path))
    # The refusal is accounted for like any call: its calls and usage are kept.
    assert verdict.transcript is not None
    assert [e.kind for e in verdict.transcript] == ["model", "tool", "model", "model"]
    assert verdict.usage.calls == 3 and verdict.halt == "invalid_verdict"
    [result] = replay(RunStore(tmp_path / "state"), load_config(config), record.run_id, None)
    assert result.identical, result.differences


def test_a_reply_longer_than_any_old_cut_replays_identical(tmp_path: Path) -> None:
    """Replies are stored whole: the old 16,000-character cut is gone."""
    config, ticket = small_pipeline(tmp_path)
    padded = '{"action": "abandon-human",' + " " * 40_000 + '"summary": "too broken to retry"}'
    gateway = ScriptedGateway(["x" * 20_000, padded], model_name="m-1")
    record = drive(config, tmp_path / "state", ticket, gateway)
    assert record.state is RunState.NEEDS_HUMAN
    store = RunStore(tmp_path / "state")
    verdict = read_verdict(Path(record.verdicts[0].path))
    assert verdict.transcript is not None and verdict.valid
    stored = sorted(
        len((replies_of(store, record.run_id) / f"{call.reply_sha256}.txt").read_text())
        for call in verdict.transcript
        if call.kind == "model"
    )
    assert stored == [20_000, len(padded)]
    [result] = replay(store, load_config(config), record.run_id, None)
    assert result.identical, result.differences
    assert result.calls_replayed == 2


@pytest.mark.slow
@pytest.mark.quick
def test_secrets_in_a_reply_are_redacted_before_it_is_stored(tmp_path: Path) -> None:
    config, ticket = small_pipeline(tmp_path)
    token = "ghp_" + "a1B2c3D4e5" * 4
    gateway = ScriptedGateway(
        [f"use {token} to log in", reply({"action": "abandon-human", "summary": "stuck"})]
    )
    record = drive(config, tmp_path / "state", ticket, gateway)
    state = tmp_path / "state"
    assert not [p for p in state.rglob("*") if p.is_file() and token.encode() in p.read_bytes()]
    verdict = read_verdict(Path(record.verdicts[0].path))
    assert verdict.transcript is not None
    first = verdict.transcript[0]
    assert first.kind == "model" and first.redactions == 1
    [result] = replay(RunStore(state), load_config(config), record.run_id, None)
    assert result.identical, result.differences
    assert result.limitations == [
        "call 0 (diagnosis): its reply was stored after scrubbing (1 replacement(s)); "
        "replay reads the scrubbed text"
    ]


# ---- verdict files written before the transcript ----------------------------------------

OLD_STATE = ROOT / "tests" / "data" / "old_state"
OLD_PREFIX = "/tmp/h1old/w/mstate"


def old_state(tmp_path: Path) -> Path:
    """The state dir written by the code before typed decisions, moved to ``tmp_path``."""
    target = tmp_path / "old"
    shutil.copytree(OLD_STATE, target)
    for path in (target / "runs").iterdir():
        path.write_text(path.read_text().replace(OLD_PREFIX, str(target)))
    return target


def test_an_old_verdict_file_is_read_and_replayed_or_said_not_replayable(
    tmp_path: Path,
) -> None:
    state = old_state(tmp_path)
    store = RunStore(state)
    cards3 = "CARDS-3-20261130T232652Z-6de1"
    first = read_verdict(store.verdict_path(cards3, 1))
    # The old evidence list and inputs read into the typed models.
    assert first.proposal.evidence.failure.stage == "review"
    assert first.proposal.evidence.judge.agrees is True
    assert first.inputs is not None and first.inputs.caps.max_diagnoses == 4
    assert first.transcript is None and first.replies  # the old replies, still readable

    out = io.StringIO()
    code = replay_command(state, ROOT / "config.toml", cards3, None, out, as_json=False)
    assert code == EXIT_DIFFERENT
    lines = out.getvalue().splitlines()
    assert lines[:2] == [
        "verdict 1: NOT REPLAYED",
        "  note: written before verdict files carried a call transcript: its 2 model call(s) "
        "cannot be replayed exactly",
    ]
    # A decision that made no call needs no transcript: it replays exactly.
    [result] = replay(store, load_config(ROOT / "config.toml"), "CARDS-1-20261130T232650Z-1a8b", 1)
    assert result.identical, result.differences
    assert result.action == "mechanical-fix" and result.calls_replayed == 0


def test_an_old_state_dir_is_readable_by_show_and_verdicts(tmp_path: Path) -> None:
    from orchestrator.cli.commands.show import show
    from orchestrator.cli.commands.verdicts import verdicts

    state = old_state(tmp_path)
    out = io.StringIO()
    assert show(state, "CARDS-3-20261130T232652Z-6de1", out) == 0
    text = out.getvalue()
    assert "      why: the test run looks flaky; run it again" in text
    assert "      routing auto at confidence 0.7917; model scripted, 2 call(s)" in text
    assert "      calls: not recorded (written before verdict files carried a transcript)" in text

    out, errors = io.StringIO(), io.StringIO()
    assert (
        verdicts(state, out, action=None, source=None, since=None, as_json=False, errors=errors)
        == 0
    )
    assert errors.getvalue() == ""
    rows = out.getvalue().splitlines()[1:]
    assert [row.split()[4:6] for row in rows] == [
        ["playbook", "mechanical-fix"],
        ["model", "retry"],
        ["model", "abandon-human"],
    ]


def test_show_lists_the_recorded_calls(runs: Runs) -> None:
    from orchestrator.cli.commands.show import show

    out = io.StringIO()
    assert show(runs.model_state, runs.model_run.run_id, out) == 0
    assert out.getvalue().count("      calls: diagnosis, judge") == 2


# ---- decisions made under an older prompt -----------------------------------------------

# Written by the code whose prompt was ``recovery-v1`` (the verdict schema in the text),
# with its state dir at this path: the bundles are kept byte for byte (the prompt quoted
# them), every other file is moved to the test's own directory.
V1_STATE = ROOT / "tests" / "data" / "prompt_v1_state"
V1_PREFIX = "/tmp/h7-v1-prompt/model"
V1_RUN = "CARDS-3-20261201T030021Z-e268"


def v1_state(tmp_path: Path) -> tuple[RunStore, Path]:
    target = tmp_path / "v1"
    shutil.copytree(V1_STATE, target)
    for path in (target / "state" / "runs").iterdir():
        if path.is_file() and ".bundle-" not in path.name:
            path.write_text(path.read_text().replace(V1_PREFIX, str(target)))
    return RunStore(target / "state"), target / "config.toml"


def test_a_decision_made_under_the_older_prompt_replays_under_it(tmp_path: Path) -> None:
    store, config = v1_state(tmp_path)
    for number in (1, 2):
        assert read_verdict(store.verdict_path(V1_RUN, number)).prompt_version == "recovery-v1"
    results = replay(store, load_config(config), V1_RUN, None)
    assert [(r.identical, r.limitations, r.calls_replayed) for r in results] == [
        (True, [], 2),
        (True, [], 2),
    ], [r.differences for r in results]
    out = io.StringIO()
    assert replay_command(store.state_dir, config, V1_RUN, None, out, as_json=False) == 0


def test_a_prompt_version_this_code_does_not_know_is_replayed_under_todays_and_said(
    tmp_path: Path,
) -> None:
    """The words matter: the same decision under today's prompt diverges at its first
    call, and the replay says the prompt changed."""
    store, config = v1_state(tmp_path)
    path = store.verdict_path(V1_RUN, 1)
    edit_verdict(path, lambda v: v.__setitem__("prompt_version", "recovery-v0"))
    [result] = replay(store, load_config(config), V1_RUN, 1)
    assert not result.identical
    assert "transcript.call[0] (diagnosis).request" in fields(result)
    assert result.limitations[0].startswith(
        "the prompt changed since (recovery-v0 → recovery-v3): "
    )
