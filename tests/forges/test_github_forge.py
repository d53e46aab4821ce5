"""The GitHub forge through a mock HTTP transport that sees the exact requests, and the
``open-pr`` GitHub stage end to end against a real local bare repository as the push target."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import git
import httpx2
import pytest

from orchestrator.execution.stage_env import StageContext
from orchestrator.forges.base import ForgeError, PullRequest
from orchestrator.forges.github import GitHubForge, pr_body, repo_from_url

from conftest import subprocess_env
from support.open_pr_workspace import stage_workspace as open_pr_workspace

TOKEN = "ghp_TESTtoken0123456789abcdefSECRET"
API = "https://api.github.com"
Handler = Callable[[httpx2.Request], httpx2.Response]


class FakeGitHub:
    """Scripted answers, and every request it was sent."""

    def __init__(self, *answers: httpx2.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


NOW = 1767600000.0 - 3600  # the clock the forge reads: an hour before the reset below


def forge_with(handler: Handler, sleeps: list[float] | None = None) -> GitHubForge:
    client = httpx2.Client(base_url=API, transport=httpx2.MockTransport(handler))
    waits = sleeps if sleeps is not None else []
    return GitHubForge(client, "octo/cards", TOKEN, network_errors=(httpx2.TransportError,),
                       sleep=waits.append, clock=lambda: NOW)  # fmt: skip


def assert_github_headers(request: httpx2.Request) -> None:
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["accept"] == "application/vnd.github+json"
    assert request.headers["x-github-api-version"] == "2022-11-28"


def pull(number: int) -> dict[str, Any]:
    return {"number": number, "html_url": f"https://github.com/octo/cards/pull/{number}",
            "state": "open", "head": {"ref": "orch/T-1"}, "base": {"ref": "main"}}  # fmt: skip


def open_t1(forge: GitHubForge) -> PullRequest:
    return forge.open_pull_request(head="orch/T-1", base="main", title="Fix deal()", body="Body")


def test_creates_a_pull_request_when_none_is_open() -> None:
    github = FakeGitHub(httpx2.Response(200, json=[]), httpx2.Response(201, json=pull(12)))
    assert open_t1(forge_with(github)) == PullRequest(
        number=12, url="https://github.com/octo/cards/pull/12", created=True
    )
    listing, creation = github.requests
    assert (listing.method, listing.url.path) == ("GET", "/repos/octo/cards/pulls")
    assert dict(listing.url.params) == {"head": "octo:orch/T-1", "base": "main", "state": "open"}
    assert listing.content == b""
    assert_github_headers(listing)
    assert (creation.method, creation.url.path, creation.url.query) == (
        "POST",
        "/repos/octo/cards/pulls",
        b"",
    )
    assert json.loads(creation.content) == {
        "title": "Fix deal()",
        "head": "orch/T-1",
        "base": "main",
        "body": "Body",
    }
    assert_github_headers(creation)


def test_reuses_the_open_pull_request_without_posting() -> None:
    github = FakeGitHub(httpx2.Response(200, json=[pull(7)]))
    assert open_t1(forge_with(github)) == PullRequest(
        7, "https://github.com/octo/cards/pull/7", created=False
    )
    assert [r.method for r in github.requests] == ["GET"]


def test_a_pull_request_opened_meanwhile_is_reused() -> None:
    exists = {"message": "Validation Failed", "errors": [
        {"resource": "PullRequest", "code": "custom",
         "message": "A pull request already exists for octo:orch/T-1."}]}  # fmt: skip
    github = FakeGitHub(
        httpx2.Response(200, json=[]),
        httpx2.Response(422, json=exists),
        httpx2.Response(200, json=[pull(9)]),
    )
    assert open_t1(forge_with(github)).number == 9
    assert [r.method for r in github.requests] == ["GET", "POST", "GET"]


@pytest.mark.parametrize(
    ("status", "headers", "body", "kind", "message"),
    [
        (401, {}, {"message": "Bad credentials"}, "auth",
         "cannot list pull requests of octo/cards: GitHub rejected the token (401): Bad credentials; check GITHUB_TOKEN"),
        # Issue 43: a spent rate limit is no refusal of the token, and an hour is past
        # what one request waits: the next batch asks again.
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1767600000"},
         {"message": "API rate limit exceeded for user ID 1."}, "rate_limited",
         "cannot list pull requests of octo/cards: GitHub's rate limit (403): API rate limit exceeded for user ID 1.; it asks to wait until 2026-01-05T08:00:01Z, past the 60 s one request may wait"),
        (403, {}, {"message": "Resource not accessible by personal access token"}, "forbidden",
         "cannot list pull requests of octo/cards: the token may not do this (403): Resource not accessible by personal access token"),
        (404, {}, {"message": "Not Found"}, "not_found",
         "cannot list pull requests of octo/cards: octo/cards not found (404), or the token cannot see it"),
        (500, {}, {"message": "Server Error"}, "outage",
         "cannot list pull requests of octo/cards: GitHub is failing (500): Server Error"),
        (502, {}, None, "outage",
         "cannot list pull requests of octo/cards: GitHub is failing (502)"),
    ],
)  # fmt: skip
def test_listing_errors(
    status: int, headers: dict[str, str], body: object, kind: str, message: str
) -> None:
    answer = (
        httpx2.Response(status, headers=headers, json=body)
        if body is not None
        else httpx2.Response(status, headers=headers, text="<html>Bad Gateway</html>")
    )
    sleeps: list[float] = []
    forge = forge_with(FakeGitHub(answer, answer, answer), sleeps)
    with pytest.raises(ForgeError) as caught:
        open_t1(forge)
    assert (caught.value.kind, str(caught.value)) == (kind, message)
    for text in (str(caught.value), repr(caught.value), repr(forge)):
        assert TOKEN not in text
    # A listing is a GET: a 5xx is asked twice more, 1 s then 2 s later; nothing else is.
    assert sleeps == ([1.0, 2.0] if status >= 500 else [])


def test_a_rejected_pull_request_says_what_github_said() -> None:
    rejected = {"message": "Validation Failed", "errors": [
        {"resource": "PullRequest", "code": "custom", "message": "No commits between main and orch/T-1"}],
        "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"}  # fmt: skip
    github = FakeGitHub(httpx2.Response(200, json=[]), httpx2.Response(422, json=rejected))
    with pytest.raises(ForgeError) as caught:
        open_t1(forge_with(github))
    assert caught.value.kind == "rejected"
    assert str(caught.value) == (
        "cannot open a pull request for orch/T-1 into main: GitHub refused it (422): "
        "Validation Failed; No commits between main and orch/T-1"
    )


def test_a_message_that_echoes_the_token_is_scrubbed() -> None:
    echo = {"message": f"token {TOKEN} is not valid"}
    with pytest.raises(ForgeError) as caught:
        open_t1(forge_with(FakeGitHub(httpx2.Response(401, json=echo))))
    assert TOKEN not in str(caught.value) and "token *** is not valid" in str(caught.value)


def test_a_network_failure_is_an_outage() -> None:
    github = FakeGitHub(*[httpx2.ConnectError("[Errno 111] Connection refused")] * 3)
    with pytest.raises(ForgeError) as caught:
        open_t1(forge_with(github))
    assert len(github.requests) == 3  # a GET: sent again after a dropped connection
    assert (caught.value.kind, str(caught.value)) == (
        "outage",
        "cannot reach GitHub: [Errno 111] Connection refused",
    )
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_the_forge_insists_on_a_repository_and_a_token() -> None:
    client = httpx2.Client(base_url=API, transport=httpx2.MockTransport(FakeGitHub()))
    with pytest.raises(ValueError, match="owner/name"):
        GitHubForge(client, "cards", TOKEN)
    with pytest.raises(ValueError, match="token is required"):
        GitHubForge(client, "octo/cards", "")


@pytest.mark.parametrize(
    ("url", "repo"),
    [
        ("https://github.com/octo/cards", "octo/cards"),
        ("https://github.com/octo/cards.git", "octo/cards"),
        ("https://github.com/octo/cards/", "octo/cards"),
        ("https://x-access-token:abc@github.com/octo/cards.git", "octo/cards"),
        ("git@github.com:octo/cards.git", "octo/cards"),
        ("git@github.com:octo/cards", "octo/cards"),
        ("ssh://git@github.com/octo/my.cards.git", "octo/my.cards"),
    ],
)
def test_repo_from_url(url: str, repo: str) -> None:
    assert repo_from_url(url) == repo


@pytest.mark.parametrize(
    "url",
    [
        "https://gitlab.com/octo/cards.git",
        "/srv/git/cards.git",
        "https://github.com/octo",
        "https://github.com/octo/cards/tree/main",
        "git@github.com:octo/.git",
    ],
)
def test_repo_from_url_refuses_what_is_not_a_github_repository(url: str) -> None:
    with pytest.raises(ValueError, match="not a GitHub repository URL"):
        repo_from_url(url)


def test_repo_from_url_never_repeats_credentials() -> None:
    with pytest.raises(ValueError) as caught:
        repo_from_url(f"https://user:{TOKEN}@gitlab.com/octo/cards.git")
    assert TOKEN not in str(caught.value)


def test_pr_body_is_the_ticket_and_the_runs_decisions() -> None:
    body = pr_body("Fix deal().\n", ["retry: the test run hit a flaky network", "escalate-model: too hard"], "T-1-20260105T100000Z-ab12")  # fmt: skip
    assert body == (
        "The ticket, as written:\n\n```text\nFix deal().\n```\n\n---\n"
        "Opened by the orchestrator, run `T-1-20260105T100000Z-ab12`.\n\n"
        "Recovery decisions in this run:\n"
        "- ` retry: the test run hit a flaky network `\n- ` escalate-model: too hard `\n"
    )
    assert pr_body("x", [], "r").endswith("Recovery decisions in this run:\nNo failure needed a recovery decision.\n")  # fmt: skip
    huge = pr_body("y" * 100_000, [], "r")
    assert len(huge) <= 60_000 and "cut here" in huge and huge.endswith("decision.\n")


# --- the stage --------------------------------------------------------------------------


@pytest.fixture
def stage() -> Iterator[ModuleType]:
    yield importlib.import_module("orchestrator.stages.open_pr_github")


class GitHubRepo:
    """An in-memory GitHub for one repository: the pulls endpoints, as the API behaves."""

    def __init__(self) -> None:
        self.pulls: list[dict[str, Any]] = []
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
        assert request.url.path == "/repos/octo/cards/pulls"
        if request.method == "GET":
            head = request.url.params["head"]
            found = [p for p in self.pulls if f"octo:{p['head']}" == head]
            return httpx2.Response(200, json=[pull(p["number"]) for p in found])
        data = json.loads(request.content)
        self.pulls.append({**data, "number": len(self.pulls) + 1})
        return httpx2.Response(201, json=pull(len(self.pulls)))


@pytest.fixture
def workspace(tmp_path: Path) -> dict[str, Any]:
    stage_workspace = open_pr_workspace(tmp_path)
    stage_workspace["environ"].update(
        GITHUB_TOKEN=TOKEN, ORCHESTRATOR_GITHUB_PUSH_URL=str(stage_workspace["origin"])
    )
    return stage_workspace


def factory(github: GitHubRepo) -> Callable[[str], httpx2.Client]:
    def make(api_url: str) -> httpx2.Client:
        assert api_url == API
        return httpx2.Client(base_url=api_url, transport=httpx2.MockTransport(github))

    return make


def test_stage_pushes_opens_records_and_reuses(
    stage: ModuleType,
    workspace: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ctx: StageContext = workspace["ctx"]
    monkeypatch.chdir(ctx.clone_dir)
    verdict = {"number": 1, "action": "retry", "verdict": {"action": "retry", "summary": "the fake network flaked"}}  # fmt: skip
    (ctx.state_dir / "runs" / f"{ctx.run_id}.verdict-1.json").write_text(json.dumps(verdict))
    github = GitHubRepo()

    assert stage.main(workspace["environ"], factory(github)) == 0
    with git.Repo(workspace["origin"]) as origin:
        assert origin.heads["orch/T-1"].commit.hexsha == workspace["sha"]
    record = json.loads((ctx.run_dir / "pull-request.json").read_text())
    assert record == {
        "forge": "github",
        "repository": "octo/cards",
        "number": 1,
        "url": "https://github.com/octo/cards/pull/1",
        "created": True,
        "head": "orch/T-1",
        "base": "main",
        "title": "Ticket T-1",
        "head_sha": workspace["sha"],
    }
    assert github.pulls[0]["body"] == (
        "The ticket, as written:\n\n```text\ndeal(5) hands out four cards.\n```\n\n---\n"
        "Opened by the orchestrator, run `T-1-20260105T100000Z-ab12`.\n\n"
        "Recovery decisions in this run:\n- ` retry: the fake network flaked `\n"
    )
    first = capsys.readouterr()
    assert first.out.splitlines()[-1] == (
        "opened pull request #1: https://github.com/octo/cards/pull/1"
    )

    # A second run (a resumed ticket): the same pull request, not a second one.
    assert stage.main(workspace["environ"], factory(github)) == 0
    assert len(github.pulls) == 1
    record = json.loads((ctx.run_dir / "pull-request.json").read_text())
    assert (record["number"], record["created"]) == (1, False)
    second = capsys.readouterr()
    assert second.out.splitlines()[-1] == (
        "reused the open pull request #1: https://github.com/octo/cards/pull/1"
    )
    assert [r.method for r in github.requests] == ["GET", "POST", "GET"]
    for text in (first.out, first.err, second.out, second.err, json.dumps(record)):
        assert TOKEN not in text


def with_origin(workspace: dict[str, Any], kind: str, project: str) -> None:
    ticket = Path(workspace["environ"]["ORCH_TICKET_FILE"])
    head, _, body = ticket.read_text().partition("+++\n")[2].partition("+++\n")
    origin = f'\n[origin]\nsource = "s"\nkind = "{kind}"\nproject = "{project}"\nnumber = 12\n'
    ticket.write_text(f"+++\n{head}{origin}+++\n{body}")


@pytest.mark.parametrize(
    ("kind", "project", "ending"),
    [
        ("github", "octo/cards", "\nFixes #12\n"),
        ("github", "octo/tracker", "\nFixes octo/tracker#12\n"),
        ("gitlab", "octo/cards", ""),  # an issue on another forge: nothing to close here
    ],
)
def test_a_ticket_from_an_issue_fixes_it(
    stage: ModuleType,
    workspace: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    project: str,
    ending: str,
) -> None:
    monkeypatch.chdir(workspace["ctx"].clone_dir)
    with_origin(workspace, kind, project)
    github = GitHubRepo()

    assert stage.main(workspace["environ"], factory(github)) == 0
    assert github.pulls[0]["body"].endswith(
        "Recovery decisions in this run:\nNo failure needed a recovery decision.\n" + ending
    )


@pytest.mark.parametrize(
    ("status", "kind", "code", "failure_class"),
    [
        (401, "auth", 3, "auth_error"),
        (403, "forbidden", 3, "auth_error"),
        (422, "rejected", 3, None),  # about the change: recovery decides, not infra
        (503, "outage", 4, "outage"),
    ],
)
def test_stage_turns_forge_errors_into_exit_codes(
    stage: ModuleType,
    workspace: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    status: int,
    kind: str,
    code: int,
    failure_class: str | None,
) -> None:
    monkeypatch.chdir(workspace["ctx"].clone_dir)

    def make(api_url: str) -> httpx2.Client:
        github = FakeGitHub(*[httpx2.Response(status, json={"message": "no"})] * 3)
        return httpx2.Client(base_url=api_url, transport=httpx2.MockTransport(github))

    sleeps: list[float] = []
    assert stage.main(workspace["environ"], make, sleeps.append) == code
    assert sleeps == ([1.0, 2.0] if status >= 500 else [])
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines[0].startswith(f"open-pr: github {kind}: ")
    # The orchestrator reads the class from this line: infrastructure, not a code failure.
    assert lines[1:] == ([f"::failure-class::{failure_class}"] if failure_class else [])
    assert TOKEN not in err
    assert not (workspace["ctx"].run_dir / "pull-request.json").exists()


def test_stage_without_a_token_says_so_in_one_line(
    stage: ModuleType,
    workspace: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(workspace["ctx"].clone_dir)
    environ = {k: v for k, v in workspace["environ"].items() if k != "GITHUB_TOKEN"}
    assert stage.main(environ, factory(GitHubRepo())) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        "open-pr: GITHUB_TOKEN is not set: the github forge needs a token that may push "
        "and open pull requests\n"
        # What the machine lacks, not the change: the run fails as configured, and no
        # model is asked about it (issue 27).
        "::failure-class::config_error\n"
    )
    with git.Repo(workspace["origin"]) as origin:
        assert "orch/T-1" not in origin.heads  # nothing was pushed


@pytest.mark.slow
def test_stage_script_without_a_token_exits_1_with_no_traceback(
    workspace: dict[str, Any],
) -> None:
    environ = {k: v for k, v in workspace["environ"].items() if k != "GITHUB_TOKEN"}
    environ = {**subprocess_env(), **environ}
    environ.pop("GITHUB_TOKEN", None)
    result = subprocess.run(
        [sys.executable, "-P", "-m", "orchestrator.stages.open_pr_github"],
        cwd=workspace["ctx"].clone_dir,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("open-pr: GITHUB_TOKEN is not set")
    assert result.stderr.splitlines()[1:] == ["::failure-class::config_error"]
    assert "Traceback" not in result.stderr


def test_stage_push_failure_is_one_line_without_the_token(
    stage: ModuleType,
    workspace: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(workspace["ctx"].clone_dir)
    environ = dict(workspace["environ"], ORCHESTRATOR_GITHUB_PUSH_URL=str(tmp_path / "nowhere.git"))
    assert stage.main(environ, factory(GitHubRepo())) == 1
    err = capsys.readouterr().err
    assert err.startswith("open-pr: cannot push orch/T-1: fatal: ") and err.count("\n") == 1
    assert TOKEN not in err


def test_stage_refuses_a_push_url_holding_a_password(
    stage: ModuleType,
    workspace: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 40: git would show it on its command line to every user; nothing is pushed."""
    monkeypatch.chdir(workspace["ctx"].clone_dir)
    url = "https://bot:pw-in-the-url-4K@github.invalid/octo/cards.git"
    environ = dict(workspace["environ"], ORCHESTRATOR_GITHUB_PUSH_URL=url)
    assert stage.main(environ, factory(GitHubRepo())) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "open-pr: cannot push orch/T-1: https://bot:***@github.invalid/octo/cards.git holds a "
        "password, which git would show on its command line to every user of this machine"
    )
    assert "pw-in-the-url-4K" not in err


