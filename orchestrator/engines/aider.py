"""Engine ``aider``: aider in one-shot mode, reading its message from a file.

    aider --message-file runs/<run>/prompt-<attempt>.txt --model M --yes-always
          --no-auto-commits --no-dirty-commits --no-pretty --no-check-update
          --no-show-release-notes --no-analytics [extra_args...]

Flags (Aider-AI/aider ``aider/args.py``, https://aider.chat/docs/config/options.html):
``--message-file``/``-f`` "process reply, then exit"; ``--yes-always`` answers every
confirmation (older releases spelled it ``--yes``); ``--no-auto-commits`` and
``--no-dirty-commits`` leave committing to the orchestrator; ``--no-pretty`` drops colour
and the live markdown view, so the log is plain lines; the last three keep it from
reaching the network for things that are not the task.

Output: plain text. What we read from it (``aider/coders/base_coder.py``,
``aider/exceptions.py``):
    "Tokens: 2.1k sent, 312 received. Cost: $0.0087 message, $0.0091 session."
        — one per LLM call: ``turns`` counts them, ``cost_usd`` is the last session total
    "litellm.RateLimitError: AnthropicException - {…rate_limit_error…}"
    "The API provider has rate limited you. Try again later or check your quotas."
    "Retrying in 0.5 seconds..."
        — a provider error, printed as ``str(err)`` plus aider's hint; retryable ones are
          retried with a doubling delay up to 60 s, then given up on
Exit status: aider returns normally after ``--message-file`` even when every call failed,
so an API failure exits **0**; a non-zero exit is a crash (a traceback) or a start-up error
("Message file not found"). aider prints no final message separate from its transcript.

Classification (after our timeout, which is ``timeout``):
    a provider error line (``litellm.<Name>Error: …`` or one of aider's hints, at the start
      of a line) after the last "Tokens: … sent" report — i.e. not recovered from —
      → ``classify.match_infra`` on those lines, else by exception name (RateLimitError →
        rate_limited, AuthenticationError → auth_error, BudgetExceededError →
        quota_exhausted, APIConnectionError / ServiceUnavailableError /
        InternalServerError / Timeout / APIError → outage), else engine_error
    non-zero exit                                             → engine_error
    otherwise                                                 → success (whether the code
      works is for the review checks to say)
Only lines after the last usage report count, and only at their start: the model's reply,
which may well quote such a line (it could be the code under work), is printed before its
call's usage report, and a unified diff prefixes every line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from orchestrator.domain.engine_settings import settings_problems
from orchestrator.engines.base import (
    EngineReport,
    EngineTask,
    FailureClass,
    Invocation,
    build_prompt,
    string_list,
)
from orchestrator.engines.classify import crashed, last_words, match_infra, one_line, output_lines

FIXED_FLAGS = (
    "--yes-always",
    "--no-auto-commits",
    "--no-dirty-commits",
    "--no-pretty",
    "--no-check-update",
    "--no-show-release-notes",
    "--no-analytics",
)

_USAGE = re.compile(
    r"^Tokens: .* sent\b.*?Cost: \$(?P<message>[\d.,]+) message, \$(?P<session>[\d.,]+) session"
)
_BY_EXCEPTION = {
    "RateLimitError": FailureClass.RATE_LIMITED,
    "RouterRateLimitError": FailureClass.RATE_LIMITED,
    "AuthenticationError": FailureClass.AUTH_ERROR,
    "PermissionDeniedError": FailureClass.AUTH_ERROR,
    "BudgetExceededError": FailureClass.QUOTA_EXHAUSTED,
    "APIConnectionError": FailureClass.OUTAGE,
    "ServiceUnavailableError": FailureClass.OUTAGE,
    "InternalServerError": FailureClass.OUTAGE,
    "Timeout": FailureClass.OUTAGE,
    "APIError": FailureClass.OUTAGE,
}
# aider prints ``str(err)``, which litellm starts with its own module name; a caught
# BadRequestError is printed behind its class name ("BadRequestError: litellm.…").
_PROVIDER_ERROR = re.compile(
    r"^(?:[A-Za-z]+Error: )?litellm\.(?P<name>[A-Za-z]+(?:Error|Timeout)|Timeout)\b"
)
_HINTS = (
    "The API provider has rate limited you",
    "The API provider is not able to authenticate you",
    "The API provider's servers are down or overloaded",
    "The API provider timed out",
    "The API provider has refused the request",
)


def _plain_lines(output: str) -> list[str]:
    return [line.rstrip() for line in output_lines(output)]


class AiderAdapter:
    name = "aider"

    def check_settings(self, settings: Mapping[str, Any]) -> list[str]:
        return settings_problems("aider", settings)

    def invocation(self, task: EngineTask) -> Invocation:
        prompt_file = task.prompt_path()
        argv = (
            "aider",
            "--message-file",
            str(prompt_file),
            "--model",
            task.model,
            *FIXED_FLAGS,
            *string_list(task.settings, "extra_args"),
        )
        return Invocation(argv=argv, files={prompt_file: build_prompt(task)})

    def report(self, output: str, exit_code: int, timed_out: bool) -> EngineReport:
        lines = _plain_lines(output)
        usage = [(i, m) for i, m in ((i, _USAGE.match(line)) for i, line in enumerate(lines)) if m]
        turns = len(usage) or None
        cost = float(usage[-1][1].group("session").replace(",", "")) if usage else None

        def done(failure: FailureClass | None, detail: str | None) -> EngineReport:
            return EngineReport(turns, cost, None, failure, detail)

        if timed_out:
            return done(FailureClass.TIMEOUT, "stopped by the stage timeout")
        after = usage[-1][0] + 1 if usage else 0
        unrecovered = [
            line for line in lines[after:] if _PROVIDER_ERROR.match(line) or line.startswith(_HINTS)
        ]
        if unrecovered:
            failure = match_infra("\n".join(unrecovered))
            if failure is None:
                for line in reversed(unrecovered):
                    named = _PROVIDER_ERROR.match(line)
                    failure = _BY_EXCEPTION.get(named.group("name")) if named else None
                    if failure is not None:
                        break
            errors = [line for line in unrecovered if _PROVIDER_ERROR.match(line)]
            return done(failure or FailureClass.ENGINE_ERROR, one_line((errors or unrecovered)[-1]))
        if exit_code != 0:
            said = last_words(output)
            kind = "crashed" if crashed(exit_code) else "failed"
            return done(
                FailureClass.ENGINE_ERROR,
                f"aider {kind} (exit {exit_code})" + (f": {said}" if said else ""),
            )
        return done(None, None)


ADAPTER = AiderAdapter()
