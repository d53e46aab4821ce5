"""``orchestrator show RUN_ID``: the run's stages, attempts, halt and paths, readable."""

from __future__ import annotations

import json
import os
import shlex
import signal as signals
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from orchestrator.domain.config import PriceConfig
from orchestrator.domain.errors import StateError
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.runs import Attempt, RunRecord
from orchestrator.reading.error_lines import error_lines_of
from orchestrator.reports.attempt_line import attempt_summary
from orchestrator.storage import PrunedMark
from orchestrator.storage.layout import verdict_files
from orchestrator.storage.retention import read_mark
from orchestrator.storage.run_ids import resolve_run_id
from orchestrator.storage.runs import RunStore

if TYPE_CHECKING:
    from orchestrator.domain.transcripts import ModelCall, ToolCall


# A failure class said in words (``engines/base.FailureClass``, and the classes a stage's
# or check's failure reading names): what ``show`` says before the detail.
CLASS_WORDS: Mapping[str, str] = {
    "rate_limited": "the provider throttled the requests",
    "quota_exhausted": "the account's credits or usage quota ran out",
    "auth_error": "the provider refused the key or login",
    "outage": "the provider was overloaded or down",
    "timeout": "the stage's timeout stopped it",
    "engine_error": "the engine crashed or could not start",
    # Its program is missing or hidden by the sandbox, or (Codex) its own sandbox could
    # not write a file: either way the machine or the config must change, not the code.
    "config_error": "the machine or the configuration must change (a program missing or "
    "hidden by the sandbox, a file the engine could not write)",
    "resource_exhausted": "the machine ran out of disk or memory",
    "network": "the network to a host failed",
    "code": "the engine ran, but its work did not pass",
}
_REASON_CHARS = 200


def _looks_like_json(text: str) -> bool:
    """An engine's event (its result object, an API error body) rather than words."""
    stripped = text.strip()
    return stripped.startswith(("{", "[")) or '{"' in stripped


def reason_line(failure_class: str | None, detail: str | None) -> str | None:
    """A failure in one line of words: ``the provider was overloaded or down (outage):
    API Error: 529``; the detail left out where it is an engine's JSON (cut, it would be
    neither JSON nor words) and cut at ``_REASON_CHARS`` otherwise. None: no class."""
    if not failure_class:
        return None
    words = CLASS_WORDS.get(failure_class)
    said = f"{words} ({failure_class})" if words else failure_class
    first = (detail or "").strip().splitlines()[0].strip() if (detail or "").strip() else ""
    if not first or _looks_like_json(first):
        return said
    if len(first) > _REASON_CHARS:
        first = first[: _REASON_CHARS - 1] + "…"
    return f"{said}: {first}"


def usage_line(attempt: Attempt) -> str | None:
    """An engine attempt's turns, tokens and cost, as far as the engine said them (an
    estimated cost with ``~`` and said so); None when it said none of them (a record
    from before they were kept, too)."""
    parts = []
    if attempt.turns is not None:
        parts.append(f"{attempt.turns} turn{'s' if attempt.turns != 1 else ''}")
    if attempt.input_tokens is not None or attempt.output_tokens is not None:
        tokens = f"{attempt.input_tokens or 0} input + {attempt.output_tokens or 0} output tokens"
        cache = [
            f"{n} {what}"
            for n, what in ((attempt.cache_read_tokens, "read"),
                            (attempt.cache_write_tokens, "written"))
            if n
        ]  # fmt: skip
        parts.append(tokens + (f" (cache: {', '.join(cache)})" if cache else ""))
    if attempt.cost_usd is not None:
        cost = f"{attempt.cost_usd:.4f}".rstrip("0").rstrip(".")
        if attempt.cost_estimated:
            parts.append(f"~${cost} (estimated from [prices])")
        else:
            parts.append(f"${cost}")
    return ", ".join(parts) if parts else None


def _listed(paths: tuple[str, ...], count: int) -> str:
    more = count - len(paths)
    return ", ".join(paths) + (f" and {more} more" if more > 0 else "")


