"""A mechanical fix's report: the recipe as validated, the sandbox it ran in, each
command's outcome, the verifier and what it said, and how the clone was put back. It is
rewritten as the fix goes (the plan, then the result, then the rollback), and read to
resume a fix cut short by a kill, by ``orchestrator show`` and by the report page.

A key is written once it is known, and only then: a report that stopped before the
verification has no ``verification`` key, one refused before anything ran has no
``head_before``. Reports written by earlier versions lack the keys added since
(``sandbox``, ``uncommitted``, ``protected``, ``verified_commit``, a command's ``signal``)
and still read.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from orchestrator.domain.runs import CheckResult
from orchestrator.domain.validation import Frozen, StrictBool, StrictInt, StrictStr
from orchestrator.domain.verdicts import RepairPlan

FixStatus = Literal["running", "green", "red"]


class Verifier(Frozen):
    """The check from config that judges the fix: the one that failed."""

    check: StrictStr
    command: tuple[StrictStr, ...]


class RecipeCommand(Frozen):
    """One recipe command as it ran (``execution/recipes.py``)."""

    argv: tuple[StrictStr, ...]
    exit_code: StrictInt | None = None
    timed_out: StrictBool = False
    signal: StrictInt | None = None  # absent from reports written before it was kept
    log_path: StrictStr | None = None
    error: StrictStr | None = None


class FixReport(Frozen):
    """Decision ``verdict``'s mechanical fix; the fields in the order they are written."""

    run_id: StrictStr
    verdict: StrictInt
    source: StrictStr
    summary: StrictStr
    repair_plan: RepairPlan
    argv: tuple[tuple[StrictStr, ...], ...]
    verifier: Verifier
    commands: tuple[RecipeCommand, ...] = ()
    sandbox: StrictStr | None = None
    status: FixStatus
    head_before: StrictStr | None = None  # the commit the recipe started from
    uncommitted: tuple[StrictStr, ...] | None = None  # status entries the recipe left
    protected: tuple[StrictStr, ...] | None = None  # the paths it may not change
    verified_commit: StrictStr | None = None  # the HEAD the verifier was run on
    verification: CheckResult | None = None
    red_reason: StrictStr | None = None
    refused: StrictStr | None = None  # why nothing ran: the clone was not safe to work in
    restored_git_files: tuple[StrictStr, ...] | None = None
    kept_as: StrictStr | None = None  # the ref the red result is kept under
    restored: StrictBool | None = None
    not_restored: StrictStr | None = None  # why the clone was left as it was

    def revised(self, **update: Any) -> Self:
        """A validated copy with ``update`` applied; a key left unset stays unwritten."""
        kept = {name: getattr(self, name) for name in self.model_fields_set}
        return self.model_validate({**kept, **update})

    def stored(self) -> dict[str, Any]:
        """What the report's file holds: the keys known so far, in order, as JSON."""
        dumped = self.model_dump(mode="json")
        return {name: value for name, value in dumped.items() if name in self.model_fields_set}
