"""The one loop: bounded investigation. It always terminates, it refuses an off-list tool,
and every step — the model's reply and the tool's result — is in the decision's transcript."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.domain.proposals import Source
from orchestrator.domain.transcripts import ModelCall, ToolCall
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.recovery.investigate import DisallowedTool, bounded_investigation

from conftest import examples
from support.hostile_json import hostile_replies, json_values
from support.recovery_fixtures import decision_context, prompt_facts

CTX = decision_context(Path("/c"), ladders={"patch": ("small", "large")})
FACTS = prompt_facts(CTX)
ALLOW = frozenset({"read_file", "grep"})


def tools(calls: list[str]) -> dict[str, Any]:
    def read_file(args: Mapping[str, Any]) -> str:
        calls.append(f"read_file {args.get('path')}")
        return "def deal(deck, n):\n    return [deck.pop() for _ in range(1, n)]\n"

    def grep(args: Mapping[str, Any]) -> str:
        calls.append(f"grep {args.get('text')}")
        return "cards/deck.py:30: range(1, n)"

    def delete_everything(args: Mapping[str, Any]) -> str:  # present, but not allowed
        calls.append("delete_everything")
        return "boom"

    return {"read_file": read_file, "grep": grep, "delete_everything": delete_everything}


def investigate(
    script: list[str], max_steps: int = 3
) -> tuple[Any, list[ToolCall], list[str], ScriptedGateway]:
    calls: list[str] = []
    gateway = ScriptedGateway(script)
    decision = bounded_investigation(
        ctx=CTX, facts=FACTS, bundle_text="(bundle)", gateway=gateway, tools=tools(calls),
        allow=ALLOW, max_steps=max_steps, max_tokens=512,
    )  # fmt: skip
    traced = [e for e in decision.transcript.entries if isinstance(e, ToolCall)]
    return decision, traced, calls, gateway


def test_it_looks_then_decides_and_every_step_is_traced() -> None:
    decision, traced, calls, gateway = investigate(
        [
            json.dumps({"tool": "grep", "args": {"text": "range(1, n)"}}),
            json.dumps({"tool": "read_file", "args": {"path": "cards/deck.py"}}),
            json.dumps(
                {"final": {"action": "retry", "summary": "seen the off-by-one; transient test env"}}
            ),
        ]
    )
    assert decision.source is Source.MODEL and decision.valid
    assert decision.verdict.action == "retry"
    assert calls == ["grep range(1, n)", "read_file cards/deck.py"]
    assert [(s.step, s.tool) for s in traced] == [(0, "grep"), (1, "read_file")]
    # The transcript interleaves the model's steps and the tools' results, in order, and
    # holds every text it names.
    kinds = [e.kind for e in decision.transcript.entries]
    assert kinds == ["model", "tool", "model", "tool", "model"]
    assert decision.transcript.texts[traced[0].result_sha256] == "cards/deck.py:30: range(1, n)"
    assert all(
        e.reply_sha256 in decision.transcript.texts
        for e in decision.transcript.entries
        if isinstance(e, ModelCall)
    )
    assert gateway.calls == 3
    # What the tools returned is shown to the model on the next step, as untrusted data.
    assert "cards/deck.py:30: range(1, n)" in gateway.requests[1].prompt


def test_it_always_terminates_a_model_that_never_decides_hits_the_cap() -> None:
    never_final = [json.dumps({"tool": "grep", "args": {"text": "x"}})] * 10
    decision, traced, _, gateway = investigate(never_final, max_steps=3)
    assert gateway.calls == 3 and len(traced) == 3
    assert decision.requires_human  # → routed hitl_required by the graph
    assert decision.verdict.action == "abandon-human"
    assert "step cap (3)" in decision.reason


def test_it_refuses_an_off_list_tool() -> None:
    with pytest.raises(DisallowedTool, match="delete_everything"):
        investigate([json.dumps({"tool": "delete_everything", "args": {}})])


def test_the_refusal_happens_before_the_tool_runs() -> None:
    calls: list[str] = []
    with pytest.raises(DisallowedTool):
        bounded_investigation(
            ctx=CTX, facts=FACTS, bundle_text="", gateway=ScriptedGateway([json.dumps({"tool": "delete_everything"})]),
            tools=tools(calls), allow=ALLOW, max_steps=3, max_tokens=512,
        )  # fmt: skip
    assert calls == []


def test_an_invalid_final_answer_is_fed_back_and_counts_as_a_step() -> None:
    decision, _, _, gateway = investigate(
        [
            json.dumps({"final": {"action": "reboot"}}),
            json.dumps({"final": {"action": "abandon-human", "summary": "x"}}),
        ]
    )
    assert decision.valid and decision.verdict.action == "abandon-human"
    assert "that verdict is invalid" in gateway.requests[1].prompt


@pytest.mark.slow
def test_in_the_pipeline_the_loop_is_traced_into_the_ledger_and_a_cap_hit_waits_for_a_person(
    tmp_path: Path,
) -> None:
    from orchestrator.app.ledger_link import ledger_for
    from orchestrator.domain.lifecycle import RunState

    from conftest import write_ticket
    from support.harness import Harness, flaky, make_origin, write_pipeline

    make_origin(tmp_path, {"README.md": "hello\n", "app.py": "print('hi')\n"})
    config = write_pipeline(
        tmp_path,
        flaky("build", fails=9),
        recovery='[diagnosis]\nmode = "investigate"\nmax_steps = 2\n',
    )
    gateway = ScriptedGateway(
        [
            json.dumps({"tool": "read_file", "args": {"path": "app.py"}}),
            json.dumps({"tool": "git_log", "args": {"n": 3}}),
        ]
    )
    h = Harness(config, gateway)
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.AWAITING_APPROVAL, record.halt
    proposal = json.loads(Path(record.verdicts[0].path).read_text())["proposal"]
    assert proposal["routing"] == "hitl_required"
    rows = list(ledger_for(tmp_path / "state", {}).rows())
    traces = [r for r in rows if r["kind"] == "trace"]
    assert [(r["decision"]["step"], r["decision"]["tool"]) for r in traces] == [
        (0, "read_file"),
        (1, "git_log"),
    ]
    assert [r["kind"] for r in rows] == ["trace", "trace", "decision"]


@pytest.mark.parametrize("name", [["grep"], {"grep": 1}, 7, None])
def test_a_tool_name_that_is_not_a_string_is_refused_not_a_crash(name: object) -> None:
    with pytest.raises(DisallowedTool) as refused:
        investigate([json.dumps({"tool": name, "args": {}})])
    assert refused.value.tool == repr(name)


@pytest.mark.slow
@pytest.mark.quick
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        hostile_replies
        | hostile_replies.map(lambda r: '{"final": ' + r + "}")
        | json_values.map(lambda args: json.dumps({"tool": "grep", "args": args})),
        min_size=3,
        max_size=3,
    )
)
def test_whatever_the_steps_say_the_loop_ends_in_a_decision_or_a_refusal(
    texts: list[str],
) -> None:
    try:
        decision, traced, _, _ = investigate(list(texts), max_steps=3)
    except DisallowedTool as refused:
        refused.tool.encode("utf-8")
        assert len(refused.tool) <= 60
        return
    assert decision.valid or decision.verdict.action == "abandon-human"
    for text in decision.transcript.texts.values():
        text.encode("utf-8")
    for step in traced:
        json.dumps(step.args).encode("utf-8")  # tool arguments are stored as they came
