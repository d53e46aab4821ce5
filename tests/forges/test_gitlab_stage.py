"""The ``open-pr`` GitLab stage end to end, in process: a real local bare repository as
the push target, the loopback fake GitLab (``tests/support/gitlab_fake.py``) as the API."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import git
import httpx2
import pytest

from orchestrator.stages import open_pr_gitlab as stage
from orchestrator.stages._open_pr import Credentials, push_environment

from conftest import subprocess_env
from support.gitlab_fake import PROJECT, TOKEN, FakeGitLab, gitlab_server  # noqa: F401 (fixture "gitlab")
from support.open_pr_workspace import stage_workspace as open_pr_workspace

ORIGIN_TABLE = '\n[origin]\nsource = "gl"\nkind = "gitlab"\nproject = "{project}"\nnumber = 12\n'


@pytest.fixture
def workspace(
    tmp_path: Path, gitlab: FakeGitLab, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    stage_workspace = open_pr_workspace(tmp_path)
    stage_workspace["environ"].update(
        GITLAB_TOKEN=TOKEN,
        ORCH_REPOSITORY=f"git@gitlab.example.org:{PROJECT}.git",
        ORCHESTRATOR_GITLAB_URL=gitlab.base_url,
        ORCHESTRATOR_GITLAB_PUSH_URL=str(stage_workspace["origin"]),
    )
    monkeypatch.chdir(stage_workspace["ctx"].clone_dir)
    return stage_workspace


def client_for(base_url: str) -> httpx2.Client:
    return httpx2.Client(base_url=base_url, timeout=10)


def no_sleep(sleeps: list[float]) -> Callable[[float], None]:
    return sleeps.append


def from_issue(workspace: dict[str, Any], project: str) -> None:
    ticket = Path(workspace["environ"]["ORCH_TICKET_FILE"])
    text = ticket.read_text()
    head, _, body = text.partition("+++\n")[2].partition("+++\n")
    ticket.write_text(f"+++\n{head}{ORIGIN_TABLE.format(project=project)}+++\n{body}")


@pytest.mark.slow
def test_stage_pushes_opens_records_and_reuses(
    workspace: dict[str, Any], gitlab: FakeGitLab, capsys: pytest.CaptureFixture[str]
) -> None:
    ctx = workspace["ctx"]
    from_issue(workspace, PROJECT)
    verdict = {"number": 1, "action": "retry", "verdict": {"action": "retry", "summary": "the fake network flaked"}}  # fmt: skip
    (ctx.state_dir / "runs" / f"{ctx.run_id}.verdict-1.json").write_text(json.dumps(verdict))

    assert stage.main(workspace["environ"], client_for, no_sleep([])) == 0
    with git.Repo(workspace["origin"]) as origin:
        assert origin.heads["orch/T-1"].commit.hexsha == workspace["sha"]
    url = f"{gitlab.base_url}/{PROJECT}/-/merge_requests/1"
    record = json.loads((ctx.run_dir / "pull-request.json").read_text())
    assert record == {
        "forge": "gitlab", "repository": PROJECT, "number": 1, "url": url, "created": True,
        "head": "orch/T-1", "base": "main", "title": "Ticket T-1", "head_sha": workspace["sha"],
    }  # fmt: skip
    (mr,) = gitlab.projects[PROJECT]["merge_requests"]
    assert (mr["source_branch"], mr["target_branch"]) == ("orch/T-1", "main")
    assert mr["description"] == (
        "The ticket, as written:\n\n```text\ndeal(5) hands out four cards.\n```\n\n---\n"
        "Opened by the orchestrator, run `T-1-20260105T100000Z-ab12`.\n\n"
        "Recovery decisions in this run:\n- ` retry: the fake network flaked `\n"
        "\nCloses #12\n"
    )
    first = capsys.readouterr()
    assert first.out.splitlines()[-1] == f"opened merge request !1: {url}"

    # A resumed ticket: the same merge request, not a second one.
    assert stage.main(workspace["environ"], client_for, no_sleep([])) == 0
    assert len(gitlab.projects[PROJECT]["merge_requests"]) == 1
    second = capsys.readouterr()
    assert second.out.splitlines()[-1] == f"reused the open merge request !1: {url}"
    record_text = (ctx.run_dir / "pull-request.json").read_text()
    assert json.loads(record_text)["created"] is False
    assert [r.method for r in gitlab.requests] == ["GET", "POST", "GET"]
    assert all(r.headers["private-token"] == TOKEN for r in gitlab.requests)
    for text in (first.out, first.err, second.out, second.err, record_text):
        assert TOKEN not in text


@pytest.mark.slow
@pytest.mark.parametrize(
    ("status", "times", "kind", "code", "failure_class"),
    [
        (401, 1, "auth", 3, "auth_error"),
        (403, 1, "forbidden", 3, "auth_error"),
        (404, 1, "not_found", 3, None),  # a wrong project: recovery decides, not infra
        (429, 3, "rate_limited", 4, "rate_limited"),
        (503, 3, "outage", 4, "outage"),
    ],
)
def test_stage_turns_forge_errors_into_exit_codes(
    workspace: dict[str, Any],
    gitlab: FakeGitLab,
    capsys: pytest.CaptureFixture[str],
    status: int,
    times: int,
    kind: str,
    code: int,
    failure_class: str | None,
) -> None:
    waits = {"Retry-After": "2"} if times > 1 else {}  # a 403 with one is a rate limit
    gitlab.fail(status, times=times, headers=waits, body={"message": f"{status} no, {TOKEN}"})
    sleeps: list[float] = []
    assert stage.main(workspace["environ"], client_for, no_sleep(sleeps)) == code
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(f"open-pr: gitlab {kind}: cannot list merge requests of {PROJECT}")
    assert lines[1:] == ([f"::failure-class::{failure_class}"] if failure_class else [])
    assert TOKEN not in "\n".join(lines)
    assert sleeps == ([2.0, 2.0] if times == 3 else [])  # waited out, through the seam
    assert not (workspace["ctx"].run_dir / "pull-request.json").exists()


def test_stage_without_a_token_fails_as_configured(
    workspace: dict[str, Any], gitlab: FakeGitLab, capsys: pytest.CaptureFixture[str]
) -> None:
    environ = {k: v for k, v in workspace["environ"].items() if k != "GITLAB_TOKEN"}
    assert stage.main(environ, client_for, no_sleep([])) == 1
    assert capsys.readouterr().err == (
        "open-pr: GITLAB_TOKEN is not set: the gitlab forge needs a token that may push "
        "and open pull requests\n"
        "::failure-class::config_error\n"
    )
    with git.Repo(workspace["origin"]) as origin:
        assert "orch/T-1" not in origin.heads  # nothing was pushed
    assert gitlab.requests == []


@pytest.mark.slow
def test_stage_script_without_a_token_exits_1_with_no_traceback(
    workspace: dict[str, Any],
) -> None:
    environ = {**subprocess_env(), **workspace["environ"]}
    environ.pop("GITLAB_TOKEN")
    result = subprocess.run(
        [sys.executable, "-P", "-m", "orchestrator.stages.open_pr_gitlab"],
        cwd=workspace["ctx"].clone_dir, env=environ, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "open-pr: GITLAB_TOKEN is not set: the gitlab forge needs a token that may push "
        "and open pull requests",
        "::failure-class::config_error",
    ]


def test_stage_needs_a_gitlab_project(
    workspace: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    environ = dict(workspace["environ"], ORCH_REPOSITORY=str(workspace["origin"]))
    assert stage.main(environ, client_for, no_sleep([])) == 1
    assert capsys.readouterr().err == (
        f"open-pr: not a GitLab project URL: '{workspace['origin']}'; "
        "set ORCHESTRATOR_GITLAB_PROJECT=group/name\n"
    )
    environ["ORCHESTRATOR_GITLAB_PROJECT"] = PROJECT
    assert stage.main(environ, client_for, no_sleep([])) == 0


def test_an_issue_of_another_project_is_closed_by_its_full_reference(
    workspace: dict[str, Any], gitlab: FakeGitLab
) -> None:
    from_issue(workspace, "grp/tracker")
    assert stage.main(workspace["environ"], client_for, no_sleep([])) == 0
    (mr,) = gitlab.projects[PROJECT]["merge_requests"]
    assert mr["description"].endswith("\nCloses grp/tracker#12\n")


def test_the_push_gets_the_token_from_git_credentials_as_oauth2(tmp_path: Path) -> None:
    """What the push relies on, shown with git itself: user ``oauth2``, the token from
    the environment through our helper, never from argv or a URL."""
    credentials = Credentials(token_env="GITLAB_TOKEN", username="oauth2", token=TOKEN)
    pushing = push_environment(credentials, None)
    env = {**subprocess_env(), "HOME": str(tmp_path), **pushing}
    result = subprocess.run(
        ["git", "credential", "fill"],
        input="protocol=https\nhost=gitlab.example.org\npath=grp/sub/cards.git\n\n",
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "username=oauth2\n" in result.stdout and f"password={TOKEN}\n" in result.stdout
    assert TOKEN not in repr(credentials)
    assert all(TOKEN not in value for key, value in pushing.items() if key != "GITLAB_TOKEN")
