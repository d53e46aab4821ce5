"""A proposed playbook entry promoted by ``/orchestrator playbook promote <entry-id>`` on the
issue of a ticket it was learned from (issue 44), against the loopback fake GitHub, by the
rules of an approval by comment: a person with write access (asked of the forge when the
comment is read), a comment not edited, written after the entry was proposed. Anyone
else's comment is refused with a ledger row; no comment is weighed twice; no forge is
asked while no entry waits; and ``orchestrator batch`` does it before its queue runs."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.app.comment_approvals import promote_from_comments
from orchestrator.app.intake import take_in, tracker_for
from orchestrator.app.playbook import propose, store_for
from orchestrator.cli.commands.batch import batch
from orchestrator.domain.comment_commands import parse_playbook_command
from orchestrator.domain.config import load_config
from orchestrator.domain.failure_signature import signature_of
from orchestrator.domain.playbook import EntryStatus, PlaybookEntry, Provenance
from orchestrator.domain.sources import GitHubSource
from orchestrator.storage import FileStorage
from orchestrator.storage.intake import IntakeFiles
from orchestrator.storage.ledger import Ledger

from support.github_fake import TOKEN, FakeGitHub, serve_github
from support.leaks import assert_not_leaked

REPO = "octo/widgets"
TICKET = "gh-octo-widgets-1"
PROPOSED_AT = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
ENVIRON = {"FAKE_GH_TOKEN": TOKEN}


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serve_github() as fake:
        fake.add_issue(REPO, 1, "deal() is off by one", "Steps…", ("orchestrate",))
        yield fake


def write_config(tmp_path: Path, fake: FakeGitHub) -> Path:
    (tmp_path / "tickets").mkdir()
    config = tmp_path / "config.toml"
    config.write_text(
        'state_dir = "state"\n[recovery]\nenabled = false\n\n[[sources]]\nkind = "github"\n'
        f'repo = "{REPO}"\nlabel = "orchestrate"\napi_url = "{fake.url}"\n'
        f'token_env = "FAKE_GH_TOKEN"\nrepository = "{tmp_path / "origin.git"}"\n\n'
        '[[stages]]\nname = "build"\ncommand = ["true"]\n'
    )
    return config


def taken_in(config: Path) -> tuple[GitHubSource, FileStorage]:
    """The issue taken in as a ticket, by the real intake."""
    loaded = load_config(config)
    [source] = loaded.config.sources
    assert isinstance(source, GitHubSource)
    storage = FileStorage(config.parent / "state")
    tracker = tracker_for(source, ENVIRON, sleep=lambda _s: None)
    take_in(source, tracker, IntakeFiles(storage.layout), storage.runs, storage.locks)
    assert IntakeFiles(storage.layout).paths(source.source_id)[0].stem == TICKET
    return source, storage


def proposed(config: Path, ticket: str = TICKET) -> PlaybookEntry:
    entry = propose(
        store_for(config.parent),
        signature=signature_of("build", "project-tests", "code", ["E   KeyError: 'ace'"]),
        decision={"action": "retry", "summary": "flaky"},
        provenance=Provenance(
            run_id=f"{ticket}-20260105T110000Z-aaaa",
            ticket_id=ticket,
            verdict=1,
            source="model",
            approved_by="auto",
            outcome="retry green",
            at=PROPOSED_AT,
        ),
        description="a flaky deck",
        ledger=Ledger(config.parent / "state" / "ledger.jsonl"),
    )
    assert entry is not None
    return entry


def comment(fake: FakeGitHub, body: str, login: str, at: datetime, *,
            edited: bool = False) -> dict[str, Any]:  # fmt: skip
    made = fake.add_comment(REPO, 1, body, login)
    made["created_at"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    made["updated_at"] = (at + timedelta(minutes=5 if edited else 0)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return made


def rows(config: Path, capability: str) -> list[dict[str, Any]]:
    ledger = Ledger(config.parent / "state" / "ledger.jsonl")
    return [r for r in ledger.rows() if r["capability"] == capability]


def weigh(config: Path, source: GitHubSource, storage: FileStorage) -> list[str]:
    return promote_from_comments(
        [source], storage, store_for(config.parent), environ=ENVIRON,
        clock=lambda: datetime(2026, 1, 6, tzinfo=UTC),
    )  # fmt: skip


def test_the_command_is_the_whole_first_line_with_an_entry_id() -> None:
    assert parse_playbook_command("/orchestrator playbook promote ci-retry-0a1b2c\n\nyes") == (
        "ci-retry-0a1b2c"
    )
    assert parse_playbook_command("/orchestrator  playbook\tpromote x-1 ") == "x-1"
    for body in (
        "> /orchestrator playbook promote x-1",
        "please /orchestrator playbook promote x-1",
        "/orchestrator playbook promote X-1",
        "/orchestrator playbook promote ../x",
        "/orchestrator playbook promote x-1 and y-2",
        "/orchestrator playbook promote x-1\u202e",
        "/orchestrator playbook retire x-1",
        "/orchestrator approve",
    ):
        assert parse_playbook_command(body) is None, body


def test_a_collaborators_comment_promotes_the_entry_once(
    tmp_path: Path, github: FakeGitHub
) -> None:
    config = write_config(tmp_path, github)
    source, storage = taken_in(config)
    entry = proposed(config)
    github.permissions[REPO] = {"alice": "write", "tim": "triage"}
    promote = f"/orchestrator playbook promote {entry.id}"
    comment(github, promote, "alice", PROPOSED_AT - timedelta(hours=1))  # before: not weighed
    stranger = comment(github, promote, "mallory", PROPOSED_AT + timedelta(minutes=1))
    triager = comment(github, promote, "tim", PROPOSED_AT + timedelta(minutes=2))
    bot = comment(github, promote, "helper[bot]", PROPOSED_AT + timedelta(minutes=3))
    edited = comment(github, promote, "alice", PROPOSED_AT + timedelta(minutes=4), edited=True)
    other = comment(github, "/orchestrator playbook promote some-other-entry", "alice",
                    PROPOSED_AT + timedelta(minutes=5))  # fmt: skip
    approved = comment(github, promote + "\n\nit is the deck", "alice",
                       PROPOSED_AT + timedelta(minutes=6))  # fmt: skip

    said = weigh(config, source, storage)

    assert said == [
        f"{TICKET}: comment {stranger['html_url']} by github:mallory refused: github:mallory "
        "has no write access to the repository; nothing was promoted",
        f"{TICKET}: comment {triager['html_url']} by github:tim refused: github:tim has no "
        "write access to the repository; nothing was promoted",
        f"{TICKET}: comment {bot['html_url']} by github:helper[bot] refused: github:helper[bot] "
        "is no person (its login is a bot's ([bot])); entries are promoted by people only; "
        "nothing was promoted",
        f"{TICKET}: comment {edited['html_url']} by github:alice refused: it was edited after "
        "it was written; nothing was promoted",
        f"{TICKET}: comment {other['html_url']} by github:alice refused: some-other-entry is "
        f"not a proposed entry learned from {TICKET}; nothing was promoted",
        f"{TICKET}: playbook entry {entry.id} promoted by github:alice ({approved['html_url']})",
    ]
    now = store_for(config.parent).get(entry.id)
    assert now is not None and now.status is EntryStatus.PROMOTED
    assert now.promoted_by == "github:alice"
    weighed = rows(config, "playbook-by-comment")
    assert [(r["decision"]["by"], r["decision"]["refused"]) for r in weighed] == [
        ("github:mallory", True), ("github:tim", True), ("github:helper[bot]", True),
        ("github:alice", True), ("github:alice", True), ("github:alice", False),
    ]  # fmt: skip
    [promoted] = [r for r in rows(config, "playbook") if r["decision"]["event"] == "promoted"]
    assert promoted["decision"]["comment_url"] == approved["html_url"]
    assert promoted["decision"]["by"] == "github:alice" and promoted["ticket"] == TICKET
    asked = [r.path for r in github.requests if r.path.endswith("/permission")]
    assert asked == [f"/repos/{REPO}/collaborators/{who}/permission"
                     for who in ("mallory", "tim", "alice")]  # fmt: skip

    again = weigh(config, source, storage)  # the entry no longer waits: no forge asked

    assert again == [] and len(rows(config, "playbook-by-comment")) == 6
    assert Ledger(config.parent / "state" / "ledger.jsonl").verify().ok
    assert_not_leaked([TOKEN], "\n".join(said), config.parent / "state", config.parent / "playbook")


def test_no_forge_is_asked_while_no_entry_waits_on_its_issues(
    tmp_path: Path, github: FakeGitHub
) -> None:
    config = write_config(tmp_path, github)
    source, storage = taken_in(config)
    asked_before = len(github.requests)
    assert weigh(config, source, storage) == []  # no entry at all
    proposed(config, ticket="gh-octo-widgets-99")  # learned from a ticket not on this source

    assert weigh(config, source, storage) == []
    assert len(github.requests) == asked_before


@pytest.mark.slow
def test_batch_promotes_by_comment_before_its_queue_runs(
    tmp_path: Path, github: FakeGitHub
) -> None:
    config = write_config(tmp_path, github)
    entry = proposed(config)
    github.permissions[REPO] = {"alice": "admin"}
    made = comment(github, f"/orchestrator playbook promote {entry.id}", "alice",
                   PROPOSED_AT + timedelta(minutes=1))  # fmt: skip
    out = io.StringIO()
    environ = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **ENVIRON}

    batch(
        config, None, tmp_path / "tickets", jobs=1, as_json=False, worker=False, out=out,
        environ=environ, stderr=out, preflight=False,
    )  # fmt: skip

    assert f"{TICKET}: playbook entry {entry.id} promoted by github:alice ({made['html_url']})" in (
        out.getvalue()
    )
    now = store_for(tmp_path).get(entry.id)
    assert now is not None and now.status is EntryStatus.PROMOTED
