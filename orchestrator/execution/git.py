"""Hardened git: the environment every git call in a clone runs with, and what a clone's
own config may not say. The orchestrator's own calls (``git_calls``), the recipes and the
stage programs all take it from here, so it stays light: no runner is loaded with it.

Everything inside a clone was written by someone we do not trust, its ``.git/config``
included, and git's config names programs git runs (hooks, fsmonitor, pager, filters,
diff and merge drivers, ssh, gpg). Every git call the orchestrator makes in a clone,
and every recipe command, runs with ``hardened_git_env``: settings passed through
``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` are command-line scope,
which beats repository config and which a recipe (it cannot set the environment) cannot
override. Drivers are per name, so ``driver_overrides`` switches off the ones a clone's
config names.

Some settings cannot be switched off from outside, because they say where git reads more
config or where it fetches and pushes: a clone whose own config holds one is refused
(``tampered_config``), as is a clone whose ``.git`` is not its own directory
(``clone_git_dir_problem``). No transport is allowed, except the one our own code names
for one command (``allow_protocol_for``)."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the stage programs import this module: no runner at start-up
    from orchestrator.execution.executor import CapturedHead, Executor

MAX_CONFIG_LISTING_BYTES = 1_000_000

# Every transport git knows. ``protocol.allow=never`` alone is not enough: a clone's own
# ``protocol.<name>.allow=always`` is more specific, and git prefers it whatever its scope.
PROTOCOLS = ("ext", "fd", "file", "git", "http", "https", "ssh")
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
    *((f"protocol.{name}.allow", "never") for name in PROTOCOLS),
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
    # Set, even empty, it replaces every protocol.* setting of every scope: an empty
    # list allows no transport at all (``allow_protocol_for`` names one for one command).
    "GIT_ALLOW_PROTOCOL": "",
    # git 2.44 and later: a missing object is an error, never a fetch from a promisor
    # remote the clone names (older versions ignore it; the protocols above stop them).
    "GIT_NO_LAZY_FETCH": "1",
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
    return overriding(env, settings.items())  # env carries no GIT_CONFIG_* of its own


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


# The config git sees in a clone, includes followed (what the hardened calls will apply),
# and the config the clone itself holds, includes not followed: an include names a file
# whoever wrote the clone controls, may not exist yet or match only elsewhere, and its
# being there is the whole answer. Listing config runs nothing.
CONFIG_LISTING = ("git", "config", "-z", "--list", "--includes", "--show-scope")
OWN_CONFIG_LISTING = ("git", "config", "-z", "--list", "--no-includes", "--show-scope")
_OWN_SCOPES = ("local", "worktree")


def listing_env(base_env: Mapping[str, str]) -> dict[str, str]:
    """The hardened environment, with the user's global config readable: listed for
    their identity only (``identity_env``), never applied to a git call in a clone."""
    probe = hardened_git_env(base_env)
    del probe["GIT_CONFIG_GLOBAL"]
    return probe


def read_clone_config(
    executor: Executor, clone: Path, base_env: Mapping[str, str]
) -> list[tuple[str, str, str]]:
    """The clone's config (includes followed) and the user's global config, as
    (scope, name, value) entries. Reading config runs nothing."""
    return parse_config_listing(_list(executor, clone, CONFIG_LISTING, listing_env(base_env)).data)


def read_own_config(
    executor: Executor, clone: Path, base_env: Mapping[str, str]
) -> list[tuple[str, str, str]] | None:
    """What the clone's own config files say (``OWN_CONFIG_LISTING``), or None when git
    could not list them all."""
    listing = _list(executor, clone, OWN_CONFIG_LISTING, hardened_git_env(base_env))
    if listing.exit_code != 0 or listing.truncated:
        return None
    return parse_config_listing(listing.data)


def _list(
    executor: Executor, clone: Path, listing: tuple[str, ...], env: Mapping[str, str]
) -> CapturedHead:
    from orchestrator.execution.process import HeadRequest  # ~7 ms the stage programs skip

    return executor.capture_head(
        HeadRequest(listing, cwd=clone, env=env, max_bytes=MAX_CONFIG_LISTING_BYTES, timeout_s=30)
    )


# What a clone's own config may not say, and why. The hardening switches off, in every
# call, what names a program to run; these cannot be switched off from outside, because
# they say where git reads more config, where it fetches or pushes, or what runs when it
# does. None of them has a place in a clone the clone stage made.
REFUSED_CONFIG: tuple[tuple[str, str], ...] = (
    ("include.*", "reads config from a file no listing of ours saw"),
    ("includeif.*", "reads config from a file only where a condition holds: the "
                    "verifier's checkout, a branch"),
    ("extensions.partialclone", "makes a missing object a fetch from a remote the clone names"),
    ("remote.*.promisor", "makes a missing object a fetch from this remote"),
    ("remote.*.partialclonefilter", "makes this remote a partial clone's lazy source"),
    ("extensions.worktreeconfig", "gives each work tree a config file of its own"),
    ("core.worktree", "moves the work tree: a checkout writes outside the clone"),
    ("remote.*.pushurl", "sends a push somewhere other than the remote's URL"),
    ("url.*.insteadof", "rewrites the URL of every fetch and push"),
    ("url.*.pushinsteadof", "rewrites the URL of every push"),
    ("remote.*.uploadpack", "names the program a fetch from a path runs"),
    ("remote.*.receivepack", "names the program a push to a path runs"),
    ("remote.*.vcs", "names the remote helper program a fetch or push runs"),
    ("remote.*.proxy", "sends a fetch or push through a proxy of its choosing"),
    ("http.*", "proxy, TLS checks, headers: where a push with our token goes, whom it trusts"),
    ("credential.*", "a helper program given, or giving out, a push's credentials"),
    ("protocol.*", "widens the transports git may use"),
)  # fmt: skip


def tampered_config(entries: Iterable[tuple[str, str, str]]) -> str | None:
    """Why the clone's own config (``local`` and ``worktree`` entries) cannot be worked
    in, naming each refused key once; None when it holds nothing ``REFUSED_CONFIG`` lists."""
    found: dict[str, str] = {}
    for scope, name, _value in entries:
        if scope not in _OWN_SCOPES:
            continue
        for pattern, why in REFUSED_CONFIG:
            if fnmatchcase(name.lower(), pattern):
                found.setdefault(name, why)
                break
    if not found:
        return None
    named = "; ".join(f"{name} ({why})" for name, why in found.items())
    return f"the clone's own git config sets what only an attacker would: {named}"


def config_problem(executor: Executor, clone: Path, base_env: Mapping[str, str]) -> str | None:
    """``tampered_config`` over the clone's own config as it is now (closed: a listing
    git could not make is a problem too)."""
    entries = read_own_config(executor, clone, base_env)
    if entries is None:
        return f"git could not list the config of {clone}"
    return tampered_config(entries)


# What makes a directory a repository to git: without them it searches the parents.
_GIT_DIR_PARTS = (("HEAD", stat.S_ISREG), ("objects", stat.S_ISDIR), ("refs", stat.S_ISDIR))


def clone_git_dir_problem(clone: Path) -> str | None:
    """Why ``clone/.git`` is not the clone's own repository, or None. A symbolic link or a
    ``gitdir:`` file sends every git call to a repository someone else chose; a ``.git``
    git does not recognise (no HEAD, objects or refs) makes git look for one in the
    directories above; a ``commondir`` file inside it borrows another's refs and config.
    Reads the file system only."""
    dot_git = clone / ".git"
    try:
        mode = dot_git.lstat().st_mode
    except FileNotFoundError:
        return f"{clone} has no .git"
    except OSError as exc:
        return f"cannot look at {dot_git}: {exc.strerror}"
    if stat.S_ISLNK(mode):
        return f"{dot_git} is a symbolic link (to {os.readlink(dot_git)}), not the clone's own"
    if stat.S_ISREG(mode):
        return f"{dot_git} is a file (a gitdir: link to another repository), not a directory"
    if not stat.S_ISDIR(mode):
        return f"{dot_git} is not a directory"
    for name, is_kind in _GIT_DIR_PARTS:
        try:
            kind_ok = is_kind((dot_git / name).lstat().st_mode)
        except OSError:
            kind_ok = False
        if not kind_ok:
            return f"{dot_git} is not a repository git recognises (its {name} is missing or odd)"
    if os.path.lexists(dot_git / "commondir"):
        return f"{dot_git}/commondir points git at another repository's refs and config"
    return None


# ``<transport>::<address>``: a remote helper, ``ext::`` and ``fd::`` among them.
_HELPER_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*::")
_URL_PROTOCOLS = {"file": "file", "git": "git", "http": "http", "https": "https",
                  "ssh": "ssh", "git+ssh": "ssh", "ssh+git": "ssh"}  # fmt: skip


def protocol_of(url: str) -> str | None:
    """The transport git would use for ``url`` (an absolute path is ``file``, ``host:path``
    is ``ssh``), or None for one our own code never uses: a remote helper (``ext::``,
    ``fd::``…), an unknown scheme, a relative path."""
    if _HELPER_URL.match(url):
        return None
    if url.startswith("/"):
        return "file"
    scheme, sep, _ = url.partition("://")
    if sep:
        return _URL_PROTOCOLS.get(scheme.lower())
    if ":" in url.partition("/")[0]:
        return "ssh"  # scp-like: user@host:path
    return None


def overriding(env: Mapping[str, str], settings: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``env`` with ``settings`` after every setting it carries, so they win over the
    hardening too: for one command our own code runs, with values our own code chose
    (never anything a clone, a ticket or a model wrote)."""
    out = dict(env)
    count = int(out.get("GIT_CONFIG_COUNT", "0"))
    for key, value in settings:
        out[f"GIT_CONFIG_KEY_{count}"] = key
        out[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    out["GIT_CONFIG_COUNT"] = str(count)
    return out


def allow_protocol_for(env: Mapping[str, str], url: str) -> dict[str, str]:
    """``env`` (hardened) for the one command that fetches from or pushes to ``url``: its
    transport allowed, every other still refused. Over ssh, git may run ssh itself.
    Raises ValueError for a transport ``protocol_of`` does not name."""
    protocol = protocol_of(url)
    if protocol is None:
        raise ValueError(
            f"git may not reach {url!r}: not an absolute path, nor a file, git, http(s) or ssh URL"
        )
    settings = [(f"protocol.{protocol}.allow", "always")]
    if protocol == "ssh":
        settings.append(("core.sshCommand", "ssh"))
    return overriding({**env, "GIT_ALLOW_PROTOCOL": protocol}, settings)


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


def config_drift(
    executor: Executor, clone: Path, base_env: Mapping[str, str], git_env: Mapping[str, str]
) -> str | None:
    """Why ``git_env``, made for the clone's config as it was, no longer fits it: the
    clone's ``.git`` or own config became one we refuse, or, recomputed from the config
    as it is now, the environment would switch off or carry something ``git_env`` does
    not (a new driver, a new identity). None when it still fits."""
    problem = clone_git_dir_problem(clone) or config_problem(executor, clone, base_env)
    if problem is not None:
        return problem
    fresh = git_env_for(read_clone_config(executor, clone, base_env), base_env)
    before, now = config_settings(git_env), config_settings(fresh)
    changed = sorted(
        {k for k in before.keys() | now.keys() if before.get(k) != now.get(k)}
        | {k for k in fresh.keys() | git_env.keys() if k.startswith(_IDENTITY)
           and fresh.get(k) != git_env.get(k)}
    )  # fmt: skip
    if not changed:
        return None
    return f"git's config in the clone changed: it now needs {changed} set"


def config_settings(env: Mapping[str, str]) -> dict[str, str]:
    """The GIT_CONFIG_KEY_n/VALUE_n settings ``env`` carries (the last of a key wins)."""
    try:
        count = int(env.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        return {}
    return {
        env[f"GIT_CONFIG_KEY_{i}"]: env.get(f"GIT_CONFIG_VALUE_{i}", "")
        for i in range(count)
        if f"GIT_CONFIG_KEY_{i}" in env
    }


def carried_overrides(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """The settings an already hardened ``env`` carries, so hardening it again keeps
    the driver overrides ``clone_git_env`` found."""
    # Only driver overrides are kept: an inherited GIT_CONFIG_* may name anything.
    return [(k, v) for k, v in config_settings(env).items() if (k, v) in driver_overrides([k])]
