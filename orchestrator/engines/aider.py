"""Engine ``aider``: aider in one-shot mode, reading its message from a file.

    aider --message-file runs/<run>/prompt-<attempt>.txt --model M --yes-always
          --no-auto-commits --no-dirty-commits --no-pretty --no-stream --no-gitignore
          --chat-history-file /dev/null --input-history-file /dev/null
          --no-check-update --no-show-release-notes --no-analytics [extra_args...]
    env: COLUMNS=4096  LITELLM_LOCAL_MODEL_COST_MAP=True
         PYTHONPATH=runs/<run>/aider-<attempt>   (its retry count: see below)

Flags (Aider-AI/aider ``aider/args.py``, checked against 0.86.1's ``--help``):
``--message-file``/``-f`` "process reply, then exit"; ``--yes-always`` answers every
confirmation (older releases spelled it ``--yes``); ``--no-auto-commits`` and
``--no-dirty-commits`` leave committing to the orchestrator; ``--no-pretty`` drops colour
and the live markdown view, so the log is plain lines; ``--no-stream`` makes aider read
each reply's usage from the provider (streamed, it counts the tokens itself, without the
cache); the last three keep it from reaching the network for things that are not the task.

aider's own files stay out of the clone where its flags allow (issue 42): no ``.aider*``
line added to ``.gitignore`` (``--no-gitignore``); its chat history (the whole prompt and
every reply, already in the attempt's log) and its input history go nowhere. Its tags
cache (``.aider.tags.cache.v4/``) has no flag: the workspace commit leaves it out, as it
does any new ``.aider*`` path (``domain/engine_files.py``).

Environment, for aider alone (``Invocation.env``): ``COLUMNS`` so that rich, which aider
prints through, does not wrap a line at 80 characters (a usage line or an error would be
cut in two); ``LITELLM_LOCAL_MODEL_COST_MAP`` so that litellm reads its bundled price list
instead of fetching it from GitHub at start. (aider still looks up a model its own list
does not have at raw.githubusercontent.com; the sandbox refuses it, recorded as an egress
denial. A model's metadata given with ``--model-metadata-file`` in ``extra_args`` avoids it.)

Retries (``[engines.NAME] settings.retries``, default 0): aider retries a failed model
call itself — rate limit, overload, timeout — with a delay doubling from 0.25 s while it
stays within ``aider.models.RETRY_TIMEOUT`` (60 s: 8 retries, about 64 s). No flag or
variable sets it, and litellm's ``num_retries`` would only add retries beneath aider's.
So the adapter writes a ``sitecustomize.py`` into the attempt's own directory of the run
(read-only to the engine) and puts that directory on aider's ``PYTHONPATH``: when aider
imports ``aider.models``, its ``RETRY_TIMEOUT`` becomes ``0.125 * 2**retries``, which
allows exactly ``retries`` retries (0: none). Nothing else is changed, and any other
``sitecustomize`` on the path still runs.

Output: plain text. What we read from it (``aider/coders/base_coder.py``,
``aider/exceptions.py``):
    "Tokens: 3.8k sent, 300 cache write, 2.0k cache hit, 60 received. Cost: $0.0087
     message, $0.0091 session."  (the cost on a line of its own when both cache figures
     are there; no cost at all when aider has no price for the model)
        — one per model reply: ``turns`` counts them (the model calls that answered;
          a failed call prints none, and neither does aider's own chat summary; none
          after its "Aider v…" banner is 0 turns and 0 tokens, not unknown); the
          usage sums them: "sent" is the input with the cache written and read, so
          input = sent - cache write - cache hit; figures of 1,000 and more are rounded
          as aider prints them ("3.8k", "12k"); ``cost_usd`` is the last session total,
          else None (the orchestrator then estimates it from ``[prices]``)
    "litellm.RateLimitError: AnthropicException - {…rate_limit_error…}"
    "The API provider has rate limited you. Try again later or check your quotas."
    "Retrying in 0.5 seconds..."
        — a provider error, printed as ``str(err)`` plus aider's hint; retryable ones are
          retried as above, then given up on
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
call's usage report, and a unified diff prefixes every line. (A reply could also print a
line that looks like a usage report: the tokens and turns are aider's words, not a bill.)
"""

from __future__ import annotations

import os
import re

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
from orchestrator.engines.classify import crashed, last_words, match_infra, one_line, output_lines

