"""Engine ``claude-code``: Claude Code in print mode, streaming JSON events.

    claude -p --output-format stream-json --verbose --model M --permission-mode P
           [--max-turns N] [extra_args...]        < runs/<run>/prompt-<attempt>.txt

The prompt goes on stdin, not in argv: argv is visible to every user in ``ps``, is written
to the attempt's log header, is capped at 128 KiB per argument by Linux (a long ticket
would not start), and Claude Code's variadic flags (``--allowedTools``, ``--add-dir``)
swallow a trailing prompt argument. ``claude -p`` with no prompt argument reads it from
stdin. ``--verbose`` is required: without it print mode refuses ``stream-json``.

Settings (``[engines.NAME]``):
    permission_mode   "acceptEdits" (default: may edit files), "plan" (read-only), or any
                      mode the installed claude accepts ("default", "bypassPermissions", …)
    max_turns         optional positive int → ``--max-turns``
    retries           how often Claude Code retries a failed API request itself (0 to 20,
                      default 0: our back-off decides the wait) → ``CLAUDE_CODE_MAX_RETRIES``
                      in its environment (``Invocation.env``); its own default is 10
    extra_args        optional list of strings appended to argv

Output format (stream-json, one JSON object per line; as the released 2.1.332 prints it
against the contract tests' scripted API, captured in ``tests/engines/data/claude-code/``;
also Claude Code's headless docs and the Agent SDK's ``SDKResultMessage`` /
``SDKAssistantMessage`` types):
    {"type":"system","subtype":"init","session_id":…,"model":…,"permissionMode":…,"tools":[…]}
    {"type":"assistant","message":{"id":"msg_…","model":…,"content":[one block],
     "usage":{…as at the stream's start…}},"session_id":…}
        — one event per content block, so one API reply is several events sharing
          ``message.id``; an API failure is an assistant message of model "<synthetic>"
          with ``"error"``: "rate_limit" | "authentication_failed" | "billing_error" |
          "server_error" | "invalid_request" | "unknown", its text "API Error: 529
          Overloaded. …" or "Invalid API key · Fix external API key"
    {"type":"user","message":{…tool_result…}}
    {"type":"result","subtype":"success"|"error_max_turns"|"error_during_execution"|
     "error_max_budget_usd","is_error":bool,"num_turns":int,"total_cost_usd":float,
     "duration_ms":int,"result":str,"api_error_status":int|null,"errors":[str],
     "usage":{"input_tokens","output_tokens","cache_read_input_tokens",
              "cache_creation_input_tokens",…},
     "modelUsage":{MODEL:{"inputTokens","outputTokens","cacheReadInputTokens",
                          "cacheCreationInputTokens","costUSD",…}},…}
        — a failed API call still ends with subtype "success" and ``is_error: true``, its
          message in ``result`` ("Invalid API key · Please run /login", "Credit balance
          is too low", "API Error: 429 …"); the process then exits 1.

Turns: the model calls that answered, i.e. the distinct ``message.id`` of the assistant
events that are not an API error (a subagent's calls count too). ``num_turns`` is not
that: it also counts the call a failed request was (401: 1) and the turn ``--max-turns``
refused (2 answered calls under ``--max-turns 2`` report 3). Only when the output is cut
(its init event is not in the tail we read) is ``num_turns`` used, less those.

Usage: the result's ``modelUsage`` summed over its models (the main model and any other
it used: a subagent's, a title's), else its ``usage``. Without a result (our timeout
stopped it, it crashed) the assistant events give each answered call's input and cache
tokens; its output tokens are unknown then (those events carry the stream's opening count).
Cost: the result's ``total_cost_usd`` (Claude Code's own, at list prices).

Classification (after our timeout, which is ``timeout``):
    result success, not is_error, exit 0                 → success
    error text names an infra cause (``classify.match_infra``: the result text and
      ``errors`` of a failed result, the text of assistant messages carrying ``error``)
                                                         → that class
    ``api_error_status`` 401/403 → auth_error, 402 → quota_exhausted, 429 → rate_limited,
      5xx/529 → outage; assistant ``error`` authentication_failed / billing_error /
      rate_limit / server_error → the same classes
    no result event at all (a crash, a bad flag, not installed) → engine_error
    subtype error_during_execution, or is_error with no identified cause → engine_error
    subtype error_max_turns / error_max_budget_usd (ran out of its allowance before the
      task was done: the model may escalate or split)    → code, checked first: its
      ``result`` is the model's own last text, which is not an error message
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.domain.engine_settings import engine_retries
from orchestrator.engines.base import (
    NO_USAGE,
    Adapter,
    EngineReport,
    EngineTask,
    FailureClass,
    Invocation,
    Usage,
    build_prompt,
    string_list,
)
from orchestrator.engines.classify import crashed, json_events, last_words, match_infra, one_line

DEFAULT_PERMISSION_MODE = "acceptEdits"
RETRIES_VARIABLE = "CLAUDE_CODE_MAX_RETRIES"
# The model Claude Code names on a message it made up itself (an API error's text).
_SYNTHETIC = "<synthetic>"
_MODEL_USAGE = ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens")
_USAGE = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")

_BY_STATUS = {
    401: FailureClass.AUTH_ERROR,
    403: FailureClass.AUTH_ERROR,
    402: FailureClass.QUOTA_EXHAUSTED,
    429: FailureClass.RATE_LIMITED,
    500: FailureClass.OUTAGE,
    502: FailureClass.OUTAGE,
    503: FailureClass.OUTAGE,
    504: FailureClass.OUTAGE,
    529: FailureClass.OUTAGE,
}
_BY_ASSISTANT_ERROR = {
    "authentication_failed": FailureClass.AUTH_ERROR,
    "billing_error": FailureClass.QUOTA_EXHAUSTED,
    "rate_limit": FailureClass.RATE_LIMITED,
    "server_error": FailureClass.OUTAGE,
}
# The engine stopped because it used up the allowance it was given, not because it broke.
_OUT_OF_ALLOWANCE = frozenset({"error_max_turns", "error_max_budget_usd"})


def _message_text(event: Mapping[str, Any]) -> str:
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return ""
    return "\n".join(
        block["text"]
        for block in content
        if isinstance(block, dict) and isinstance(block.get("text"), str)
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _answered(events: list[dict[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Each model call that answered, by its message id: the message itself."""
    calls: dict[str, Mapping[str, Any]] = {}
    for event in events:
        message = event.get("message")
        if event["type"] != "assistant" or "error" in event or not isinstance(message, dict):
            continue
        if message.get("model") == _SYNTHETIC or not isinstance(message.get("id"), str):
            continue
        calls.setdefault(message["id"], message)
    return calls


