"""The one sandbox profile for everything the orchestrator runs for a ticket: its stages
(engines included), its checks and the verifier. docs/architecture/sandbox.md states it,
one table per role. What a sandboxed process sees is a list of what is allowed:

  * the system's read-only directories (``sandbox.SYSTEM_DIRS``) and this installation;
    a private /tmp and HOME, sized by ``[sandbox] scratch_mb``; nothing of any home,
    /srv, /var, /run or the host's /tmp;
  * of the state dir, only what this attempt works on: the run's clone (the
    verification checkout, for the verifier) and the ticket it was given; a stage that
    works in the run dir (clone) or records a result there (open-pr) gets the run dir;
  * of the config's directory, only the files its configured command names under
    ``{root}`` (``{python} {root}/checks/lint.py``), never the directory; a file that
    holds a secret (``orchestrator.env``, the approval key, a pgpass file) is empty even
    inside a path the stage declares readable;
  * under a check or the verifier the clone's ``.git`` is read-only: a check cannot plant
    a hook, a config or a ref for the stages and the push that follow;
  * its own PID namespace; no network unless the stage declares it (an engine keeps it),
    and then only the hosts of its allow-list, through the egress proxy outside
    (``domain/egress.py``, ``egress_proxy.py``), unless it opts out with ``egress = ["*"]``;
    no unix socket can be created, but for a coding engine a datagram one (what its
    own sandbox needs: ``SandboxSpec.unix_datagrams``); limits on processes, memory and file
    size.

``profile`` is pure, so the profile is pinned by tests without starting anything.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from orchestrator.domain.egress import NetworkAccess
from orchestrator.domain.errors import ConfigError
from orchestrator.domain.keys import ENV_FILE
from orchestrator.domain.sandbox import SandboxConfig, SandboxOptions
from orchestrator.execution.executor import Executor, HeadRequest
from orchestrator.execution.sandbox import (
    HIDDEN_ALWAYS,
    SANDBOX_ENV,
    SandboxLimits,
    SandboxSpec,
)
from orchestrator.execution.stage_env import BASE_ENV_NAMES, BASE_ENV_PREFIXES

Role = Literal["stage", "engine", "check"]
_MB = 1024 * 1024


@dataclass(frozen=True)
class RunPlaces:
    """Where a run's things are, as the sandbox needs to know them."""

    state_dir: Path
    run_dir: Path
    clone: Path  # the run's own clone: the verifier's checkout shares its .git
    ticket_dir: Path
    repository: str  # a URL, or the path of a local repository
    config_root: Path
    home: Path | None  # the real home of whoever runs the orchestrator
    # The run's decision files: a side-effectful stage tells them (the GitHub open-pr
    # writes their summaries into the pull request), read-only.
    decisions: tuple[Path, ...] = ()
    # The files that hold a secret (``secret_files``): masked wherever they would show.
    secrets: tuple[Path, ...] = ()


def profile(
    options: SandboxOptions,
    role: Role,
    *,
    cwd: Path,
    places: RunPlaces,
    limits: SandboxConfig,
    access: NetworkAccess,
    identity: Mapping[str, str] = {},
    side_effectful: bool = False,
    named: tuple[Path, ...] = (),
) -> SandboxSpec:
    """The sandbox a stage (``role`` stage or engine) or a check (or the verifier) runs
    in, in ``cwd``, reaching what ``access`` allows (``domain.egress.network_access``).
    ``named``: the paths under the config's directory its configured command names
    (``config_files``), shown read-only."""
    writable = [cwd]
    writable += [
        Path(os.path.normpath(cwd / _expand(extra, places.home))) for extra in options.writable
    ]
    if role != "check" and (side_effectful or cwd == places.run_dir):
        writable.append(places.run_dir)
    local_repository = Path(places.repository) if Path(places.repository).is_absolute() else None
    if side_effectful and local_repository is not None:
        writable.append(local_repository)  # a push to a repository on this machine
    # A named path the stage may write (``{root}/counts/x`` under a writable
    # ``{root}/counts``) stays writable: shown read-only on top, it could not be.
    readable = [p for p in named if not any(p.is_relative_to(w) for w in writable)]
    readable.append(places.ticket_dir)
    if local_repository is not None:
        readable.append(local_repository)
    readable += [_expand(path, places.home) for path in options.readable]
    if side_effectful:
        readable += places.decisions
    if role == "engine":
        # Its prompt is a file the orchestrator wrote in the run dir (aider's
        # --message-file, a command engine's {prompt_file}): this run's own, read-only.
        readable.append(places.run_dir)
    read_only = [places.clone / ".git"] if role == "check" else []
    return SandboxSpec(
        writable=tuple(dict.fromkeys(writable)),
        network=access.mode == "open",
        egress=access.policy if access.mode == "proxy" else None,
        readable=tuple(readable),
        hidden=hidden_for(places.state_dir, places.home, places.config_root),
        read_only=tuple(read_only),
        masked=places.secrets,
        env_set={**SANDBOX_ENV, **identity},
        # A JavaScript or Java engine reserves far more address space than it uses.
        limits=sandbox_limits(limits, memory=role != "engine"),
        # Codex's own sandbox (workspace-write) cannot start without one (issue 42).
        unix_datagrams=role == "engine",
    )


def git_profile(
    clone: Path,
    *,
    writes: bool,
    state_dir: Path,
    home: Path | None,
    limits: SandboxConfig,
    config_root: Path | None = None,
    secrets: tuple[Path, ...] = (),
) -> SandboxSpec:
    """The sandbox of the orchestrator's own git calls in ``clone``: the clone readable,
    and writable (with the run dir around it, where ``git worktree add`` makes the
    verification checkout) only for a call that ``writes``; no network; nothing else of
    the state dir, the config's directory or any home; of the environment it is given,
    the base (``stage_env.BASE_ENV``) and git's own (hardening and identity)."""
    return SandboxSpec(
        writable=(clone, clone.parent) if writes else (),
        readable=(clone,),
        hidden=hidden_for(state_dir, home, config_root),
        masked=secrets,
        env_names=BASE_ENV_NAMES,
        env_prefixes=(*BASE_ENV_PREFIXES, "GIT_"),
        env_set={**SANDBOX_ENV},
        limits=sandbox_limits(limits),
        # Only whether git succeeded matters here: no init of ours to start (issue 41).
        reports_signal=False,
    )


def sandbox_limits(limits: SandboxConfig, *, memory: bool = True) -> SandboxLimits:
    return SandboxLimits(
        max_processes=limits.max_processes,
        max_memory_bytes=limits.max_memory_mb * _MB if memory else 0,
        max_file_bytes=limits.max_file_mb * _MB,
        scratch_bytes=limits.scratch_mb * _MB,
    )


def hidden_for(
    state_dir: Path, home: Path | None, config_root: Path | None = None
) -> tuple[Path, ...]:
    """What every sandbox of a run hides wherever a shown path holds it: every home, the
    real one, the state dir (other tickets' clones, the keys, the ledger) and the config's
    directory (its env file holds every key)."""
    return (
        *HIDDEN_ALWAYS, state_dir, *((home,) if home is not None else ()),
        *((config_root,) if config_root is not None else ()),
    )  # fmt: skip


def secret_files(
    config_root: Path,
    approval_key: Path,
    home: Path | None,
    environ: Mapping[str, str],
    also: tuple[Path, ...] = (),
) -> tuple[Path, ...]:
    """The files this orchestrator knows hold a secret: the env file ``orchestrator
    init`` writes beside the config (every key), the approval key's directory, the
    PostgreSQL password files libpq reads (``$PGPASSFILE``, ``~/.pgpass``), and ``also``
    (the fleet's signing key). Each as given and with its links resolved (a mask covers
    the file a link names, too)."""
    found = [config_root / ENV_FILE, approval_key.parent, *also]
    if home is not None:
        found.append(home / ".pgpass")
    if environ.get("PGPASSFILE"):
        found.append(Path(environ["PGPASSFILE"]))
    both = [variant for path in found for variant in (path, Path(os.path.realpath(path)))]
    return tuple(dict.fromkeys(both))


