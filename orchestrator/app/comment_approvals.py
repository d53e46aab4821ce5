"""Approval by issue comment (issue 28): a run paused for a person, whose ticket came from
a forge issue, is answered by ``/orchestrator approve`` or ``/orchestrator reject
<reason>`` on that issue (``domain/comment_commands.py``). Read by ``orchestrator batch``
before its queue runs; the queue then carries the answer out as after a shell ``approve``.

Per paused run: the issue's comments created after the decision was put to a person,
oldest first; the first command comment not already in the ledger is weighed:

* edited after it was written (its ``updated_at`` is not its ``created_at``), naming
  another verdict than the one waiting, from an account that is no person (issue 40:
  whatever its permission — the forge's own word on the account, never the comment's
  text: GitHub's ``user.type`` must be ``"User"`` and the login must not end in
  ``[bot]``; GitLab's ``GET /users/:id`` must say ``bot: false`` and the username must
  not be an access token's ``project_N_bot…``/``group_N_bot…``), or from an account
  without write access to the repository, asked of the forge now (GitHub: collaborator
  permission admin, maintain or write; GitLab: access level Developer or above): refused. A ledger row says who, why
  and the comment's URL, nothing is answered, and the next command comment is weighed;
* otherwise: answered as ``orchestrator approve``/``reject`` answers (``answers.py``:
  signed, bound to the verdict file), by ``github:<login>`` / ``gitlab:<username>``,
  with the comment's URL in the approval and in a ledger row.

The same issues answer for the playbook (issue 44): ``/orchestrator playbook promote
<entry-id>`` on the issue of a ticket a proposed entry was learned from promotes it, under
the same rules (``promote_from_comments``).

Every comment weighed has its ledger row, keyed by run and comment id, so no batch weighs
it twice. A batch killed between a comment's answer and its ledger row is resumed by the
next: the answer on disk, signed and naming that comment's URL, is recognised as the
comment's own, and only its missing row (accepted) is written. Every other comment is ignored. A forge that cannot be asked (network, 5xx,
401) leaves the run waiting and is said in one line; the next batch asks again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from orchestrator.app.answers import answer_decision
from orchestrator.app.ledger_link import aware_time
from orchestrator.app.playbook import promote as playbook_promote
from orchestrator.app.services import Services
from orchestrator.app.stores import approvals_of
from orchestrator.domain.comment_commands import (
    CommentCommand,
    bot_name,
    parse_command,
    parse_playbook_command,
)
from orchestrator.domain.errors import (
    ConfigError,
    StateError,
    TicketError,
    TicketLocked,
    UsageError,
)
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.playbook import EntryStatus, PlaybookEntry
from orchestrator.domain.runs import RunRecord, pending_verdict
from orchestrator.domain.sources import ForgeSource, GitHubSource
from orchestrator.domain.tickets import TicketOrigin, load_ticket
from orchestrator.execution.stoppable_sleep import stoppable_sleep
from orchestrator.forges._rest import MAX_WAIT_S, Retrying
from orchestrator.forges.base import ForgeError
from orchestrator.forges.issues import Comment
from orchestrator.redaction import redact
from orchestrator.storage import DecisionLedger, StateStorage
from orchestrator.storage.intake import IntakeFiles
from orchestrator.storage.ledger import (
    key_from_env,
    person_decision,
)
from orchestrator.storage.playbook import PlaybookStore

CAPABILITY = "answer-by-comment"
PLAYBOOK_CAPABILITY = "playbook-by-comment"
GITHUB_WRITE = frozenset({"admin", "maintain", "write"})
GITLAB_DEVELOPER = 30


T = TypeVar("T")


class CommentThreads(Protocol):
    """One forge source's issue comments, and who may answer there."""

    kind: str  # "github" | "gitlab": the prefix of an approver's name

    def comments(self, number: int) -> Sequence[Comment]: ...

    def not_a_person(self, comment: Comment) -> str | None:
        """Why the comment's author is not known to be a person, or None when the forge
        says it is one."""
        ...

    def may_write(self, author: str) -> bool: ...


@dataclass(frozen=True)
class Weighed:
    """What became of one comment: the line the batch prints."""

    ticket_id: str
    comment_url: str
    by: str
    line: str
    answered: bool