def test_stage_needs_a_github_repository(
    stage: ModuleType,
    workspace: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(workspace["ctx"].clone_dir)
    environ = dict(workspace["environ"], ORCH_REPOSITORY=str(workspace["origin"]))
    assert stage.main(environ, factory(GitHubRepo())) == 1
    assert capsys.readouterr().err == (
        f"open-pr: not a GitHub repository URL: '{workspace['origin']}'; "
        "set ORCHESTRATOR_GITHUB_REPO=owner/name\n"
    )
    environ["ORCHESTRATOR_GITHUB_REPO"] = "octo/cards"
    assert stage.main(environ, factory(GitHubRepo())) == 0


def test_the_credential_helper_answers_git_with_the_token_from_the_environment(
    stage: ModuleType, tmp_path: Path
) -> None:
    """What the push relies on, shown with git itself: the token reaches git through the
    environment and our helper, never through argv or a URL."""
    env = {**subprocess_env(), "HOME": str(tmp_path), **stage.push_environment(TOKEN)}
    result = subprocess.run(
        ["git", "credential", "fill"],
        input="protocol=https\nhost=github.com\npath=octo/cards.git\n\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "username=x-access-token\n" in result.stdout
    assert f"password={TOKEN}\n" in result.stdout
    assert TOKEN not in stage.CREDENTIAL_HELPER


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("fatal: Authentication failed for 'https://github.com/octo/cards.git/'", "auth"),
        ("fatal: could not read Username for 'https://github.com': terminal prompts disabled", "auth"),
        ("remote: Permission to octo/cards.git denied to ci-bot.; fatal: unable to access 'https://github.com/octo/cards.git/': The requested URL returned error: 403", "forbidden"),
        ("fatal: unable to access 'https://github.com/octo/cards.git/': Could not resolve host: github.com", "outage"),
        ("fatal: unable to access 'https://github.com/octo/cards.git/': The requested URL returned error: 502", "outage"),
        ("fatal: unable to access 'https://github.com/octo/cards.git/': The requested URL returned error: 429", "rate_limited"),
        ("remote: You have exceeded a secondary rate limit.; fatal: unable to access 'https://ghe.example/o/r.git/': The requested URL returned error: 403", "rate_limited"),
        ("fatal: '/srv/nowhere.git' does not appear to be a git repository", None),
        ("error: failed to push some refs to 'https://github.com/octo/cards.git'", None),
    ],
)  # fmt: skip
def test_what_a_failed_push_amounts_to(stage: ModuleType, reason: str, kind: str | None) -> None:
    assert stage.push_failure_kind(reason) == kind