def workspace_lines(attempt: Attempt) -> list[str]:
    """What the commit after an engine took of its work, and what it left out as the
    engine's own (aider's ``.aider*``, its lines in ``.gitignore``); nothing when no
    commit step ran (a failed attempt, a record from before it was kept)."""
    if attempt.committed_paths is None:
        return []
    lines = [
        f"committed: {_listed(attempt.committed_paths, attempt.committed_count)}"
        if attempt.committed_count
        else "committed: nothing (the engine changed no file of the project)"
    ]
    if attempt.left_out_count:
        lines.append(
            "left out as the engine's own: "
            + _listed(attempt.left_out_paths, attempt.left_out_count)
        )
    return lines


def killed_by(number: int) -> str:
    """``killed by signal 9 (SIGKILL)``."""
    try:
        name = f" ({signals.Signals(number).name})"
    except ValueError:
        name = ""
    return f"killed by signal {number}{name}"


def _log_lines(attempt: Attempt, pruned: PrunedMark | None) -> list[str]:
    """Where the attempt's log is and, for a failure, its last error lines; or that
    retention removed the log (``orchestrator prune``), or that it is missing."""
    if not attempt.log_path:
        return []
    lines = [f"      log: {attempt.log_path}"]
    log = attempt.failed_log if not attempt.ok else Path(attempt.log_path)
    if log is not None and not log.exists():
        if pruned is not None:
            lines.append(f"      log pruned on {pruned.pruned_at} (orchestrator prune)")
        else:
            lines.append(f"      log missing: {log}")
        return lines
    if not attempt.ok:
        said = error_lines_of(log)
        if attempt.engine:  # an engine's events are its reason line's, said in words
            said = [line for line in said if not _looks_like_json(line)]
        lines.extend(f"      | {line}" for line in said)
    return lines


def _attempt_lines(attempt: Attempt, pruned: PrunedMark | None = None) -> list[str]:
    who = ""
    if attempt.engine:
        who = f" engine={attempt.engine}" + (f" model={attempt.model}" if attempt.model else "")
    # Opted out of the sandbox: said on its line, as every start said it.
    outside = " (unsandboxed)" if attempt.sandbox == "none" else ""
    outside += " (whole network)" if attempt.egress == "open" else ""
    lines = [
        f"  #{attempt.number} {attempt.stage}{who} [{attempt.status}]{outside} "
        f"{attempt.started_at:%Y-%m-%d %H:%M:%S}Z  {attempt_summary(attempt)}"
    ]
    for check in attempt.checks:
        if check.skipped:
            lines.append(f"      check {check.name}: skipped (not for this ticket kind)")
        else:
            verdict = "timed out" if check.timed_out else f"exit {check.exit_code}"
            if check.signal and not check.timed_out:
                verdict = f"{killed_by(check.signal)} (exit {check.exit_code})"
            if check.already_on_base:  # on_red_base = "compare": judged passed
                verdict += ", failures already on the base: passed"
            outside = " (unsandboxed)" if check.sandbox == "none" else ""
            lines.append(f"      check {check.name}: {verdict} in {check.duration_s:.2f}s{outside}")
            if check.egress_denials:
                lines.append(
                    f"        egress denied ({check.egress_denials}): "
                    + ", ".join(check.egress_denied)
                )
    usage = usage_line(attempt) if attempt.engine else None
    if usage is not None:
        lines.append(f"      usage: {usage}")
    reason = None if attempt.ok else reason_line(attempt.failure_class, attempt.failure_detail)
    if reason is not None:
        lines.append(f"      reason: {reason}")
    lines.extend(f"      {line}" for line in workspace_lines(attempt))
    if attempt.egress_denials:  # what the egress proxy refused it (issue 40)
        lines.append(
            f"      egress denied ({attempt.egress_denials}): {', '.join(attempt.egress_denied)}"
        )
    lines.extend(_log_lines(attempt, pruned))
    return lines


