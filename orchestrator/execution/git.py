"""The orchestrator's own git calls in a clone (not a stage's, not a recipe's): where
HEAD is, and putting a clone back after a failed recipe. All through the executor.

Everything inside a clone was written by someone we do not trust, its ``.git/config``
included, and git's config names programs git runs (hooks, fsmonitor, pager, filters,
diff and merge drivers, ssh, gpg). Every git call the orchestrator makes in a clone,
and every recipe command, runs with ``hardened_git_env``: settings passed through
``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` are command-line scope,
which beats repository config and which a recipe (it cannot set the environment) cannot
override. Drivers are per name, so ``driver_overrides`` switches off the ones a clone's
config names."""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from orchestrator.execution.executor import Executor

GIT_TIMEOUT_S = 60.0
GIT_KILL_AFTER_S = 5.0
MAX_CONFIG_LISTING_BYTES = 1_000_000

# Each one names a program git would run, or lets git reach outside the machine.
HARDENED_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("core.gitProxy", ""),
    ("sequence.editor", "true"),
    ("protocol.allow", "never"),
    ("credential.helper", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.ssh.defaultKeyCommand", "false"),
    ("gpg.x509.program", "false"),
    ("interactive.diffFilter", "cat"),
    ("uploadpack.packObjectsHook", ""),
    ("core.alternateRefsCommand", ""),
)
HARDENED_VARIABLES: dict[str, str] = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_SYSTEM": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_EDITOR": "true",
    "GIT_SEQUENCE_EDITOR": "true",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_PROTOCOL_FROM_USER": "0",
}
_IDENTITY = ("GIT_AUTHOR_", "GIT_COMMITTER_")
# Per-driver keys whose value is a program: an empty value means git runs nothing (a
# filter is skipped; a diff or merge driver fails, which is closed, not open).
_DRIVER_PROGRAM_KEYS = {
    "filter": ("clean", "smudge", "process"),
    "diff": ("command", "textconv"),
    "merge": ("driver",),
}


def hardened_git_env(
    base_env: Mapping[str, str], extra: Iterable[tuple[str, str]] = ()
) -> dict[str, str]:
    """``base_env`` without any ``GIT_*`` variable it carried (``GIT_DIR``,
    ``GIT_SSH_COMMAND``, ``GIT_CONFIG_PARAMETERS``…), plus git's hardening: hooks, fsmonitor,
    pagers, editors, prompts, protocols and signing programs off, system and global config
    ignored. ``extra`` settings follow (see ``driver_overrides``). Idempotent."""
    env = {k: v for k, v in base_env.items() if _kept(k)}
    env.update(HARDENED_VARIABLES)
    # The hardening comes last (git keeps the last value), and an ``extra`` that names
    # a hardened key in any spelling is dropped: nothing in it can switch one back on.
    hardened = {key.lower() for key, _ in HARDENED_CONFIG}
    settings = {k: v for k, v in extra if k.lower() not in hardened}
    settings.update(HARDENED_CONFIG)
    env["GIT_CONFIG_COUNT"] = str(len(settings))
    for index, (key, value) in enumerate(settings.items()):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def _kept(name: str) -> bool:
    # Who commits is harmless and a user's identity often lives only in the environment.
    return name.startswith(_IDENTITY) or not (name.startswith("GIT_") or name == "PAGER")


def driver_overrides(config_names: Iterable[str]) -> list[tuple[str, str]]:
    """For every filter, diff or merge driver ``config_names`` mention, the settings that
    stop git running its program (``filter.lfs.smudge`` → ``("filter.lfs.smudge", "")``)."""
    found: dict[str, str] = {}
    for name in config_names:
        if name.lower() == "diff.external":
            # An empty external diff fails every `git diff`: set only when one is named.
            found["diff.external"] = ""
            continue
        section, _, rest = name.partition(".")
        subsection, _, _key = rest.rpartition(".")
        programs = _DRIVER_PROGRAM_KEYS.get(section.lower())
        if programs is None or not subsection:
            continue
        for key in programs:
            found[f"{section.lower()}.{subsection}.{key}"] = ""
        if section.lower() == "filter":
            found[f"filter.{subsection}.required"] = "false"
    return sorted(found.items())


