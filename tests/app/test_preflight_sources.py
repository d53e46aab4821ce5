"""How the preflight gathers its facts about ``[[sources]]`` and ``[[notify]]``: a forge
source's token is tried on the forge it reads (loopback fakes: GitHub's ``GET /user``,
GitLab's ``GET /api/v4/user``) whatever DRY_RUN says, one request per forge, URL and
variable; a notify target is judged without sending anything. No secret — token or
webhook URL — reaches ``doctor``'s text or its ``--json``."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from orchestrator.app.preflight import (
    forge_stages,
    gather,
    notify_targets,
    origin_stages,
    pass_env,
    sources,
)
from orchestrator.cli.main import main
from orchestrator.domain.config import load_config
from orchestrator.domain.preflight import GITHUB, GITLAB, checklist

from conftest import write_config
from support.github_fake import TOKEN, FakeGitHub, serve_github
from support.gitlab_fake import PROJECT, FakeGitLab, gitlab_server  # noqa: F401 (fixture "gitlab")
from support.gitlab_fake import TOKEN as GITLAB_TOKEN

UNBOXED = '[sandbox]\ngit = "none"\n'
STAGE = '[[stages]]\nname = "x"\ncommand = ["true"]\ncwd = "run"\nsandbox = "none"\n'
OPEN_PR = """
[[stages]]
name = "open-pr"
command = ["{python}", "-P", "-m", "orchestrator.stages.open_pr"]
side_effectful = true
sandbox = "none"
pass_env = ["GITHUB_TOKEN", "GITLAB_TOKEN"]
"""
WEBHOOK = "https://hooks.slack.com/services/T000/B000/SECRETxyz123"
SMTP_PASSWORD = "smtp-Secret-pa55"


@pytest.fixture(name="github")
def github_server() -> Iterator[FakeGitHub]:
    with serve_github() as fake:
        yield fake


def github_source(url: str, token_env: str = "GH_READ", name: str = "") -> str:
    named = f'name = "{name}"\n' if name else ""
    return (f'[[sources]]\nkind = "github"\nrepo = "octo/widgets"\nlabel = "orchestrate"\n'
            f'token_env = "{token_env}"\napi_url = "{url}"\n{named}')  # fmt: skip


def gitlab_source(url: str) -> str:
    return (f'[[sources]]\nkind = "gitlab"\nproject = "{PROJECT}"\nlabel = "orchestrate"\n'
            f'base_url = "{url}"\n')  # fmt: skip


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_forge_sources_are_asked_even_under_dry_run_and_each_answer_is_judged(
    tmp_path: Path, github: FakeGitHub, gitlab: FakeGitLab
) -> None:
    nowhere = f"http://127.0.0.1:{closed_port()}"
    config = write_config(
        tmp_path,
        STAGE,
        header=UNBOXED + github_source(github.url) + gitlab_source(gitlab.base_url)
        + github_source(github.url, "GH_OTHER", "wrong") + github_source(nowhere, name="down")
        + github_source(github.url, "GH_UNSET", "unset")
        + '[[sources]]\nkind = "directory"\npath = "inbox"\n',
    )  # fmt: skip
    environ = {"GH_READ": TOKEN, "GITLAB_TOKEN": GITLAB_TOKEN, "GH_OTHER": "ghp_wrong-one"}
    checks = [c for c in checklist(gather(load_config(config), tmp_path / "state", environ))
              if c.name == "source"]  # fmt: skip
    assert [(c.status, c.detail) for c in checks] == [
        ("ok", f"gh-octo-widgets: $GH_READ accepted by {github.url}"),
        ("ok", f"gl-grp-sub-cards: $GITLAB_TOKEN accepted by {gitlab.base_url}"),
        ("fail", f"wrong: {github.url} refused $GH_OTHER (HTTP 401)"),
        ("fail", f"down: cannot reach {nowhere}: URLError: <urlopen error [Errno 111] "
                 "Connection refused>"),
        ("fail", "unset: $GH_UNSET is not set (the token its GitHub issues are read with)"),
        ("fail", f"dir-inbox: {tmp_path / 'inbox'} does not exist"),
    ]  # fmt: skip
    assert [(r.method, r.path) for r in github.requests] == [("GET", "/user")] * 2
    assert [(r.method, r.path) for r in gitlab.requests] == [("GET", "/api/v4/user")]
    (tmp_path / "inbox").mkdir()
    [there] = sources(load_config(config), environ, None)[-1:]
    assert (there.exists, there.is_dir) == (True, True)


def test_a_forge_answers_once_for_the_stage_and_the_source_that_share_a_token(
    tmp_path: Path, github: FakeGitHub
) -> None:
    # Issue 43: the forge named only by the source's api_url (no ORCHESTRATOR_* variable)
    # is where the stage's token is checked too; the line says what named that host.
    config = write_config(
        tmp_path,
        OPEN_PR,
        header=UNBOXED + github_source(github.url, "GITHUB_TOKEN"),
    )
    environ = {"GITHUB_TOKEN": TOKEN, "DRY_RUN": "false"}
    checks = checklist(gather(load_config(config), tmp_path / "state", environ))
    shown = [(c.name, c.status, c.detail) for c in checks if c.name in ("source", "forge-token")]
    assert shown == [
        ("source", "ok", f"gh-octo-widgets: $GITHUB_TOKEN accepted by {github.url}"),
        ("forge-token", "ok",
         f"$GITHUB_TOKEN accepted by {github.url} (source gh-octo-widgets's api_url)"),
    ]  # fmt: skip
    assert len(github.requests) == 1


def test_open_pr_opens_on_the_forges_of_the_sources(tmp_path: Path) -> None:
    gh, gl = "https://api.github.com", "https://gitlab.com"
    both = load_config(write_config(tmp_path / "both", OPEN_PR,
                                    header=github_source(gh) + gitlab_source(gl)))  # fmt: skip
    armed = {"DRY_RUN": "false"}
    assert [s.stage for s in forge_stages(both, armed, GITHUB)] == ["open-pr"]
    assert [s.stage for s in forge_stages(both, armed, GITLAB)] == ["open-pr"]
    assert origin_stages(both) == []
    assert pass_env(both, {}) == []  # both tokens are the forge-token check's

    only_gitlab = load_config(write_config(tmp_path / "gl", OPEN_PR, header=gitlab_source(gl)))
    assert forge_stages(only_gitlab, armed, GITHUB) == []
    assert [s.stage for s in forge_stages(only_gitlab, armed, GITLAB)] == ["open-pr"]

    none = load_config(write_config(tmp_path / "none", OPEN_PR))
    assert forge_stages(none, armed, GITHUB) == forge_stages(none, armed, GITLAB) == []
    assert origin_stages(none) == ["open-pr"]
    [skipped] = [c for c in checklist(gather(none, tmp_path / "s", armed)) if c.name == "forge-token"]  # fmt: skip
    assert skipped.status == "skip" and "no [[sources]] is a forge" in skipped.detail


NOTIFY = """
[[notify]]
kind = "slack"
url_env = "SLACK_URL"