def threads_for(
    source: ForgeSource, environ: Mapping[str, str], max_wait_s: float = MAX_WAIT_S
) -> CommentThreads:
    """The comment threads of ``source`` over the network, its token read from
    ``token_env``; a rate limit waited out for ``max_wait_s`` at most
    (``[recovery] forge_max_wait_s``), past which the run waits for the next batch."""
    from orchestrator.forges.http import UrllibClient

    token = environ.get(source.token_env, "")
    if not token:
        raise ForgeError(
            "auth", f"${source.token_env} is not set (the token to read comments with)"
        )
    waits = Retrying(sleep=stoppable_sleep, max_wait_s=max_wait_s)  # a stop cuts one short
    if isinstance(source, GitHubSource):
        from orchestrator.forges.github import GitHubForge

        return _GitHubThreads(
            GitHubForge(UrllibClient(source.api_url), source.repo, token, **waits)
        )
    from orchestrator.forges.gitlab import GitLabForge

    return _GitLabThreads(
        GitLabForge(UrllibClient(), source.base_url, source.project, token, **waits)
    )


class _GitHubThreads:
    kind = "github"

    def __init__(self, forge: _GitHubLike) -> None:
        self._forge = forge

    def comments(self, number: int) -> Sequence[Comment]:
        return self._forge.issue_comments(number)

    def not_a_person(self, comment: Comment) -> str | None:
        if bot_name(self.kind, comment.author):
            return "its login is a bot's ([bot])"
        if comment.author_person is None:
            return "GitHub did not say which type of account wrote it"
        if not comment.author_person:
            return "GitHub says its account is no user (type Bot or another)"
        return None

    def may_write(self, author: str) -> bool:
        return self._forge.permission(author) in GITHUB_WRITE


class _GitLabThreads:
    kind = "gitlab"

    def __init__(self, forge: _GitLabLike) -> None:
        self._forge = forge

    def comments(self, number: int) -> Sequence[Comment]:
        return [note for note in self._forge.issue_comments(number) if not note.system]

    def not_a_person(self, comment: Comment) -> str | None:
        if bot_name(self.kind, comment.author):
            return "its username is an access token's bot user's"
        if comment.author_person is False:
            return "GitLab says its author is a bot"
        bot = self._forge.user_is_bot(comment.author)  # asked now, as the permission is
        if bot is None:
            return "GitLab did not say whether its account is a bot"
        return "GitLab says its account is a bot" if bot else None

    def may_write(self, author: str) -> bool:
        level = self._forge.access_level(author)
        return level is not None and level >= GITLAB_DEVELOPER


class _GitHubLike(Protocol):
    def issue_comments(self, number: int) -> Sequence[Comment]: ...
    def permission(self, login: str) -> str | None: ...


class _GitLabLike(Protocol):
    def issue_comments(self, iid: int) -> Sequence[Comment]: ...
    def access_level(self, user: str | int) -> int | None: ...
    def user_is_bot(self, user: str | int) -> bool | None: ...


def comment_decision_id(run_id: str, kind: str, comment_id: int) -> str:
    """The ledger key of a comment weighed for a run: one row per comment, ever."""
    return f"{run_id}:comment-{kind}-{comment_id}"


def answer_from_comments(
    sources: Sequence[ForgeSource],
    storage: StateStorage,
    services: Services,
    *,
    threads: Callable[[ForgeSource], CommentThreads] | None = None,
) -> list[str]:
    """Weigh the comments on the issue of every paused run of ``sources`` (see the module
    docstring); the lines to print, one per comment weighed or source not reachable."""
    ledger = storage.ledger(key_from_env(services.environ))
    intake = IntakeFiles(storage.layout)
    lines: list[str] = []
    for source in sources:
        paused = list(_paused_runs(source, intake, storage))
        if not paused:
            continue  # no request to the forge when no run waits
        try:
            thread = (
                threads(source)
                if threads
                else threads_for(
                    source, services.environ, services.loaded.config.recovery.forge_max_wait_s
                )
            )
        except ForgeError as exc:
            lines.append(f"comments of {source.source_id}: not read: {exc.kind}: {exc}")
            continue
        for record, origin in paused:
            try:
                weighed = _weigh_run(record, origin, thread, ledger, storage, services)
            except ForgeError as exc:
                lines.append(f"{record.ticket_id}: comments not read ({exc.kind}: {exc}); "
                             "the run waits for the next batch")  # fmt: skip
                continue
            lines += [w.line for w in weighed]
    return lines


