"""Ticket intake (issue 28): each ``[[sources]]`` forge source's open, labelled issues
become ticket files under the state dir, and say whether they would run.

Per issue, under the ticket's lock (so two batches taking the same issue write it once
and run it once, and nothing is rewritten under a run in progress):

* no run yet: the ticket file is written when its text changed (title, body, labels,
  the source's settings), and it is queued;
* a run that has not ended: the file is left as the run took it, and the ticket is
  queued so the run resumes (``run_unfinished``); another process holding it: queued,
  and the queue reports it locked;
* a run that ended: not queued (with a pull request: "already has our pull request");
  but a run DRY_RUN stopped is queued, so the first batch that may act goes on with it
  (issue 43), and one a person can resume says so rather than "finished" (``ended``);
  a run waiting out an outage (``waiting-infra``) has not ended: queued, it goes on;
* an issue no longer listed (closed, or its label taken away) starts no new work: its
  file stays, and is not queued.

A source that cannot be read (the network, a 5xx after retries, a 401) is one line
naming it; the other sources go on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from orchestrator.domain.errors import StateError, TicketError, TicketLocked
from orchestrator.domain.intake import clean_title, issue_ticket
from orchestrator.domain.lifecycle import HaltReason, is_terminal, later_batch_may_resume
from orchestrator.domain.runs import RunRecord
from orchestrator.domain.sources import DirectorySource, ForgeSource, GitHubSource, Source
from orchestrator.domain.tickets import load_ticket, parse_ticket, render_ticket
from orchestrator.domain.validation import describe_validation_error
from orchestrator.execution.stoppable_sleep import stoppable_sleep
from orchestrator.forges._rest import MAX_WAIT_S
from orchestrator.forges.base import ForgeError
from orchestrator.forges.issues import ForgeIssue, IssueTracker
from orchestrator.storage import Locks, Runs
from orchestrator.storage.intake import IntakeFiles

if TYPE_CHECKING:
    from orchestrator.domain.config import LoadedConfig
    from orchestrator.storage import StateStorage as Storage

QUEUED = "queued"
SKIPPED = "skipped"


@dataclass(frozen=True)
class IntakeEntry:
    """One issue (or a file whose issue is gone) and what the batch does with it."""

    ticket_id: str
    title: str
    status: str  # QUEUED | SKIPPED
    reason: str
    url: str = ""
    path: Path | None = None


@dataclass(frozen=True)
class SourceReport:
    source: str
    kind: str
    entries: tuple[IntakeEntry, ...] = ()
    error: str | None = None  # the source could not be read: why, one line
    queued: tuple[Path, ...] = field(default=())


def tracker_for(
    source: ForgeSource,
    environ: Mapping[str, str],
    sleep: Callable[[float], None],
    max_wait_s: float = MAX_WAIT_S,
) -> IssueTracker:
    """The issue tracker of a source, its token read from ``token_env``; a rate limit is
    waited out for ``max_wait_s`` at most (``[recovery] forge_max_wait_s``), past which
    the source's error says when to ask again."""
    from orchestrator.forges.http import UrllibClient

    token = environ.get(source.token_env, "")
    if not token:
        raise ForgeError("auth", f"${source.token_env} is not set (the token to read issues with)")
    if isinstance(source, GitHubSource):
        from orchestrator.forges.github_issues import GitHubIssues

        return GitHubIssues(
            UrllibClient(), source.api_url, source.repo, token, sleep=sleep, max_wait_s=max_wait_s
        )
    from orchestrator.forges.gitlab import GitLabForge

    return GitLabForge(
        UrllibClient(), source.base_url, source.project, token, sleep=sleep, max_wait_s=max_wait_s
    )


