"""The mechanical fix's report as a record: what is written reads back as it was, a key
not known yet is not written, a report an earlier version wrote still reads, and a
damaged one is refused with its file and its key named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchestrator.domain.errors import StateError
from orchestrator.domain.fix_report import FixReport, RecipeCommand, Verifier
from orchestrator.domain.runs import CheckResult
from orchestrator.domain.verdicts import RepairPlan
from orchestrator.storage.runs import RunStore

from conftest import ROOT

RUN = "T-1-20261207T120000Z-abcd"
OLD_RUN = "CARDS-1-20261130T232650Z-1a8b"
PLANNED = FixReport(
    run_id=RUN,
    verdict=2,
    source="model",
    summary="commit order",
    repair_plan=RepairPlan(verification_check="lint", commands=("git reset --soft HEAD~1",)),
    argv=(("git", "reset", "--soft", "HEAD~1"),),
    verifier=Verifier(check="lint", command=("make", "lint")),
    sandbox="bwrap",
    status="running",
)


def test_a_report_reads_back_as_written_with_only_the_keys_known(tmp_path: Path) -> None:
    runs = RunStore(tmp_path)
    ran = PLANNED.revised(head_before=None).revised(
        commands=[
            {"argv": ["git", "reset"], "exit_code": 0, "timed_out": False, "signal": None,
             "log_path": "/l/1.log", "error": None}
        ],
        verification=CheckResult(name="lint", command=("make", "lint"), exit_code=0),
        status="green",
        red_reason=None,
    )  # fmt: skip
    runs.write_mechanical_fix(RUN, 2, ran.stored())
    assert runs.read_mechanical_fix(RUN, 2) == ran
    assert runs.read_mechanical_fix(RUN) == ran  # the run's latest, too
    written = json.loads(runs.mechanical_fix_path(RUN, 2).read_text())
    # Written as known, in order: no rollback keys, head_before null (there was none).
    assert list(written) == [
        "run_id", "verdict", "source", "summary", "repair_plan", "argv", "verifier",
        "commands", "sandbox", "status", "head_before", "verification", "red_reason",
    ]  # fmt: skip
    assert written["commands"][0]["argv"] == ["git", "reset"]
    assert written["verification"] == ran.verification.model_dump(mode="json")  # type: ignore[union-attr]
    assert ran.commands == (RecipeCommand(argv=("git", "reset"), exit_code=0, log_path="/l/1.log"),)
    assert runs.read_mechanical_fix(RUN, 3) is None  # none written


def test_a_report_an_earlier_version_wrote_still_reads(tmp_path: Path) -> None:
    """From before the sandbox, the protected paths and a command's signal were kept."""
    shutil.copytree(ROOT / "tests" / "data" / "old_state", tmp_path / "state")
    old = RunStore(tmp_path / "state").read_mechanical_fix(OLD_RUN)
    assert old is not None
    assert (old.verdict, old.status, old.sandbox, old.red_reason) == (1, "green", None, None)
    assert old.verifier.check == "lint-bug-commit-order"
    assert [c.argv[3] for c in old.commands] == ["reset", "restore", "commit", "add", "commit"]
    assert old.commands[0].signal is None and old.verification is not None
    assert old.verification.exit_code == 0 and old.head_before is not None
    assert "protected" not in old.stored() and "sandbox" not in old.stored()


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("status", "blue", "status: Input should be 'running', 'green' or 'red'"),
        ("verdict", "2", "verdict: Input should be a valid integer"),
        ("restored_as", True, "restored_as: unknown key (not allowed here)"),
    ],
)
def test_a_damaged_report_is_refused_naming_its_file_and_key(
    tmp_path: Path, key: str, value: object, said: str
) -> None:
    runs = RunStore(tmp_path)
    runs.write_mechanical_fix(RUN, 2, {**PLANNED.stored(), key: value})
    path = runs.mechanical_fix_path(RUN, 2)
    with pytest.raises(StateError) as raised:
        runs.read_mechanical_fix(RUN, 2)
    assert str(raised.value).startswith(f"state error: {path}: not a valid mechanical-fix report: ")
    assert said in str(raised.value)
