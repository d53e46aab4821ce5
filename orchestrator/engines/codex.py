"""Engine ``codex``: OpenAI's Codex CLI, non-interactive, JSONL events on stdout.

    codex exec --json -m M --sandbox S
          -c model_providers.orchestrator={name=…, base_url=…, env_key=…,
             wire_api="responses", request_max_retries=N, stream_max_retries=0}
          -c model_provider="orchestrator" -c analytics.enabled=false
          --disable plugins --disable apps --disable remote_plugin
          [extra_args...] -   < runs/<run>/prompt-<attempt>.txt

``-`` as the prompt reads it from stdin. ``--json`` prints events as JSONL. ``--sandbox``
is ``read-only`` | ``workspace-write`` | ``danger-full-access``: Codex's own sandbox, inside
ours (its bundled bwrap needs a unix datagram socket to start, which our engine sandbox
allows: docs/architecture/sandbox.md). Approvals are never asked for in ``exec``.

The provider: Codex 0.17x reads where to send requests from a ``model_providers`` entry
(``OPENAI_BASE_URL`` alone does not move it, and its built-in ``openai`` provider may not
be overridden by ``-c``), so the adapter always gives it one, ``orchestrator``, whose retry
counts it sets too. ``extra_args`` come after it: ``-c model_provider=openai`` there goes
back to Codex's built-in provider (and its ChatGPT login), whose retries it then decides.

Settings (``[engines.NAME]``):
    sandbox      "workspace-write" (default: may edit the clone), "read-only",
                 "danger-full-access"
    base_url     the Responses API's base (default ``https://api.openai.com/v1``); its
                 host is then what the engine reaches instead of OpenAI's
                 (``domain/stage_hosts.py``)
    env_key      the variable that holds the API key (default ``OPENAI_API_KEY``); it
                 reaches the engine only when ``pass_env`` names it
    retries      how often Codex retries a failed request itself (0 to 20, default 0: our
                 back-off decides the wait) → the provider's ``request_max_retries``; its
                 ``stream_max_retries`` (a whole failed turn again, after those) is 0
    extra_args   optional list of strings inserted before the final ``-``

Output format (as the released 0.171.0 prints it against the contract tests' scripted
Responses API, captured in ``tests/engines/data/codex/``; openai/codex
``codex-rs/exec/src/exec_events.rs``):
    {"type":"thread.started","thread_id":"…"}
    {"type":"turn.started"}
    {"type":"item.started"|"item.updated"|"item.completed","item":{"id":"item_0",
      "type":"agent_message"|"reasoning"|"command_execution"|"file_change"|
              "mcp_tool_call"|"web_search"|"todo_list"|"error", …}}
        — ``agent_message`` has ``text`` (the last one is the final message); an item of
          type ``error`` is a warning ("Model metadata for `M` not found…"); a
          ``file_change`` has ``changes`` [{"path","kind"}] and ``status`` "completed" or
          "failed" (Codex could not write it: its own sandbox refused, a read-only path).
          A patch that does not apply is no item at all: the model is told and retries.
    {"type":"turn.completed","usage":{"input_tokens":…,"cached_input_tokens":…,
      "cache_write_input_tokens":…,"output_tokens":…,"reasoning_output_tokens":…}}
    {"type":"turn.failed","error":{"message":"…"}}
    {"type":"error","message":"…"}   (a failed request, "Reconnecting… 1/5 (…)" while it
                                       retries, else fatal)
Exit status: 0, or 1 when a turn failed; 2 for a command-line error (nothing on stdout).
Codex reports tokens, not cost.

Usage: ``turn.completed``'s, summed over turns: ``input_tokens`` less its
``cached_input_tokens`` as input (OpenAI counts the cached part inside it), the cached part
as cache reads, ``cache_write_input_tokens`` as cache writes, ``output_tokens`` (reasoning
included) as output. A turn that failed says none: unknown then.

Turns: the model calls that answered. Codex's events do not mark them, so they are
counted from what each answer produced: a call answers with reasoning and messages, then
tool calls (commands, file changes, MCP calls, searches) that Codex runs before it calls
again; each run of tool items followed by more output is one call, and the output that
ends the turn is one more. Consecutive calls that made only tool calls, with no
reasoning or message between them, count as one (a lower bound). A request that failed
produced nothing and counts none.

Classification (after our timeout, which is ``timeout``):
    a ``file_change`` reported ``failed``                   → config_error (Codex could not
      write its change: its own sandbox setting or the machine; retrying cannot help)
    exit 0 with turn.completed and no turn.failed          → success
    "Missing environment variable: `OPENAI_API_KEY`." (its ``env_key`` is not set: not
      in the engine's ``pass_env``)                         → auth_error
    turn.failed / error messages name an infra cause (``classify.match_infra``, e.g.
      "unexpected status 401 Unauthorized", "unexpected status 503 Service Unavailable",
      "exceeded retry limit, last status: 429 …", "stream disconnected …") → that class
    no JSON event at all (bad flag, not installed), a crash status, a fatal ``error``
      without a failed turn, or a stream that ends without turn.completed/turn.failed
                                                            → engine_error
    turn.failed for any other reason                        → code
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.domain.engine_settings import (
    CODEX_BASE_URL,
    CODEX_ENV_KEY,
    engine_retries,
)
from orchestrator.engines.base import (
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

DEFAULT_SANDBOX = "workspace-write"
PROVIDER = "orchestrator"
# Items a model call asks Codex to act on; Codex calls the model again after them.
TOOL_ITEMS = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})
# Items a model call says (reasoning, a message); ``error`` and ``todo_list`` are Codex's own.
SAID_ITEMS = frozenset({"agent_message", "reasoning"})


def provider_entry(settings: Mapping[str, Any]) -> str:
    """The ``-c`` value that defines the provider Codex is pointed at (TOML: strings in
    JSON's quoting, which TOML's basic strings share; the URL is checked at load)."""
    retries = engine_retries(settings)
    fields = {
        "name": PROVIDER,
        "base_url": str(settings.get("base_url", CODEX_BASE_URL)),
        "env_key": str(settings.get("env_key", CODEX_ENV_KEY)),
        "wire_api": "responses",
    }
    inline = ", ".join(f"{key} = {json.dumps(value)}" for key, value in fields.items())
    # A failed turn is retried whole ("Reconnecting… 1/N") on top of the request's own
    # retries, a 401 too: one of the two, or N retries would be (N+1)² requests.
    counts = f"request_max_retries = {retries}, stream_max_retries = 0"
    return f"model_providers.{PROVIDER}={{{inline}, {counts}}}"


def _error_message(event: Mapping[str, Any]) -> str | None:
    """``{"type":"error","message":…}`` or ``{"type":"turn.failed","error":{"message":…}}``."""
    holder = event.get("error") if event["type"] == "turn.failed" else event
    message = holder.get("message") if isinstance(holder, dict) else None
    return message if isinstance(message, str) and message.strip() else None


def _completed_items(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["item"]
        for e in events
        if e["type"] == "item.completed" and isinstance(e.get("item"), dict)
    ]


def model_calls(items: Sequence[Mapping[str, Any]]) -> int:
    """The model calls that answered, from the items they produced (see the module's doc)."""
    calls = 0
    in_tools = False
    for item in items:
        kind = item.get("type")
        if kind in TOOL_ITEMS:
            if not in_tools and calls == 0:
                calls = 1  # tool calls with nothing said before them: the first call
            in_tools = True
        elif kind in SAID_ITEMS:
            if in_tools or calls == 0:
                calls += 1  # output after tools: Codex called the model again
            in_tools = False
    return calls


def usage_of(events: Sequence[Mapping[str, Any]]) -> Usage:
    """The tokens of every ``turn.completed``, summed; unknown without one."""
    totals: dict[str, int] = {}
    seen = False
    for event in events:
        usage = event.get("usage") if event["type"] == "turn.completed" else None
        if not isinstance(usage, dict):
            continue
        seen = True
        for key in (
            "input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens",
        ):  # fmt: skip
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                totals[key] = totals.get(key, 0) + value
    if not seen:
        return Usage()
    cached = totals.get("cached_input_tokens", 0)
    return Usage(
        input_tokens=max(totals.get("input_tokens", 0) - cached, 0),
        output_tokens=totals.get("output_tokens"),
        cache_read_tokens=cached,
        cache_write_tokens=totals.get("cache_write_input_tokens"),
    )


# Codex's words when the variable its provider's ``env_key`` names is not set (the
# engine's ``pass_env`` does not name it): a person fixes the credentials.
_NO_KEY = re.compile(r"^Missing environment variable: `?(?P<name>[A-Za-z_][A-Za-z0-9_]*)`?")
# The runner's header line names the working directory (``runner``): the clone.
_CWD = re.compile(r"^# orchestrator: \S+ cwd=(?P<cwd>/.*)$", re.MULTILINE)


def _failed_changes(items: Sequence[Mapping[str, Any]], cwd: str | None) -> list[str]:
    """The paths of every file change Codex reported failed, relative to the clone when
    they lie in it (Codex names them absolute)."""
    paths: list[str] = []
    for item in items:
        if item.get("type") != "file_change" or item.get("status") != "failed":
            continue
        changes = item.get("changes")
        named = [
            str(change.get("path"))
            for change in (changes if isinstance(changes, list) else [])
            if isinstance(change, dict) and change.get("path")
        ]
        paths += named or ["(no path given)"]
    if cwd is None:
        return paths
    return [p.removeprefix(cwd.rstrip("/") + "/") for p in paths]


# Codex 0.171 asks chatgpt.com (analytics, plugins, apps) and github.com (remote plugins)
# unless told not to: a run talks to its model and nothing else. The sandbox would
# refuse them anyway; off, they are not egress denials in every attempt's record.
QUIET = (
    "-c", "analytics.enabled=false",
    "--disable", "plugins", "--disable", "apps", "--disable", "remote_plugin",
)  # fmt: skip


class CodexAdapter(Adapter):
    name = "codex"

    def invocation(self, task: EngineTask) -> Invocation:
        sandbox = str(task.settings.get("sandbox", DEFAULT_SANDBOX))
        argv = (
            "codex",
            "exec",
            "--json",
            "-m",
            task.model,
            "--sandbox",
            sandbox,
            "-c",
            provider_entry(task.settings),
            "-c",
            f'model_provider="{PROVIDER}"',
            *QUIET,
            *string_list(task.settings, "extra_args"),
            "-",
        )
        prompt_file = task.prompt_path()
        return Invocation(
            argv=argv, stdin_path=prompt_file, files={prompt_file: build_prompt(task)}
        )

    def report(self, output: str, exit_code: int, timed_out: bool) -> EngineReport:
        events = json_events(output)
        started = any(e["type"] == "turn.started" for e in events)
        completed = any(e["type"] == "turn.completed" for e in events)
        failed = [e for e in events if e["type"] == "turn.failed"]
        fatal = [e for e in events if e["type"] == "error"]
        items = _completed_items(events)
        messages = [
            item["text"]
            for item in items
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str)
        ]
        final_message = messages[-1] if messages else None
        calls = model_calls(items)
        turns = calls if calls or started else None
        usage = usage_of(events)

        def done(failure: FailureClass | None, detail: str | None) -> EngineReport:
            return EngineReport(turns, None, final_message, failure, detail, usage)

        if timed_out:
            return done(FailureClass.TIMEOUT, "stopped by the stage timeout")
        header = _CWD.search(output)
        unwritten = _failed_changes(items, header.group("cwd") if header else None)
        if unwritten:
            return done(
                FailureClass.CONFIG_ERROR,
                one_line(
                    f"codex could not write {', '.join(unwritten)}: its file change failed "
                    "(Codex's own sandbox or the file system refused the write)"
                ),
            )
        if exit_code == 0 and completed and not failed:
            return done(None, None)

        # The failed turn's own message first: earlier ``error`` events may be retries
        # that codex recovered from before the turn finally failed for another reason.
        texts = [m for m in (_error_message(e) for e in [*failed[-1:], *reversed(fatal)]) if m]
        detail = one_line(texts[0]) if texts else None
        missing = _NO_KEY.match(texts[0]) if texts else None
        if missing is not None:
            name = missing.group("name")
            return done(
                FailureClass.AUTH_ERROR,
                f"codex found no API key: {name} is not set (name it in the engine's pass_env)",
            )
        failure = match_infra("\n".join(texts))
        if failure is not None:
            return done(failure, detail)
        if not events:
            said = last_words(output)
            return done(
                FailureClass.ENGINE_ERROR,
                f"codex printed no JSON events (exit {exit_code})" + (f": {said}" if said else ""),
            )
        if crashed(exit_code):
            return done(FailureClass.ENGINE_ERROR, detail or f"codex crashed (exit {exit_code})")
        if failed:
            return done(FailureClass.CODE, detail or "the turn failed")
        if fatal:
            return done(FailureClass.ENGINE_ERROR, detail)
        return done(
            FailureClass.ENGINE_ERROR,
            f"codex ended without turn.completed or turn.failed (exit {exit_code})",
        )


ADAPTER = CodexAdapter()
