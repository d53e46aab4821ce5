"""git hardened everywhere the orchestrator runs it in a clone: the transports, the config
a clone may not hold, the ``.git`` it must have, the verification checkout. The rules are
pinned as pure functions; each attack is played on a real repository, with a canary file
outside the clone that the planted command would create."""

from __future__ import annotations

import os
from pathlib import Path

import git
import pytest

from orchestrator.execution.executor import HeadRequest, LocalExecutor
from orchestrator.execution.git import (
    HARDENED_CONFIG,
    PROTOCOLS,
    allow_protocol_for,
    clone_git_dir_problem,
    clone_git_env,
    config_drift,
    config_problem,
    hardened_git_env,
    overriding,
    protocol_of,
    tampered_config,
)
from orchestrator.execution.git_calls import add_checkout, changed_paths

from support.gitrepo import commit_files, init_repo


def settings(env: dict[str, str]) -> list[tuple[str, str]]:
    return [
        (env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"])
        for i in range(int(env["GIT_CONFIG_COUNT"]))
    ]


# ---- the rules, pure --------------------------------------------------------------------


def test_every_transport_is_refused_by_name_and_by_the_environment() -> None:
    env = hardened_git_env({"PATH": "/bin", "GIT_ALLOW_PROTOCOL": "ext", "GIT_NO_LAZY_FETCH": "0"})
    found = dict(settings(env))
    assert found["protocol.allow"] == "never"
    assert {p: found[f"protocol.{p}.allow"] for p in PROTOCOLS} == dict.fromkeys(PROTOCOLS, "never")
    assert set(PROTOCOLS) == {"ext", "fd", "file", "git", "http", "https", "ssh"}
    # Set, even empty, GIT_ALLOW_PROTOCOL overrides every protocol.* of every scope.
    assert (env["GIT_ALLOW_PROTOCOL"], env["GIT_NO_LAZY_FETCH"]) == ("", "1")


def test_an_extra_naming_a_protocol_setting_in_any_case_is_dropped() -> None:
    env = hardened_git_env(
        {}, [("Protocol.Ext.Allow", "always"), ("PROTOCOL.FILE.ALLOW", "always"),
             ("filter.lfs.smudge", "")],
    )  # fmt: skip
    found = settings(env)
    assert ("filter.lfs.smudge", "") in found
    assert [k for k, v in found if v == "always"] == []
    assert len(found) == len(HARDENED_CONFIG) + 1
    assert hardened_git_env(env, [("filter.lfs.smudge", "")]) == env  # still idempotent


@pytest.mark.parametrize(
    ("url", "protocol"),
    [
        ("/srv/repos/cards.git", "file"),
        ("file:///srv/repos/cards.git", "file"),
        ("https://github.com/octo/cards.git", "https"),
        ("HTTP://example.com/cards", "http"),
        ("ssh://git@example.com/cards.git", "ssh"),
        ("git+ssh://example.com/cards.git", "ssh"),
        ("git@github.com:octo/cards.git", "ssh"),
        ("git://example.com/cards.git", "git"),
        ("ext::sh -c touch% /tmp/x", None),
        ("fd::17", None),
        ("https::https://example.com/x", None),  # a remote helper named like a transport
        ("ftp://example.com/cards.git", None),
        ("relative/path", None),
    ],
)
def test_protocol_of(url: str, protocol: str | None) -> None:
    assert protocol_of(url) == protocol


def test_allowing_a_transport_allows_that_one_after_the_hardening() -> None:
    env = allow_protocol_for(hardened_git_env({}), "/srv/cards.git")
    assert env["GIT_ALLOW_PROTOCOL"] == "file"
    assert settings(env)[-1] == ("protocol.file.allow", "always")  # last: it wins
    assert dict(settings(env))["protocol.ext.allow"] == "never"
    ssh = allow_protocol_for(hardened_git_env({}), "git@github.com:octo/cards.git")
    assert settings(ssh)[-2:] == [("protocol.ssh.allow", "always"), ("core.sshCommand", "ssh")]
    with pytest.raises(ValueError, match="git may not reach 'ext::sh -c true'"):
        allow_protocol_for(hardened_git_env({}), "ext::sh -c true")


def test_overriding_appends_after_every_setting() -> None:
    env = overriding({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "a.b", "GIT_CONFIG_VALUE_0": "1"},
                     [("a.b", "2"), ("c.d", "")])  # fmt: skip
    assert settings(env) == [("a.b", "1"), ("a.b", "2"), ("c.d", "")]
    assert settings(overriding({}, [("x.y", "z")])) == [("x.y", "z")]


CLEAN = [
    ("local", "core.repositoryformatversion", "0"),
    ("local", "remote.origin.url", "/srv/cards.git"),
    ("local", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
    ("local", "branch.main.remote", "origin"),
    ("local", "user.name", "orchestrator"),
    ("local", "filter.lfs.smudge", "git-lfs smudge -- %f"),  # switched off, not refused
    ("local", "core.hookspath", ".husky"),  # ignored by the hardening, not refused
    ("global", "url.git@github.com:.insteadof", "https://github.com/"),  # the user's own
    ("command", "protocol.allow", "never"),  # ours
]


def test_a_clone_as_the_clone_stage_makes_it_is_not_tampered() -> None:
    assert tampered_config(CLEAN) is None
    assert tampered_config([]) is None


@pytest.mark.parametrize(
    "name",
    [
        "include.path", "includeif.gitdir:**/worktrees/**.path", "includeif.onbranch:evil.path",
        "extensions.partialclone", "extensions.partialClone", "remote.origin.promisor",
        "remote.origin.partialclonefilter", "extensions.worktreeconfig", "core.worktree",
        "remote.origin.pushurl", "Remote.Origin.PushUrl", "remote./srv/cards.git.pushurl",
        "url./tmp/evil.git.insteadof", "url./tmp/evil.git.pushInsteadOf",
        "remote.origin.uploadpack", "remote.origin.receivepack", "remote.origin.vcs",
        "remote.origin.proxy", "http.proxy", "http.https://github.com.sslverify",
        "credential.helper", "credential.https://github.com.helper", "protocol.ext.allow",
        "protocol.allow",
    ],
)  # fmt: skip
def test_each_key_only_an_attacker_writes_is_refused(name: str) -> None:
    for scope in ("local", "worktree"):
        reason = tampered_config([*CLEAN, (scope, name, "x")])
        assert reason is not None and reason.startswith(
            f"the clone's own git config sets what only an attacker would: {name} ("
        )
    assert tampered_config([*CLEAN, ("global", name, "x")]) is None


def test_a_tampered_config_names_each_key_once() -> None:
    reason = tampered_config(
        [("local", "include.path", "a"), ("local", "include.path", "b"),
         ("local", "remote.origin.pushurl", "/evil")]
    )  # fmt: skip
    assert reason == (
        "the clone's own git config sets what only an attacker would: include.path (reads "
        "config from a file no listing of ours saw); remote.origin.pushurl (sends a push "
        "somewhere other than the remote's URL)"
    )


# ---- the clone's .git -------------------------------------------------------------------


def test_a_clones_git_dir_must_be_its_own_directory(tmp_path: Path) -> None:
    other = init_repo(tmp_path / "other")
    commit_files(other, {"a": "1\n"}, "other's")
    clone = tmp_path / "clone"
    init_repo(clone)
    assert clone_git_dir_problem(clone) is None
    dot_git = clone / ".git"
    (dot_git / "commondir").write_text("../../other/.git\n")
    assert clone_git_dir_problem(clone) == (
        f"{dot_git}/commondir points git at another repository's refs and config"
    )
    (dot_git / "commondir").unlink()
    dot_git.rename(tmp_path / "old-git")
    assert clone_git_dir_problem(clone) == f"{clone} has no .git"
    dot_git.write_text(f"gitdir: {tmp_path / 'other' / '.git'}\n")
    assert clone_git_dir_problem(clone) == (
        f"{dot_git} is a file (a gitdir: link to another repository), not a directory"
    )
    dot_git.unlink()
    dot_git.symlink_to(tmp_path / "other" / ".git")
    assert clone_git_dir_problem(clone) == (
        f"{dot_git} is a symbolic link (to {tmp_path / 'other' / '.git'}), not the clone's own"
    )
    dot_git.unlink()
    dot_git.mkdir()  # git would not take it for a repository, and search the parents
    assert clone_git_dir_problem(clone) == (
        f"{dot_git} is not a repository git recognises (its HEAD is missing or odd)"
    )


# ---- attacks, on real repositories ------------------------------------------------------


def promisor_clone(tmp: Path) -> tuple[Path, str, str, Path]:
    """A clone missing the objects of its last commit, whose config makes any missing
    object a lazy fetch from an ``ext::`` remote it allows by name (what per-protocol
    settings did to ``protocol.allow=never``)."""
    repo = init_repo(tmp / "clone")
    first = commit_files(repo, {"src/a.txt": "one\n"}, "first")
    second = commit_files(repo, {"src/a.txt": "two\n"}, "second")
    clone = Path(repo.working_dir)
    missing = [repo.git.rev_parse(f"{second}:{path}") for path in ("src", "src/a.txt")]
    for sha in missing:
        (clone / ".git" / "objects" / sha[:2] / sha[2:]).unlink()
    canary = tmp / "CANARY"
    for key, value in {
        "core.repositoryformatversion": "1", "extensions.partialClone": "origin",
        "remote.origin.url": f"ext::sh -c touch% {canary}", "remote.origin.promisor": "true",
        "protocol.ext.allow": "always", "protocol.file.allow": "always",
    }.items():  # fmt: skip
        repo.git.config(key, value)
    repo.close()
    return clone, first, second, canary


def base_env(tmp: Path) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": str(tmp / "home")}


def test_a_promisor_ext_remote_is_not_fetched_by_the_recipe_diff(tmp_path: Path) -> None:
    clone, first, second, canary = promisor_clone(tmp_path)
    env = hardened_git_env(base_env(tmp_path))
    assert changed_paths(LocalExecutor(), clone, env, first, second) is None  # missing, said
    assert not canary.exists(), "a lazy fetch ran the clone's ext:: command"


def test_a_promisor_ext_remote_is_not_fetched_by_the_recovery_diff(tmp_path: Path) -> None:
    clone, first, second, canary = promisor_clone(tmp_path)
    # What the recovery diff runs (orchestrator.app.recover._read_diff), and what a push
    # allowed one transport runs: neither may reach the ext:: remote.
    for env in (
        hardened_git_env(base_env(tmp_path)),
        allow_protocol_for(hardened_git_env(base_env(tmp_path)), str(tmp_path / "origin.git")),
    ):
        diff = LocalExecutor().capture_head(HeadRequest(
            ("git", "diff", "--no-color", "--no-ext-diff", "--no-textconv", first, second),
            cwd=clone, env=env, max_bytes=100_000, timeout_s=60,
        ))  # fmt: skip
        assert diff.exit_code != 0
        assert not canary.exists(), "a lazy fetch ran the clone's ext:: command"


def test_the_clones_own_config_is_read_without_its_includes(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "clone")
    commit_files(repo, {"a.txt": "1\n"}, "first")
    clone = Path(repo.working_dir)
    executor, env = LocalExecutor(), base_env(tmp_path)
    assert config_problem(executor, clone, env) is None
    # A file that does not exist yet: what it would say cannot matter, being named does.
    repo.git.config("include.path", "../later.cfg")
    assert config_problem(executor, clone, env) == tampered_config([("local", "include.path", "")])
    (clone / ".git" / "config").write_text("[core\n")  # git cannot read it: closed
    assert config_problem(executor, clone, env) == f"git could not list the config of {clone}"


def test_config_drift_sees_a_new_driver_and_a_new_include(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "clone")
    commit_files(repo, {"a.txt": "1\n"}, "first")
    clone = Path(repo.working_dir)
    executor, env = LocalExecutor(), base_env(tmp_path)
    git_env = clone_git_env(executor, clone, env)
    assert config_drift(executor, clone, env, git_env) is None
    repo.git.config("filter.evil.clean", "touch x")
    assert config_drift(executor, clone, env, git_env) == (
        "git's config in the clone changed: it now needs ['filter.evil.clean', "
        "'filter.evil.process', 'filter.evil.required', 'filter.evil.smudge'] set"
    )
    repo.git.config("includeIf.onbranch:main.path", "x.cfg")
    drift = config_drift(executor, clone, env, git_env)
    assert drift is not None and "includeif.onbranch:main.path (reads config" in drift


def test_a_work_tree_include_does_not_reach_the_verification_checkout(tmp_path: Path) -> None:
    """``includeIf "gitdir:**/worktrees/**"`` matches only in a linked work tree: the
    clone's listing never sees what it includes, so its filter was not switched off and
    ran when the checkout was filled. The checkout is made empty, its config read there,
    and it is refused before a file is written."""
    canary = tmp_path / "CANARY"
    evil = tmp_path / "evil.cfg"
    evil.write_text(f'[filter "evil"]\n\tsmudge = touch {canary}\n')
    repo = init_repo(tmp_path / "clone")
    commit_files(repo, {".gitattributes": "* filter=evil\n", "a.txt": "1\n"}, "first")
    repo.git.config("includeIf.gitdir:**/worktrees/**.path", str(evil))
    clone, checkout = Path(repo.working_dir), tmp_path / "run" / "verify-1"
    executor, env = LocalExecutor(), base_env(tmp_path)
    git_env = clone_git_env(executor, clone, env)
    unmade = add_checkout(executor, clone, checkout, git_env, tmp_path / "checkout.log")
    assert not canary.exists(), "the work tree's include ran its filter"
    assert unmade is not None and unmade.startswith(
        "the clone's own git config sets what only an attacker would: "
        "includeif.gitdir:**/worktrees/**.path ("
    )
    assert unmade.endswith("(read in the verification checkout)")
    assert not (checkout / "a.txt").exists()


def test_a_sound_clone_is_checked_out_whole(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "clone")
    head = commit_files(repo, {"a.txt": "1\n", "src/b.txt": "2\n"}, "first")
    clone, checkout = Path(repo.working_dir), tmp_path / "run" / "verify-1"
    executor, env = LocalExecutor(), base_env(tmp_path)
    git_env = clone_git_env(executor, clone, env)
    assert add_checkout(executor, clone, checkout, git_env, tmp_path / "checkout.log") is None
    assert (checkout / "src" / "b.txt").read_text() == "2\n"
    with git.Repo(checkout) as made:
        assert made.head.commit.hexsha == head and not made.is_dirty(untracked_files=True)
