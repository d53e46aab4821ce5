"""The preflight's rules (issue 27), one fact at a time: what fails a run before it
starts, what only warns, and that every warning and failure names its fix."""

from __future__ import annotations

from dataclasses import replace

import pytest

from orchestrator.domain.preflight import (
    Check,
    Facts,
    ForgeAnswer,
    ForgeTokenFact,
    GitHubFact,
    PassEnvFact,
    Probed,
    ProgramFact,
    broker_check,
    checklist,
    failed,
    forge_checks,
    identity_check,
    line,
    model_key_check,
    pass_env_checks,
    program_checks,
    sandbox_check,
    state_dir_check,
    warned,
)

FALLBACK = {"name": "orchestrator", "email": "orchestrator@localhost"}
GOOD = Facts(
    programs=(ProgramFact("stage clone", "/usr/bin/python3", "/usr/bin/python3"),),
    model_key_set=True,
    git_identity={"name": "Ada", "email": "ada@example.org"},
    fallback_identity=FALLBACK,
    state_dir=Probed("/s"),
)
GITHUB = GitHubFact("open-pr", passes_token=True, blocked_by_dry_run=False)


def only(checks: list[Check]) -> Check:
    [check] = checks
    return check


def test_a_machine_with_everything_passes_with_nothing_to_fix() -> None:
    checks = checklist(GOOD)
    assert failed(checks) == [] and warned(checks) == []
    assert all(c.fix == "" for c in checks)
    assert [c.name for c in checks] == [
        "state-dir", "storage", "program", "sandbox", "forge-token", "model-key",
        "git-identity", "broker", "fleet-key",
    ]  # fmt: skip


def test_the_state_store_is_checked_only_when_one_is_configured() -> None:
    def storage(**facts: Probed) -> Check:
        return only([c for c in checklist(replace(GOOD, **facts)) if c.name == "storage"])

    assert storage().status == "skip"
    reached = storage(storage=Probed("postgresql://orch:***@db/orch"))
    assert (reached.status, reached.fix) == ("ok", "")
    down = storage(storage=Probed("postgresql://orch:***@db/orch", "connection refused"))
    assert down.status == "fail"
    assert down.detail == "postgresql://orch:***@db/orch: connection refused"
    assert "ORCHESTRATOR_STORAGE_URL" in down.fix


def test_every_failure_and_warning_names_a_fix() -> None:
    bad = replace(
        GOOD,
        programs=(ProgramFact("stage x", "nope", None),),
        pass_env=(PassEnvFact("stage x", "MY_TOKEN", False),),
        model_key_set=False,
        github=ForgeTokenFact((replace(GITHUB, passes_token=False),)),
        git_identity={},
        sandboxed=("stage x",),
        sandbox_problem="no user namespaces",
        sandbox_remedy="enable them",
        state_dir=Probed("/s", "cannot be created: /f is not a directory"),
        broker=Probed("redis://127.0.0.1:1/0", "Connection refused"),
    )
    checks = checklist(bad)
    assert {c.name for c in failed(checks)} == {
        "program", "pass_env", "forge-token", "sandbox", "state-dir", "broker",
    }  # fmt: skip
    assert {c.name for c in warned(checks)} == {"model-key", "git-identity"}
    assert all(c.fix for c in (*failed(checks), *warned(checks)))


def test_a_missing_program_fails_and_one_in_the_clone_waits_for_it() -> None:
    missing, later, found = program_checks(
        replace(GOOD, programs=(
            ProgramFact("check review:tests", "gradle", None),
            ProgramFact("check review:build", "./gradlew", None, later=True),
            ProgramFact("stage clone", "git", "/usr/bin/git"),
        ))
    )  # fmt: skip
    assert missing.status == "fail" and missing.detail == "check review:tests: gradle not found"
    assert missing.fix.startswith("install gradle, or put its directory on PATH")
    assert later.status == "skip" and "checked when the clone exists" in later.detail
    assert (found.status, found.detail) == ("ok", "stage clone: git (/usr/bin/git)")
    [absolute] = program_checks(replace(GOOD, programs=(ProgramFact("stage x", "/opt/x", None),)))
    assert absolute.fix == "make /opt/x executable, or correct the command"


def test_an_unset_pass_env_variable_fails_unless_dry_run_blocks_its_stage() -> None:
    unset, is_set, later = pass_env_checks(
        replace(GOOD, pass_env=(PassEnvFact("engine claude", "ANTHROPIC_API_KEY", False),
                                PassEnvFact("stage deploy", "DEPLOY_TOKEN", True),
                                PassEnvFact("stage deploy", "SIGNING_KEY", False, True)))
    )  # fmt: skip
    assert unset.status == "fail" and unset.detail.startswith("engine claude: $ANTHROPIC_API_KEY")
    assert unset.fix == "export ANTHROPIC_API_KEY=…, or remove it from pass_env"
    assert is_set.status == "ok"
    assert later.status == "warn" and "DRY_RUN blocks the stage now" in later.detail


def test_no_model_key_only_warns_and_no_recovery_needs_none() -> None:
    warning = model_key_check(replace(GOOD, model_key_set=False, model_key_env="MY_KEY"))
    assert warning.status == "warn" and "$MY_KEY is not set" in warning.detail
    assert warning.fix.startswith("export MY_KEY=")
    assert model_key_check(replace(GOOD, model_key_set=False, recovery_enabled=False)).status == (
        "skip"
    )


@pytest.mark.parametrize(
    ("stage", "token", "answer", "status", "said"),
    [
        (GITHUB, False, None, "fail", "$GITHUB_TOKEN is not set (stage open-pr pushes"),
        (replace(GITHUB, blocked_by_dry_run=True), False, None, "warn", "DRY_RUN blocks"),
        (replace(GITHUB, blocked_by_dry_run=True), True, None, "ok", "not tried: DRY_RUN"),
        (GITHUB, True, ForgeAnswer("http://gh", status=200), "ok", "accepted by http://gh"),
        (
            GITHUB,
            True,
            ForgeAnswer("http://gh", status=401),
            "fail",
            "refused $GITHUB_TOKEN (HTTP 401)",
        ),
        (GITHUB, True, ForgeAnswer("http://gh", status=403), "fail", "(HTTP 403)"),
        (
            GITHUB,
            True,
            ForgeAnswer("http://gh", error="ConnectError: refused"),
            "fail",
            "cannot reach http://gh: ConnectError",
        ),
        (GITHUB, True, ForgeAnswer("http://gh", status=502), "warn", "answered HTTP 502"),
    ],
    ids=["missing", "missing-dry-run", "set-dry-run", "accepted", "401", "403", "network", "5xx"],
)
def test_the_github_token(
    stage: GitHubFact, token: bool, answer: ForgeAnswer | None, status: str, said: str
) -> None:
    check = only(forge_checks(replace(GOOD, github=ForgeTokenFact((stage,), token, answer))))
    assert (check.status, check.name) == (status, "forge-token")
    assert said in check.detail


def test_a_github_stage_that_withholds_the_token_fails_and_no_github_stage_skips() -> None:
    withheld, _ = forge_checks(
        replace(GOOD, github=ForgeTokenFact((replace(GITHUB, passes_token=False),), True))
    )
    assert withheld.status == "fail" and withheld.fix == 'add pass_env = ["GITHUB_TOKEN"] to stage open-pr'  # fmt: skip
    assert only(forge_checks(GOOD)).status == "skip"


def test_a_forge_override_set_but_not_passed_is_a_warning_naming_the_fix() -> None:
    """A stage's environment is an allow-list (issue 40): ``ORCHESTRATOR_GITHUB_API_URL``
    set for the orchestrator reaches the open-pr stage only if its pass_env names it."""
    unpassed = replace(GITHUB, unpassed=("ORCHESTRATOR_GITHUB_API_URL",))
    checks = forge_checks(replace(GOOD, github=ForgeTokenFact((unpassed,), True)))
    [warning] = [c for c in checks if c.status == "warn"]
    assert warning.detail == (
        "$ORCHESTRATOR_GITHUB_API_URL is set, but stage open-pr does not name it in pass_env: "
        "the stage will not see it"
    )
    assert (
        warning.fix == 'add "ORCHESTRATOR_GITHUB_API_URL" to stage open-pr\'s pass_env, or unset it'
    )


