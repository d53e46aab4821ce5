"""Whatever the model says, the loop ends with a persisted, valid verdict and never runs a
command taken from an invalid one. Driven through the real driver and runner."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from orchestrator.app.driver import run_ticket
from orchestrator.domain.config import load_config
from orchestrator.domain.lifecycle import TERMINAL, RunState
from orchestrator.domain.tickets import load_ticket
from orchestrator.domain.verdicts import MechanicalFixVerdict
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.recovery.verdict import validate_verdict_object
from orchestrator.storage.decisions import read_verdict

from conftest import examples, write_ticket
from support.hostile_json import hostile_replies
from support.recording_executor import RecordingExecutor
from support.services import make_services

PIPELINE = """\
state_dir = "state"
[recovery]
max_diag_invocations_per_ticket = 1
max_retries_per_ticket = 1
[engines.a]
command = ["bash", "-c", "exit 1"]
models = ["small", "large"]
[engines.b]
command = ["bash", "-c", "exit 1"]
[[stages]]
name = "clone"
cwd = "run"
# A clone with a base to reset to (origin/main), as a real clone has, without a remote.
command = ["bash", "-c", "git init -q -b main clone && git -C clone -c user.name=t -c user.email=t@t commit -q --allow-empty -m base && git -C clone update-ref refs/remotes/origin/main HEAD"]
[[stages]]
name = "implement"
engine = "a"
[[stages]]
name = "review"
[[stages.checks]]
name = "c"
command = ["bash", "-c", "exit 1"]
on_red_base = "ignore"  # red on the base too: these runs are about the model's replies
"""

PIPELINE_CLONE = (
    "bash",
    "-c",
    "git init -q -b main clone && git -C clone -c user.name=t -c user.email=t@t commit -q "
    "--allow-empty -m base && git -C clone update-ref refs/remotes/origin/main HEAD",
)

commands = st.sampled_from(
    [
        "git -C <clone> status",
        "git -C <clone> log --oneline",
        "rm -rf /tmp/should-never-run",
        "git -C /tmp status",
        "git status; touch /tmp/should-never-run",
        "touch <clone>/marker",
        "",
    ]
)
verdicts = st.fixed_dictionaries(
    {
        "action": st.sampled_from(
            [
                "retry",
                "escalate-model",
                "switch-engine",
                "split",
                "abandon-human",
                "mechanical-fix",
                "reboot",
            ]
        )
    },
    optional={
        "summary": st.sampled_from(["why", "", " "]),
        "engine": st.sampled_from(["a", "b", "zzz"]),
        "repair_plan": st.fixed_dictionaries(
            {
                "verification_check": st.sampled_from(["c", "other"]),
                "commands": st.lists(commands, max_size=3),
            }
        ),
        "sub_tickets": st.lists(
            st.fixed_dictionaries({"title": st.just("t"), "body": st.just("b")}), max_size=3
        ),
        "junk": st.integers(),
    },
)
replies = st.one_of(
    st.text(max_size=60),
    verdicts.map(json.dumps),
    verdicts.map(lambda v: "Sure: " + json.dumps(v)),
    # Any JSON value in any field, 10,000-deep nesting, lone surrogates, NaN, huge numbers,
    # duplicate keys, non-objects, raw text.
    hostile_replies,
)


# Forty examples in all, every one a run of the real driver (about a second of CPU each):
# drawn as two independent halves, so two workers share them instead of one running the
# suite's longest test alone at its end.
@pytest.mark.slow
@pytest.mark.parametrize("half", [1, 2])
@settings(
    max_examples=examples(20, least=4),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(texts=st.lists(replies, min_size=4, max_size=4))
# Found by hypothesis: an invalid reply, then a valid one routed to a person.
@example(texts=["", '{"action": "retry", "summary": "w"}', "", ""])
def test_any_model_output_ends_in_a_persisted_valid_verdict(half: int, texts: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "config.toml").write_text(PIPELINE)
        loaded = load_config(root / "config.toml")
        executor = RecordingExecutor()

        gateway = ScriptedGateway(list(texts))
        services = make_services(
            loaded,
            root / "state",
            environ={"PATH": os.environ["PATH"], "HOME": tmp},
            executor=executor,
            gateway_factory=lambda: gateway,
            sleep=lambda seconds: None,
        )
        record = run_ticket(load_ticket(write_ticket(root / "t")), services)

        # The loop always ends: in a terminal state, or waiting for a person to approve a
        # proposal routed to them (whose decision is then on disk but not carried out).
        assert record.state in TERMINAL or record.state is RunState.AWAITING_APPROVAL
        if record.state is RunState.AWAITING_APPROVAL:
            assert record.verdicts[-1].outcome is None
        assert record.verdicts, "a failure always leaves a decision on disk"
        assert gateway.calls <= 2  # one diagnosis (cap 1) plus at most one re-ask
        for ref in record.verdicts:
            json.loads(Path(ref.path).read_bytes().decode("utf-8"))  # strict: valid UTF-8
            stored = read_verdict(Path(ref.path))
            # The stored verdict, checked again from its JSON as a model reply would be.
            verdict, errors = validate_verdict_object(stored.verdict.model_dump(mode="json"))
            assert verdict is not None and errors == []
            if not stored.valid:
                assert stored.action == "abandon-human"
        stored_verdicts = [read_verdict(Path(ref.path)) for ref in record.verdicts]
        valid_recipes = {
            cmd
            for stored in stored_verdicts
            if stored.valid and isinstance(stored.verdict, MechanicalFixVerdict)
            for cmd in stored.verdict.repair_plan.commands
        }
        configured = {PIPELINE_CLONE, ("bash", "-c", "exit 1")}
        for argv in executor.started:  # every process, the orchestrator's own git included
            if argv in configured or (
                argv[:1] == ("git",)
                and argv[1:2]
                in (("update-ref",), ("reset",), ("clean",), ("rev-parse",), ("diff",), ("config",))
            ):
                continue
            if argv == ("true",):
                continue  # the sandbox's probe: can bwrap start here at all
            if argv[1:4] == ("-P", "-m", "orchestrator.stages.engine_workspace"):
                continue  # the orchestrator's own workspace step around the engine
            # Anything else must be a recipe command of a valid verdict.
            assert any(argv[-1] in cmd for cmd in valid_recipes), argv
        assert not Path("/tmp/should-never-run").exists()
        for text in (root / "state" / "runs").glob("*.replies/*.txt"):
            text.read_bytes().decode("utf-8")