def _paused_runs(
    source: ForgeSource, intake: IntakeFiles, storage: StateStorage
) -> list[tuple[RunRecord, TicketOrigin]]:
    found = []
    for path in intake.paths(source.source_id):
        try:
            origin = load_ticket(path).fields.origin
            record = storage.runs.latest_for_ticket(path.stem)
        except (TicketError, StateError):
            continue  # the intake and the queue report these
        if origin is None or origin.source != source.source_id or record is None:
            continue
        if record.state is RunState.AWAITING_APPROVAL:
            found.append((record, origin))
    return found


def _weigh_run(
    record: RunRecord,
    origin: TicketOrigin,
    thread: CommentThreads,
    ledger: DecisionLedger,
    storage: StateStorage,
    services: Services,
) -> list[Weighed]:
    ref = pending_verdict(record)
    if ref is None:
        return []
    decided, _ = services.storage.decisions.read_with_sha256(record.run_id, ref.number)
    asked_at = decided.created_at
    weighed: list[Weighed] = []
    unweighed = _unweighed(
        thread, origin.number, asked_at, parse_command,
        lambda comment_id: comment_decision_id(record.run_id, thread.kind, comment_id), ledger,
    )  # fmt: skip
    for comment, command, key in unweighed:
        by = f"{thread.kind}:{comment.author}"
        why = _refusal(comment, command, ref.number) or _not_allowed(
            thread, comment, by, rule="approvals come from people only", where=origin.project
        )
        if why is not None:
            _record(ledger, key, record, ref.number, by, comment, command, services, why=why)
            weighed.append(Weighed(record.ticket_id, comment.url, by, (
                f"{record.ticket_id}: comment {comment.url} by {by} refused: {why}; "
                "nothing was answered"), answered=False))  # fmt: skip
            continue
        weighed.append(
            _answer(record, ref.number, by, comment, command, ledger, key, storage, services)
        )
        break
    return weighed


def _unweighed(
    thread: CommentThreads,
    number: int,
    since: datetime,
    parse: Callable[[str], T | None],
    key_of: Callable[[int], str],
    ledger: DecisionLedger,
) -> Iterator[tuple[Comment, T, str]]:
    """The comments on issue ``number`` written after ``since`` that hold a command
    (``parse``) and that no earlier batch weighed (their ledger key, ``key_of`` their id,
    has a row): each with its command and its key, in the thread's order."""
    for comment in thread.comments(number):
        created = aware_time(comment.created_at)
        if created is None or created <= since:
            continue
        command = parse(comment.body)
        if command is None:
            continue
        key = key_of(comment.id)
        if any(row.get("kind") == "decision" for row in ledger.rows_of(key)):
            continue  # weighed by an earlier batch
        yield comment, command, key


def _not_allowed(
    thread: CommentThreads, comment: Comment, by: str, *, rule: str, where: str
) -> str | None:
    """Why ``comment``'s author may not give this answer, or None: a bot (``rule`` says
    people give it), or no write access to ``where`` (asked of the forge now, not cached)."""
    if (bot := thread.not_a_person(comment)) is not None:
        return f"{by} is no person ({bot}); {rule}"
    if not thread.may_write(comment.author):
        return f"{by} has no write access to {where}"
    return None


def _refusal(comment: Comment, command: CommentCommand, waiting: int) -> str | None:
    """Why the comment cannot answer whoever wrote it, or None."""
    if comment.updated_at != comment.created_at:
        return "it was edited after it was written"
    if command.verdict is not None and command.verdict != waiting:
        return f"it names verdict {command.verdict}; the run waits on verdict {waiting}"
    return None


