"""The sandbox keys of config.toml: what they accept, what they refuse (naming the key),
and the executor a stage or check gets from them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.app.services import Services
from orchestrator.domain.config import Config, LoadedConfig, parse_config
from orchestrator.domain.errors import ConfigError
from orchestrator.domain.sandbox import effective_sandbox
from orchestrator.execution.attempts import git_sandbox, sandboxed
from orchestrator.execution.executor import LocalExecutor
from orchestrator.execution.process import ProcessRequest
from orchestrator.execution.sandbox import SANDBOX_HOME, SandboxedExecutor
from orchestrator.execution.stage_env import StageContext, stage_environ
from orchestrator.execution.stage_sandbox import parse_identity, secret_files
from orchestrator.storage.files import FileStorage

from support.sandbox_required import require_sandbox
from support.services import make_services

BASE = """
[engines.coder]
command = ["bash", "-c", "true"]

[[stages]]
name = "implement"
engine = "coder"
{engine_extra}

[[stages]]
name = "build"
command = ["make"]
{build_extra}

[[stages]]
name = "review"

[[stages.checks]]
name = "tests"
command = ["pytest"]
{check_extra}
"""


def parse(recovery: str = "", engine_extra: str = "", build_extra: str = "",
          check_extra: str = "") -> Config:  # fmt: skip
    text = recovery + BASE.format(
        engine_extra=engine_extra, build_extra=build_extra, check_extra=check_extra
    )
    return parse_config(text, Path("/p/config.toml"))


def test_recipes_are_sandboxed_by_default_and_none_is_an_explicit_opt_out() -> None:
    assert parse().recovery.recipe_sandbox == "bwrap"
    assert parse('[recovery]\nrecipe_sandbox = "none"\n').recovery.recipe_sandbox == "none"
    with pytest.raises(ConfigError, match=r"recovery\.recipe_sandbox"):
        parse('[recovery]\nrecipe_sandbox = "docker"\n')


def test_every_stage_is_sandboxed_unless_it_says_none_and_false_is_not_an_opt_out() -> None:
    config = parse()
    assert [s.sandbox for s in config.stages] == [None, None, None]  # None: the sandbox
    assert parse(build_extra="sandbox = true").stage("build").sandbox == "bwrap"
    assert parse(build_extra='sandbox = "none"').stage("build").sandbox == "none"
    # ``false`` was "the default" before every stage was sandboxed: an opt-out is a word.
    with pytest.raises(ConfigError, match=r'stages\[1\]\.sandbox.*write sandbox = "none"'):
        parse(build_extra="sandbox = false")
    with pytest.raises(ConfigError, match=r"stages\[2\]\.checks\[0\]\.sandbox"):
        parse(check_extra='sandbox = "yes"')
    with pytest.raises(ConfigError, match='sandbox settings: not with sandbox = "none"'):
        parse(build_extra='sandbox = "none"\nwritable = ["out"]')
    with pytest.raises(ConfigError, match=r"sandbox\.max_processes"):
        parse("[sandbox]\nmax_processes = -1\n")


def services(config: Config, environ: dict[str, str] | None = None) -> Services:
    return make_services(
        LoadedConfig(config=config, path=Path("/p/config.toml"), root=Path("/p"), sha256=""),
        Path("/p/state"),
        environ=environ if environ is not None else {"HOME": "/home/me", "PATH": "/usr/bin:/bin"},
        executor=LocalExecutor(),
    )


def context(repository: str = "https://example.com/r.git") -> StageContext:
    run_dir = Path("/p/state/runs/T-1-r1")
    return StageContext(
        ticket_file=run_dir / "ticket" / "T-1.md", ticket_id="T-1", ticket_kind="bug-fix",
        repository=repository, base_branch="main", run_id="T-1-r1", run_dir=run_dir,
        clone_dir=run_dir / "clone", state_dir=Path("/p/state"), stage="build", engine="",
        model="", attempt=1,
    )  # fmt: skip


def test_a_stage_gets_the_one_profile_and_its_config_adds_to_it() -> None:
    config = parse(
        build_extra='writable = ["../cache", "/srv/out"]\nreadable = ["~/.cache/pip"]',
        check_extra="network = true",
    )
    svc = services(config)
    ctx = context()
    clone = ctx.clone_dir
    build = sandboxed(svc, config.stage("build"), cwd=clone, ctx=ctx)
    assert isinstance(build, SandboxedExecutor) and build.inner is svc.executor
    assert build.spec.writable == (clone, ctx.run_dir / "cache", Path("/srv/out"))
    assert build.spec.network is False  # a command's default
    # The ticket and what the stage declared: never the config's directory (issue 40).
    assert build.spec.readable == (ctx.run_dir / "ticket", Path("/home/me/.cache/pip"))
    # Hidden wherever shown: every home, the whole state dir (this clone is bound back on
    # top) and the config's directory; its env file and the keys masked even so.
    assert build.spec.hidden == (
        Path("/root"), Path("/home"), Path("/p/state"), Path("/home/me"), Path("/p"),
    )  # fmt: skip
    assert {
        Path("/p/orchestrator.env"), Path("/p/state/keys"), Path("/home/me/.pgpass"),
        Path("/p/fleet.key"),
    } <= set(build.spec.masked)  # fmt: skip
    assert build.spec.read_only == ()
    # A script the configured command names under {root}: that file, read-only.
    lint = sandboxed(
        svc, config.stage("build"), cwd=clone, ctx=ctx,
        command=("{python}", "{root}/checks/lint.py", "--out={root}/../elsewhere", "{root}"),
    )  # fmt: skip
    assert isinstance(lint, SandboxedExecutor)
    assert lint.spec.readable[0] == Path("/p/checks/lint.py") and Path("/p") not in (
        lint.spec.readable
    )
    assert Path("/elsewhere") not in lint.spec.readable
    env = build.spec.environment({"HOME": "/home/me", "TMPDIR": "/home/me/tmp", "X": "1"})
    assert env["HOME"] == SANDBOX_HOME and env["TMPDIR"] == "/tmp" and env["X"] == "1"
    assert build.spec.limits.max_processes == 2048 and build.spec.limits.scratch_bytes > 0
    # An engine calls its model: only through the egress proxy (issue 40), to the hosts it
    # is given; no address-space limit.
    engine = sandboxed(
        svc, config.stage("implement"), cwd=clone, ctx=ctx, role="engine",
        egress_hosts=("api.example.com",),
    )  # fmt: skip
    assert isinstance(engine, SandboxedExecutor) and engine.spec.network is False
    assert engine.spec.egress is not None and engine.spec.egress.allows("api.example.com", 443)
    assert engine.spec.limits.max_memory_bytes == 0
    # A check: its own network setting over its stage's; the clone's .git read-only.
    check_options = effective_sandbox(config.stage("review").checks[0], config.stage("review"))
    check = sandboxed(svc, check_options, cwd=clone, ctx=ctx, role="check")
    assert isinstance(check, SandboxedExecutor) and check.spec.network is False
    assert check.spec.egress is not None and check.spec.egress.describe() == "no host"
    assert check.spec.read_only == (clone / ".git",)
    assert check.spec.limits.max_memory_bytes == 16 * 1024 * 1024 * 1024
    # Opted out: the plain executor, untouched.
    none = parse(build_extra='sandbox = "none"').stage("build")
    assert sandboxed(svc, none, cwd=clone, ctx=ctx) is svc.executor


def test_the_verifier_sees_its_checkout_and_the_clone_s_git_read_only_nothing_else() -> None:
    config = parse()
    ctx = context()
    checkout = ctx.run_dir / "verify-1"
    verifier = sandboxed(
        services(config), config.stage("review"), cwd=checkout,
        ctx=replace(ctx, clone_dir=checkout), role="check",
    )  # fmt: skip
    assert isinstance(verifier, SandboxedExecutor)
    assert verifier.spec.writable == (checkout,)
    assert verifier.spec.read_only == (ctx.run_dir / "clone" / ".git",)


def test_a_stage_that_records_a_result_gets_the_run_dir_and_a_local_repository() -> None:
    config = parse()
    ctx = context(repository="/srv/repos/app.git")
    svc = services(config)
    pushing = sandboxed(svc, config.stage("build"), cwd=ctx.clone_dir, ctx=ctx, side_effectful=True)
    assert isinstance(pushing, SandboxedExecutor)
    assert pushing.spec.writable == (ctx.clone_dir, ctx.run_dir, Path("/srv/repos/app.git"))
    cloning = sandboxed(svc, config.stage("build"), cwd=ctx.run_dir, ctx=ctx)
    assert isinstance(cloning, SandboxedExecutor)
    assert cloning.spec.writable == (ctx.run_dir,)
    assert Path("/srv/repos/app.git") in cloning.spec.readable


def test_the_orchestrator_s_own_git_calls_run_sandboxed_writing_only_when_they_must() -> None:
    config = parse()
    svc = services(config)
    clone = Path("/p/state/runs/T-1-r1/clone")
    read = git_sandbox(svc, clone)
    assert isinstance(read, SandboxedExecutor) and read.inner is svc.executor
    assert read.spec.writable == () and read.spec.readable == (clone,)
    assert read.spec.network is False
    assert Path("/p/state") in read.spec.hidden and Path("/home/me") in read.spec.hidden
    assert Path("/p") in read.spec.hidden and Path("/p/orchestrator.env") in read.spec.masked
    # Of what it is handed, the base and git's own (hardening, identity): nothing else.
    assert read.spec.environment(
        {"PATH": "/usr/bin", "LC_ALL": "C", "GIT_CONFIG_COUNT": "0",
         "SLACK_WEBHOOK_URL": "https://hooks.slack.com/x", "ANTHROPIC_API_KEY": "sk"}
    ) == {"PATH": "/usr/bin", "LC_ALL": "C", "GIT_CONFIG_COUNT": "0", "HOME": SANDBOX_HOME,
          "TMPDIR": "/tmp"}  # fmt: skip
    write = git_sandbox(svc, clone, writes=True)
    assert isinstance(write, SandboxedExecutor)
    # The run dir too: ``git worktree add`` makes the verification checkout beside it.
    assert write.spec.writable == (clone, clone.parent)
    opted_out = parse('[sandbox]\ngit = "none"\n')
    assert git_sandbox(services(opted_out), clone) is svc.executor or isinstance(
        git_sandbox(services(opted_out), clone), LocalExecutor
    )


def test_the_global_git_identity_is_carried_in_unless_the_environment_sets_one() -> None:
    listing = b"user.name\nAda Lovelace\0user.email\nada@example.com\0"
    assert parse_identity(listing, {}) == {
        "GIT_AUTHOR_NAME": "Ada Lovelace", "GIT_COMMITTER_NAME": "Ada Lovelace",
        "GIT_AUTHOR_EMAIL": "ada@example.com", "GIT_COMMITTER_EMAIL": "ada@example.com",
    }  # fmt: skip
    assert (
        parse_identity(listing, {"GIT_AUTHOR_NAME": "Me"})["GIT_COMMITTER_NAME"] == "Ada Lovelace"
    )
    assert "GIT_AUTHOR_NAME" not in parse_identity(listing, {"GIT_AUTHOR_NAME": "Me"})
    assert parse_identity(b"", {}) == {}


def test_the_shipped_config_documents_the_sandbox_keys_and_parses() -> None:
    root = Path(__file__).resolve().parents[2]
    text = (root / "config.toml").read_text()
    assert 'recipe_sandbox = "bwrap"' in text and '# sandbox = "none"' in text
    config = parse_config(text, root / "config.toml")
    assert config.recovery.recipe_sandbox == "bwrap"
    # The stages that reach the network say so; the others have none.
    assert {s.name for s in config.stages if s.network} == {"clone", "open-pr"}


def test_the_orchestrator_s_keys_reach_no_stage_even_one_that_names_them() -> None:
    for key in ("ORCHESTRATOR_LEDGER_KEY", "ORCHESTRATOR_APPROVAL_KEY"):
        with pytest.raises(ConfigError, match=rf"stages\[1\]\.pass_env: names {key}: "):
            parse(build_extra=f'pass_env = ["{key}", "GITHUB_TOKEN"]')
    # And the stage environment drops them whatever it is given.
    environ = {
        "ORCHESTRATOR_LEDGER_KEY": "l", "ORCHESTRATOR_APPROVAL_KEY": "a",
        "GITHUB_TOKEN": "g", "PATH": "/usr/bin",
    }  # fmt: skip
    env = stage_environ(
        environ, context(), ("ORCHESTRATOR_LEDGER_KEY", "ORCHESTRATOR_APPROVAL_KEY", "GITHUB_TOKEN")
    )
    assert env["GITHUB_TOKEN"] == "g"
    assert "ORCHESTRATOR_LEDGER_KEY" not in env and "ORCHESTRATOR_APPROVAL_KEY" not in env


def test_the_secret_files_are_known_by_place_and_through_links(tmp_path: Path) -> None:
    """The env file beside the config is masked where it lies and where a link points
    (``orchestrator.env -> ~/secrets/orch.env`` is common); the keys' directory, the
    pgpass files and what the caller adds (the fleet key) too."""
    tmp_path = tmp_path.resolve()  # the links are resolved: compare with resolved paths
    project, secrets = tmp_path / "project", tmp_path / "secrets"
    project.mkdir()
    secrets.mkdir()
    (secrets / "orch.env").write_text("GITHUB_TOKEN=x\n")
    (project / "orchestrator.env").symlink_to(secrets / "orch.env")
    found = secret_files(
        project, tmp_path / "state" / "keys" / "approval.key", tmp_path / "home",
        {"PGPASSFILE": str(tmp_path / "pg" / "pass")}, also=(project / "fleet.key",),
    )  # fmt: skip
    assert set(found) == {
        project / "orchestrator.env", secrets / "orch.env", tmp_path / "state" / "keys",
        tmp_path / "home" / ".pgpass", tmp_path / "pg" / "pass", project / "fleet.key",
    }  # fmt: skip


def test_a_stage_s_environment_is_an_allow_list_whatever_a_name_looks_like() -> None:
    """Issue 40: the base, the commit identity, ``pass_env`` and the contract — an
    unknown variable is dropped whatever its name (a webhook URL, a database URL, odd
    credentials), a ``pass_env`` one kept, the orchestrator's own refused even there."""
    environ = {
        "PATH": "/usr/bin", "HOME": "/home/me", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "TZ": "UTC", "TERM": "xterm", "TMPDIR": "/var/tmp",
        "GIT_AUTHOR_NAME": "Ada", "ORCHESTRATOR_GIT_AUTHOR_EMAIL": "ada@example.com",
        "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T/B/x",
        "DATABASE_URL": "postgresql://u:pw@h/db", "DEPLOY_CREDS_B64": "c2VjcmV0",
        "MY_CREDS": "x", "EDITOR": "vi", "SSH_AUTH_SOCK": "/run/agent",
        "ORCHESTRATOR_BROKER_URL": "redis://:pw@h/0", "ORCHESTRATOR_CRASH_AT": "x",
        "ORCH_RUN_ID": "stale", "NEEDED_BY_BUILD": "yes", "ANTHROPIC_API_KEY": "sk-ant",
        "ORCHESTRATOR_LEDGER_KEY": "l", "ORCHESTRATOR_STORAGE_URL": "postgresql://u:pw@h/s",
    }  # fmt: skip
    env = stage_environ(
        environ, context(),
        ("NEEDED_BY_BUILD", "ORCHESTRATOR_LEDGER_KEY", "ORCHESTRATOR_STORAGE_URL"),
    )  # fmt: skip
    given = {k: v for k, v in env.items() if not k.startswith("ORCH_") and k != "PATH"}
    assert given == {
        "HOME": "/home/me", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
        "TERM": "xterm", "TMPDIR": "/var/tmp", "GIT_AUTHOR_NAME": "Ada",
        "ORCHESTRATOR_GIT_AUTHOR_EMAIL": "ada@example.com", "NEEDED_BY_BUILD": "yes",
    }  # fmt: skip
    assert env["PATH"].endswith(":/usr/bin") and env["ORCH_RUN_ID"] == "T-1-r1"
    # The same whether the stage is sandboxed or not: stage_environ is all it is given.
    assert "ANTHROPIC_API_KEY" in stage_environ(environ, context(), ("ANTHROPIC_API_KEY",))