def _sum(rows: Sequence[Mapping[str, Any]], keys: tuple[str, ...]) -> tuple[int | None, ...]:
    totals: list[int | None] = []
    for key in keys:
        values = [_int(row.get(key)) for row in rows]
        known = [v for v in values if v is not None]
        totals.append(sum(known) if known else None)
    return tuple(totals)


def _turns(
    events: list[dict[str, Any]], result: Mapping[str, Any] | None, answered: int
) -> int | None:
    whole = any(e["type"] == "system" and e.get("subtype") == "init" for e in events)
    if whole:
        return answered
    if result is None:
        return answered or None
    reported = _int(result.get("num_turns"))
    if reported is None:
        return None
    unanswered = int(result.get("subtype") == "error_max_turns") + int(
        _int(result.get("api_error_status")) is not None
    )
    return max(0, reported - unanswered)


def _usage(result: Mapping[str, Any] | None, calls: dict[str, Mapping[str, Any]]) -> Usage:
    if result is not None:
        by_model = result.get("modelUsage")
        if isinstance(by_model, dict) and by_model:
            rows = [row for row in by_model.values() if isinstance(row, dict)]
            return Usage(*_sum(rows, _MODEL_USAGE))
        usage = result.get("usage")
        return Usage(*_sum([usage], _USAGE)) if isinstance(usage, dict) else NO_USAGE
    rows = [m["usage"] for m in calls.values() if isinstance(m.get("usage"), dict)]
    if not rows:
        return NO_USAGE
    # The events carry the stream's opening usage: input and cache are final, output not.
    inp, _output, read, write = _sum(rows, _USAGE)
    return Usage(inp, None, read, write)


class ClaudeCodeAdapter(Adapter):
    name = "claude-code"

    def invocation(self, task: EngineTask) -> Invocation:
        settings = task.settings
        argv = [
            "claude",
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            task.model,
            "--permission-mode",
            str(settings.get("permission_mode", DEFAULT_PERMISSION_MODE)),
        ]
        if settings.get("max_turns") is not None:
            argv += ["--max-turns", str(settings["max_turns"])]
        argv += string_list(settings, "extra_args")
        prompt_file = task.prompt_path()
        return Invocation(
            argv=tuple(argv),
            stdin_path=prompt_file,
            files={prompt_file: build_prompt(task)},
            env={RETRIES_VARIABLE: str(engine_retries(settings))},
        )

    def report(self, output: str, exit_code: int, timed_out: bool) -> EngineReport:
        events = json_events(output)
        results = [e for e in events if e["type"] == "result"]
        result = results[-1] if results else None
        calls = _answered(events)
        turns = _turns(events, result, len(calls))
        usage = _usage(result, calls)
        cost = _float(result.get("total_cost_usd")) if result else None
        text = result.get("result") if result else None
        final_message = text if isinstance(text, str) else None

        def done(failure: FailureClass | None, detail: str | None) -> EngineReport:
            return EngineReport(turns, cost, final_message, failure, detail, usage)

        if timed_out:
            return done(FailureClass.TIMEOUT, "stopped by the stage timeout")
        subtype = result.get("subtype") if result else None
        is_error = bool(result.get("is_error")) if result else False
        if result is not None and subtype == "success" and not is_error and exit_code == 0:
            return done(None, None)
        if subtype in _OUT_OF_ALLOWANCE:
            # Its own limit stopped it: certain, and its last words (the model's own text,
            # which may discuss rate limits in the code) are not an error message.
            errors = result.get("errors") if result else None
            limits = [e for e in errors if isinstance(e, str)] if isinstance(errors, list) else []
            return done(
                FailureClass.CODE, one_line(limits[0]) if limits else f"claude stopped: {subtype}"
            )

        error_texts: list[str] = []
        if result is not None and (is_error or subtype != "success"):
            if final_message:
                error_texts.append(final_message)
            errors = result.get("errors")
            if isinstance(errors, list):
                error_texts += [e for e in errors if isinstance(e, str)]
        assistant_errors = [
            e for e in events if e["type"] == "assistant" and isinstance(e.get("error"), str)
        ]
        error_texts += [_message_text(e) for e in assistant_errors]
        error_texts = [t for t in error_texts if t.strip()]
        detail = one_line(error_texts[0]) if error_texts else None

        failure = match_infra("\n".join(error_texts))
        if failure is None and result is not None:
            failure = _BY_STATUS.get(_int(result.get("api_error_status")) or 0)
        if failure is None:
            for event in reversed(assistant_errors):
                failure = _BY_ASSISTANT_ERROR.get(event["error"])
                if failure is not None:
                    break
        if failure is not None:
            return done(failure, detail)

        if result is None:
            said = last_words(output, skip_json=True)
            return done(
                FailureClass.ENGINE_ERROR,
                f"claude ended without a result event (exit {exit_code})"
                + (f": {said}" if said else ""),
            )
        if is_error or subtype != "success" or crashed(exit_code):
            return done(
                FailureClass.ENGINE_ERROR,
                detail or f"claude failed: {subtype} (exit {exit_code})",
            )
        # A clean result but a non-zero exit: the engine broke after finishing.
        return done(FailureClass.ENGINE_ERROR, f"claude exited {exit_code} after a clean result")


ADAPTER = ClaudeCodeAdapter()