def _answer(
    record: RunRecord,
    number: int,
    by: str,
    comment: Comment,
    command: CommentCommand,
    ledger: DecisionLedger,
    key: str,
    storage: StateStorage,
    services: Services,
) -> Weighed:
    reason = redact(command.reason) if command.reason is not None else None
    word = "approved" if command.approved else "rejected"
    written_before = False
    try:
        with storage.locks.ticket(record.ticket_id):
            written_before = _answered_by(services, record.run_id, number, by, comment, command)
            if not written_before:
                answer_decision(services, record.run_id, approved=command.approved,
                                reason=reason, by=by, comment_url=comment.url)  # fmt: skip
    except TicketLocked as exc:
        line = f"{record.ticket_id}: comment {comment.url} by {by} waits: {exc}"
        return Weighed(record.ticket_id, comment.url, by, line, answered=False)
    except (UsageError, StateError) as exc:
        _record(ledger, key, record, number, by, comment, command, services, why=str(exc))
        line = f"{record.ticket_id}: comment {comment.url} by {by} refused: {exc}"
        return Weighed(record.ticket_id, comment.url, by, line, answered=False)
    _record(ledger, key, record, number, by, comment, command, services, why=None)
    line = f"{record.ticket_id}: verdict {number} of {record.run_id} {word} by {by} ({comment.url})"
    if written_before:
        line += "; its answer was written by an earlier batch that stopped before its ledger row"
    return Weighed(record.ticket_id, comment.url, by, line, answered=True)


def _answered_by(
    services: Services,
    run_id: str,
    number: int,
    by: str,
    comment: Comment,
    command: CommentCommand,
) -> bool:
    """Whether decision ``number`` was already answered from ``comment`` itself: the
    answer (signed, verified against the verdict file) is on disk but its ledger row is
    not, because the batch that wrote it died in between. Its row is then what is missing,
    not a second answer. Raises StateError when the answer on disk does not verify."""
    if not services.storage.approvals.answered(run_id, number):
        return False
    _, digest = services.storage.decisions.read_with_sha256(run_id, number)
    approval = approvals_of(services).read(run_id, number, verdict_sha256=digest)
    return (
        approval is not None
        and approval.comment_url == comment.url
        and approval.by == by
        and approval.approved == command.approved
    )


def _record(
    ledger: DecisionLedger,
    key: str,
    record: RunRecord,
    number: int,
    by: str,
    comment: Comment,
    command: CommentCommand,
    services: Services,
    *,
    why: str | None,
) -> None:
    """The comment's ledger row: who, what it asked, the URL, and whether it was refused."""
    decision = {
        "action": "approve" if command.approved else "reject",
        "verdict": number,
        "by": by,
        "comment_id": comment.id,
        "comment_url": comment.url,
        "reason": redact(command.reason) if command.reason is not None else None,
        "refused": why is not None,
        "why": why,
    }
    ledger.append(
        person_decision(
            decision_id=key,
            ticket=record.ticket_id,
            run=record.run_id,
            capability=CAPABILITY,
            inputs={"body": comment.body, "url": comment.url},
            decision=decision,
            at=services.clock(),
        )
    )


# ---------------------------------------------------------------- playbook promotion


def playbook_comment_id(kind: str, comment_id: int) -> str:
    """The ledger key of a ``/orchestrator playbook promote`` comment weighed: one row
    per comment, ever."""
    return f"playbook:comment-{kind}-{comment_id}"


def promote_from_comments(
    sources: Sequence[ForgeSource],
    storage: StateStorage,
    playbook: PlaybookStore,
    *,
    environ: Mapping[str, str],
    clock: Callable[[], datetime],
    max_wait_s: float = MAX_WAIT_S,
    threads: Callable[[ForgeSource], CommentThreads] | None = None,
) -> list[str]:
    """Proposed playbook entries promoted by ``/orchestrator playbook promote <entry-id>``
    on the issue of a ticket the entry was learned from (issue 44), by the same rules as an
    approval: a comment written after the entry was proposed, not edited, by a person with
    write access (asked of the forge now), is the promotion (by ``github:<login>``, its URL
    in the entry's ledger row); anyone else's is refused, with a ledger row saying who and
    why. Every comment weighed has its row (keyed by the comment), so none is weighed
    twice; no forge is asked when no entry waits. The lines to print."""
    waiting = _proposed_entries(playbook)
    if not waiting:
        return []
    ledger = storage.ledger(key_from_env(environ))
    intake = IntakeFiles(storage.layout)
    lines: list[str] = []
    for source in sources:
        issues = _issues_of(source, intake, waiting)
        if not issues:
            continue
        try:
            thread = threads(source) if threads else threads_for(source, environ, max_wait_s)
        except ForgeError as exc:
            lines.append(f"comments of {source.source_id}: not read: {exc.kind}: {exc}")
            continue
        for number, (ticket_id, entry_ids) in sorted(issues.items()):
            try:
                lines += _weigh_promotions(
                    thread, number, ticket_id, entry_ids, waiting, playbook, ledger, clock
                )
            except ForgeError as exc:
                lines.append(f"{ticket_id}: comments not read ({exc.kind}: {exc}); "
                             "the playbook's entries wait for the next batch")  # fmt: skip
    return lines


