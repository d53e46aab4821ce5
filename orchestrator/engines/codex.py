"""Engine ``codex``: OpenAI's Codex CLI, non-interactive, JSONL events on stdout.

    codex exec --json -m M --sandbox S [extra_args...] -   < runs/<run>/prompt-<attempt>.txt

``-`` as the prompt reads it from stdin (openai/codex ``codex-rs/exec/src/cli.rs``: "If not
provided as an argument (or if `-` is used), instructions are read from stdin"). ``--json``
prints events as JSONL (alias ``--experimental-json``). ``--sandbox`` is
``read-only`` | ``workspace-write`` | ``danger-full-access``; ``--full-auto`` is deprecated
upstream in favour of ``--sandbox workspace-write``, so it is not used. Approvals are never
asked for in ``exec``.

Settings (``[engines.NAME]``):
    sandbox      "workspace-write" (default: may edit the clone), "read-only",
                 "danger-full-access"
    extra_args   optional list of strings inserted before the final ``-``

Output format (openai/codex ``codex-rs/exec/src/exec_events.rs`` and
``event_processor_with_jsonl_output.rs``):
    {"type":"thread.started","thread_id":"…"}
    {"type":"turn.started"}
    {"type":"item.started"|"item.updated"|"item.completed","item":{"id":"item_0",
      "type":"agent_message"|"reasoning"|"command_execution"|"file_change"|
              "mcp_tool_call"|"web_search"|"todo_list"|"error", …}}
        — ``agent_message`` has ``text`` (the last one is the final message); an item of
          type ``error`` is a non-fatal warning
    {"type":"turn.completed","usage":{"input_tokens":…,"cached_input_tokens":…,
      "output_tokens":…}}
    {"type":"turn.failed","error":{"message":"…"}}
    {"type":"error","message":"…"}        (a fatal stream error)
Exit status (``exec/src/lib.rs``): 0, or 1 when a non-retried error or a failed turn was
seen; 2 for a command-line error (clap, nothing on stdout). Codex reports tokens, not cost.

Classification (after our timeout, which is ``timeout``):
    exit 0 with turn.completed and no turn.failed          → success
    turn.failed / error messages name an infra cause (``classify.match_infra``, e.g.
      "You've hit your usage limit", "exceeded retry limit, last status: 429 …",
      "unexpected status 401 Unauthorized", "stream disconnected …") → that class
    no JSON event at all (bad flag, not installed), a crash status, a fatal ``error``
      without a failed turn, or a stream that ends without turn.completed/turn.failed
                                                            → engine_error
    turn.failed for any other reason                        → code
"""

from __future__ import annotations

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
from orchestrator.engines.classify import crashed, json_events, last_words, match_infra, one_line

DEFAULT_SANDBOX = "workspace-write"


def _error_message(event: Mapping[str, Any]) -> str | None:
    """``{"type":"error","message":…}`` or ``{"type":"turn.failed","error":{"message":…}}``."""
    holder = event.get("error") if event["type"] == "turn.failed" else event
    message = holder.get("message") if isinstance(holder, dict) else None
    return message if isinstance(message, str) and message.strip() else None


class CodexAdapter:
    name = "codex"

    def check_settings(self, settings: Mapping[str, Any]) -> list[str]:
        return settings_problems("codex", settings)

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
            *string_list(task.settings, "extra_args"),
            "-",
        )
        prompt_file = task.prompt_path()
        return Invocation(
            argv=argv, stdin_path=prompt_file, files={prompt_file: build_prompt(task)}
        )

    def report(self, output: str, exit_code: int, timed_out: bool) -> EngineReport:
        events = json_events(output)
        started = sum(1 for e in events if e["type"] == "turn.started")
        completed = any(e["type"] == "turn.completed" for e in events)
        failed = [e for e in events if e["type"] == "turn.failed"]
        fatal = [e for e in events if e["type"] == "error"]
        messages = [
            e["item"]["text"]
            for e in events
            if e["type"] == "item.completed"
            and isinstance(e.get("item"), dict)
            and e["item"].get("type") == "agent_message"
            and isinstance(e["item"].get("text"), str)
        ]
        final_message = messages[-1] if messages else None

        def done(failure: FailureClass | None, detail: str | None) -> EngineReport:
            return EngineReport(started or None, None, final_message, failure, detail)

        if timed_out:
            return done(FailureClass.TIMEOUT, "stopped by the stage timeout")
        if exit_code == 0 and completed and not failed:
            return done(None, None)

        # The failed turn's own message first: earlier ``error`` events may be retries
        # that codex recovered from before the turn finally failed for another reason.
        texts = [m for m in (_error_message(e) for e in [*failed[-1:], *reversed(fatal)]) if m]
        detail = one_line(texts[0]) if texts else None
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
