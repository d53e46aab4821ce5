"""A dry first batch does not strand an issue's ticket (issue 43): through the real batch
against the loopback GitHub, a batch with DRY_RUN armed stops the run before open-pr
(``dry_run_block``) and the issue's status comment says the first ``DRY_RUN=false`` batch
goes on from there; intake keeps the ticket queued (never "finished"), and the first batch
with ``DRY_RUN=false`` resumes it from open-pr — no second clone — and opens exactly one
pull request, the one status comment edited in place. Real stage programs (clone,
open-pr) in subprocesses, real git repositories."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import git
import pytest

from orchestrator.cli.commands.batch import batch
from orchestrator.cli.commands.tickets import tickets
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.storage import FileStorage

from support.github_fake import LOGIN, TOKEN, FakeGitHub, serve_github
from support.gitrepo import commit_files, init_repo

REPO = "octo/widgets"
TICKET = "gh-octo-widgets-3"
MARKER = "<!-- orchestrator:status"
IMPLEMENT = 'echo "fixed: $ORCH_TICKET_ID" > FIX.txt && git add FIX.txt && git commit -qm fix'


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serve_github() as fake:
        yield fake


def write_config(tmp_path: Path, github: FakeGitHub) -> Path:
    work = init_repo(tmp_path / "widgets-work")
    commit_files(work, {"README.md": "widgets\n"}, "initial")
    origin = tmp_path / "widgets.git"
    git.Repo.clone_from(work.working_dir, origin, bare=True).close()
    config = tmp_path / "config.toml"
    config.write_text(
        'state_dir = "state"\n'
        '[git]\nauthor_name = "Orchestrator"\nauthor_email = "bot@example.org"\n\n'
        f'[[sources]]\nkind = "github"\nrepo = "{REPO}"\nlabel = "orchestrate"\n'
        f'api_url = "{github.url}"\nrepository = "{origin}"\n\n'
        '[[stages]]\nname = "clone"\n'
        'command = ["{python}", "-P", "-m", "orchestrator.stages.clone"]\n'
        'cwd = "run"\nnetwork = true\n\n'
        f'[[stages]]\nname = "implement"\ncommand = ["bash", "-c", {json.dumps(IMPLEMENT)}]\n\n'
        '[[stages]]\nname = "open-pr"\n'
        'command = ["{python}", "-P", "-m", "orchestrator.stages.open_pr"]\n'
        'side_effectful = true\nnetwork = true\npass_env = ["GITHUB_TOKEN"]\n'
    )
    github.add_issue(REPO, 3, "shuffle() is not random", "Steps…", ("orchestrate", "bug"))
    return config


def run_batch(config: Path, **env: str) -> tuple[int, str]:
    out = io.StringIO()
    environ = {"PATH": os.environ["PATH"], "HOME": str(config.parent), "GITHUB_TOKEN": TOKEN}
    code = batch(
        config, None, config.parent / "tickets", jobs=1, as_json=False, worker=False,
        out=out, environ={**environ, **env}, stderr=out, preflight=False,
    )  # fmt: skip
    return code, out.getvalue()


def status_comments(github: FakeGitHub) -> list[dict[str, Any]]:
    return [
        c for c in github.comments_on(REPO, 3)
        if c["user"]["login"] == LOGIN and c["body"].startswith(MARKER)
    ]  # fmt: skip


def intake_says(config: Path) -> tuple[str, str]:
    listed = io.StringIO()
    tickets(config, None, config.parent / "tickets", listed, as_json=True,
            environ={"GITHUB_TOKEN": TOKEN})  # fmt: skip
    [entry] = json.loads(listed.getvalue().splitlines()[0])["entries"]
    return entry["status"], entry["reason"]


@pytest.mark.slow
@pytest.mark.quick  # this file's one test in the quick tier (a few seconds)
def test_the_first_batch_with_dry_run_false_opens_the_pull_request_a_dry_batch_stopped(
    tmp_path: Path, github: FakeGitHub
) -> None:
    config = write_config(tmp_path, github)
    storage = FileStorage(tmp_path / "state")

    code, dry = run_batch(config)  # DRY_RUN armed, as the guide's first batch is

    record = storage.runs.latest_for_ticket(TICKET)
    assert record is not None and record.state is RunState.NEEDS_HUMAN, dry
    assert record.halt is not None and record.halt.reason is HaltReason.DRY_RUN_BLOCK
    assert code == 3 and github.pulls.get(REPO, []) == []
    [status] = status_comments(github)
    assert "**Stopped by DRY_RUN** before a side effect" in status["body"]
    assert "the first batch whose environment has `DRY_RUN=false` goes on" in status["body"]
    assert intake_says(config) == (
        "queued",
        f"stopped by DRY_RUN at 'open-pr' ({record.run_id}): the first batch with "
        "DRY_RUN=false goes on from there",
    )
    code, still_dry = run_batch(config)  # armed again: said again, nothing done
    assert code == 0 and "blocked by DRY_RUN at 'open-pr'" in still_dry, still_dry
    assert github.pulls.get(REPO, []) == [] and len(status_comments(github)) == 1

    code, real = run_batch(config, DRY_RUN="false")

    record = storage.runs.load(record.run_id)
    assert record.state is RunState.COMPLETED and code == 0, real
    assert [r.by for r in record.resumes] == ["batch"]
    assert [a.stage for a in record.attempts] == ["clone", "implement", "open-pr"]
    [pull] = github.pulls[REPO]
    assert pull["head"]["ref"] == f"orch/{TICKET}" and pull["body"].rstrip().endswith("Fixes #3")
    [status] = status_comments(github)  # the one comment, edited in place
    assert "**Completed**" in status["body"] and pull["html_url"] in status["body"]
    assert any("Stopped by DRY_RUN" in body for body in status["history"])

    code, again = run_batch(config, DRY_RUN="false")
    assert code == 0 and len(github.pulls[REPO]) == 1, again
    assert intake_says(config)[1].startswith("already has our pull request")
