"""What each engine kind accepts in its ``[engines.NAME]`` table, checked when the config
is loaded so a typo fails before any run starts. The adapters (``orchestrator/engines/``)
read the same settings when they build an invocation; the rules live here, below the
config that applies them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.domain.placeholders import placeholder_problems

Known = Mapping[str, type | tuple[type, ...]]

CLAUDE_CODE: Known = {
    "permission_mode": str,
    "max_turns": int,
    "retries": int,
    "extra_args": list,
}
CODEX: Known = {
    "sandbox": str,
    "base_url": str,
    "env_key": str,
    "retries": int,
    "extra_args": list,
}
CODEX_SANDBOXES = ("read-only", "workspace-write", "danger-full-access")
# Where Codex sends its Responses API requests, and the variable that holds its key
# (``engines/codex.py`` gives Codex a provider entry with both).
CODEX_BASE_URL = "https://api.openai.com/v1"
CODEX_ENV_KEY = "OPENAI_API_KEY"
_URL = re.compile(r"^https?://[^\s\"'\\]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
AIDER: Known = {"retries": int, "extra_args": list}
# How often an engine may retry a failed model request itself before it gives up
# (``[engines.NAME] retries``): Claude Code's own default is 10, aider's about 9 over a
# minute, each holding the stage while our own back-off would also wait. None by
# default: an overloaded provider ends the attempt as ``outage`` at once, and our
# back-off (``[routing]``) decides the one bounded wait.
DEFAULT_ENGINE_RETRIES = 0
MAX_ENGINE_RETRIES = 20


def retries_problems(settings: Mapping[str, Any]) -> list[str]:
    retries = settings.get("retries")
    if isinstance(retries, int) and not isinstance(retries, bool):
        if not 0 <= retries <= MAX_ENGINE_RETRIES:
            return [f"retries: must be 0 to {MAX_ENGINE_RETRIES} (got {retries})"]
    return []


def engine_retries(settings: Mapping[str, Any]) -> int:
    """The engine's own retry count: ``retries`` as configured, else the default."""
    value = settings.get("retries", DEFAULT_ENGINE_RETRIES)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"retries: must be an integer (got {value!r})")
    return value


COMMAND: Known = {"command": list, "prompt_on_stdin": bool}
PATCH: Known = {}


def check_known_keys(settings: Mapping[str, Any], known: Known) -> list[str]:
    """Unknown keys and wrong scalar types, one line each. ``list`` means a list of strings."""
    problems = []
    for key in sorted(settings):
        if key not in known:
            names = ", ".join(sorted(known))
            problems.append(
                f"{key}: unknown setting ({f'known: {names}' if names else 'takes none'})"
            )
            continue
        value = settings[key]
        expected = known[key]
        if expected is list:
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                problems.append(f"{key}: must be a list of strings (got {value!r})")
        elif isinstance(value, bool) and expected is not bool:
            problems.append(f"{key}: must not be a boolean (got {value!r})")
        elif not isinstance(value, expected):
            problems.append(f"{key}: wrong type (got {value!r})")
    return problems


def _claude_code(settings: Mapping[str, Any]) -> list[str]:
    problems = check_known_keys(settings, CLAUDE_CODE)
    mode = settings.get("permission_mode")
    if isinstance(mode, str) and not mode.isalpha():
        problems.append(f"permission_mode: not a permission mode (got {mode!r})")
    turns = settings.get("max_turns")
    if isinstance(turns, int) and not isinstance(turns, bool) and turns < 1:
        problems.append(f"max_turns: must be at least 1 (got {turns})")
    return problems + retries_problems(settings)


def _codex(settings: Mapping[str, Any]) -> list[str]:
    problems = check_known_keys(settings, CODEX)
    sandbox = settings.get("sandbox")
    if isinstance(sandbox, str) and sandbox not in CODEX_SANDBOXES:
        problems.append(f"sandbox: must be one of {', '.join(CODEX_SANDBOXES)} (got {sandbox!r})")
    url = settings.get("base_url")
    if isinstance(url, str) and not _URL.match(url):
        problems.append(f"base_url: must be an http:// or https:// URL (got {url!r})")
    key = settings.get("env_key")
    if isinstance(key, str) and not _ENV_NAME.match(key):
        problems.append(f"env_key: must be an environment variable's name (got {key!r})")
    return problems + retries_problems(settings)


def _command(settings: Mapping[str, Any]) -> list[str]:
    problems = check_known_keys(settings, COMMAND)
    command = settings.get("command")
    if command is None:
        problems.append("command: required for an engine of kind 'command' (an argv list)")
    elif isinstance(command, (list, tuple)) and (not command or not command[0]):
        problems.append("command: must name a program (got an empty command)")
    elif isinstance(command, (list, tuple)):
        problems.extend(
            f"command{p}" for p in placeholder_problems(list(map(str, command)), "engine")
        )
    return problems


CHECKS: Mapping[str, Callable[[Mapping[str, Any]], list[str]]] = {
    "claude-code": _claude_code,
    "codex": _codex,
    "aider": lambda settings: check_known_keys(settings, AIDER) + retries_problems(settings),
    "command": _command,
    "patch": lambda settings: check_known_keys(settings, PATCH),
}


def settings_problems(kind: str, settings: Mapping[str, Any]) -> list[str]:
    """Problems with an engine's config table, one line each, ``key: reason`` (empty:
    fine); ValueError naming the known kinds for an unknown kind."""
    try:
        check = CHECKS[kind]
    except KeyError:
        known = ", ".join(sorted(CHECKS))
        raise ValueError(f"unknown engine kind {kind!r} (known: {known})") from None
    return check(settings)