def take_in(
    source: ForgeSource,
    tracker: IssueTracker,
    intake: IntakeFiles,
    runs: Runs,
    locks: Locks,
    *,
    write: bool = True,
) -> SourceReport:
    """Read the source's issues and bring its ticket files up to date (``write=False``:
    only say what would happen, touching nothing: ``orchestrator tickets``)."""
    name = source.source_id
    try:
        issues = tracker.list_issues(
            source.label, source.assignee if isinstance(source, GitHubSource) else None
        )
    except ForgeError as exc:
        return SourceReport(name, source.kind, error=f"{exc.kind}: {exc}")
    entries: list[IntakeEntry] = []
    seen: set[str] = set()
    for issue in issues:
        entry = _one(source, issue, intake, runs, locks, seen, write=write)
        entries.append(entry)
    for path in intake.paths(name):
        if path.stem not in seen:
            entries.append(IntakeEntry(path.stem, _title_of(path), SKIPPED,
                                       "closed, or no longer labelled: no new work", path=path))  # fmt: skip
    queued = tuple(e.path for e in entries if e.status == QUEUED and e.path is not None)
    return SourceReport(name, source.kind, tuple(entries), queued=queued)


def _title_of(path: Path) -> str:
    try:
        return parse_ticket(path.read_text(encoding="utf-8"), path).fields.title
    except (OSError, UnicodeDecodeError, TicketError):
        return "?"


def _one(
    source: ForgeSource,
    issue: ForgeIssue,
    intake: IntakeFiles,
    runs: Runs,
    locks: Locks,
    seen: set[str],
    *,
    write: bool,
) -> IntakeEntry:
    try:
        fields, body = issue_ticket(source, issue)
        text = render_ticket(fields, body)
    except (ValidationError, ValueError) as exc:
        problems = (
            describe_validation_error(exc) if isinstance(exc, ValidationError) else [str(exc)]
        )
        return IntakeEntry(f"#{issue.number}", clean_title(issue.title), SKIPPED,
                           "malformed: " + "; ".join(problems)[:300], issue.url)  # fmt: skip
    ticket_id, title = fields.id, fields.title
    if ticket_id in seen:
        return IntakeEntry(ticket_id, title, SKIPPED, "duplicate id in this source", issue.url)
    seen.add(ticket_id)
    path = intake.path(source.source_id, ticket_id)

    def entry(status: str, reason: str) -> IntakeEntry:
        return IntakeEntry(ticket_id, title, status, reason, issue.url, path)

    try:
        with locks.ticket(ticket_id):
            latest = runs.latest_for_ticket(ticket_id)
            if latest is not None and is_terminal(latest.state):
                return entry(*ended(latest))
            if latest is not None:
                return entry(QUEUED, f"resumes its unfinished run {latest.run_id} ({latest.state})")
            before = intake.read(source.source_id, ticket_id)
            if before == text:
                return entry(QUEUED, "new, unchanged since the last intake")
            if write:
                intake.write(source.source_id, ticket_id, text)
            return entry(QUEUED, "new" if before is None else "new, the issue changed")
    except TicketLocked as exc:
        return entry(QUEUED, f"running elsewhere ({exc})")
    except StateError as exc:
        return entry(SKIPPED, f"state error: {exc}")


def ended(latest: RunRecord) -> tuple[str, str]:
    """What intake does with a ticket whose latest run stopped, and why. A run stopped
    for a reason a later batch removes (DRY_RUN: ``later_batch_may_resume``) is queued,
    never "finished": the queue goes on with it once the batch may act, or says again
    why not (issue 43). Any other stop is not queued; one a person can undo says how."""
    halt = latest.halt.reason if latest.halt else None
    where = f" at {latest.halt.stage!r}" if latest.halt and latest.halt.stage else ""
    if latest.pull_request:
        return SKIPPED, f"already has our pull request {latest.pull_request}"
    if later_batch_may_resume(latest.state, halt):
        return QUEUED, (
            f"stopped by DRY_RUN{where} ({latest.run_id}): the first batch with "
            "DRY_RUN=false goes on from there"
        )
    if halt is not None and halt is not HaltReason.HUMAN_REJECTED:
        return SKIPPED, (
            f"stopped: {latest.state} ({halt}){where} ({latest.run_id}); "
            f"`orchestrator resume {latest.run_id}` once its cause is fixed"
        )
    return SKIPPED, f"finished: {latest.state} ({latest.run_id})"


