"""Forge credentials go only to the forge the config names (issue 40): a ticket whose
``[origin]`` names another API — a second loopback fake GitHub here — is refused before
any stage starts. The token never reaches the second fake, and the configured forge gets
no pull request. Real CLI, real clone and open-pr stages, loopback fakes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from orchestrator.domain.errors import EXIT_USAGE
from orchestrator.domain.forge_hosts import origin_problem, push_host
from orchestrator.domain.sources import GitHubSource
from orchestrator.domain.tickets import load_ticket
from orchestrator.storage.runs import RunStore

from conftest import subprocess_env, write_ticket
from support.github_fake import TOKEN, FakeGitHub, serve_github
from support.gitrepo import commit_files, init_repo
from support.scripted_cli import run_forked

REPO = "octo/widgets"
SOURCE_ID = "gh-octo-widgets"
IMPLEMENT = "echo fixed > FIX.txt && git add FIX.txt && git commit -qm fix"


@pytest.fixture
def two_forges() -> Iterator[tuple[FakeGitHub, FakeGitHub]]:
    with serve_github() as configured, serve_github() as rogue:
        yield configured, rogue


def origin_repo(tmp_path: Path) -> Path:
    work = init_repo(tmp_path / "widgets-work")
    commit_files(work, {"README.md": "widgets\n"}, "initial")
    bare = tmp_path / "widgets.git"
    git.Repo.clone_from(work.working_dir, bare, bare=True).close()
    return bare


def write_config(tmp_path: Path, api_url: str, repository: Path) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(
        'state_dir = "state"\n[recovery]\nenabled = false\n'
        '[git]\nauthor_name = "Orchestrator"\nauthor_email = "bot@example.org"\n\n'
        f'[[sources]]\nkind = "github"\nrepo = "{REPO}"\nlabel = "orchestrate"\n'
        f'api_url = "{api_url}"\nrepository = "{repository}"\n\n'
        '[[stages]]\nname = "clone"\n'
        'command = ["{python}", "-P", "-m", "orchestrator.stages.clone"]\n'
        'cwd = "run"\nnetwork = true\n\n'
        f'[[stages]]\nname = "implement"\ncommand = ["bash", "-c", {json.dumps(IMPLEMENT)}]\n\n'
        '[[stages]]\nname = "open-pr"\n'
        'command = ["{python}", "-P", "-m", "orchestrator.stages.open_pr"]\n'
        'side_effectful = true\nnetwork = true\npass_env = ["GITHUB_TOKEN"]\n'
    )
    return config


def issue_ticket(
    directory: Path, repository: Path | str, api_url: str, source: str = SOURCE_ID
) -> Path:
    origin = (
        f'[origin]\nsource = "{source}"\nkind = "github"\nproject = "{REPO}"\nnumber = 7\n'
        f'api_url = "{api_url}"\n'
    )
    return write_ticket(directory, "gh-octo-widgets-7", repository=str(repository), extra=origin)


def run(config: Path, ticket: Path) -> subprocess.CompletedProcess[str]:
    # Its own process, forked as `python -m orchestrator` starts (``run_forked``).
    return run_forked(
        config.parent, ["--config", str(config), "run", str(ticket), "--no-preflight"],
        subprocess_env(DRY_RUN="false", GITHUB_TOKEN=TOKEN, HOME=str(config.parent)),
        timeout_s=120, as_entry=True,
    )  # fmt: skip


def carried_the_token(fake: FakeGitHub) -> list[str]:
    return [
        f"{r.method} {r.path}"
        for r in fake.requests
        if TOKEN in json.dumps(r.headers) + str(r.body)
    ]


@pytest.mark.slow
def test_an_origin_naming_another_api_is_refused_and_the_token_never_goes_there(
    tmp_path: Path, two_forges: tuple[FakeGitHub, FakeGitHub]
) -> None:
    configured, rogue = two_forges
    configured.add_issue(REPO, 7, "deal() hands out one card too few", "", ("orchestrate",))
    repository = origin_repo(tmp_path)
    config = write_config(tmp_path, configured.url, repository)
    for source in (SOURCE_ID, "gh-someone-else"):  # the configured source, and none
        ticket = issue_ticket(tmp_path / "tickets", repository, rogue.url, source=source)
        done = run(config, ticket)
        assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
        assert "refused: a ticket never chooses where a forge token is sent" in done.stderr
        assert rogue.url in done.stderr and TOKEN not in done.stdout + done.stderr
        assert rogue.requests == [] and carried_the_token(rogue) == []
        assert configured.pulls == {} and carried_the_token(configured) == []
        assert RunStore(tmp_path / "state").latest_for_ticket("gh-octo-widgets-7") is None
    # The same ticket naming the configured API runs and opens its pull request there.
    ticket = issue_ticket(tmp_path / "tickets", repository, configured.url)
    done = run(config, ticket)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [p["head"]["ref"] for p in configured.pulls[REPO]] == ["orch/gh-octo-widgets-7"]
    assert rogue.requests == []


def source(api_url: str = "https://ghe.example.com/api/v3", **more: str) -> GitHubSource:
    return GitHubSource(kind="github", repo=REPO, label="orchestrate", api_url=api_url, **more)


def test_the_origin_must_name_the_configured_source_its_api_and_its_repository(
    tmp_path: Path,
) -> None:
    def problem(repository: str, api_url: str, sources: tuple[GitHubSource, ...] = (),
                environ: dict[str, str] | None = None, name: str = SOURCE_ID) -> str | None:  # fmt: skip
        path = issue_ticket(tmp_path / name, repository, api_url, source=name)
        return origin_problem(load_ticket(path), sources, environ or {})

    ghe = source(repository="https://ghe.example.com/octo/widgets.git")
    good = "https://ghe.example.com/octo/widgets.git"
    assert problem(good, "https://ghe.example.com/api/v3/", (ghe,)) is None
    assert "whose API in the config is https://ghe.example.com/api/v3" in str(
        problem(good, "https://evil.example/api/v3", (ghe,))
    )
    assert "where its branch would be pushed" in str(
        problem("https://evil.example/octo/widgets.git", "https://ghe.example.com/api/v3", (ghe,))
    )
    # No such source: only the forge's own API (the public one, or the override), and a
    # push that leaves the machine only to that forge.
    assert problem("https://github.com/octo/w.git", "", name="gh-x") is None
    assert problem("/srv/git/w.git", "https://api.github.com", name="gh-x") is None
    assert "not one the config names" in str(
        problem("/srv/w.git", "https://evil.example", name="gh-x")
    )
    assert "is on evil.example" in str(problem("https://evil.example/w.git", "", name="gh-x"))
    override = {"ORCHESTRATOR_GITHUB_API_URL": "https://ghe.example.com/api/v3"}
    assert (
        problem("/srv/w.git", "https://ghe.example.com/api/v3", environ=override, name="gh-x")
        is None
    )
    assert problem("/srv/w.git", "", environ=override, name="gh-x") is not None
    # Issue 43: with a GitHub source configured, the forge's own API is that source's
    # (forge_location: what the open-pr stage's egress allows), not the override.
    other = source(api_url="https://ghe2.example.com/api/v3", name="gh-other")
    assert problem("/srv/w.git", "https://ghe2.example.com/api/v3", (other,), name="gh-x") is None
    assert "the forge's API here is https://ghe2.example.com/api/v3" in str(
        problem("/srv/w.git", "https://ghe.example.com/api/v3", (other,), override, name="gh-x")
    )


def test_where_a_push_goes() -> None:
    assert push_host("https://GitHub.com/o/r.git") == "github.com"
    assert push_host("git@github.com:o/r.git") == "github.com"
    assert push_host("ssh://git@host.example:22/o/r.git") == "host.example"
    assert push_host("/srv/git/r.git") is None
    assert push_host("file:///srv/git/r.git") is None
    assert push_host("../origin.git") is None
