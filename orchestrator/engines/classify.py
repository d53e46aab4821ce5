"""Infrastructure failures told apart from code failures. Pure functions.

The rule, for every engine: an attempt failed for an *infrastructure* reason only when we
can name it — our timeout stopped it, the engine's own output carries an identified
provider error (below), or the engine crashed or could not start (its crash signature, per
adapter). Anything else that failed is ``code``: the engine ran and did not produce working
code, which is the one class the model is asked about.

The shared text patterns are matched against *error text only* — an engine's error event,
its final error message, or (for the generic ``command`` engine) the tail of its output
after a non-zero exit — never against a whole transcript, because a transcript quotes the
code being worked on, and that code may well mention rate limits.

Order matters: authentication, then quota, then rate limit, then outage. OpenAI reports an
exhausted quota as HTTP 429 ("You exceeded your current quota"), and aider's rate-limit
hint ends "check your quotas", so quota is tested before the rate limit and is matched on
specific phrases, never on the bare word.

Stages and checks that are not engines are read differently, by the failure-reading
package (``reading.failure``): their own ``::failure-class::`` line, else the named signs
in ``reading/signs.py``.

Sources for the phrases (provider and CLI messages as they print them):
  * Anthropic API error types (platform.claude.com, "Errors"): ``authentication_error``,
    ``permission_error``, ``billing_error``, ``rate_limit_error`` (429),
    ``overloaded_error`` (529), ``api_error`` (500); Claude Code prints them as
    ``API Error: <status> {json}``, and "Invalid API key · Please run /login",
    "Credit balance is too low", "Claude AI usage limit reached".
  * Codex CLI (openai/codex ``codex-rs/core/src/error.rs``): "You've hit your usage
    limit…", "Quota exceeded. Check your plan and billing details.", "exceeded retry limit,
    last status: 429 Too Many Requests", "We're currently experiencing high demand…",
    "stream disconnected before completion", "Connection failed: …",
    "unexpected status 401 Unauthorized: …".
  * aider (Aider-AI/aider ``aider/exceptions.py``): ``litellm.RateLimitError``,
    ``litellm.AuthenticationError``, ``APIConnectionError``, ``ServiceUnavailableError``,
    ``InternalServerError``, ``BudgetExceededError`` and its hints ("The API provider has
    rate limited you…", "…is not able to authenticate you…", "…servers are down or
    overloaded."); OpenAI's "You exceeded your current quota" (``insufficient_quota``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from orchestrator.domain.terminal import plain
from orchestrator.engines.base import EngineReport, FailureClass

INFRA = frozenset(
    {
        FailureClass.RATE_LIMITED,
        FailureClass.QUOTA_EXHAUSTED,
        FailureClass.AUTH_ERROR,
        FailureClass.OUTAGE,
        FailureClass.TIMEOUT,
        FailureClass.ENGINE_ERROR,
        FailureClass.CONFIG_ERROR,
        FailureClass.RESOURCE_EXHAUSTED,
        FailureClass.NETWORK,
    }
)

# An HTTP status counts only next to a word that says it is one ("API Error: 429",
# "last status: 503", "Error code: 401", "HTTP 502"): a bare number is too common.
_STATUS = r"(?:status|error|code|http)\D{0,15}\b"

_PATTERNS: tuple[tuple[FailureClass, re.Pattern[str]], ...] = tuple(
    (failure, re.compile("|".join(alternatives), re.IGNORECASE))
    for failure, alternatives in (
        (
            FailureClass.AUTH_ERROR,
            (
                _STATUS + r"401\b",
                r"\bauthentication[ _]?(?:error|failed)",
                r"could not resolve authentication",
                r"\binvalid[ _-]?(?:x-)?api[ _-]?key",
                r"\bincorrect api key",
                r"\bmissing api key",
                r"please run /login|\bnot logged in\b",
                r"\bpermission_error\b",
                r"\b(?:access|refresh|oauth) token\b[^\n]{0,40}"
                r"\b(?:expired|revoked|invalid|could not be refreshed)",
            ),
        ),
        (
            FailureClass.QUOTA_EXHAUSTED,
            (
                _STATUS + r"402\b",
                r"insufficient_quota",
                r"exceeded your current quota",
                r"\bquota (?:exceeded|exhausted)",
                r"\bout of (?:quota|credits)",
                r"credit balance",
                r"\bbilling",
                r"usage limit",
                r"hit your (?:usage )?limit",
                r"budget ?exceeded",
                r"purchase more credits",
                r"payment required",
            ),
        ),
        (
            FailureClass.RATE_LIMITED,
            (
                _STATUS + r"429\b",
                r"rate[ _-]?limit",
                r"too many requests",
            ),
        ),
        (
            FailureClass.OUTAGE,
            (
                _STATUS + r"(?:500|502|503|504|529)\b",
                r"overloaded",
                r"service ?unavailable",
                r"internal ?server ?error",
                r"bad gateway|gateway time-?out",
                r"temporarily unavailable",
                r"high demand",
                r"api ?connection ?error",
                r"connection (?:error|failed|refused|reset)",
                r"stream disconnected",
                r"error while reading the server response",
                r"could not resolve host",
                r"network is unreachable",
                r"api provider timed out",
            ),
        ),
    )
)

# Exit statuses that say the engine never ran, or was killed, whatever it printed.
_CANNOT_START = frozenset({126, 127})
_SIGNALLED = 128

DETAIL_MAX_CHARS = 300


def match_infra(text: str) -> FailureClass | None:
    """The infrastructure class an error text names, or None. Only for error text."""
    for failure, pattern in _PATTERNS:
        if pattern.search(text):
            return failure
    return None


def crashed(exit_code: int) -> bool:
    """Could not be started (126/127), or killed by a signal (128+N) that was not ours
    (our timeout is reported separately, as 124 with ``timed_out``)."""
    return exit_code in _CANNOT_START or exit_code > _SIGNALLED


def one_line(text: str, limit: int = DETAIL_MAX_CHARS) -> str:
    """Whitespace collapsed, cut at ``limit`` characters: fit for a record and a status line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# The runner's own words when a program could not be started because it is not there
