"""What a stage process is told: environment variables and command placeholders.

This is the contract between the orchestrator and every stage script (the docs' stage
contract page is generated from it). Pure functions, so the contract is pinned by tests
without starting anything.

Environment (all strings): ``STAGE_VARIABLES`` below, name by name, with what each holds
(``docs/reference/stage-contract.md`` is generated from it).

Placeholders in configured commands: {python} {root} {clone} {run_dir}.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.domain.git_identity import IDENTITY_ENV
from orchestrator.domain.keys import ORCHESTRATOR_ONLY
from orchestrator.domain.placeholders import STAGE_PLACEHOLDERS
from orchestrator.execution.process import EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND, EXIT_TIMEOUT
from orchestrator.redaction import hold

WORK_BRANCH_PREFIX = "orch/"

# What every stage, engine, check and verifier gets of the orchestrator's environment
# without naming it (issue 40: an allow-list, whatever a name looks like): where programs
# are, the home, the locale, the time zone, the terminal and the temporary directory (in
# the sandbox HOME and TMPDIR are its own), and the commit identity the user or the
# config's [git] table sets. Anything else reaches a stage only through its ``pass_env``.
BASE_ENV_NAMES: tuple[str, ...] = ("PATH", "HOME", "LANG", "TZ", "TERM", "TMPDIR")
BASE_ENV_PREFIXES: tuple[str, ...] = ("LC_",)
IDENTITY_NAMES: tuple[str, ...] = (
    *(f"GIT_{role}_{part}" for role in ("AUTHOR", "COMMITTER") for part in ("NAME", "EMAIL")),
    *IDENTITY_ENV.values(),
)

# The ORCH_* variables every stage is given, with what each holds: the contract's one
# written list (``docs/reference/stage-contract.md`` is generated from it; a test holds
# ``stage_environ`` to it, name for name).
STAGE_VARIABLES: tuple[tuple[str, str], ...] = (
    ("ORCH_TICKET_FILE", "the run's snapshot of the ticket (extras files sit beside it)"),
    ("ORCH_TICKET_ID", "the ticket's id"),
    ("ORCH_TICKET_KIND", "the ticket's kind"),
    ("ORCH_REPOSITORY", "the ticket's repository (URL, or absolute path)"),
    ("ORCH_BASE_BRANCH", "the branch the work starts from (`main`)"),
    ("ORCH_WORK_BRANCH", f"the branch the work goes on (`{WORK_BRANCH_PREFIX}<ticket-id>`)"),
    ("ORCH_BASE_REF", "`origin/<base branch>`, for checks"),
    ("ORCH_RUN_ID", "the run's id"),
    ("ORCH_RUN_DIR", "the run's workspace (`runs/<run-id>/` under the state dir)"),
    ("ORCH_CLONE_DIR", "the working clone"),
    ("ORCH_STATE_DIR", "the state dir"),
    ("ORCH_STAGE", "the stage's name"),
    ("ORCH_ENGINE", "for engine stages: the engine (empty otherwise)"),
    ("ORCH_MODEL", "for engine stages: the model (empty otherwise)"),
    ("ORCH_ATTEMPT", "the attempt number within the run"),
    (
        "ORCH_ATTEMPT_ID",
        "`<run-id>#<attempt>`: marks every process of the attempt, so a resumed run can find "
        "what a dead orchestrator left behind",
    ),
    ("ORCH_CHECK", "for checks only: the check's name (unset otherwise)"),
)

# How a stage's ending is written in its attempt's ``exit_code``, beyond the status the
# process itself exited with (a stage's own 0 is success, anything else a failure).
RECORDED_EXIT_STATUSES: tuple[tuple[str, str], ...] = (
    (
        "128+N",
        "killed by signal N (`signal` is set), whether it raised it, was sent it or the "
        "kernel's OOM killer sent it, in the sandbox or not; a program that itself exits "
        "128+N (`exit 139`) is recorded with `signal` null",
    ),
    (
        str(EXIT_TIMEOUT),
        "our timeout stopped it (`timed_out: true`): TERM to everything it started, "
        "`kill_after_s` to finish (a `trap` on TERM runs), then KILL; in the sandbox or not",
    ),
    (str(EXIT_CANNOT_EXECUTE), "the program could not be executed (`error` says why)"),
    (
        str(EXIT_NOT_FOUND),
        "the program, the working directory or standard input was not found (`error` says which)",
    ),
)


@dataclass(frozen=True)
class StageContext:
    ticket_file: Path
    ticket_id: str
    ticket_kind: str
    repository: str
    base_branch: str
    run_id: str
    run_dir: Path
    clone_dir: Path
    state_dir: Path
    stage: str
    engine: str
    model: str
    attempt: int
    check: str = ""
    # The commit the review checks were run on before any change (``app.base_check``):
    # a check's failure is judged against its failure there. Not told to the stage.
    base_commit: str = ""

    @property
    def work_branch(self) -> str:
        return work_branch(self.ticket_id)


def work_branch(ticket_id: str) -> str:
    return WORK_BRANCH_PREFIX + ticket_id


def attempt_marker(run_id: str, attempt: int) -> str:
    return f"{run_id}#{attempt}"


def stage_environ(
    base: Mapping[str, str], ctx: StageContext, pass_env: Collection[str] = ()
) -> dict[str, str]:
    """The base (``BASE_ENV_NAMES``, ``LC_*``, the commit identity), the variables the
    stage or its engine names in ``pass_env``, and the ORCH_* contract — nothing else of
    ``base``, whatever its name: a webhook URL, a database URL or ``MY_CREDS`` reaches no
    stage that did not ask for it. ORCH_* from ``base`` is dropped (a stage never sees a
    stale value from an orchestrator that started this one), and the orchestrator's own
    keys are refused whatever ``pass_env`` says."""
    allowed = {*BASE_ENV_NAMES, *IDENTITY_NAMES, *pass_env}
    env = {
        k: v
        for k, v in base.items()
        if (k in allowed or k.startswith(BASE_ENV_PREFIXES))
        and not k.startswith("ORCH_")
        and k not in ORCHESTRATOR_ONLY  # never, whatever pass_env says
    }
    # A value handed to a stage is one the orchestrator holds from now on: redacted by
    # value, encoded or not, from whatever the stage prints back (redaction/held.py).
    hold(env[name] for name in pass_env if name in env)
    env.update(
        ORCH_TICKET_FILE=str(ctx.ticket_file),
        ORCH_TICKET_ID=ctx.ticket_id,
        ORCH_TICKET_KIND=ctx.ticket_kind,
        ORCH_REPOSITORY=ctx.repository,
        ORCH_BASE_BRANCH=ctx.base_branch,
        ORCH_WORK_BRANCH=ctx.work_branch,
        ORCH_BASE_REF=f"origin/{ctx.base_branch}",
        ORCH_RUN_ID=ctx.run_id,
        ORCH_RUN_DIR=str(ctx.run_dir),
        ORCH_CLONE_DIR=str(ctx.clone_dir),
        ORCH_STATE_DIR=str(ctx.state_dir),
        ORCH_STAGE=ctx.stage,
        ORCH_ENGINE=ctx.engine,
        ORCH_MODEL=ctx.model,
        ORCH_ATTEMPT=str(ctx.attempt),
        ORCH_ATTEMPT_ID=attempt_marker(ctx.run_id, ctx.attempt),
    )
    if ctx.check:
        env["ORCH_CHECK"] = ctx.check
    # Stage scripts written in Python run on the orchestrator's own interpreter: put its
    # directory first so `python` inside a stage is the one with our dependencies installed.
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + (":" + env["PATH"] if env.get("PATH") else "")
    return env


def expand_command(argv: tuple[str, ...], *, root: Path, ctx: StageContext) -> tuple[str, ...]:
    """Substitute the known placeholders; braces that are not placeholders stay as written."""
    values = {
        "python": sys.executable,
        "root": str(root),
        "clone": str(ctx.clone_dir),
        "run_dir": str(ctx.run_dir),
    }
    out = []
    for arg in argv:
        expanded = arg
        # The names the config was checked against at load (domain/placeholders.py).
        for name in STAGE_PLACEHOLDERS:
            expanded = expanded.replace(f"{{{name}}}", values[name])
        out.append(expanded)
    return tuple(out)