def directory_report(source_id: str, directory: Path, runs: Runs) -> SourceReport:
    """A directory source: every ticket file is queued (the queue refuses a malformed or
    duplicate one, and passes over one whose run ended); the entries say which will run."""
    from orchestrator.storage.ticket_queue import ticket_files

    if not directory.is_dir():
        return SourceReport(
            source_id, "directory", error=f"{directory}: not a directory of tickets"
        )
    paths = ticket_files(directory)
    entries = tuple(_file_entry(path, runs) for path in paths)
    return SourceReport(source_id, "directory", entries, queued=tuple(paths))


def _file_entry(path: Path, runs: Runs) -> IntakeEntry:
    try:
        ticket = load_ticket(path)
    except TicketError as exc:
        return IntakeEntry(path.stem, "?", SKIPPED, f"malformed: {exc}", path=path)
    try:
        latest = runs.latest_for_ticket(ticket.id)
    except StateError as exc:
        return IntakeEntry(
            ticket.id, ticket.fields.title, SKIPPED, f"state error: {exc}", path=path
        )
    if latest is not None and is_terminal(latest.state):
        status, reason = ended(latest)
        return IntakeEntry(ticket.id, ticket.fields.title, status, reason, path=path)
    reason = "new" if latest is None else f"resumes its unfinished run {latest.run_id}"
    return IntakeEntry(ticket.id, ticket.fields.title, QUEUED, reason, path=path)


def gather(
    sources: tuple[Source, ...],
    root: Path,
    storage: Storage,
    *,
    environ: Mapping[str, str] = os.environ,
    sleep: Callable[[float], None] = stoppable_sleep,  # a forge's rate limit, up to 60 s
    trackers: Callable[[ForgeSource], IssueTracker] | None = None,
    write: bool = True,
    max_wait_s: float = MAX_WAIT_S,
) -> list[SourceReport]:
    """Every source's report, in config order: a directory's files (``path`` relative to
    the config file's directory), a forge's issues taken in (``write=False``: only said).
    Ticket ids claimed twice across sources are marked on every claimant."""
    intake = IntakeFiles(storage.layout)
    reports = []
    for source in sources:
        if isinstance(source, DirectorySource):
            reports.append(directory_report(source.source_id, root / source.path, storage.runs))
            continue
        try:
            tracker = (
                trackers(source) if trackers else tracker_for(source, environ, sleep, max_wait_s)
            )
        except ForgeError as exc:
            reports.append(SourceReport(source.source_id, source.kind, error=f"{exc.kind}: {exc}"))
            continue
        reports.append(take_in(source, tracker, intake, storage.runs, storage.locks, write=write))
    return _mark_duplicates(reports)


def _mark_duplicates(reports: list[SourceReport]) -> list[SourceReport]:
    claims: dict[str, int] = {}
    for report in reports:
        for entry in report.entries:
            if entry.status == QUEUED:
                claims[entry.ticket_id] = claims.get(entry.ticket_id, 0) + 1
    twice = {ticket_id for ticket_id, count in claims.items() if count > 1}
    if not twice:
        return reports
    return [
        replace(report, entries=tuple(
            replace(entry, status=SKIPPED, reason="duplicate id: another file claims it")
            if entry.status == QUEUED and entry.ticket_id in twice else entry
            for entry in report.entries
        ))
        for report in reports
    ]  # fmt: skip


def sources_of(loaded: LoadedConfig, tickets_dir: Path) -> tuple[tuple[Source, ...], Path]:
    """The configured sources and the directory their paths are relative to; without
    ``[[sources]]``, the one directory ``tickets_dir`` (relative to where we are)."""
    if loaded.config.sources:
        return loaded.config.sources, loaded.root
    return (DirectorySource(kind="directory", path=str(tickets_dir), name="tickets"),), Path.cwd()