def test_declared_paths_expand_the_home_and_the_placeholders_and_missing_ones_are_made_nearby(
    tmp_path: Path,
) -> None:
    config = parse(
        build_extra='writable = ["~/.engine.json", "{root}/cache"]\nreadable = ["~/.ro"]'
    )
    svc = services(config, environ={"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"})
    svc = replace(svc, loaded=svc.loaded.model_copy(update={"root": tmp_path / "project"}))
    ctx = context()
    build = sandboxed(svc, config.stage("build"), cwd=tmp_path / "clone", ctx=ctx)
    assert isinstance(build, SandboxedExecutor)
    assert build.spec.writable[1:] == (
        tmp_path / "home" / ".engine.json",
        tmp_path / "project" / "cache",
    )
    assert tmp_path / "home" / ".ro" in build.spec.readable
    # Beside the config it is made; in the home it may be a file: never made there.
    assert (tmp_path / "project" / "cache").is_dir() and not (
        tmp_path / "home" / ".engine.json"
    ).exists()
    with pytest.raises(ConfigError, match=r"names ~, but \$HOME is not set"):
        sandboxed(
            services(config, environ={"PATH": "/bin"}), config.stage("build"), cwd=tmp_path, ctx=ctx
        )


def test_a_side_effectful_stage_reads_its_run_s_decisions_and_nothing_else_of_the_state_dir(
    tmp_path: Path,
) -> None:
    """The GitHub open-pr stage writes the run's decisions into the pull request's body:
    it sees this run's verdict files, read-only, and no other run's."""
    require_sandbox()
    config = parse()
    state = tmp_path / "p" / "state"
    runs = state / "runs"
    run_dir = runs / "T-1-20261201T000000Z-abcd"
    (run_dir / "clone").mkdir(parents=True)
    (run_dir / "ticket").mkdir()
    (runs / f"{run_dir.name}.verdict-1.json").write_text('{"verdict": "mine"}')
    (runs / "T-2-20261201T000000Z-ef01.verdict-1.json").write_text('{"verdict": "theirs"}')
    ctx = replace(
        context(), run_id=run_dir.name, run_dir=run_dir, clone_dir=run_dir / "clone",
        ticket_file=run_dir / "ticket" / "T-1.md", state_dir=state,
    )  # fmt: skip
    svc = replace(
        services(config),
        storage=FileStorage(state),
        loaded=services(config).loaded.model_copy(update={"root": tmp_path / "p"}),
    )
    log = tmp_path / "log"
    for side_effectful, seen in ((True, "mine"), (False, None)):
        executor = sandboxed(
            svc, config.stage("build"), cwd=ctx.clone_dir, ctx=ctx, side_effectful=side_effectful
        )
        executor.run(
            ProcessRequest(
                ("sh", "-c", f"cat {runs}/*.verdict-1.json"), cwd=ctx.clone_dir,
                env={"PATH": "/usr/bin:/bin"}, log_path=log, timeout_s=30, kill_after_s=1,
            )
        )  # fmt: skip
        said = log.read_text()
        assert "theirs" not in said
        assert ("mine" in said) is (seen is not None), said
        log.unlink()