[[notify]]
kind = "webhook"
url_env = "HOOK_URL"

[[notify]]
kind = "teams"
url_env = "TEAMS_URL"

[[notify]]
kind = "email"
smtp_host = "smtp.example.org"
from = "bot@example.org"
to = ["ops@example.org"]
username_env = "SMTP_USER"
password_env = "SMTP_PASS"
"""


def test_notify_targets_are_judged_without_their_urls(tmp_path: Path) -> None:
    loaded = load_config(write_config(tmp_path, STAGE, header=NOTIFY))
    environ = {"SLACK_URL": WEBHOOK, "HOOK_URL": "ftp://example.org/x", "SMTP_PASS": SMTP_PASSWORD}
    slack, hook, teams, email = notify_targets(loaded, environ)
    assert (slack.url_set, slack.url_is_http) == (True, True)
    assert (hook.url_set, hook.url_is_http) == (True, False)
    assert teams.url_set is False
    assert email.unset_env == ("SMTP_USER",)
    assert WEBHOOK not in repr((slack, hook, teams, email))


def test_a_target_on_loopback_or_a_private_address_is_told_unless_allowed(tmp_path: Path) -> None:
    """Judged from the URL's host or smtp_host alone (an IP address, or localhost): no
    name is resolved and nothing is sent."""
    header = (
        '[[notify]]\nkind = "webhook"\nurl_env = "A"\n'
        '[[notify]]\nkind = "webhook"\nurl_env = "B"\nallow_private = ["10.0.0.5:8443"]\n'
        '[[notify]]\nkind = "slack"\nurl_env = "C"\n'
        '[[notify]]\nkind = "email"\nsmtp_host = "127.0.0.1"\nfrom = "b@example.org"\n'
        'to = ["o@example.org"]\n'
    )
    loaded = load_config(write_config(tmp_path, STAGE, header=header))
    environ = {
        "A": "http://169.254.169.254/latest/meta-data",
        "B": "https://10.0.0.5:8443/hook",
        "C": "https://hooks.slack.com/services/T/B/x",
    }
    assert [t.private for t in notify_targets(loaded, environ)] == [True, False, False, True]
    assert notify_targets(loaded, {**environ, "B": "https://10.0.0.5/hook"})[1].private


def test_doctor_names_the_variables_never_the_secrets(
    tmp_path: Path,
    github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wrong = "ghp_Wrong-but-still-secret-999"
    header = (UNBOXED + github_source(github.url) + github_source(github.url, "GH_OTHER", "other")
              + NOTIFY)  # fmt: skip
    config = write_config(tmp_path, STAGE, header=header)
    for name, value in {"GH_READ": TOKEN, "GH_OTHER": wrong, "SLACK_URL": WEBHOOK,
                        "HOOK_URL": "hooks.example.org/" + "SECRETpath", "TEAMS_URL": "",
                        "SMTP_USER": "", "SMTP_PASS": SMTP_PASSWORD}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DRY_RUN", raising=False)
    secrets = (TOKEN, wrong, WEBHOOK, "SECRETpath", SMTP_PASSWORD)

    assert main(["--config", str(config), "doctor"]) == 2  # the refused source fails
    text = capsys.readouterr().out
    assert f"✓ source: gh-octo-widgets: $GH_READ accepted by {github.url}" in text
    assert f"✗ source: other: {github.url} refused $GH_OTHER (HTTP 401)" in text
    assert "✓ notify: slack $SLACK_URL is set (nothing sent)" in text
    assert "! notify: webhook $HOOK_URL is not an http(s) URL" in text
    assert "! notify: teams $TEAMS_URL is not set" in text
    assert "! notify: email to ops@example.org: $SMTP_USER not set" in text

    assert main(["--config", str(config), "doctor", "--json"]) == 2
    out = capsys.readouterr().out
    document = json.loads(out)
    named = {c["name"] for c in document["checks"]}
    assert {"source", "notify"} <= named
    for secret in secrets:
        assert secret not in text and secret not in out, secret
    # Only GitHub was asked, and nothing was sent to a notify target.
    assert {(r.method, r.path) for r in github.requests} == {("GET", "/user")}


def test_forges_are_asked_at_the_same_time_and_not_at_all_when_told_not_to(
    tmp_path: Path,
) -> None:
    config = write_config(
        tmp_path,
        STAGE,
        header=UNBOXED + github_source("https://ghe.example.org/api/v3")
        + gitlab_source("https://gitlab.example.org"),
    )  # fmt: skip
    environ = {"GH_READ": "ghp_a", "GITLAB_TOKEN": "glpat-b"}
    both_in_flight = threading.Barrier(2, timeout=10)
    seen: list[str] = []

    def send(url: str, headers: Mapping[str, str]) -> int:
        seen.append(url)
        both_in_flight.wait()  # one forge at a time would never get past this
        return 200

    loaded = load_config(config)
    facts = gather(loaded, tmp_path / "state", environ, send=send)
    assert [s.answer.status if s.answer else None for s in facts.sources] == [200, 200]
    assert sorted(seen) == ["https://ghe.example.org/api/v3/user",
                            "https://gitlab.example.org/api/v4/user"]  # fmt: skip

    untried = gather(loaded, tmp_path / "state", environ, ask_forge=False, send=send)
    assert [c.detail for c in checklist(untried) if c.name == "source"] == [
        "gh-octo-widgets: $GH_READ is set (not tried)",
        "gl-grp-sub-cards: $GITLAB_TOKEN is set (not tried)",
    ]
    assert len(seen) == 2
