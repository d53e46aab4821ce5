"""Expected failures, each mapped to an exit code at the top (``cli.main``) and nowhere else.

    OrchestratorError            anything a user can fix; printed as one line, no traceback
    ├── UsageError               bad command line                      → EXIT_USAGE
    ├── ConfigError              config.toml is not what we expect     → EXIT_USAGE
    ├── TicketError              a ticket file is malformed            → EXIT_USAGE
    ├── StateError               a file under .state is unreadable     → EXIT_STATE
    │   └── UnknownRun           no run answers to the id given        → EXIT_STATE
    ├── IllegalTransition        the state machine refused a move      → EXIT_STATE
    └── TicketLocked             another process holds the ticket      → EXIT_LOCKED
    Interrupted                  SIGINT/SIGTERM while running          → EXIT_INTERRUPTED

Anything else is a bug: ``cli.main`` prints where the traceback was written and exits
``EXIT_BUG``.
"""

from __future__ import annotations

# The one list of exit codes: ``EXIT_MEANINGS`` below says what each means; `--help` prints it
# and docs/reference/cli.md is generated from it (scripts/docs_reference.py).
EXIT_COMPLETED = 0
EXIT_BUG = 1
EXIT_USAGE = 2
EXIT_NEEDS_HUMAN = 3
EXIT_FAILED = 4
EXIT_SPLIT = 5
EXIT_AWAITING_APPROVAL = 6
EXIT_STATE = 7
EXIT_DIFFERENT = 8  # replay: today's code does not reach the same decision
EXIT_LOCKED = 75  # EX_TEMPFAIL: try again later
EXIT_INTERRUPTED = 130
# 128 + SIGPIPE: what a shell reports for git, cat or seq when the reader of their output
# went away (`| head -1`), so a pipeline under `set -o pipefail` reads the same for us.
EXIT_BROKEN_PIPE = 141

EXIT_MEANINGS: dict[int, str] = {
    EXIT_COMPLETED: "completed (or nothing to do)",
    EXIT_BUG: "internal error (a bug: the traceback's path is printed)",
    EXIT_USAGE: "usage, config or ticket error, or a failed preflight (a run cannot succeed here)",
    EXIT_NEEDS_HUMAN: "needs a human (halted with a typed reason, or blocked by DRY_RUN)",
    EXIT_FAILED: "failed (a stage or check failed and was not recovered)",
    EXIT_SPLIT: "split into sub-tickets",
    EXIT_AWAITING_APPROVAL: "awaiting approval",
    EXIT_STATE: "unreadable state file, or no run answers to the run or ticket id given",
    EXIT_DIFFERENT: "replay: a decision came out differently (or could not be replayed)",
    EXIT_LOCKED: (
        "try again later: the ticket is locked by another orchestrator process, a run waits "
        "out an outage (waiting-infra), or a batch could not read a source"
    ),
    EXIT_INTERRUPTED: "interrupted (state saved; run again to resume)",
    EXIT_BROKEN_PIPE: "the reader of the output went away (a closed pipe); ended quietly",
}


class OrchestratorError(Exception):
    """An expected failure: the message is for the user, the code for the shell."""

    exit_code = EXIT_USAGE


class UsageError(OrchestratorError):
    exit_code = EXIT_USAGE


class ConfigError(OrchestratorError):
    exit_code = EXIT_USAGE


class TicketError(OrchestratorError):
    exit_code = EXIT_USAGE


class StateError(OrchestratorError):
    exit_code = EXIT_STATE


class UnknownRun(StateError):
    """No run answers to a RUN_ID argument: one class, so show, replay, approve and reject
    all exit with the same code for it."""


class IllegalTransition(OrchestratorError):
    exit_code = EXIT_STATE


class TicketLocked(OrchestratorError):
    exit_code = EXIT_LOCKED

    def __init__(self, ticket_id: str, holder_pid: int | None) -> None:
        holder = f"pid {holder_pid}" if holder_pid else "another process"
        super().__init__(f"skipped: {ticket_id} is locked by {holder}")
        self.ticket_id = ticket_id
        self.holder_pid = holder_pid


class Interrupted(BaseException):
    """Raised from the SIGINT/SIGTERM handler so every ``finally`` on the way out runs.

    A BaseException (like KeyboardInterrupt) so that no ``except Exception`` swallows it.
    """

    exit_code = EXIT_INTERRUPTED

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum
