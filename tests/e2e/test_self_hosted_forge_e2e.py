"""Issue 43 through the CLI: a self-hosted GitHub named only by the source's ``api_url``
(no ``ORCHESTRATOR_*`` variable anywhere) is where ``doctor`` checks the stage's token
and says so, where a ``DRY_RUN=false`` batch's preflight asks (it used to ask the public
host and exit 2), and where the open-pr stage, a real subprocess in the sandbox, opens the
pull request. A secondary rate limit on ``POST /pulls`` that outlasts the wait one
request may take is no ``auth_error``: the ticket waits for the next batch, which opens
exactly one pull request. No wait is slept: the limit asks for a year, the back-off is 0."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from orchestrator.cli.main import main
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.runs import RunRecord
from orchestrator.storage import FileStorage

from conftest import write_ticket
from support.github_fake import TOKEN, FakeGitHub, serve_github
from support.gitlab_fake import PROJECT, FakeGitLab, gitlab_server  # noqa: F401 - the fixture
from support.gitlab_fake import TOKEN as GITLAB_TOKEN
from support.gitrepo import commit_files, init_repo

REPO = "octo/widgets"
TICKET = "gh-octo-widgets-7"
IMPLEMENT = 'echo "fixed: $ORCH_TICKET_ID" > FIX.txt && git add FIX.txt && git commit -qm fix'
YEAR = str(365 * 24 * 3600)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with serve_github() as fake:
        yield fake


def write_config(tmp_path: Path, github: FakeGitHub | FakeGitLab) -> Path:
    work = init_repo(tmp_path / "work")
    commit_files(work, {"README.md": "widgets\n"}, "initial")
    bare = tmp_path / "widgets.git"
    git.Repo.clone_from(work.working_dir, bare, bare=True).close()
    forge = "github" if isinstance(github, FakeGitHub) else "gitlab"
    config = tmp_path / "config.toml"
    config.write_text(
        'state_dir = "state"\n'
        # An outage or a limit is retried once at once, then waits for the next batch.
        "[recovery]\ninfra_backoff_s = 0.0\nmax_infra_retries_per_ticket = 1\n"
        '[git]\nauthor_name = "Orchestrator"\nauthor_email = "bot@example.org"\n\n'
        + source(github, bare)
        + '[[stages]]\nname = "clone"\n'
        'command = ["{python}", "-P", "-m", "orchestrator.stages.clone"]\n'
        'cwd = "run"\nnetwork = true\n\n'
        f'[[stages]]\nname = "implement"\ncommand = ["bash", "-c", {json.dumps(IMPLEMENT)}]\n\n'
        '[[stages]]\nname = "open-pr"\n'
        f'command = ["{{python}}", "-P", "-m", "orchestrator.stages.open_pr_{forge}"]\n'
        f'side_effectful = true\nnetwork = true\npass_env = ["{forge.upper()}_TOKEN"]\n'
    )
    return config


def source(fake: FakeGitHub | FakeGitLab, bare: Path) -> str:
    if isinstance(fake, FakeGitHub):
        return (f'[[sources]]\nkind = "github"\nrepo = "{REPO}"\nlabel = "orchestrate"\n'
                f'api_url = "{fake.url}"\nrepository = "{bare}"\n\n')  # fmt: skip
    return (f'[[sources]]\nkind = "gitlab"\nproject = "{PROJECT}"\nlabel = "orchestrate"\n'
            f'base_url = "{fake.base_url}"\nrepository = "{bare}"\n\n')  # fmt: skip


def attempts_said(run: RunRecord) -> list[tuple[str, int | None, str | None, str | None]]:
    """Each attempt's stage, exit, class and detail: what a failed assertion says."""
    return [(a.stage, a.exit_code, a.failure_class, a.failure_detail) for a in run.attempts]


@pytest.fixture
def environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ORCHESTRATOR_GITHUB_API_URL", "ORCHESTRATOR_GITLAB_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITLAB_TOKEN", GITLAB_TOKEN)
    monkeypatch.setenv("DRY_RUN", "false")


