"""The status written back to the issue a ticket came from (issue 28): one comment per
issue, edited in place as the run goes (``domain/status_comments.py`` says what it reads).

Ours is the comment that carries the ticket's marker *and* was written by the token's own
account (``GET /user``, asked once per source and kept for the batch): a marker pasted
into someone else's comment is left alone, and ours is written beside it. Found before
created, so a run that died between creating the comment and anything after finds it
again on its next pass; no local state is kept. A create answered with a 5xx or cut off
is not sent again (the forge may have made the comment): it is looked for once more.

A source with ``status_labels = true`` also keeps one ``orchestrator:<status>`` label on
the issue, set at the same moments, our other status labels taken off and everybody
else's left alone.

Never failing or blocking a run: every forge error is one line said, requests are
bounded by a timeout, and GitLab's back-off is capped (``MAX_WAIT_S``).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.runs import RunRecord
from orchestrator.domain.sources import ForgeSource, GitHubSource, GitLabSource, Source
from orchestrator.domain.status_comments import (
    StatusFacts,
    is_status_of,
    status_body,
    status_labels,
)
from orchestrator.domain.tickets import TicketOrigin, load_ticket
from orchestrator.forges._rest import MAX_WAIT_S as FORGE_MAX_WAIT_S
from orchestrator.forges.base import ForgeError
from orchestrator.forges.issues import Comment
from orchestrator.redaction import redact

TIMEOUT_S: Final = 10.0
MAX_WAIT_S: Final = 2.0  # a rate-limited GitLab is waited for this long at most, per wait

Say = Callable[[str], None]


class IssueThread(Protocol):
    """The comments of a forge's issues, as ``GitHubForge`` and ``GitLabForge`` keep them."""

    def issue_comments(self, number: int) -> Sequence[Comment]: ...

    def create_comment(self, number: int, body: str) -> int: ...

    def edit_comment(self, number: int, comment_id: int, body: str) -> None: ...

    def own_login(self) -> str: ...

    def relabel(self, number: int, add: str | None, remove: Sequence[str]) -> None: ...


ThreadFactory = Callable[[ForgeSource, str, str], IssueThread]


class RunStatus(Protocol):
    def show(self, record: RunRecord, say: Say) -> None:
        """Bring the status written back for ``record`` up to date; never raises."""
        ...


class NoStatus:
    """No ``[[sources]]`` forge with a token: nothing is written back."""

    def show(self, record: RunRecord, say: Say) -> None:
        return None


def _capped_sleep(seconds: float) -> None:
    time.sleep(min(seconds, MAX_WAIT_S))


def forge_thread(
    source: ForgeSource, project: str, token: str, *, max_wait_s: float = FORGE_MAX_WAIT_S
) -> IssueThread:
    """The real forge of ``source``'s kind for ``project``, over urllib; a rate limit is
    waited out for ``max_wait_s`` at most (``[recovery] forge_max_wait_s``)."""
    from orchestrator.forges.http import UrllibClient

    if isinstance(source, GitHubSource):
        from orchestrator.forges.github import GitHubForge

        return GitHubForge(UrllibClient(source.api_url, timeout_s=TIMEOUT_S), project, token,
                           max_wait_s=max_wait_s)  # fmt: skip
    from orchestrator.forges.gitlab import GitLabForge

    return GitLabForge(UrllibClient(timeout_s=TIMEOUT_S), source.base_url, project, token,
                       sleep=_capped_sleep, max_wait_s=max_wait_s)  # fmt: skip


