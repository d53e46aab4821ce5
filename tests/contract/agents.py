"""The released coding agents at pinned versions, installed from the registries into a
cache outside the clone, for the contract tests.

    <cache>/npm     npm install --prefix: @anthropic-ai/claude-code and @openai/codex
    <cache>/aider   a venv of its own (python -m venv + pip): aider-chat

``<cache>`` is ``$ORCHESTRATOR_AGENT_CACHE``, else ``~/.cache/orchestrator-contract/<hash>``
where the hash names the pinned versions (a new pin installs beside the old one, never
over it). Each part is installed once and then found by its marker file; pytest-xdist
workers take a file lock per part, so one installs while the others wait and then find it done.

Where the registry cannot be reached the tests skip with the reason printed, except under
``CI=true``, where they fail: CI must run them, not quietly stop looking. A registry that
answers but an install that still fails is a failure everywhere.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

CLAUDE_CODE_VERSION = "2.1.332"
CODEX_VERSION = "0.171.0"
AIDER_VERSION = "0.86.1"

NPM_PACKAGES = {"@anthropic-ai/claude-code": CLAUDE_CODE_VERSION, "@openai/codex": CODEX_VERSION}
PIP_PACKAGES = {"aider-chat": AIDER_VERSION}

# npm and pip left to themselves take minutes to give up on an unreachable registry.
INSTALL_TIMEOUT_S = 900
PROBE_TIMEOUT_S = 30
MARKER = ".contract-installed"
# The line of a failed probe that says why (npm's FetchError, pip's ERROR or retry warning).
_TELLING = ("reason:", "FetchError", "ERROR:", "Error:", "NewConnectionError")
# Quiet installs: no update notices, audits, funding pleas or version checks.
_QUIET = {
    "npm_config_update_notifier": "false",
    "npm_config_audit": "false",
    "npm_config_fund": "false",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
}


def versions_hash() -> str:
    pins = json.dumps({**NPM_PACKAGES, **PIP_PACKAGES}, sort_keys=True)
    return hashlib.sha256(pins.encode()).hexdigest()[:12]


def cache_dir(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    chosen = env.get("ORCHESTRATOR_AGENT_CACHE")
    if chosen:
        return Path(chosen).expanduser().resolve()
    return Path.home() / ".cache" / "orchestrator-contract" / versions_hash()


class RegistryUnreachable(Exception):
    """The install failed and the registry does not answer: skip (fail in CI)."""


@contextlib.contextmanager
def _install_lock(cache: Path, part: str) -> Iterator[None]:
    """One install of ``part`` at a time; the parts install side by side."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".{part}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def _run(argv: list[str], log: Path) -> int:
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(argv)}\n".encode())
        out.flush()
        try:
            done = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **_QUIET},
                timeout=INSTALL_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            out.write(f"timed out after {INSTALL_TIMEOUT_S} s\n".encode())
            return 124
        except FileNotFoundError as exc:
            out.write(f"{exc}\n".encode())
            return 127
    return done.returncode


def _probe(argv: list[str]) -> str | None:
    """None when the registry answers, else what the probe said."""
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env={**os.environ, **_QUIET},
            timeout=PROBE_TIMEOUT_S,
        )
    except (subprocess.TimeoutExpired, FileNotFoundError) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    telling = [line for line in lines if any(word in line for word in _TELLING)]
    return (telling or lines or [f"exit {done.returncode}"])[0]