def _recipe_lines(fix_path: Path, number: int) -> list[str]:
    """The recipe that ran for decision ``number`` and what the verifier said: read key by
    key, not as a ``FixReport``, so that a report cut short still shows what it holds."""
    try:
        fix = json.loads(fix_path.read_text())
    except (OSError, ValueError):
        return []
    if fix.get("verdict") != number:
        return []
    lines = [
        f"recipe: {shlex.join(c['argv'])} → "
        + (f"{killed_by(c['signal'])} (exit {c['exit_code']})" if c.get("signal")
           else f"exit {c['exit_code']}")
        for c in fix.get("commands", [])
    ]  # fmt: skip
    verification = fix.get("verification") or {}
    if verification:
        lines.append(
            f"verifier {fix['verifier']['check']}: exit {verification.get('exit_code')} "
            f"→ {fix.get('status')}" + (f" ({fix['red_reason']})" if fix.get("red_reason") else "")
        )
    elif fix.get("red_reason"):
        lines.append(f"recipe refused or failed: {fix['red_reason']}")
    if fix.get("sandbox") == "none":  # absent in reports from before the sandbox
        lines.insert(0, 'recipe ran unsandboxed: [recovery] recipe_sandbox = "none"')
    return lines


def usage_of(
    verdict_paths: list[Path], prices: Mapping[str, PriceConfig]
) -> tuple[int, int, int, float]:
    """(calls, input tokens, output tokens, estimated USD) over some verdict files."""
    from orchestrator.storage.batch_budget import estimate_cost
    from orchestrator.storage.decisions import read_verdict

    calls = inp = outp = 0
    cost = 0.0
    for path in verdict_paths:
        try:
            decided = read_verdict(path)
        except StateError:
            continue
        calls += decided.usage.calls
        inp += decided.usage.input_tokens
        outp += decided.usage.output_tokens
        cost += estimate_cost(
            dict(prices),
            decided.model or "",
            decided.usage.input_tokens,
            decided.usage.output_tokens,
        )
    return calls, inp, outp, round(cost, 6)


def _call_word(call: ModelCall | ToolCall) -> str:
    if call.kind == "tool":
        return f"tool {call.tool}"
    return f"{call.purpose}" + (f" ({call.error})" if call.error else "")


def _decision_lines(path: Path) -> list[str]:
    """Summary, routing and confidence of one decision, from its verdict file."""
    from orchestrator.storage.decisions import read_verdict

    try:
        decided = read_verdict(path)
    except StateError as exc:
        return [f"(unreadable: {exc})"]
    proposal = decided.proposal
    usage = decided.usage
    lines = [f"why: {decided.verdict.summary}"]
    lines.append(
        f"routing {proposal.routing} at confidence {proposal.confidence}"
        + (f"; model {decided.model}, {usage.calls} call(s), {usage.input_tokens}+"
           f"{usage.output_tokens} tokens" if usage.calls else "")
    )  # fmt: skip
    if decided.transcript:
        lines.append("calls: " + ", ".join(_call_word(c) for c in decided.transcript))
    elif decided.transcript is None and usage.calls:
        lines.append("calls: not recorded (written before verdict files carried a transcript)")
    return lines


