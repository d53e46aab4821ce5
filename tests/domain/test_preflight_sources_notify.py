"""The preflight's rules for ``[[sources]]`` and ``[[notify]]``, and for the ``open_pr``
stage that opens its request on a ticket's own forge: pure, from facts alone. A source
that cannot be read fails (a batch would find nothing); a notify target that cannot be
sent to only warns (a notification never blocks a run)."""

from __future__ import annotations

from dataclasses import replace

from orchestrator.domain.preflight import (
    GITHUB,
    GITLAB,
    Check,
    Facts,
    ForgeAnswer,
    ForgeTokenFact,
    GitHubFact,
    NotifyFact,
    SourceFact,
    checklist,
    forge_checks,
    notify_checks,
    origin_stage,
    runs_module,
    source_checks,
    stage_forges,
)

GOOD = Facts(model_key_set=True, git_identity={"name": "Ada", "email": "ada@example.org"})
GH_URL = "https://api.github.com"
GL_URL = "https://gitlab.example.org"
GH_SOURCE = SourceFact("gh-octo-widgets", "github", forge=GITHUB, token_env="GH_READ",
                       token_set=True, answer=ForgeAnswer(GH_URL, status=200))  # fmt: skip
GL_SOURCE = SourceFact("gl-grp-cards", "gitlab", forge=GITLAB, token_env="GITLAB_TOKEN",
                       token_set=True, answer=ForgeAnswer(GL_URL, status=200))  # fmt: skip
OPEN_PR = ["{python}", "-P", "-m", "orchestrator.stages.open_pr"]


def only(checks: list[Check]) -> Check:
    [check] = checks
    return check


def test_a_directory_source_fails_when_missing_or_not_a_directory_naming_the_path() -> None:
    there, missing, a_file = source_checks(replace(GOOD, sources=(
        SourceFact("tickets", "directory", "/work/tickets"),
        SourceFact("dir-inbox", "directory", "/work/inbox", exists=False, is_dir=False),
        SourceFact("dir-notes", "directory", "/work/notes.md", exists=True, is_dir=False),
    )))  # fmt: skip
    assert (there.name, there.status) == ("source", "ok")
    assert there.detail == "tickets: /work/tickets is a directory"
    assert (missing.status, missing.detail) == ("fail", "dir-inbox: /work/inbox does not exist")  # fmt: skip
    assert missing.fix.startswith("create the directory, or correct the source's path")
    assert (a_file.status, a_file.detail) == (
        "fail", "dir-notes: /work/notes.md is not a directory",
    )  # fmt: skip


def test_a_forge_source_without_its_token_fails_naming_the_variable_and_the_source() -> None:
    check = only(source_checks(replace(GOOD, sources=(
        replace(GH_SOURCE, token_set=False, answer=None),
    ))))  # fmt: skip
    assert (check.name, check.status) == ("source", "fail")
    assert check.detail == (
        "gh-octo-widgets: $GH_READ is not set (the token its GitHub issues are read with)"
    )
    assert check.fix.startswith("export GH_READ=…")


def test_a_forge_source_whose_token_is_refused_or_whose_forge_is_unreachable_fails() -> None:
    refused, unreachable, odd, accepted, untried = source_checks(replace(GOOD, sources=(
        replace(GH_SOURCE, answer=ForgeAnswer(GH_URL, status=401)),
        replace(GL_SOURCE, answer=ForgeAnswer(GL_URL, error="ConnectionRefusedError: refused")),
        replace(GL_SOURCE, answer=ForgeAnswer(GL_URL, status=502)),
        GL_SOURCE,
        replace(GL_SOURCE, answer=None),
    )))  # fmt: skip
    assert (refused.status, refused.detail) == (
        "fail", f"gh-octo-widgets: {GH_URL} refused $GH_READ (HTTP 401)",
    )  # fmt: skip
    assert refused.fix == "export a GH_READ that is valid and may read the issues"
    assert (unreachable.status, unreachable.detail) == (
        "fail", f"gl-grp-cards: cannot reach {GL_URL}: ConnectionRefusedError: refused",
    )  # fmt: skip
    assert unreachable.fix == "check the network, or the source's base_url"
    assert odd.status == "warn" and "answered HTTP 502" in odd.detail
    assert (accepted.status, accepted.detail) == (
        "ok", f"gl-grp-cards: $GITLAB_TOKEN accepted by {GL_URL}",
    )  # fmt: skip
    assert (untried.status, untried.detail) == ("ok", "gl-grp-cards: $GITLAB_TOKEN is set (not tried)")  # fmt: skip