def _tail(log: Path, lines: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _npm_versions_match(prefix: Path) -> bool:
    for package, version in NPM_PACKAGES.items():
        meta = prefix / "node_modules" / package / "package.json"
        try:
            if json.loads(meta.read_text()).get("version") != version:
                return False
        except (OSError, ValueError):
            return False
    return True


def _install_npm(cache: Path) -> Path:
    prefix = cache / "npm"
    if (prefix / MARKER).exists():
        return prefix
    if prefix.exists() and not _npm_versions_match(prefix):
        shutil.rmtree(prefix)
    prefix.mkdir(parents=True, exist_ok=True)
    log = cache / "npm-install.log"
    npm = shutil.which("npm")
    if npm is None:
        raise RegistryUnreachable("npm is not on PATH")
    pins = [f"{name}@{version}" for name, version in NPM_PACKAGES.items()]
    argv = [npm, "install", "--prefix", str(prefix), "--save-exact", "--no-audit", "--no-fund"]
    if _run([*argv, *pins], log) != 0 or not _npm_versions_match(prefix):
        unreachable = _probe([npm, "ping"])
        if unreachable is not None:
            raise RegistryUnreachable(f"the npm registry cannot be reached: {unreachable}")
        pytest.fail(f"npm install of {' '.join(pins)} failed (log {log}):\n{_tail(log)}")
    _check_starts(prefix / "node_modules" / ".bin" / "claude", CLAUDE_CODE_VERSION, log)
    _check_starts(prefix / "node_modules" / ".bin" / "codex", CODEX_VERSION, log)
    (prefix / MARKER).write_text(json.dumps(NPM_PACKAGES) + "\n")
    return prefix


def _check_starts(program: Path, version: str, log: Path) -> None:
    """Once, after an install: the program starts and says its version (Claude Code's
    native binary is put in place by its postinstall script, which an npm that skips
    install scripts would leave out)."""
    try:
        done = subprocess.run([str(program), "--version"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=PROBE_TIMEOUT_S)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"{program} --version did not run after its install (log {log}): {exc}")
    if done.returncode != 0 or version not in done.stdout:
        pytest.fail(
            f"{program} --version after its install: exit {done.returncode}, "
            f"{(done.stdout + done.stderr).strip()[:300]!r} (expected {version}; log {log})"
        )


def _aider_installed(venv: Path) -> bool:
    found = list(venv.glob(f"lib/python3*/site-packages/aider_chat-{AIDER_VERSION}.dist-info"))
    return bool(found) and (venv / "bin" / "aider").exists()


def _install_aider(cache: Path) -> Path:
    venv = cache / "aider"
    if (venv / MARKER).exists():
        return venv
    if venv.exists() and not _aider_installed(venv):
        shutil.rmtree(venv)
    log = cache / "aider-install.log"
    if not venv.exists():
        # The interpreter running the tests: the project's own Python (3.11+), which
        # aider-chat 0.86 supports.
        if _run([sys.executable, "-m", "venv", str(venv)], log) != 0:
            pytest.fail(f"python -m venv {venv} failed (log {log}):\n{_tail(log)}")
        pins = [f"{name}=={version}" for name, version in PIP_PACKAGES.items()]
        pip = str(venv / "bin" / "pip")
        if _run([pip, "install", "--quiet", *pins], log) != 0 or not _aider_installed(venv):
            unreachable = _probe([pip, "download", "--no-deps", "--quiet", "-d",
                                  str(cache / "probe"), *pins])  # fmt: skip
            shutil.rmtree(venv, ignore_errors=True)
            if unreachable is not None:
                raise RegistryUnreachable(
                    f"the Python package index cannot be reached: {unreachable}"
                )
            pytest.fail(f"pip install of {' '.join(pins)} failed (log {log}):\n{_tail(log)}")
    _check_starts(venv / "bin" / "aider", AIDER_VERSION, log)
    (venv / MARKER).write_text(json.dumps(PIP_PACKAGES) + "\n")
    return venv


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the contract tests, but the agents cannot be installed: {reason}")
    print(f"contract tests skipped: {reason}")
    pytest.skip(f"the released agents cannot be installed: {reason}")


def npm_prefix() -> Path:
    cache = cache_dir()
    with _install_lock(cache, "npm"):
        try:
            return _install_npm(cache)
        except RegistryUnreachable as exc:
            _skip_or_fail(str(exc))
            raise  # not reached: skip and fail raise


def aider_venv() -> Path:
    cache = cache_dir()
    with _install_lock(cache, "aider"):
        try:
            return _install_aider(cache)
        except RegistryUnreachable as exc:
            _skip_or_fail(str(exc))
            raise  # not reached: skip and fail raise


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The released ``claude`` (Claude Code, pinned), installed on first use."""
    return npm_prefix() / "node_modules" / ".bin" / "claude"


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    """The released ``codex`` (pinned), installed on first use."""
    return npm_prefix() / "node_modules" / ".bin" / "codex"


@pytest.fixture(scope="session")
def aider_bin() -> Path:
    """The released ``aider`` (aider-chat, pinned) in a venv of its own, installed on first use."""
    return aider_venv() / "bin" / "aider"