def render(
    record: RunRecord, store: RunStore, prices: Mapping[str, PriceConfig] | None = None
) -> list[str]:
    lines = [
        f"run      {record.run_id}",
        f"ticket   {record.ticket_id} ({record.ticket_kind}): {record.ticket_title}",
        f"state    {record.state}"
        + (f" at {record.current_stage}" if record.current_stage else ""),
        f"started  {record.created_at:%Y-%m-%d %H:%M:%S}Z   updated {record.updated_at:%Y-%m-%d %H:%M:%S}Z",
    ]
    if record.base_commit is not None:
        lines.append(
            f"base     {record.base_branch} at {record.base_commit} (checked before any change)"
        )
    if record.halt is not None:
        lines.append(f"halt     {record.halt.reason} at {record.halt.stage}: {record.halt.detail}")
    if record.state is RunState.WAITING_INFRA:  # issue 43: not a stop, and nobody's to act on
        lines.append(
            "waiting  the next batch goes on from the failed stage, its caps untouched; a "
            "person is told once the outage is [recovery] infra_wait_max_h old"
        )
    for resumed in record.resumes:  # a person's hand in the run, in order
        left = f" ({resumed.halt.reason})" if resumed.halt is not None else ""
        lines.append(
            f"resumed  {resumed.at:%Y-%m-%d %H:%M:%S}Z by {resumed.by} from {resumed.from_state}{left}, "
            f"at stage {resumed.stage}"
        )
    lines.append("stages   " + "  ".join(f"{s.name}={s.status}" for s in record.stages))
    lines.append(
        f"counters attempts={record.counters.attempts} retries={record.counters.retries} "
        f"diagnoses={record.counters.diagnoses}"
    )
    lines.append("attempts")
    pruned = read_mark(store.layout, record.run_id)
    for attempt in record.attempts:
        lines.extend(_attempt_lines(attempt, pruned))
    if record.verdicts:
        lines.append("verdicts")
    for ref in record.verdicts:
        lines.append(
            f"  {ref.number}. after attempt #{ref.attempt}: {ref.action} ({ref.source}) "
            f"→ {ref.outcome or 'not yet carried out'}"
        )
        lines.extend(f"      {line}" for line in _decision_lines(Path(ref.path)))
        if ref.action == "mechanical-fix":
            # One report per verdict; older state dirs have only the run's latest.
            numbered = store.mechanical_fix_path(record.run_id, ref.number)
            fix_path = numbered if numbered.exists() else store.mechanical_fix_path(record.run_id)
            lines.extend(f"      {line}" for line in _recipe_lines(fix_path, ref.number))
        lines.append(f"      file: {ref.path}")
    if record.handoff:
        lines.append(f"handoff  {record.handoff}")
    for sub_ticket in record.sub_tickets:
        lines.append(f"split    {sub_ticket}")
    run_usage = usage_of([Path(v.path) for v in record.verdicts], prices or {})
    ticket_files = [v.path for v in verdict_files(store.runs_dir, ticket_id=record.ticket_id)]
    ticket_usage = usage_of(ticket_files, prices or {})
    for label, (calls, inp, outp, cost) in (("run", run_usage), ("ticket", ticket_usage)):
        lines.append(
            f"model    {label}: {calls} call(s), {inp} input + {outp} output tokens, ~${cost}"
        )
    lines.append(f"clone    {record.clone_dir}")
    if pruned is not None:
        lines.append(
            f"pruned   {', '.join(pruned.removed)} on {pruned.pruned_at} (orchestrator prune)"
        )
    lines.append(f"ticket   {record.ticket_snapshot}")
    if record.pull_request:
        lines.append(f"pr       {record.pull_request}")
    return lines


def comment_lines(rows: Iterable[Mapping[str, Any]], run_id: str) -> list[str]:
    """The issue comments weighed as answers to the run (their ledger rows, capability
    ``answer-by-comment``): who, what became of each and why, and where it is."""
    lines: list[str] = []
    for row in rows:
        if row.get("run") != run_id or row.get("capability") != "answer-by-comment":
            continue
        decision = row.get("decision")
        if not isinstance(decision, Mapping) or row.get("kind") != "decision":
            continue
        did = f"{decision.get('action')} verdict {decision.get('verdict')}"
        said = f"refused: {decision.get('why')}" if decision.get("refused") else "answered"
        lines.append(f"  {decision.get('by')}: {did}: {said}")
        lines.append(f"      {decision.get('comment_url')}")
    return ["comments (answers given on the issue)", *lines] if lines else []


def show(
    state_dir: Path,
    run_id: str,
    out: TextIO,
    *,
    as_json: bool = False,
    prices: Mapping[str, PriceConfig] | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    store = RunStore(state_dir)
    run_id = resolve_run_id(store, run_id)
    record = store.load(run_id)
    if as_json:
        # The validated record, not the file's bytes: what a stage said is redacted as it
        # is read, so a record written before redaction at the source prints no secret.
        out.write(record.model_dump_json(indent=2) + "\n")
        return 0
    from orchestrator.app.ledger_link import ledger_for

    ledger = ledger_for(state_dir, os.environ if environ is None else environ)
    lines = render(record, store, prices) + comment_lines(ledger.rows(), record.run_id)
    out.write("\n".join(lines) + "\n")
    return 0