# ``{root}/<path>`` inside an argument (a shell line too): the path runs to the first
# character a shell would end a word at.
_ROOT_PATH = re.compile(r"\{root\}(/[^\s'\"`;|&<>()$]+)")


def config_files(command: tuple[str, ...], root: Path) -> tuple[Path, ...]:
    """The paths under the config's directory that a configured command names
    (``{python} {root}/checks/lint.py``): the ones a sandboxed stage or check is shown
    of it. Never the directory itself, nor a path that climbs out of it."""
    found: list[Path] = []
    for arg in command:
        for match in _ROOT_PATH.finditer(arg):
            path = Path(os.path.normpath(f"{root}{match.group(1)}"))
            if path != root and path.is_relative_to(root):
                found.append(path)
    return tuple(dict.fromkeys(found))


def home_of(environ: Mapping[str, str]) -> Path | None:
    home = environ.get("HOME")
    return Path(home) if home else None


def _expand(path: str, home: Path | None) -> Path:
    if path == "~" or path.startswith("~/"):
        if home is None:
            raise ConfigError(f"config error: sandbox path {path!r} names ~, but $HOME is not set")
        return home / path[2:]
    return Path(path)


_IDENTITY_KEYS = {"user.name": "NAME", "user.email": "EMAIL"}
# Per executor (a test's recording executor sees the read), then per home.
_identities: dict[tuple[int, str, str], dict[str, str]] = {}


def parse_identity(listing: bytes, environ: Mapping[str, str]) -> dict[str, str]:
    """``git config -z --get-regexp`` output for user.name/user.email as the
    GIT_AUTHOR_*/GIT_COMMITTER_* variables ``environ`` does not already set."""
    found: dict[str, str] = {}
    for item in listing.decode("utf-8", "replace").split("\0"):
        name, _, value = item.partition("\n")
        field = _IDENTITY_KEYS.get(name.lower())
        if field is not None and value:
            for role in ("AUTHOR", "COMMITTER"):
                found[f"GIT_{role}_{field}"] = value
    return {k: v for k, v in found.items() if k not in environ}


def config_identity(
    executor: Executor, env: Mapping[str, str], *scope: str, timeout_s: float
) -> dict[str, str]:
    """What ``git config [scope]`` says of user.name/user.email (``parse_identity``);
    empty where git says nothing, or is not there. Reading config runs nothing."""
    argv = ("git", "config", *scope, "-z", "--get-regexp", r"^user\.(name|email)$")
    request = HeadRequest(argv, cwd=Path("/"), env=env, max_bytes=64 * 1024, timeout_s=timeout_s)
    listing = executor.capture_head(request)
    return parse_identity(listing.data if listing.exit_code == 0 else b"", {})


def global_identity(executor: Executor, environ: Mapping[str, str]) -> dict[str, str]:
    """Who commits, from the global git config of whoever runs the orchestrator: the
    sandbox hides their home, and a commit made inside must still be theirs. Read once
    per executor and home (reading config runs nothing)."""
    home = environ.get("HOME", "")
    key = (id(executor), home, environ.get("GIT_CONFIG_GLOBAL", ""))
    if key not in _identities:
        env = {"PATH": environ.get("PATH", os.defpath), "HOME": home}
        if environ.get("GIT_CONFIG_GLOBAL"):
            env["GIT_CONFIG_GLOBAL"] = environ["GIT_CONFIG_GLOBAL"]
        _identities[key] = config_identity(executor, env, "--global", timeout_s=30)
    return {k: v for k, v in _identities[key].items() if k not in environ}