# (``execution.runner``: "executable not found: NAME", exit 127).
_NOT_FOUND = re.compile(r"^executable not found: (?P<name>.+)$")


def missing_executable(start_error: str | None) -> str | None:
    """The program the runner could not find, from its start error; None otherwise (a
    missing working directory is the run's damage, not the machine's configuration)."""
    match = _NOT_FOUND.match(start_error or "")
    return match.group("name") if match else None


def classify(
    exit_code: int, timed_out: bool, report: EngineReport, *, start_error: str | None = None
) -> FailureClass | None:
    """The attempt's final class (None: it succeeded).

    A program that is not installed is a configuration error, whatever else is said:
    nothing ran. Our timeout wins over anything the engine printed before it was
    stopped; then the adapter's own reading of its output; then the exit status: 0 is
    success, a crash status is ``engine_error``, and any other failure is ``code``.
    """
    if missing_executable(start_error) is not None:
        return FailureClass.CONFIG_ERROR
    if timed_out:
        return FailureClass.TIMEOUT
    if report.failure is not None:
        return report.failure
    if exit_code == 0:
        return None
    if crashed(exit_code):
        return FailureClass.ENGINE_ERROR
    return FailureClass.CODE


def output_lines(output: str) -> list[str]:
    """The engine's own lines as a reader sees them (``terminal.plain``: no colours): the
    runner's ``# orchestrator:`` header/footer and the ``# $ argv`` line are left out
    (the argv may quote a prompt)."""
    return [
        line
        for line in plain(output).splitlines()
        if not line.startswith(("# orchestrator: ", "# $ "))
    ]


def json_events(output: str) -> list[dict[str, Any]]:
    """The JSON-object lines of a JSONL stream that carry a string ``type``; anything
    else (a warning on stderr, a half-written last line) is skipped, not an error."""
    events = []
    for line in output_lines(output):
        stripped = line.strip()
        if not stripped.startswith("{"):
            continue
        try:
            event = json.loads(stripped)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            events.append(event)
    return events


_RUNNER_FOOTER = re.compile(r"^# orchestrator: exit -?\d+ after [\d.]+s(?: \((?P<why>.*)\))?$")


def last_words(output: str, *, skip_json: bool = False) -> str | None:
    """What a crashed engine said last: the runner's own reason when it could not start
    the process ("executable not found: claude"), else the engine's last non-empty line."""
    for line in reversed(output.splitlines()):
        match = _RUNNER_FOOTER.match(line)
        if match and match.group("why"):
            return one_line(match.group("why"))
    for line in reversed(output_lines(output)):
        stripped = line.strip()
        if stripped and not (skip_json and stripped.startswith("{")):
            return one_line(stripped)
    return None