def test_the_overrides_the_checklist_knows_are_the_ones_the_stages_read() -> None:
    from orchestrator.domain.preflight import GITHUB as GITHUB_FORGE
    from orchestrator.domain.preflight import GITLAB as GITLAB_FORGE
    from orchestrator.stages import open_pr_github, open_pr_gitlab

    for forge, module in ((GITHUB_FORGE, open_pr_github), (GITLAB_FORGE, open_pr_gitlab)):
        overrides = module.OVERRIDES
        assert forge.overrides == (overrides.project, overrides.api_url, overrides.push_url)


def test_the_identity_comes_from_git_else_the_config_else_the_fallback_with_a_warning() -> None:
    assert identity_check(GOOD).detail == "commits by Ada <ada@example.org> (git config)"
    configured = identity_check(
        replace(GOOD, git_identity={}, configured_identity={"name": "Bot", "email": "bot@x"})
    )
    assert (configured.status, configured.detail) == ("ok", "commits by Bot <bot@x> ([git] in config)")  # fmt: skip
    fallback = identity_check(replace(GOOD, git_identity={"name": "Ada"}))
    assert fallback.status == "warn"
    assert fallback.detail == (
        "no user.email in git config or [git]: commits by Ada <orchestrator@localhost> "
        "(the fallback identity)"
    )
    assert "[git] author_name/author_email" in fallback.fix


def test_the_sandbox_fails_what_needs_it_and_warns_when_only_recipes_do() -> None:
    down = replace(GOOD, sandbox_problem="no bwrap binary at /x", sandbox_remedy="reinstall")
    needed = sandbox_check(replace(down, sandboxed=("stage a", "stage b", "check c:d", "git")))
    assert needed.status == "fail" and "needed by stage a, stage b, check c:d …" in needed.detail
    assert needed.fix == 'reinstall; or opt out per stage/check with sandbox = "none"'
    recipes = sandbox_check(down)
    assert recipes.status == "warn" and "recipes will be refused" in recipes.detail
    assert recipes.fix == 'reinstall; or [recovery] recipe_sandbox = "none"'
    assert sandbox_check(replace(down, recipes_sandboxed=False)).status == "skip"


def test_the_state_dir_and_the_broker() -> None:
    bad = state_dir_check(replace(GOOD, state_dir=Probed("/s", "cannot be written: Read-only file system")))  # fmt: skip
    assert bad.status == "fail" and bad.detail == "/s: cannot be written: Read-only file system"
    assert broker_check(GOOD).status == "skip"
    assert broker_check(replace(GOOD, broker=Probed("redis://h/0"))).status == "ok"
    down = broker_check(replace(GOOD, broker=Probed("redis://:***@h/0", "refused")))
    assert down.status == "fail" and down.detail == "redis://:***@h/0 unreachable: refused"


def test_a_line_carries_its_mark_and_only_a_problem_its_fix() -> None:
    assert line(Check("program", "fail", "stage x: y not found", "install y")) == (
        "✗ program: stage x: y not found — fix: install y"
    )
    assert line(Check("model-key", "warn", "unset", "export K=…")) == (
        "! model-key: unset — fix: export K=…"
    )
    assert line(Check("broker", "ok", "fine", "ignored")) == "✓ broker: fine"
    assert Check("a", "skip", "b").as_dict() == {"name": "a", "status": "skip", "detail": "b", "fix": ""}  # fmt: skip


def test_a_gitlab_stage_has_its_own_token_check_beside_githubs() -> None:
    """``open_pr_gitlab`` needs ``GITLAB_TOKEN`` as ``open_pr_github`` needs its own."""
    github_ok, gitlab_missing = forge_checks(
        replace(GOOD, github=ForgeTokenFact((GITHUB,), True),
                gitlab=ForgeTokenFact((replace(GITHUB, stage="open-mr"),), False))
    )  # fmt: skip
    assert github_ok.detail == "$GITHUB_TOKEN is set"
    assert (gitlab_missing.status, gitlab_missing.detail) == (
        "fail", "$GITLAB_TOKEN is not set (stage open-mr pushes and opens a merge request)")  # fmt: skip
    refused = only(forge_checks(
        replace(GOOD, gitlab=ForgeTokenFact((GITHUB,), True,
                                            ForgeAnswer("https://gl.example", status=401)))
    ))  # fmt: skip
    assert (refused.status, refused.detail) == (
        "fail", "https://gl.example refused $GITLAB_TOKEN (HTTP 401)")  # fmt: skip
