"""The verdict's closed vocabulary: shape and meaning, without any world."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from orchestrator.domain.verdicts import (
    Action,
    DecisionContext,
    MechanicalFixVerdict,
    SplitVerdict,
    names_check,
    next_model,
    verdict_json_schema,
)
from orchestrator.domain.vocabulary import semantic_errors
from orchestrator.recovery.verdict import parse_verdict, validate_verdict_object

from conftest import examples
from support.hostile_json import hostile_replies

SEED_FIX = {
    "action": "mechanical-fix",
    "summary": "bug-fix ticket squashed the code fix and its test into one commit",
    "repair_plan": {
        "verification_check": "bash scripts/dev.sh lint-bug-commit-order",
        "commands": [
            "git -C <clone> reset --soft HEAD~1",
            "git -C <clone> restore --staged -- tests/",
            "git -C <clone> commit -m 'fix: correct the off-by-one in the deal'",
            "git -C <clone> add -- tests/",
            "git -C <clone> commit -m 'test: pin the corrected deal'",
        ],
    },
}


def ctx(tmp_path: Path, **overrides: object) -> DecisionContext:
    values: dict[str, object] = {
        "failing_stage": "review",
        "failing_check": "lint-bug-commit-order",
        "code_stage": "implement",
        "current_engine": "patch",
        "current_model": "small",
        "ladders": {"patch": ("small", "large"), "aider": ("m1",)},
        "clone_dir": tmp_path,
        "recipe_allowlist": ("git",),
    }
    values.update(overrides)
    return DecisionContext(**values)  # type: ignore[arg-type]


def test_the_vocabulary_is_closed_at_six() -> None:
    assert [a.value for a in Action] == [
        "retry",
        "escalate-model",
        "switch-engine",
        "split",
        "abandon-human",
        "mechanical-fix",
    ]
    schema = json.dumps(verdict_json_schema())
    for action in Action:
        assert f'"{action.value}"' in schema


def test_the_seeds_worked_example_is_a_valid_verdict(tmp_path: Path) -> None:
    verdict, errors = parse_verdict(json.dumps(SEED_FIX))
    assert errors == []
    assert isinstance(verdict, MechanicalFixVerdict)
    assert verdict.repair_plan.commands[0] == "git -C <clone> reset --soft HEAD~1"
    assert semantic_errors(verdict, ctx(tmp_path)) == []


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("Sure! " + json.dumps(SEED_FIX), "reply is not a single JSON object"),
        (json.dumps(SEED_FIX) + "\nHope that helps.", "reply is not a single JSON object"),
        ("[]", "reply is JSON but not an object (got list)"),
        (
            '{"action": "reboot", "summary": "x"}',
            "action: 'reboot' is not one of: retry, escalate-model",
        ),
        ('{"action": "retry"}', "summary: required key is missing"),
        ('{"action": "retry", "summary": ""}', "summary: String should have at least 1 character"),
        ('{"action": "retry", "summary": "   "}', "summary: String should match pattern"),
        (
            '{"action": "retry", "summary": "x", "execute_shell": "rm -rf /"}',
            "execute_shell: unknown key",
        ),
        ('{"action": "switch-engine", "summary": "x"}', "engine: required key is missing"),
        ('{"action": "retry", "summary": 5}', "summary: Input should be a valid string"),
        (
            '{"action": "mechanical-fix", "summary": "x", "repair_plan": {"verification_check": "c", "commands": []}}',
            "repair_plan.commands: expected at least 1 item(s)",
        ),
        (
            '{"action": "mechanical-fix", "summary": "x", "repair_plan": {"verification_check": "c", "commands": [""]}}',
            "repair_plan.commands[0]: String should have at least 1 character",
        ),
        (
            '{"action": "split", "summary": "x", "sub_tickets": [{"title": "a", "body": "b"}]}',
            "sub_tickets: expected at least 2 item(s)",
        ),
        (
            '{"action": "retry", "summary": "' + "x" * 2001 + '"}',
            "summary: String should have at most 2000 characters",
        ),
    ],
)
def test_malformed_replies_are_not_verdicts(reply: str, error: str) -> None:
    verdict, errors = parse_verdict(reply)
    assert verdict is None
    assert any(error in e for e in errors), errors


def test_a_whole_reply_json_fence_is_tolerated_but_nothing_else_around_it() -> None:
    fenced = "```json\n" + json.dumps({"action": "retry", "summary": "flaky"}) + "\n```"
    assert parse_verdict(fenced)[1] == []
    assert parse_verdict("Here:\n" + fenced)[0] is None


def test_split_carries_sub_tickets() -> None:
    verdict, _ = parse_verdict(
        json.dumps(
            {
                "action": "split",
                "summary": "two concerns",
                "sub_tickets": [{"title": "a", "body": "do a"}, {"title": "b", "body": "do b"}],
            }
        )
    )
    assert isinstance(verdict, SplitVerdict)
    assert [s.title for s in verdict.sub_tickets] == ["a", "b"]


@pytest.mark.parametrize(
    ("verdict", "overrides", "error"),
    [
        (
            {"action": "switch-engine", "summary": "x", "engine": "codex"},
            {},
            "engine: 'codex' is not a configured engine",
        ),
        (
            {"action": "switch-engine", "summary": "x", "engine": "patch"},
            {},
            "engine: 'patch' is the engine that just failed",
        ),
        (
            {"action": "escalate-model", "summary": "x"},
            {"current_model": "large"},
            "no model above 'large'",
        ),
        (
            {"action": "escalate-model", "summary": "x"},
            {"current_engine": None},
            "runs no engine with a model ladder",
        ),
        (
            {**SEED_FIX, "repair_plan": {**SEED_FIX["repair_plan"], "verification_check": "true"}},  # type: ignore[dict-item]
            {},
            "must name the failing check 'lint-bug-commit-order' (got 'true')",
        ),
        (SEED_FIX, {"failing_check": None}, "the failure was not a check"),
        (
            {
                **SEED_FIX,
                "repair_plan": {
                    "verification_check": "lint-bug-commit-order",
                    "commands": ["rm -rf tests"],
                },
            },  # type: ignore[dict-item]
            {},
            "repair_plan.commands[0]: executable 'rm' is not on the recipe allow-list ['git']",
        ),
    ],
)
def test_semantic_checks_refuse_verdicts_that_do_not_fit_the_failure(
    tmp_path: Path, verdict: dict[str, object], overrides: dict[str, object], error: str
) -> None:
    parsed, shape_errors = parse_verdict(json.dumps(verdict))
    assert parsed is not None, shape_errors
    assert any(error in e for e in semantic_errors(parsed, ctx(tmp_path, **overrides)))


def test_valid_escalation_and_switch(tmp_path: Path) -> None:
    for verdict in (
        {"action": "escalate-model", "summary": "x"},
        {"action": "switch-engine", "summary": "x", "engine": "aider"},
        {"action": "retry", "summary": "x"},
        {"action": "abandon-human", "summary": "x"},
    ):
        parsed, _ = parse_verdict(json.dumps(verdict))
        assert parsed is not None
        assert semantic_errors(parsed, ctx(tmp_path)) == []


def test_ladder_and_check_naming_helpers() -> None:
    assert next_model(("a", "b", "c"), "a") == "b"
    assert next_model(("a", "b"), "b") is None
    assert next_model(("a",), "zzz") is None
    assert next_model(("a", "b"), None) == "a"
    assert names_check("lint-bug-commit-order", "lint-bug-commit-order")
    assert names_check("bash scripts/dev.sh lint-bug-commit-order", "lint-bug-commit-order")
    assert not names_check("project-tests", "lint-bug-commit-order")


# ---- every reply fails closed ----------------------------------------------------------

DEEP = 10_000


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ('{"action": ["retry"], "summary": "x"}', "action: ['retry'] is not one of"),
        ('{"action": {"retry": 1}, "summary": "x"}', "action: {'retry': 1} is not one of"),
        ('{"action": 7, "summary": "x"}', "action: 7 is not one of"),
        ('{"action": null, "summary": "x"}', "action: None is not one of"),
        ('{"action": true, "summary": "x"}', "action: True is not one of"),
        ('{"action": "retry", "summary": ["x"]}', "summary: Input should be a valid string"),
        ('{"action": "retry", "summary": null}', "summary: Input should be a valid string"),
        ("[" * DEEP + "]" * DEEP, "nested deeper than 16 levels"),
        ('{"a":' * DEEP + "1" + "}" * DEEP, "nested deeper than 16 levels"),
        ('{"action": ' + "[" * DEEP + "]" * DEEP + "}", "nested deeper than 16 levels"),
        ('{"action": "retry", "summary": "\\ud800"}', "a string holds a lone surrogate"),
        ('{"\\udfff": 1, "action": "retry", "summary": "x"}', "a key holds a lone surrogate"),
        ('{"action": "retry", "summary": "a\ud800b"}', "reply holds a lone surrogate"),
        ('{"action": "retry", "summary": 1e999}', "the number 1e999 is out of range"),
        ('{"action": "retry", "summary": -1e999}', "out of range"),
        ('{"action": "retry", "summary": NaN}', "NaN is not a JSON number"),
        ('{"action": "retry", "summary": Infinity}', "Infinity is not a JSON number"),
        ('{"action": ' + "9" * 10_000 + ', "summary": "x"}', "a number with 10000 digits"),
        ('{"action": "retry", "action": "abandon-human", "summary": "x"}', "duplicate key"),
        ('{"action": "retry", "summary": "' + "x" * 70_000 + '"}', "longer than 64000"),
        ('"retry"', "not an object (got str)"),
        ("[1, 2]", "not an object (got list)"),
        ("null", "not an object (got NoneType)"),
        ("1e999", "out of range"),
    ],
)
def test_every_oddity_in_a_reply_is_a_validation_error(reply: str, error: str) -> None:
    verdict, errors = parse_verdict(reply)
    assert verdict is None
    assert len(errors) >= 1 and any(error in e for e in errors), errors
    for message in errors:
        message.encode("utf-8")  # every message can be stored and shown
        assert len(message) <= 300


def test_json_nested_to_the_limit_still_parses_and_one_more_level_does_not() -> None:
    inside = "[" * 15 + "]" * 15  # the reply's object and 15 lists: 16 levels
    verdict, errors = parse_verdict('{"action": "retry", "summary": "x", "n": ' + inside + "}")
    assert verdict is None and errors == ["n: unknown key (not allowed here)"]
    deeper = '{"action": "retry", "summary": "x", "n": [' + inside + "]}"
    assert parse_verdict(deeper)[1] == ["reply is nested deeper than 16 levels"]


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    summary = "[" * 100 + '\\"{' * 50  # escaped quotes do not end the string
    verdict, errors = parse_verdict(json.dumps({"action": "retry", "summary": summary}))
    assert errors == [] and verdict is not None and verdict.summary == summary


@pytest.mark.parametrize(
    "value",
    [
        {"action": ["retry"], "summary": "x"},
        {"action": {"a": 1}, "summary": "x"},
        {"action": "retry", "summary": "\ud800"},
        {"action": "retry", "summary": float("nan")},
        {"action": "retry", "summary": 10**5000},
        {"action": "retry", "summary": object()},
        {1: "retry"},
        ["action", "retry"],
        "retry",
        None,
    ],
)
def test_validating_an_object_of_any_shape_never_raises(value: object) -> None:
    verdict, errors = validate_verdict_object(value)
    assert verdict is None and errors


def test_validating_an_object_nested_ten_thousand_deep_never_raises() -> None:
    value: object = "retry"
    for _ in range(DEEP):
        value = [value]
    verdict, errors = validate_verdict_object({"action": value, "summary": "x"})
    assert verdict is None and errors == ["not a plain JSON value: nested deeper than 16 levels"]


# Slow tier: 300 hostile replies take 1-1.5 s alone and 11 s beside a full suite's heavy
# neighbours (over the 10 s guard); in the edit loop it draws a fifth of them.
@pytest.mark.slow
@pytest.mark.quick
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_replies)
def test_parse_verdict_never_raises_and_says_why(reply: str) -> None:
    verdict, errors = parse_verdict(reply)
    assert (verdict is None) == bool(errors)
    for message in errors:
        message.encode("utf-8")
    if verdict is not None:
        verdict.model_dump_json().encode("utf-8")  # what is accepted can be stored