@dataclass(frozen=True)
class StatusComments:
    """Status comments on the issues of ``sources`` (each with its token's variable)."""

    sources: tuple[ForgeSource, ...]
    environ: Mapping[str, str]
    thread_for: ThreadFactory = forge_thread
    # source id → its token's login: asked once per batch (one Services).
    _logins: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def show(self, record: RunRecord, say: Say) -> None:
        """Edit our status comment on the ticket's issue to say where ``record`` is, or
        write it when there is none yet, and (``status_labels``) set its status label; a
        ticket from no forge issue is left alone."""
        origin: TicketOrigin | None = None
        token = ""
        try:
            origin = load_ticket(Path(record.ticket_snapshot)).fields.origin
            source = self._source_of(origin)
            token = self.environ.get(source.token_env, "") if source else ""
            if origin is None or source is None or not token:
                return
            thread = self.thread_for(source, origin.project, token)
        except Exception as exc:  # noqa: BLE001 - a status comment never fails a run
            say(_not_done("status comment", origin, token, exc))
            return
        try:
            self._comment(thread, source, origin.number, record)
        except Exception as exc:  # noqa: BLE001 - a status comment never fails a run
            say(_not_done("status comment", origin, token, exc))
        if source.status_labels:
            label, others = status_labels(record.state)
            try:
                thread.relabel(origin.number, label, others)
            except Exception as exc:  # noqa: BLE001 - nor does a label
                say(_not_done("status label", origin, token, exc))

    def _comment(
        self, thread: IssueThread, source: ForgeSource, number: int, record: RunRecord
    ) -> None:
        login = self._logins.get(source.source_id)
        if login is None:
            login = self._logins.setdefault(source.source_id, thread.own_login())
        body = status_body(record, facts_of(record))
        ours = _ours(thread, number, login, record.ticket_id)
        if not ours:
            _create_once(thread, number, body, login, record.ticket_id)
        elif ours[0].body != body:
            thread.edit_comment(number, ours[0].id, body)

    def _source_of(self, origin: TicketOrigin | None) -> ForgeSource | None:
        if origin is None:
            return None
        for source in self.sources:
            if source.source_id == origin.source and source.kind == origin.kind:
                return source
        return None


def _not_done(what: str, origin: TicketOrigin | None, token: str, exc: Exception) -> str:
    """One line, without the token: what was not written, where, and why."""
    where = f" on issue #{origin.number}" if origin is not None else ""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    if token:
        text = text.replace(token, "***")
    verb = "set" if what == "status label" else "written"
    return f"{what}{where} not {verb}: {redact(text)[:300]}"


def _ours(thread: IssueThread, number: int, login: str, ticket_id: str) -> list[Comment]:
    return [
        c
        for c in thread.issue_comments(number)
        if c.author == login and is_status_of(c.body, ticket_id)
    ]


def _create_once(thread: IssueThread, number: int, body: str, login: str, ticket_id: str) -> None:
    """Create our comment; never twice. A 5xx or a dropped connection does not say the
    forge made nothing (it may have made it and failed to answer): such a create is not
    sent again, here or by the forge client (a POST is not retried), but looked for. If
    it is there, it was written; if not, the error is said and the next status writes."""
    try:
        thread.create_comment(number, body)
    except ForgeError as exc:
        if exc.kind != "outage" or not _ours(thread, number, login, ticket_id):
            raise


def _json_field(path: str | None, *keys: str) -> str | None:
    """``keys`` followed into the JSON file at ``path``; None if anything is missing."""
    if not path:
        return None
    try:
        value: object = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) else None


def facts_of(record: RunRecord) -> StatusFacts:
    """What the comment quotes beyond the record: read from the run's own files."""
    handoff = asked = None
    if record.state in (RunState.NEEDS_HUMAN, RunState.FAILED) and record.handoff:
        try:
            handoff = Path(record.handoff).read_text(encoding="utf-8", errors="replace")
        except OSError:
            handoff = None
    if record.state is RunState.AWAITING_APPROVAL:
        pending = [v for v in record.verdicts if v.outcome is None]
        asked = _json_field(pending[-1].path, "verdict", "summary") if pending else None
    pull_request = _json_field(record.pull_request, "url")
    return StatusFacts(handoff=handoff, asked=asked, pull_request_url=pull_request)


def status_for(
    sources: Sequence[Source], environ: Mapping[str, str], max_wait_s: float = FORGE_MAX_WAIT_S
) -> RunStatus:
    """Status comments for the forge sources whose token is set; else nothing. A rate
    limit is waited out for ``max_wait_s`` at most (``[recovery] forge_max_wait_s``)."""
    forges = tuple(
        s for s in sources
        if isinstance(s, GitHubSource | GitLabSource) and environ.get(s.token_env)
    )  # fmt: skip
    if not forges:
        return NoStatus()
    return StatusComments(forges, environ, functools.partial(forge_thread, max_wait_s=max_wait_s))
