"""The ``open_pr`` stage for a config fed by both forges: the forge comes from the ticket's
origin, else from a public host in its repository URL, else it is refused as a config
error; and where each forge stage opens the request (``_open_pr.forge_target``) for a
ticket taken from an issue: the issue's API, the ticket's repository as push target,
the repository URL's project when it names one (an issue tracker apart from the code)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.domain.tickets import load_ticket
from orchestrator.reading.signs import FAILURE_MARKER
from orchestrator.stages import open_pr, open_pr_github, open_pr_gitlab
from orchestrator.stages._open_pr import OpenPrRun, forge_target
from orchestrator.stages._stagelib import StageError
from orchestrator.stages.open_pr import forge_of

from support.open_pr_workspace import stage_workspace


@pytest.mark.parametrize(
    ("origin", "repository", "forge"),
    [
        ("gitlab", "https://github.com/octo/cards.git", "gitlab"),  # the origin decides
        ("github", "/srv/mirrors/cards.git", "github"),
        (None, "https://github.com/octo/cards.git", "github"),
        (None, "git@github.com:octo/cards.git", "github"),
        (None, "ssh://git@GitHub.com/octo/cards.git", "github"),
        (None, "https://gitlab.com/grp/sub/cards.git", "gitlab"),
        (None, "git@gitlab.com:grp/cards.git", "gitlab"),
        (None, "https://gitlab.example.org/grp/cards.git", None),  # self-managed: say which
        (None, "https://github.com.evil.example/octo/cards.git", None),
        (None, "/srv/repos/cards.git", None),
        (None, "cards", None),
    ],
)
def test_which_forge(origin: str | None, repository: str, forge: str | None) -> None:
    assert forge_of(origin, repository) == forge


def origin_table(kind: str, project: str, api_url: str) -> str:
    return (
        f'\n[origin]\nsource = "s"\nkind = "{kind}"\nproject = "{project}"\nnumber = 12\n'
        f'api_url = "{api_url}"\n'
    )


def with_origin(workspace: dict[str, Any], table: str) -> None:
    """The workspace's ticket with this ``[origin]`` table ('': none)."""
    ticket = Path(workspace["environ"]["ORCH_TICKET_FILE"])
    plain = workspace.setdefault("plain_ticket", ticket.read_text())
    head, _, body = plain.partition("+++\n")[2].partition("+++\n")
    ticket.write_text(f"+++\n{head}{table}+++\n{body}")


def test_a_ticket_of_no_forge_is_refused_as_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = stage_workspace(tmp_path)
    environ = {**workspace["environ"], "ORCH_REPOSITORY": str(workspace["origin"])}
    opened: list[str] = []
    monkeypatch.setattr(open_pr_github, "main", lambda env: opened.append("github") or 0)
    monkeypatch.setattr(open_pr_gitlab, "main", lambda env: opened.append("gitlab") or 0)

    assert open_pr.main(environ) == 1

    err = capsys.readouterr().err
    assert "ticket T-1 was not taken from a forge issue" in err
    assert "orchestrator.stages.open_pr_github or orchestrator.stages.open_pr_gitlab" in err
    assert f"{FAILURE_MARKER}config_error" in err and opened == []

    with_origin(workspace, origin_table("gitlab", "grp/cards", "https://gl.example.org"))
    assert open_pr.main(environ) == 0 and opened == ["gitlab"]
    with_origin(workspace, "")
    environ["ORCH_REPOSITORY"] = "git@github.com:octo/cards.git"
    assert load_ticket(Path(environ["ORCH_TICKET_FILE"])).fields.origin is None
    assert open_pr.main(environ) == 0 and opened == ["gitlab", "github"]


def test_where_a_ticket_from_an_issue_is_opened(tmp_path: Path) -> None:
    workspace = stage_workspace(tmp_path)
    environ = {**workspace["environ"], "ORCH_REPOSITORY": "/srv/mirrors/widgets.git"}
    with_origin(workspace, origin_table("github", "octo/widgets", "https://ghe.example/api/v3"))
    target = forge_target(
        environ, OpenPrRun.from_environ(environ), **github_rules()
    )  # a local mirror: the issue's project, its API, pushed to the mirror
    assert (target.project, target.api_url, target.push_url) == (
        "octo/widgets", "https://ghe.example/api/v3", "/srv/mirrors/widgets.git",
    )  # fmt: skip

    environ["ORCH_REPOSITORY"] = "https://github.com/octo/code.git"  # issues kept elsewhere
    target = forge_target(environ, OpenPrRun.from_environ(environ), **github_rules())
    assert (target.project, target.push_url) == ("octo/code", "https://github.com/octo/code.git")

    environ.update(ORCHESTRATOR_GITHUB_API_URL="https://other/api/", ORCHESTRATOR_GITHUB_REPO="a/b")
    target = forge_target(environ, OpenPrRun.from_environ(environ), **github_rules())
    assert (target.project, target.api_url) == ("a/b", "https://other/api")  # overrides win

    with_origin(workspace, "")  # no origin, a path: nothing names the project
    plain = {**workspace["environ"], "ORCH_REPOSITORY": "/srv/mirrors/widgets.git"}
    with pytest.raises(StageError, match="set ORCHESTRATOR_GITHUB_REPO=owner/name"):
        forge_target(plain, OpenPrRun.from_environ(plain), **github_rules())


def github_rules() -> dict[str, Any]:
    from orchestrator.forges.github import DEFAULT_API_URL, repo_from_url

    return {
        "forge": "github", "overrides": open_pr_github.OVERRIDES, "parse": repo_from_url,
        "form": "owner/name", "default_api": DEFAULT_API_URL,
        "default_push": lambda _api, repo: f"https://github.com/{repo}.git",
    }  # fmt: skip
