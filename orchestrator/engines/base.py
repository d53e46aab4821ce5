"""What every coding engine adapter is: the types an engine stage passes around, and the
prompt a coding engine is given.

An adapter never starts anything. It turns an ``EngineTask`` into an ``Invocation`` (argv,
an optional stdin file, files to write first), and afterwards turns the attempt's log text
into an ``EngineReport`` (turns, cost, final message, and — when it failed — its
``FailureClass``). The orchestrator writes the files, runs the argv through
``orchestrator.execution.runner.run_process`` and records the report in the attempt.

    EngineTask ──adapter.invocation()──▶ Invocation ──run_process()──▶ log text, exit code
    log text, exit code, timed_out ──adapter.report()──▶ EngineReport ──classify()──▶ class

Only ``FailureClass.CODE`` goes to the model; every other class is infrastructure and gets
a deterministic verdict: a model cannot fix a rate limit or a bad key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from orchestrator.domain.engine_settings import settings_problems


class FailureClass(StrEnum):
    """Why an engine attempt failed. All but ``CODE`` are infrastructure."""

    RATE_LIMITED = "rate_limited"  # the provider throttled us: retry after a back-off
    QUOTA_EXHAUSTED = "quota_exhausted"  # credits, billing or a usage window: a human pays
    AUTH_ERROR = "auth_error"  # missing/invalid key or login: a human fixes credentials
    OUTAGE = "outage"  # provider overloaded/down, network: retry after a back-off
    TIMEOUT = "timeout"  # our stage timeout stopped it
    ENGINE_ERROR = "engine_error"  # the engine itself crashed or could not start
    # Its program is not installed (not on PATH): a person fixes the machine or the config;
    # retrying cannot, and asking a model costs money for nothing.
    CONFIG_ERROR = "config_error"
    # The machine ran out of something (disk, disk quota, memory): a person frees it;
    # a retry on the same machine would fail the same way.
    RESOURCE_EXHAUSTED = "resource_exhausted"
    # The network between us and a host (DNS, a refused or reset connection, TLS, a
    # package registry's 5xx or 429): retry after a back-off, like an outage.
    NETWORK = "network"
    CODE = "code"  # the engine ran but did not produce working code: the model decides


@dataclass(frozen=True)
class EngineTask:
    """One attempt of an engine stage, as an adapter needs to know it."""

    ticket_id: str
    title: str
    kind: str  # a TicketKind value: "bug-fix", "feature", ...
    body: str
    clone_dir: Path  # the engine's working directory
    run_dir: Path  # where prompt files go
    model: str
    settings: Mapping[str, Any]  # the engine's config table (adapter-specific keys)
    attempt: int
    # A re-run after a code failure: what failed, as ``recovery/context/feedback.py``
    # writes it (bounded, redacted, its run data marked untrusted). None on a first run.
    feedback: str | None = None
    # The title is inside the body's untrusted fence (a ticket taken from an issue:
    # ``domain/intake.py``), so the prompt does not say it again outside it.
    title_fenced: bool = False

    def prompt_path(self) -> Path:
        """Where an adapter that hands the prompt over as a file puts it (one per attempt,
        so a retry never reads a half-rewritten prompt of the attempt before)."""
        return self.run_dir / f"prompt-{self.attempt}.txt"


def _no_files() -> Mapping[Path, str]:
    return MappingProxyType({})


def _no_env() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True)
class Invocation:
    """How to start the engine. ``files`` are written (atomically, UTF-8) by the
    orchestrator before the process starts, e.g. the prompt file ``stdin_path`` names.
    ``env``: variables the adapter sets for the engine alone (its own retry count, say),
    on top of the stage's allow-listed environment; values the adapter chose, never a
    secret (a secret reaches an engine only by the engine's ``pass_env``)."""

    argv: tuple[str, ...]
    stdin_path: Path | None = None
    files: Mapping[Path, str] = field(default_factory=_no_files)
    env: Mapping[str, str] = field(default_factory=_no_env)


@dataclass(frozen=True)
class Usage:
    """Tokens an attempt used, summed over its model calls, as the engine's own events
    say them; ``None`` where the tool does not say. ``input_tokens`` counts the input
    not read from a cache (Anthropic's ``input_tokens``; OpenAI's ``input_tokens`` less
    its ``cached_input_tokens``), so the four add up to what was sent and received."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None

    @property
    def known(self) -> bool:
        return self.input_tokens is not None or self.output_tokens is not None


NO_USAGE = Usage()


@dataclass(frozen=True)
class EngineReport:
    """What the engine's own output says happened. ``None`` where the tool does not say.

    ``turns``: the model calls the attempt made (each request to the provider that
    answered), counted the same way for every engine so two engines' turns compare."""

    turns: int | None
    cost_usd: float | None
    final_message: str | None
    failure: FailureClass | None  # None: the engine reports success
    detail: str | None  # one line: why it failed (the engine's words), else None
    usage: Usage = NO_USAGE


class EngineAdapter(Protocol):
    """One kind of coding engine (``claude-code``, ``codex``, ...)."""

    name: str

    def check_settings(self, settings: Mapping[str, Any]) -> list[str]:
        """Problems with an engine's config table, one line each, ``key: reason`` (empty:
        fine). Called when the config is loaded, so a typo fails before any run starts."""
        ...

    def invocation(self, task: EngineTask) -> Invocation:
        """The argv (and files) for this attempt. Pure: starts and writes nothing."""
        ...

    def report(self, output: str, exit_code: int, timed_out: bool) -> EngineReport:
        """Parse the attempt's captured output (its log text). Pure."""
        ...


class Adapter:
    """What every adapter shares: its settings checked by the rules for its kind."""

    name: str

    def check_settings(self, settings: Mapping[str, Any]) -> list[str]:
        return settings_problems(self.name, settings)


# The orchestrator commits the engine's work itself (and orders a bug fix before its
# tests), so an engine that commits on its own would break lint-bug-commit-order.
_INSTRUCTIONS = """\
## How to work

- Work in the current directory. It is a git clone of the project, checked out on the
  branch for this ticket. Change only files inside it.
- Do not commit, amend, rebase, merge, push, or create or switch branches: leave your
  changes in the working tree. The orchestrator owns the commits and the branch.
- Do not ask questions: nobody will answer. If something is ambiguous, make the smallest
  reasonable choice and say so in your final message.
- When you are done, end with a short summary of what you changed and why."""

_BUG_FIX_INSTRUCTIONS = """\
- This is a bug fix. Fix the bug first, in production code. Put tests for it in test
  files only (under tests/, or named test_*.py): the orchestrator commits the fix first
  and the tests in a separate commit after it, so keep the fix and the tests in separate
  files."""


def build_prompt(task: EngineTask) -> str:
    """The prompt a coding engine gets: the ticket, what failed last time (on a re-run
    after a code failure), then fixed instructions. The same task always yields the same
    text (the attempt number and model are not part of it).

    Every engine takes its context as this one text (Claude Code and Codex on standard
    input, aider as ``--message-file``, a command as ``{prompt_file}``), so each gets the
    "previous attempt" section the same way.

    A re-run starts from the base, not from the previous attempt's tree (the workspace
    is reset before every attempt: ``stages/engine_workspace.py prepare``); the previous
    change is in the section as a bounded diff. Why: what an attempt was given is then
    exactly the base and its prompt file, both on disk, so an attempt can be explained
    and reproduced; a timed-out or crashed attempt's half-written files never reach the
    next; a stronger model or another engine is not handed a weaker one's partial edits
    as if they were the project's; and a bug fix is split into its two commits from one
    clean diff."""
    # The first line is ours alone (the id is ours: ``[a-z0-9-]``); the title, which
    # someone else may have written, follows it — inside the untrusted fence when it
    # came from an issue.
    parts = [f"# Ticket {task.ticket_id}", f"Kind: {task.kind}", "## The task"]
    if not task.title_fenced:
        parts.append(f"Title: {' '.join(task.title.split())}")
    parts.append(task.body.strip("\n"))
    if task.feedback:
        parts.append(task.feedback.strip("\n"))
    parts.append(_INSTRUCTIONS)
    if task.kind == "bug-fix":
        parts.append(_BUG_FIX_INSTRUCTIONS)
    return "\n\n".join(parts) + "\n"


def string_list(settings: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """``settings[key]`` as a tuple of strings (absent: empty). Shape is checked by
    ``check_settings`` at config load; here a wrong shape is a bug, so it raises."""
    value = settings.get(key, ())
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key}: must be a list of strings (got {value!r})")
    return tuple(value)