def _proposed_entries(playbook: PlaybookStore) -> dict[str, PlaybookEntry]:
    """The project's proposed entries, by id, found through the playbook's index (a file
    that is not an entry is passed over here: the run that reads the playbook names it)."""
    waiting: dict[str, PlaybookEntry] = {}
    for name, row in playbook.index(on_error=lambda _exc: None).files.items():
        if row[4] != EntryStatus.PROPOSED.value:
            continue
        try:
            entry = playbook.read_current(name)
        except ConfigError:
            continue
        if entry is not None and entry.status is EntryStatus.PROPOSED and entry.provenance:
            waiting[entry.id] = entry
    return waiting


def _issues_of(
    source: ForgeSource, intake: IntakeFiles, waiting: Mapping[str, PlaybookEntry]
) -> dict[int, tuple[str, frozenset[str]]]:
    """The source's issues whose tickets a waiting entry was learned from: by issue
    number, the ticket and those entries."""
    learned_from: dict[str, set[str]] = {}
    for entry in waiting.values():
        for provenance in entry.provenance:
            if provenance.ticket_id:
                learned_from.setdefault(provenance.ticket_id, set()).add(entry.id)
    found: dict[int, tuple[str, frozenset[str]]] = {}
    for path in intake.paths(source.source_id):
        if path.stem not in learned_from:
            continue
        try:
            origin = load_ticket(path).fields.origin
        except TicketError:
            continue  # the intake and the queue report these
        if origin is not None and origin.source == source.source_id:
            found[origin.number] = (path.stem, frozenset(learned_from[path.stem]))
    return found


def _weigh_promotions(
    thread: CommentThreads,
    number: int,
    ticket_id: str,
    entry_ids: frozenset[str],
    waiting: Mapping[str, PlaybookEntry],
    playbook: PlaybookStore,
    ledger: DecisionLedger,
    clock: Callable[[], datetime],
) -> list[str]:
    since = min(waiting[e].provenance[0].at for e in entry_ids)
    lines: list[str] = []
    unweighed = _unweighed(
        thread, number, since, parse_playbook_command,
        lambda comment_id: playbook_comment_id(thread.kind, comment_id), ledger,
    )  # fmt: skip
    for comment, entry_id, key in unweighed:
        by = f"{thread.kind}:{comment.author}"
        why: str | None = None
        if comment.updated_at != comment.created_at:
            why = "it was edited after it was written"
        elif entry_id not in entry_ids or entry_id not in waiting:
            why = f"{entry_id} is not a proposed entry learned from {ticket_id}"
        why = why or _not_allowed(
            thread, comment, by, rule="entries are promoted by people only", where="the repository"
        )
        if why is None:
            try:
                playbook_promote(playbook, entry_id, by=by, at=clock(), ledger=ledger,
                                 comment_url=comment.url)  # fmt: skip
            except (UsageError, ConfigError) as exc:  # its file went, or is no entry now
                why = str(exc)
        if why is None:
            lines.append(f"{ticket_id}: playbook entry {entry_id} promoted by {by} ({comment.url})")
        else:
            lines.append(f"{ticket_id}: comment {comment.url} by {by} refused: {why}; "
                         "nothing was promoted")  # fmt: skip
        ledger.append(
            person_decision(
                decision_id=key,
                ticket=ticket_id,
                run="",
                capability=PLAYBOOK_CAPABILITY,
                inputs={"body": comment.body, "url": comment.url},
                decision={
                    "action": "playbook-promote",
                    "entry": entry_id,
                    "by": by,
                    "comment_id": comment.id,
                    "comment_url": comment.url,
                    "refused": why is not None,
                    "why": why,
                },
                at=clock(),
            )
        )
    return lines
