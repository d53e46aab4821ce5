"""``orchestrator show`` on engine attempts (issue 42, item 4): each one's turns, tokens
(input, output, cache read and written) and cost — the engine's own, or ``~$x (estimated
from [prices])`` — and a failed one's reason in one line of words (its class said as
words, then the engine's detail unless that is JSON: never its result object cut
mid-way); a check or recipe command killed by a signal says which. A record written
before these fields loads and shows as it did."""

from __future__ import annotations

import io
import json
import os
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.cli.commands.show import _attempt_lines, _recipe_lines, reason_line, show
from orchestrator.domain.runs import Attempt, CheckResult

from conftest import write_ticket
from support.harness import CLAUDE, FAKES, Harness, make_origin, write_pipeline

STARTED = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)


def attempt(**fields: object) -> Attempt:
    base: dict[str, object] = {
        "number": 2, "stage": "implement", "status": "finished", "engine": "claude",
        "model": "claude-sonnet-4-6", "started_at": STARTED, "duration_s": 4.21, "exit_code": 0,
    }  # fmt: skip
    return Attempt.model_validate({**base, **fields})


def test_an_engine_attempt_shows_its_turns_tokens_and_its_own_cost() -> None:
    lines = _attempt_lines(
        attempt(turns=3, input_tokens=2100, output_tokens=312, cache_read_tokens=15000,
                cache_write_tokens=1200, cost_usd=0.0421)
    )  # fmt: skip
    assert lines[1] == (
        "      usage: 3 turns, 2100 input + 312 output tokens (cache: 15000 read, 1200 "
        "written), $0.0421"
    )


def test_an_estimated_cost_is_said_to_be_one() -> None:
    lines = _attempt_lines(
        attempt(turns=1, input_tokens=900, output_tokens=40, cost_usd=0.0033,
                cost_estimated=True)
    )  # fmt: skip
    assert lines[1] == (
        "      usage: 1 turn, 900 input + 40 output tokens, ~$0.0033 (estimated from [prices])"
    )


def test_a_record_from_before_usage_was_kept_loads_and_shows_as_it_did() -> None:
    """No turns, tokens or cost (the keys are absent): no usage line, no reason line."""
    old = attempt(exit_code=1)
    assert old.input_tokens is None and old.cost_estimated is False
    lines = _attempt_lines(old)
    assert len(lines) == 1 and lines[0].startswith("  #2 implement engine=claude")


def test_what_the_commit_took_and_left_out_is_shown() -> None:
    lines = _attempt_lines(
        attempt(committed_paths=["greeting.py", ".gitignore"], committed_count=2,
                left_out_paths=[".aider.chat.history.md", ".gitignore"], left_out_count=3)
    )  # fmt: skip
    assert lines[1:] == [
        "      committed: greeting.py, .gitignore",
        "      left out as the engine's own: .aider.chat.history.md, .gitignore and 1 more",
    ]
    nothing = _attempt_lines(attempt(committed_paths=[], committed_count=0))
    assert nothing[1:] == ["      committed: nothing (the engine changed no file of the project)"]


def test_a_failed_attempt_says_its_class_in_words_and_its_detail() -> None:
    lines = _attempt_lines(
        attempt(exit_code=1, failure_class="outage", failure_detail="API Error: 529 Overloaded")
    )
    assert (
        "      reason: the provider was overloaded or down (outage): API Error: 529 Overloaded"
        in lines
    )


def test_a_detail_that_is_json_is_left_out_never_cut() -> None:
    detail = 'API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Ove'
    assert reason_line("outage", detail) == "the provider was overloaded or down (outage)"
    assert reason_line("auth_error", '{"type":"result","subtype":"success","is_e') == (
        "the provider refused the key or login (auth_error)"
    )
    long = reason_line("outage", "x" * 300)
    assert long == f"the provider was overloaded or down (outage): {'x' * 199}…"
    assert reason_line("something_new", "said") == "something_new: said"
    assert reason_line(None, "said") is None


def test_a_check_and_a_recipe_killed_by_a_signal_say_so(tmp_path: Path) -> None:
    check = CheckResult(name="tests", command=("pytest",), exit_code=137, signal=9, duration_s=1.5)
    lines = _attempt_lines(attempt(engine=None, model=None, checks=(check,), exit_code=1))
    assert "      check tests: killed by signal 9 (SIGKILL) (exit 137) in 1.50s" in lines
    fix = tmp_path / "fix.json"
    commands = [
        {"argv": ["make", "fix"], "exit_code": 143, "signal": 15},
        {"argv": ["true"], "exit_code": 0},
    ]
    fix.write_text(json.dumps({"verdict": 1, "commands": commands}))
    assert _recipe_lines(fix, 1) == [
        "recipe: make fix → killed by signal 15 (SIGTERM) (exit 143)",
        "recipe: true → exit 0",
    ]


def test_show_says_a_rate_limited_claude_in_words_not_its_result_json(tmp_path: Path) -> None:
    """The fake Claude Code prints the real CLI's stream-json for a 429 (a result event
    among JSON lines): the run records it, ``show`` says the class and the engine's words,
    its usage, and none of its JSON."""
    make_origin(tmp_path)
    config = write_pipeline(tmp_path, CLAUDE, recovery="max_infra_retries_per_ticket = 0\n")
    ticket = write_ticket(tmp_path / "t")
    env = {"PATH": f"{FAKES}:{os.environ['PATH']}", "HOME": str(tmp_path), "DRY_RUN": "false",
           "FAKE_ENGINE_MODE": "rate_limited"}  # fmt: skip
    record = Harness(config, None, environ=env).run(ticket)
    engine_attempt = next(a for a in record.attempts if a.engine)
    assert engine_attempt.failure_class == "rate_limited"
    out = io.StringIO()
    assert show(tmp_path / "state", record.run_id, out, environ={}) == 0
    text = out.getvalue()
    implement = text[text.index("  #2 implement") : text.index("verdicts")]
    assert "      reason: the provider throttled the requests (rate_limited): API Error: " in text
    assert "      usage: 0 turns, 0 input + 0 output tokens, $0\n" in implement, implement
    assert "{" not in implement, implement