@pytest.mark.slow
@pytest.mark.usefixtures("environ")
def test_the_source_url_alone_serves_doctor_preflight_and_the_pull_request(
    tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    github.add_issue(REPO, 7, "deal() hands out one card too few", "Steps…", ("orchestrate",))
    config = write_config(tmp_path, github)

    main(["--config", str(config), "doctor"])
    said = capsys.readouterr().out
    assert (
        f"✓ forge-token: $GITHUB_TOKEN accepted by {github.url} (source gh-octo-widgets's "
        "api_url)" in said
    ), said

    asked = len(github.requests)
    assert main(["--config", str(config), "batch"]) == 0, capsys.readouterr()
    # The preflight asked the self-hosted forge, not api.github.com.
    assert [r.path for r in github.requests[asked:] if r.path == "/user"]
    [pull] = github.pulls[REPO]
    assert pull["head"]["ref"] == f"orch/{TICKET}" and pull["body"].endswith("Fixes #7\n")
    run = FileStorage(tmp_path / "state").runs.latest_for_ticket(TICKET)
    assert run is not None and run.state is RunState.COMPLETED


@pytest.mark.slow
@pytest.mark.usefixtures("environ")
def test_a_rate_limit_on_post_pulls_waits_for_the_next_batch_not_a_person(
    tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    github.add_issue(REPO, 7, "deal() hands out one card too few", "Steps…", ("orchestrate",))
    config = write_config(tmp_path, github)
    # Each open-pr attempt of the first batch meets a secondary limit asking for a year.
    github.secondary_limit("POST", "/pulls", retry_after=YEAR, times=2)

    main(["--config", str(config), "batch"])
    first = capsys.readouterr()
    run = FileStorage(tmp_path / "state").runs.latest_for_ticket(TICKET)
    assert run is not None, first
    assert run.state is RunState.WAITING_INFRA, (first, run.halt, attempts_said(run))
    assert github.pulls.get(REPO, []) == []
    failed = [a for a in run.attempts if a.stage == "open-pr"]
    assert failed and all(a.failure_class == "rate_limited" for a in failed), failed
    assert "auth_error" not in first.out + first.err

    assert main(["--config", str(config), "batch"]) == 0, capsys.readouterr()
    [pull] = github.pulls[REPO]  # exactly one
    assert pull["body"].endswith("Fixes #7\n")
    again = FileStorage(tmp_path / "state").runs.latest_for_ticket(TICKET)
    assert again is not None and again.state is RunState.COMPLETED
    assert again.run_id == run.run_id  # the same run went on: the ticket was not spent


@pytest.mark.slow
@pytest.mark.usefixtures("environ")
def test_a_self_managed_gitlab_by_its_base_url_alone_and_its_429_on_the_merge_request(
    tmp_path: Path, gitlab: FakeGitLab, capsys: pytest.CaptureFixture[str]
) -> None:
    gitlab.add_issue(PROJECT, "Shuffle is not random", ["orchestrate"], "2026-01-01T00:00:00Z")
    config = write_config(tmp_path, gitlab)
    ticket = f"gl-{PROJECT.replace('/', '-')}-1"

    main(["--config", str(config), "doctor"])
    said = capsys.readouterr().out
    assert (
        f"✓ forge-token: $GITLAB_TOKEN accepted by {gitlab.base_url} (source "
        f"{ticket.removesuffix('-1')}'s base_url)" in said
    ), said

    # GitLab's 429 with only RateLimit-Reset, a year away, on each open-pr attempt.
    reset = str(int(time.time()) + int(YEAR))
    gitlab.rate_limit("POST", "/merge_requests", retry_after="", reset=reset, times=2)
    main(["--config", str(config), "batch"])
    first = capsys.readouterr()
    run = FileStorage(tmp_path / "state").runs.latest_for_ticket(ticket)
    assert run is not None, first
    assert run.state is RunState.WAITING_INFRA, (first, run.halt, attempts_said(run))
    assert gitlab.projects[PROJECT]["merge_requests"] == []

    assert main(["--config", str(config), "batch"]) == 0, capsys.readouterr()
    [merge_request] = gitlab.projects[PROJECT]["merge_requests"]
    assert merge_request["description"].endswith("Closes #1\n")
    again = FileStorage(tmp_path / "state").runs.latest_for_ticket(ticket)
    assert again is not None and again.state is RunState.COMPLETED
    assert again.run_id == run.run_id


@pytest.mark.slow
@pytest.mark.usefixtures("environ")
def test_a_ticket_file_for_github_enterprise_by_the_stage_forge_url_alone(
    tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # No [[sources]]: the open-pr stage's forge_url names the GitHub (issue 43).
    config = write_config(tmp_path, github)
    text = config.read_text()
    start = text.index("[[sources]]")
    config.write_text(
        text[:start] + text[text.index("[[stages]]", start):]
        + f'forge_url = "{github.url}"\n'
        + 'pass_env = ["GITHUB_TOKEN", "ORCHESTRATOR_GITHUB_REPO", "ORCHESTRATOR_GITHUB_PUSH_URL"]\n'
    )  # fmt: skip
    config.write_text(config.read_text().replace('pass_env = ["GITHUB_TOKEN"]\n', "", 1))
    bare = tmp_path / "widgets.git"
    write_ticket(tmp_path / "tickets", "T-1", repository=str(bare))
    github.pulls[REPO] = []
    monkeypatch.setenv("ORCHESTRATOR_GITHUB_REPO", REPO)
    monkeypatch.setenv("ORCHESTRATOR_GITHUB_PUSH_URL", str(bare))

    main(["--config", str(config), "doctor"])
    said = capsys.readouterr().out
    assert (
        f"✓ forge-token: $GITHUB_TOKEN accepted by {github.url} (stage open-pr's forge_url)" in said
    ), said
    tickets = str(tmp_path / "tickets")
    assert main(["--config", str(config), "batch", "--tickets", tickets]) == 0, capsys.readouterr()
    [pull] = github.pulls[REPO]
    assert pull["head"]["ref"] == "orch/T-1"