def parse_config_listing(data: bytes) -> list[tuple[str, str, str]]:
    """``git config -z --list --show-scope`` output as (scope, name, value) entries."""
    fields = data.decode("utf-8", "replace").split("\0")
    entries = []
    for scope, item in zip(fields[0::2], fields[1::2], strict=False):
        name, _, value = item.partition("\n")
        entries.append((scope, name, value))
    return entries


def identity_env(
    entries: Iterable[tuple[str, str, str]], base_env: Mapping[str, str]
) -> dict[str, str]:
    """Who commits, when only the user's global config says so: global config is
    ignored by every hardened call, and a recipe's commit still needs an author. The
    clone's own identity, or one already in the environment, wins."""
    found: dict[str, dict[str, str]] = {}
    for scope, name, value in entries:
        if name.lower() in ("user.name", "user.email"):
            found.setdefault(name.lower(), {})[scope] = value
    env: dict[str, str] = {}
    for key, field in (("user.name", "NAME"), ("user.email", "EMAIL")):
        scopes = found.get(key, {})
        if "global" not in scopes or "local" in scopes or "worktree" in scopes:
            continue
        for role in ("AUTHOR", "COMMITTER"):
            if f"GIT_{role}_{field}" not in base_env:
                env[f"GIT_{role}_{field}"] = scopes["global"]
    return env


def read_clone_config(
    executor: Executor, clone: Path, base_env: Mapping[str, str]
) -> list[tuple[str, str, str]]:
    """The clone's config (includes followed) and the user's global config, as
    (scope, name, value) entries. Reading config runs nothing."""
    probe = hardened_git_env(base_env)
    del probe["GIT_CONFIG_GLOBAL"]  # read here for the identity only
    listing = executor.capture_head(
        ("git", "config", "-z", "--list", "--includes", "--show-scope"),
        cwd=clone,
        env=probe,
        max_bytes=MAX_CONFIG_LISTING_BYTES,
        timeout_s=30,
    )
    return parse_config_listing(listing.data)


def git_env_for(
    entries: Iterable[tuple[str, str, str]], base_env: Mapping[str, str]
) -> dict[str, str]:
    """The hardened environment for a clone whose config is ``entries``: every driver
    it names switched off, the user's identity carried over from their global config."""
    entries = list(entries)
    drivers = driver_overrides(name for scope, name, _ in entries if scope != "command")
    env = hardened_git_env(base_env, drivers)
    env.update(identity_env(entries, base_env))
    return env


def configured_hooks_path(entries: Iterable[tuple[str, str, str]]) -> str | None:
    """Where the clone's own config points ``core.hooksPath`` (the last value wins)."""
    found = None
    for scope, name, value in entries:
        if scope in ("local", "worktree") and name.lower() == "core.hookspath":
            found = value
    return found


def clone_git_env(executor: Executor, clone: Path, base_env: Mapping[str, str]) -> dict[str, str]:
    """``git_env_for`` the clone's config as it is now."""
    return git_env_for(read_clone_config(executor, clone, base_env), base_env)


def head_commit(executor: Executor, clone: Path, env: Mapping[str, str]) -> str | None:
    """The commit HEAD names, or None when there is none (no repository, no commit)."""
    head = executor.capture_head(
        ("git", "rev-parse", "HEAD"),
        cwd=clone,
        env=hardened_git_env(env, _extra_of(env)),
        max_bytes=100,
        timeout_s=30,
    )
    if head.exit_code != 0:
        return None
    return head.data.decode().strip() or None


