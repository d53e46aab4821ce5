"""What a run's event is and what each kind of ``[[notify]]`` target is sent about it
(issue 28). Pure: the sending is ``app/notify.py``.

Every text a notice carries is redacted and bounded: a halt's detail quotes logs nobody
here wrote. No URL is ever in a notice (a target's URL is only ever in its variable).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from orchestrator.domain import inert
from orchestrator.domain.inert import plain
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.notify import NotifyEvent
from orchestrator.domain.runs import RunRecord
from orchestrator.redaction import redact

_EVENT_OF_STATE = {
    RunState.AWAITING_APPROVAL: NotifyEvent.AWAITING_APPROVAL,
    RunState.NEEDS_HUMAN: NotifyEvent.NEEDS_HUMAN,
    RunState.FAILED: NotifyEvent.FAILED,
    RunState.COMPLETED: NotifyEvent.COMPLETED,
}
# What a notice may carry of one text (a title, a halt's detail): enough to act on.
MAX_TEXT = 2000
MAX_TITLE = 200


class Occasion(NamedTuple):
    """An event of one run that is notified once: ``number`` tells apart the times a
    run may reach it again (the decision awaiting approval; the resumes before a halt)."""

    event: NotifyEvent
    number: int


def occasion_of(record: RunRecord) -> Occasion | None:
    """The event ``record``'s state is, or None (still pending, running, recovering, or
    split: nobody need be told). Pure: the outbox, not this, knows whether it was sent."""
    event = _EVENT_OF_STATE.get(record.state)
    if event is None:
        return None
    if event is NotifyEvent.AWAITING_APPROVAL:
        pending = [v.number for v in record.verdicts if v.outcome is None]
        return Occasion(event, pending[-1] if pending else 0)
    if event is NotifyEvent.COMPLETED:
        return Occasion(event, 0)
    return Occasion(event, len(record.resumes))  # a resumed run may halt again


def _text(value: str | None, limit: int = MAX_TEXT) -> str | None:
    if value is None:
        return None
    said = plain(redact(value))
    return said if len(said) <= limit else said[: limit - 1] + "…"


def notice_of(record: RunRecord, occasion: Occasion) -> dict[str, Any]:
    """The generic webhook's JSON body: what happened to which run, and what a person can
    do about it. Every text redacted and bounded."""
    halt = record.halt
    notice: dict[str, Any] = {
        "event": occasion.event.value,
        "ticket": {"id": record.ticket_id, "title": _text(record.ticket_title, MAX_TITLE)},
        "run_id": record.run_id,
        "state": record.state.value,
        "halt": None
        if halt is None
        else {"reason": halt.reason.value, "stage": halt.stage, "detail": _text(halt.detail)},
        "handoff": _text(record.handoff),
        "pull_request": _text(record.pull_request),
        "approval": None,
    }
    if occasion.event is NotifyEvent.AWAITING_APPROVAL:
        ref = next((v for v in record.verdicts if v.number == occasion.number), None)
        notice["approval"] = {
            "verdict": occasion.number,
            "action": ref.action if ref else None,
            "proposal": _text(ref.path) if ref else None,
            "approve": f"orchestrator approve {record.run_id}",
            "reject": f"orchestrator reject {record.run_id} --reason ...",
        }
    return notice


_HEADLINES = {
    NotifyEvent.AWAITING_APPROVAL: "is waiting for your approval",
    NotifyEvent.NEEDS_HUMAN: "needs a human",
    NotifyEvent.FAILED: "failed",
    NotifyEvent.COMPLETED: "completed",
}


def headline(notice: dict[str, Any]) -> str:
    ticket = notice["ticket"]
    return f"orchestrator: {ticket['id']} {_HEADLINES[NotifyEvent(notice['event'])]}"


def notice_lines(notice: dict[str, Any]) -> list[str]:
    """The notice as lines a person reads (Slack, Teams, e-mail)."""
    lines = [f"{headline(notice)}: {notice['ticket']['title']}", f"run {notice['run_id']}"]
    if notice["halt"]:
        halt = notice["halt"]
        lines.append(f"halt: {halt['reason']} at {halt['stage'] or '-'}: {halt['detail']}")
    if notice["approval"]:
        asked = notice["approval"]
        lines.append(f"asked: verdict {asked['verdict']} ({asked['action']}), {asked['proposal']}")
        lines.append(f"approve: {asked['approve']}")
        lines.append(f"reject: {asked['reject']}")
    if notice["handoff"]:
        lines.append(f"hand-off: {notice['handoff']}")
    if notice["pull_request"]:
        lines.append(f"pull request: {notice['pull_request']}")
    return lines


def payload_for(kind: str, notice: dict[str, Any]) -> dict[str, Any]:
    """What a webhook of ``kind`` is posted: the notice itself (``webhook``: plain strings,
    the receiver escapes them for whatever it renders), Slack's ``{"text": ...}`` escaped
    for mrkdwn, or a Teams connector's MessageCard escaped for its Markdown
    (``domain/inert.py``): a title, a halt's detail or a hand-off pings, links and shows
    nothing there."""
    if kind == "webhook":
        return notice
    if kind == "slack":
        # No preview either: a link's preview would fetch and show what it points at.
        text = inert.slack("\n".join(notice_lines(notice)))
        return {"text": text, "unfurl_links": False, "unfurl_media": False}
    if kind == "teams":
        return {
            "@type": "MessageCard",
            "@context": "https://schema.org/extensions",
            "summary": inert.teams(headline(notice)),
            "title": inert.teams(headline(notice)),
            # A MessageCard's text is markdown: two spaces end a line.
            "text": "  \n".join(inert.teams(line) for line in notice_lines(notice)[1:]),
        }
    raise ValueError(f"no webhook payload for a {kind} target")


def body_for(kind: str, notice: dict[str, Any]) -> bytes:
    """The JSON a webhook of ``kind`` is posted, with ``<``, ``>``, ``&`` as ``\\u``
    escapes (``inert.json_text``)."""
    return inert.json_text(payload_for(kind, notice)).encode()