FIXED_FLAGS = (
    "--yes-always",
    "--no-auto-commits",
    "--no-dirty-commits",
    "--no-pretty",
    "--no-stream",
    "--no-gitignore",
    "--chat-history-file",
    os.devnull,
    "--input-history-file",
    os.devnull,
    "--no-check-update",
    "--no-show-release-notes",
    "--no-analytics",
)
FIXED_ENV = {"COLUMNS": "4096", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
# aider's first retry waits 0.25 s, each next one twice as long, while within this.
FIRST_DELAY_S = 0.125

# Imported by aider's Python at start (``site``), from the directory the adapter puts on
# its PYTHONPATH: sets aider's retry bound once ``aider.models`` is loaded, then runs any
# other sitecustomize the interpreter would have run.
SITECUSTOMIZE = """\
# Written by the orchestrator's aider adapter (orchestrator/engines/aider.py): aider
# retries a failed model call while its doubling delay stays within RETRY_TIMEOUT.
import importlib.machinery
import importlib.util
import os
import sys

RETRY_TIMEOUT = {limit!r}


class _AiderRetries:
    def find_spec(self, name, path=None, target=None):
        if name != "aider.models":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.RETRY_TIMEOUT = RETRY_TIMEOUT

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _AiderRetries())

_here = os.path.dirname(os.path.abspath(__file__))
_rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
_next = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _next is not None and _next.loader is not None:
    _next.loader.exec_module(importlib.util.module_from_spec(_next))
"""

_FIGURE = r"[\d.,]+k?"
_USAGE = re.compile(
    rf"^Tokens: (?P<sent>{_FIGURE}) sent(?:, (?P<write>{_FIGURE}) cache write)?"
    rf"(?:, (?P<hit>{_FIGURE}) cache hit)?, (?P<received>{_FIGURE}) received\."
)
_COST = re.compile(
    r"^(?:.*\s)?Cost: \$(?P<message>[\d.,]+) message, \$(?P<session>[\d.,]+) session"
)
_BANNER = "Aider v"  # its start-up line: "Aider v0.86.1"
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


class AiderAdapter(Adapter):
    name = "aider"

    def invocation(self, task: EngineTask) -> Invocation:
        prompt_file = task.prompt_path()
        site = task.run_dir / f"aider-{task.attempt}"
        argv = (
            "aider",
            "--message-file",
            str(prompt_file),
            "--model",
            task.model,
            *FIXED_FLAGS,
            *string_list(task.settings, "extra_args"),
        )
        limit = FIRST_DELAY_S * 2 ** engine_retries(task.settings)
        return Invocation(
            argv=argv,
            files={
                prompt_file: build_prompt(task),
                site / "sitecustomize.py": SITECUSTOMIZE.format(limit=limit),
            },
            env={**FIXED_ENV, "PYTHONPATH": str(site)},
        )

    def report(self, output: str, exit_code: int, timed_out: bool) -> EngineReport:
        lines = _plain_lines(output)
        usage = [(i, m) for i, m in ((i, _USAGE.match(line)) for i, line in enumerate(lines)) if m]
        # Once aider is running it reports every call that answered: none reported is
        # none answered (a bad key: 0 turns, as for every engine), not "unknown".
        started = any(line.startswith(_BANNER) for line in lines)
        turns = len(usage) if usage or started else None
        cost = _session_cost(lines, [i for i, _ in usage])
        spent = _usage([m for _, m in usage]) if usage or not started else Usage(0, 0, 0, 0)

        def done(failure: FailureClass | None, detail: str | None) -> EngineReport:
            return EngineReport(turns, cost, None, failure, detail, spent)

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


def _count(figure: str | None) -> int:
    """A token figure as aider prints it: "754", "3.8k", "12k" (rounded by aider)."""
    if not figure:
        return 0
    text = figure.replace(",", "")
    return round(float(text[:-1]) * 1000) if text.endswith("k") else int(float(text))


def _usage(reports: list[re.Match[str]]) -> Usage:
    """The tokens of every reply, summed; none when aider printed no usage."""
    if not reports:
        return NO_USAGE
    write = sum(_count(m.group("write")) for m in reports)
    hit = sum(_count(m.group("hit")) for m in reports)
    sent = sum(
        max(_count(m.group("sent")) - _count(m.group("write")) - _count(m.group("hit")), 0)
        for m in reports
    )
    received = sum(_count(m.group("received")) for m in reports)
    return Usage(sent, received, hit, write)


def _session_cost(lines: list[str], at: list[int]) -> float | None:
    """aider's session total from the last usage report: its cost on the same line, or
    on the next when aider split it; None when it has no price for the model."""
    if not at:
        return None
    last = at[-1]
    for line in lines[last : last + 2]:
        found = _COST.match(line)
        if found:
            return float(found.group("session").replace(",", ""))
    return None


ADAPTER = AiderAdapter()
