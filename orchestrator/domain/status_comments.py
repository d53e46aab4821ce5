"""The one status comment a run keeps on the issue its ticket came from (issue 28). Pure:
finding, creating and editing it is ``app/status_comments.py``.

The comment opens with a hidden marker naming the ticket; it is ours only when it also
was written by the token's own account (anyone can paste the marker into a comment of
theirs). Its text is rewritten in place as the run goes: started, waiting for approval
(what is asked and how to answer), stopped by DRY_RUN or waiting out an outage (what
the next batch does: issue 43), needing a person (the hand-off), failed, completed (the
pull request). Every text quoted from the run is redacted and bounded: the issue is
read by whoever can read the repository. A source with ``status_labels`` also keeps one
``orchestrator:<status>`` label on the issue (``status_labels``), at the same moments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from orchestrator.domain.inert import markdown_block, markdown_inline
from orchestrator.domain.lifecycle import RunState, later_batch_may_resume
from orchestrator.domain.runs import RunRecord
from orchestrator.redaction import redact

MAX_QUOTE: Final = 1500  # of a hand-off, a halt's detail, a decision's summary
_MARKER: Final = "<!-- orchestrator:status ticket={ticket} -->"
_URL: Final = re.compile(r"https?://[A-Za-z0-9.:-]+(?:/[A-Za-z0-9._~%/+-]*)?")


@dataclass(frozen=True)
class StatusFacts:
    """What the comment says beyond the run record, read by the caller: the hand-off's
    text, the pending decision's summary, the pull request's URL."""

    handoff: str | None = None
    asked: str | None = None
    pull_request_url: str | None = None


# The label naming a run's status (a source's ``status_labels``); a state not listed
# (split) carries none of them.
STATUS_LABELS: Final[dict[RunState, str]] = {
    RunState.PENDING: "orchestrator:running",
    RunState.RUNNING: "orchestrator:running",
    RunState.RECOVERING: "orchestrator:running",
    RunState.AWAITING_APPROVAL: "orchestrator:awaiting-approval",
    # Still ours, going on in the next batch: no label of its own (issue 43).
    RunState.WAITING_INFRA: "orchestrator:running",
    RunState.NEEDS_HUMAN: "orchestrator:needs-human",
    RunState.FAILED: "orchestrator:failed",
    RunState.COMPLETED: "orchestrator:completed",
}


def status_labels(state: RunState) -> tuple[str | None, tuple[str, ...]]:
    """The status label a run in ``state`` puts on its issue (None: none), and the other
    status labels it takes off. Labels that are not ours are never named here."""
    label = STATUS_LABELS.get(state)
    others = tuple(sorted({name for name in STATUS_LABELS.values() if name != label}))
    return label, others


def marker(ticket_id: str) -> str:
    """The hidden first line of the status comment of ``ticket_id``."""
    return _MARKER.format(ticket=ticket_id)


def is_status_of(body: str, ticket_id: str) -> bool:
    """Whether ``body`` is (by its marker; not by its author) the status of ``ticket_id``."""
    return body.split("\n", 1)[0].strip() == marker(ticket_id)


def _quote(text: str) -> str:
    said = redact(text).strip()
    if len(said) > MAX_QUOTE:
        said = said[: MAX_QUOTE - 1] + "…"
    # A fenced block, shown as written: no markdown, no mention, image or link made live,
    # no issue closed (an indented block would not be: it cannot interrupt a paragraph,
    # so it read as Markdown after "Asked:"). ``domain/inert.py`` says why code.
    return "\n" + markdown_block(said)


def _link(url: str) -> str:
    """The pull request's URL as the forge gave it, when it is only a URL; else as code."""
    return url if _URL.fullmatch(url) else markdown_inline(url)


def _code(text: str) -> str:
    return f"`{text.replace('`', '')}`"


def status_body(record: RunRecord, facts: StatusFacts = StatusFacts()) -> str:
    """The status comment of ``record``'s run, marker first."""
    run = _code(record.run_id)
    state = record.state
    lines = [marker(record.ticket_id)]
    if state is RunState.COMPLETED:
        lines.append(f"**Completed** (run {run}).")
        if facts.pull_request_url:
            lines.append(f"\nPull request: {_link(facts.pull_request_url)}")
    elif state is RunState.AWAITING_APPROVAL:
        pending = [v for v in record.verdicts if v.outcome is None]
        lines.append(f"**Waiting for approval** (run {run}).")
        if pending:
            ref = pending[-1]
            lines.append(f"\nAsked: decision {ref.number}, {_code(ref.action)}:")
        else:
            lines.append("\nAsked:")
        lines.append(_quote(facts.asked or (record.halt.detail if record.halt else "") or "-"))
        lines += [
            "\nAnswer with a comment whose first line is one of:",
            "\n    /orchestrator approve\n    /orchestrator reject <reason>",
            "\nor on the orchestrator's host: "
            f"{_code(f'orchestrator approve {record.run_id}')} / "
            f"{_code(f'orchestrator reject {record.run_id} --reason ...')}",
        ]
    elif state is RunState.NEEDS_HUMAN and later_batch_may_resume(
        state, record.halt.reason if record.halt else None
    ):
        # Not a person's to do: the first batch that may act goes on (issue 43).
        stage = record.halt.stage if record.halt else None
        at = f" at {_code(stage)}" if stage else ""
        lines.append(f"**Stopped by DRY_RUN** before a side effect (run {run}{at}).")
        lines.append(
            "\nNothing is needed here: the first batch whose environment has "
            f"{_code('DRY_RUN=false')} goes on from there, and this comment says how it went."
        )
    elif state in (RunState.NEEDS_HUMAN, RunState.FAILED):
        word = "Needs a person" if state is RunState.NEEDS_HUMAN else "Failed"
        lines.append(f"**{word}** (run {run}).")
        if record.halt is not None:
            stage = f" at {_code(record.halt.stage)}" if record.halt.stage else ""
            lines.append(f"\nHalted: {_code(record.halt.reason.value)}{stage}.")
        if facts.handoff:
            lines += ["\nHand-off:", _quote(facts.handoff)]
        elif record.halt is not None and record.halt.detail:
            lines.append(_quote(record.halt.detail))
    elif state is RunState.WAITING_INFRA:
        stage = record.halt.stage if record.halt else record.current_stage
        at = f" at {_code(stage)}" if stage else ""
        lines.append(f"**Waiting for the infrastructure** (run {run}{at}).")
        lines.append(
            "\nThe forge, the model provider or the network kept failing through the "
            "back-off. Nothing is needed from you: the next batch goes on from there, with "
            "this ticket's caps untouched. If the outage lasts longer than "
            f"{_code('[recovery] infra_wait_max_h')}, a person is asked here."
        )
        if record.halt is not None and record.halt.detail:
            # What failed, without where the hand-off lies on this host: not the issue's.
            lines.append(_quote(record.halt.detail.split("; hand-off: ")[0]))
    elif state is RunState.SPLIT:
        subs = ", ".join(_code(sub) for sub in record.sub_tickets) or "-"
        lines.append(f"**Split** into sub-tickets (run {run}): {subs}.")
    else:
        stage = f", at {_code(record.current_stage)}" if record.current_stage else ""
        lines.append(f"**Started** (run {run}{stage}).")
    return "\n".join(lines) + "\n"