def test_a_webhook_target_warns_when_its_variable_is_unset_or_no_http_url() -> None:
    unset, not_http, fine = notify_checks(replace(GOOD, notify=(
        NotifyFact("slack $SLACK_URL", "slack", "SLACK_URL", url_set=False),
        NotifyFact("webhook $HOOK_URL", "webhook", "HOOK_URL", url_set=True, url_is_http=False),
        NotifyFact("teams $TEAMS_URL", "teams", "TEAMS_URL", url_set=True, url_is_http=True),
    )))  # fmt: skip
    assert (unset.name, unset.status) == ("notify", "warn")
    assert unset.detail == "slack $SLACK_URL is not set: nothing can be sent there"
    assert unset.fix == "export SLACK_URL=… (the URL to post to)"
    assert (not_http.status, not_http.detail) == (
        "warn", "webhook $HOOK_URL is not an http(s) URL: nothing can be sent there",
    )  # fmt: skip
    assert (fine.status, fine.detail) == ("ok", "teams $TEAMS_URL is set (nothing sent)")  # fmt: skip


def test_an_email_target_warns_when_a_credential_it_names_is_unset() -> None:
    missing, fine = notify_checks(replace(GOOD, notify=(
        NotifyFact("email to ops@example.org", "email", unset_env=("SMTP_USER", "SMTP_PASS")),
        NotifyFact("email to ops@example.org", "email"),
    )))  # fmt: skip
    assert (missing.status, missing.detail) == (
        "warn", "email to ops@example.org: $SMTP_USER, $SMTP_PASS not set: the SMTP login will fail",
    )  # fmt: skip
    assert missing.fix == "export SMTP_USER=…, SMTP_PASS=…, or remove username_env/password_env"
    assert (fine.status, fine.detail) == ("ok", "email to ops@example.org (nothing sent)")


def test_a_target_on_a_private_address_not_allowed_by_name_warns() -> None:
    """Issue 40: every send to it would be refused; the warning says so before a run."""
    hook_set, hook_private, mail_set, mail_private = notify_checks(replace(GOOD, notify=(
        NotifyFact("webhook $HOOK_URL", "webhook", "HOOK_URL", url_set=True, url_is_http=True,
                   private=True),
        NotifyFact("email to ops@example.org", "email", private=True),
    )))  # fmt: skip
    assert hook_set.status == mail_set.status == "ok"
    assert (hook_private.status, hook_private.detail) == (
        "warn", "webhook $HOOK_URL: its host is a loopback, link-local or private address its "
        "allow_private does not name: every send will be refused",
    )  # fmt: skip
    assert hook_private.fix == 'if it is yours, add allow_private = ["HOST[:PORT]"] to the target'
    assert mail_private.detail.startswith("email to ops@example.org: its host is a loopback")


def test_notify_never_fails_and_no_sources_or_targets_add_no_line() -> None:
    names = [c.name for c in checklist(GOOD)]
    assert "source" not in names and "notify" not in names
    broken = replace(GOOD, notify=(
        NotifyFact("slack $S", "slack", "S"), NotifyFact("email to a@b", "email", unset_env=("P",)),
    ))  # fmt: skip
    assert {c.status for c in checklist(broken) if c.name == "notify"} == {"warn"}


def test_open_pr_is_told_from_open_pr_github_and_opens_on_the_sources_forges() -> None:
    github = ["{python}", "-m", "orchestrator.stages.open_pr_github"]
    assert runs_module(OPEN_PR, "orchestrator.stages.open_pr")
    assert not runs_module(github, "orchestrator.stages.open_pr")
    assert runs_module(["sh", "-c", "python -m orchestrator.stages.open_pr --x"],
                       "orchestrator.stages.open_pr")  # fmt: skip
    assert stage_forges(github, (GITLAB,)) == (GITHUB,)
    assert stage_forges(["{python}", "-m", "orchestrator.stages.open_pr_gitlab"], ()) == (GITLAB,)
    assert stage_forges(OPEN_PR, (GITHUB, GITLAB)) == (GITHUB, GITLAB)
    assert stage_forges(OPEN_PR, (GITLAB,)) == (GITLAB,)
    assert stage_forges(OPEN_PR, ()) == ()
    assert stage_forges(["true"], (GITHUB,)) == () and stage_forges(None, (GITHUB,)) == ()
    assert origin_stage(OPEN_PR) and not origin_stage(github)


def test_an_open_pr_stage_without_forge_sources_is_skipped_with_its_reason() -> None:
    check = only(forge_checks(replace(GOOD, origin_stages=("open-pr",))))
    assert (check.name, check.status) == ("forge-token", "skip")
    assert check.detail == (
        "stage open-pr opens its request on the forge a ticket's [origin] names, and no "
        "[[sources]] is a forge (GitHub or GitLab)"
    )
    # With GitHub and GitLab sources its stage is each forge's: both tokens are checked.
    stage = GitHubFact("open-pr", passes_token=True, blocked_by_dry_run=False)
    both = forge_checks(
        replace(GOOD, github=ForgeTokenFact((stage,)), gitlab=ForgeTokenFact((stage,)))
    )
    assert [c.detail for c in both if c.status == "fail"] == [
        "$GITHUB_TOKEN is not set (stage open-pr pushes and opens a pull request)",
        "$GITLAB_TOKEN is not set (stage open-pr pushes and opens a merge request)",
    ]
