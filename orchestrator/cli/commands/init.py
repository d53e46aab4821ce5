"""``orchestrator init [--force]``: a commented starter ``config.toml``, a ``tickets/``
directory with an example ticket, the state dir, and ``orchestrator.env`` — the
environment an unattended batch (cron, a systemd timer) reads — in the current directory.

An existing ``config.toml`` is someone's work: it is replaced only with ``--force``; an
existing ``orchestrator.env`` (it holds keys) is never touched.

``orchestrator.env`` is ``KEY=value`` lines and whole-line comments only, so that both
``set -a; . ./orchestrator.env`` (cron's ``/bin/sh``) and systemd's ``EnvironmentFile=``
read it the same. Its ``PATH`` starts with the directory this ``orchestrator`` was started
from: cron's own ``PATH`` is ``/usr/bin:/bin``, where a pipx or venv install is not.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import TextIO

from orchestrator import starter
from orchestrator.domain.errors import UsageError
from orchestrator.domain.keys import ENV_FILE

TICKETS_DIR = "tickets"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def program_dir(argv0: str, executable: str) -> Path:
    """Where the running ``orchestrator`` command is: the directory it was started as
    (``~/.local/bin`` for pipx, not the venv a link points into), else that of the Python
    running it (``python -m orchestrator`` in a venv, whose ``bin/`` has the command)."""
    started = Path(argv0)
    if started.name == "orchestrator" and started.parent != Path():
        return Path(os.path.abspath(started.parent))
    return Path(os.path.abspath(Path(executable).parent))


def env_file_text(bin_dir: Path) -> str:
    """``orchestrator.env``: what an unattended batch needs and cron does not give."""
    path = str(bin_dir) if str(bin_dir) in SYSTEM_PATH.split(":") else f"{bin_dir}:{SYSTEM_PATH}"
    return (
        "# The environment of an unattended batch: cron reads it with\n"
        "#   set -a; . ./orchestrator.env; set +a\n"
        "# and a systemd service with EnvironmentFile=. KEY=value lines and whole-line\n"
        "# comments only (no quotes, no `export`, no comment after a value).\n"
        "# It holds secrets: it is written mode 0600; keep it out of version control.\n"
        "#\n"
        "# Where the orchestrator is (cron's own PATH is /usr/bin:/bin):\n"
        f"PATH={path}\n"
        "#\n"
        "# Let side-effectful stages (open-pr: push, open the pull request) run:\n"
        "#DRY_RUN=false\n"
        "#\n"
        "# The model's key ([model] api_key_env); without it failures go to a person:\n"
        "#ANTHROPIC_API_KEY=\n"
        "#\n"
        "# Forge tokens: open-pr on GitHub / GitLab, and [[sources]] of those kinds:\n"
        "#GITHUB_TOKEN=\n"
        "#GITLAB_TOKEN=\n"
    )


def init(directory: Path, out: TextIO, *, force: bool) -> int:
    config = directory / starter.CONFIG_NAME
    if config.exists() and not force:
        raise UsageError(
            f"init: {config} already exists; pass --force to overwrite it "
            "(your tickets/ are never touched)"
        )
    tickets = directory / TICKETS_DIR
    text = starter.config_text()
    state = directory / tomllib.loads(text).get("state_dir", ".state")
    for path, kind in (
        (config, "a directory"), (tickets, "not a directory"), (state, "not a directory"),
    ):  # fmt: skip
        if path.exists() and path.is_dir() == (kind == "a directory"):
            raise UsageError(f"init: {path} is {kind}")
    # A plain write, not the state dir's atomic one: these are the user's files, and
    # should get the user's umask rather than a temp file's 0600.
    config.write_text(text, encoding="utf-8")
    out.write(f"wrote {config}\n")
    tickets.mkdir(exist_ok=True)
    example = tickets / starter.EXAMPLE_TICKET_NAME
    if not example.exists():
        example.write_text(starter.example_ticket_text(), encoding="utf-8")
        out.write(f"wrote {example}\n")
    # The state dir exists from the start: a cron line's `>> .state/batch.log`, or
    # `batch --log .state/batch.log`, needs it before the first batch made it.
    if not state.is_dir():
        state.mkdir(parents=True, exist_ok=True)
        out.write(f"made {state}/\n")
    env_file = directory / ENV_FILE
    if not env_file.exists():
        fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(env_file_text(program_dir(sys.argv[0], sys.executable)))
        out.write(f"wrote {env_file} (mode 0600: add your keys there for cron)\n")
    out.write(
        "next: copy the example to tickets/<ID>.md and edit it, then\n"
        "  orchestrator run tickets/<ID>.md      one ticket, watched\n"
        "  orchestrator batch                    every ticket in tickets/ (for cron)\n"
        "  orchestrator doctor                   check this machine before the first run\n"
        "  orchestrator demo                     see the whole pipeline on a built-in project\n"
    )
    return 0