def _extra_of(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """The settings an already hardened ``env`` carries, so hardening it again keeps
    the driver overrides ``clone_git_env`` found."""
    try:
        count = int(env.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        return []
    carried = [
        (env[f"GIT_CONFIG_KEY_{i}"], env.get(f"GIT_CONFIG_VALUE_{i}", ""))
        for i in range(count)
        if f"GIT_CONFIG_KEY_{i}" in env
    ]
    # Only driver overrides are kept: an inherited GIT_CONFIG_* may name anything.
    return [(k, v) for k, v in carried if (k, v) in driver_overrides([k])]


def keep_and_restore(
    executor: Executor,
    clone: Path,
    *,
    keep_as: str,
    restore_to: str | None,
    env: Mapping[str, str],
    log_prefix: Path,
) -> bool:
    """Keep what the clone's HEAD is now as the ref ``keep_as`` (for inspection), then
    reset the clone hard to ``restore_to`` and drop untracked files. True when all of
    it succeeded (never when there was nothing to restore to). A reset checks files out,
    so the clone's drivers are switched off first (``clone_git_env``)."""
    git_env = clone_git_env(executor, clone, env)
    steps: list[tuple[str, ...]] = [("git", "update-ref", keep_as, "HEAD")]
    if restore_to is not None:
        steps += [("git", "reset", "--hard", restore_to), ("git", "clean", "-fd")]
    ok = True
    for index, argv in enumerate(steps, start=1):
        outcome = executor.run(
            argv,
            cwd=clone,
            env=git_env,
            log_path=log_prefix.with_name(f"{log_prefix.name}-{index}.log"),
            timeout_s=GIT_TIMEOUT_S,
            kill_after_s=GIT_KILL_AFTER_S,
        )
        ok = ok and outcome.ok
    return ok and restore_to is not None


def status_entries(executor: Executor, clone: Path, env: Mapping[str, str]) -> list[str] | None:
    """``git status --porcelain`` entries (``" D tests/x.py"``, ``"?? new"``), or None
    when git could not say."""
    status = executor.capture_head(
        ("git", "status", "--porcelain=v1", "-z", "--untracked-files=all"),
        cwd=clone,
        env=hardened_git_env(env, _extra_of(env)),
        max_bytes=MAX_CONFIG_LISTING_BYTES,
        timeout_s=GIT_TIMEOUT_S,
    )
    if status.exit_code != 0 or status.truncated:
        return None
    entries: list[str] = []
    fields = status.data.decode("utf-8", "replace").split("\0")
    index = 0
    while index < len(fields):
        field = fields[index]
        index += 1
        if not field:
            continue
        entries.append(field)
        if field[:1] in ("R", "C"):  # a rename's source follows as its own field
            index += 1
    return entries


def changed_paths(
    executor: Executor, clone: Path, env: Mapping[str, str], since: str, until: str
) -> list[str] | None:
    """The paths the commits ``since..until`` add, change, delete or rename (both
    names of a rename), or None when git could not say."""
    diff = executor.capture_head(
        ("git", "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv",
         since, until),
        cwd=clone,
        env=hardened_git_env(env, _extra_of(env)),
        max_bytes=MAX_CONFIG_LISTING_BYTES,
        timeout_s=GIT_TIMEOUT_S,
    )  # fmt: skip
    if diff.exit_code != 0 or diff.truncated:
        return None
    return [p for p in diff.data.decode("utf-8", "replace").split("\0") if p]


def add_checkout(
    executor: Executor, clone: Path, checkout: Path, env: Mapping[str, str], log_path: Path
) -> bool:
    """A clean checkout of the clone's HEAD at ``checkout`` (a detached work tree that
    shares the clone's objects and refs): what a push of HEAD would ship."""
    remove_checkout(executor, clone, checkout, env, log_path)  # a crashed run's leftover
    outcome = executor.run(
        ("git", "worktree", "add", "--detach", str(checkout), "HEAD"),
        cwd=clone,
        env=hardened_git_env(env, _extra_of(env)),
        log_path=log_path,
        timeout_s=GIT_TIMEOUT_S,
        kill_after_s=GIT_KILL_AFTER_S,
    )
    return outcome.ok


def remove_checkout(
    executor: Executor, clone: Path, checkout: Path, env: Mapping[str, str], log_path: Path
) -> None:
    """Remove a checkout made by ``add_checkout`` and forget it in the clone."""
    if checkout.exists():
        executor.run(
            ("git", "worktree", "remove", "--force", "--force", str(checkout)),
            cwd=clone,
            env=hardened_git_env(env, _extra_of(env)),
            log_path=log_path,
            timeout_s=GIT_TIMEOUT_S,
            kill_after_s=GIT_KILL_AFTER_S,
        )
        if checkout.exists() and not checkout.is_symlink():
            shutil.rmtree(checkout, ignore_errors=True)
    executor.run(
        ("git", "worktree", "prune"),
        cwd=clone,
        env=hardened_git_env(env, _extra_of(env)),
        log_path=log_path,
        timeout_s=GIT_TIMEOUT_S,
        kill_after_s=GIT_KILL_AFTER_S,
    )
