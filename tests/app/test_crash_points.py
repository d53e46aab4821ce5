"""Kill the orchestrator right after each write a run makes, then run it again.

For every named crash point (``orchestrator.storage.crash_points``) a real
``orchestrator`` process is armed with ``$ORCHESTRATOR_CRASH_AT`` and dies by SIGKILL
right after that write; the next ``run`` (or ``batch``) must bring the ticket to a
terminal or waiting state, with nothing charged twice, no model call repeated (counted
at the scripted gateway across processes), one ledger row per decision and a ledger
that verifies. The same scenario run without a crash is the baseline each case matches;
a case says what its kill may legitimately change (a call that was in flight).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

from orchestrator.cli.commands.batch import batch
from orchestrator.demo.run import build_demo
from orchestrator.domain.runs import RunRecord
from orchestrator.storage.budget import BudgetStore
from orchestrator.storage.crash_points import CrashPoint
from orchestrator.storage.files import FileStorage
from orchestrator.storage.layout import run_record_paths
from orchestrator.storage.runs import read_record_file

from conftest import ROOT, subprocess_env, untimed, write_ticket
from support.cli_here import cli_here
from support.harness import flaky, reply
from support.scripted_cli import (
    CALLS_ENV,
    SCRIPT_ENV,
    FileScriptedGateway,
    requests_made,
    run_forked,
    run_here,
)

pytestmark = pytest.mark.slow

KILLED = -signal.SIGKILL
# A clone the decision can look at (an empty repository: no diff), without a network.
CLONE = '[[stages]]\nname = "clone"\ncwd = "run"\ncommand = ["git", "init", "-q", "clone"]\n'
AUTO = '[routing]\nretry = 0.0\n"abandon-human" = 0.0\nsplit = 0.0\n'
EXIT = {"completed": 0, "needs-human": 3, "split": 5, "awaiting-approval": 6}


@dataclass(frozen=True)
class Scenario:
    stages: str
    replies: tuple[str, ...]
    header: str = AUTO
    demo: bool = False  # the demo's CARDS-1 through the real config.toml instead


RETRY = Scenario(flaky("build", fails=1), (reply({"action": "retry", "summary": "flaky"}),))
ABANDON = Scenario(
    flaky("build", fails=9), (reply({"action": "abandon-human", "summary": "needs a person"}),)
)
# Only the parent fails: a batch that runs its sub-tickets completes them without a call.
PARENT_FAILS = (
    '[[stages]]\nname = "build"\ncwd = "clone"\n'
    'command = ["bash", "-c", "[ $ORCH_TICKET_ID != T-1 ]"]\n'
)
SPLIT = Scenario(
    PARENT_FAILS,
    (
        reply(
            {
                "action": "split",
                "summary": "two concerns",
                "sub_tickets": [
                    {"title": "The parser", "body": "Only the parser."},
                    {"title": "The printer", "body": "Only the printer."},
                ],
            }
        ),
    ),
)
# A retry a person must approve (routed hitl: its threshold cannot be reached).
APPROVAL = Scenario(RETRY.stages, RETRY.replies, header="[routing]\nretry = 1.0\n")
INVESTIGATE = Scenario(
    flaky("build", fails=9),
    (
        reply({"tool": "read_file", "args": {"path": "README.md"}}),
        reply({"final": {"action": "abandon-human", "summary": "nothing to go on"}}),
    ),
    header=AUTO + '[diagnosis]\nmode = "investigate"\n',
)
# A side-effectful stage that DRY_RUN blocks, for a person to resume.
SHIPS = Scenario(
    '[[stages]]\nname = "ship"\ncwd = "run"\nside_effectful = true\ncommand = ["true"]\n', ()
)
# The demo's squashed bug fix, repaired by the playbook's mechanical fix (no model).
DEMO = Scenario("", (), demo=True)
# Every model call goes through a batch budget (written before and after the call).
BUDGETED = Scenario(RETRY.stages, RETRY.replies, header=AUTO + "[batch]\nmax_model_calls = 5\n")


@dataclass(frozen=True)
class Step:
    """One orchestrator process: its arguments (after ``--config``), and the crash point
    it is armed with (it must die there: that proves the point is reached)."""

    command: tuple[str, ...]
    crash: str | None = None
    dry_run: str = "false"


RUN = ("run", "t/T-1.md")
BATCH = ("batch", "--tickets", "t")
RESUME = ("resume", "LATEST")
RESET = ("reset", "T-1", "--reason", "the cause is fixed")
# DRY_RUN armed (as cron has it unless told): the side-effectful stage is blocked.
BLOCKED = Step(RUN, dry_run="true")


def killed_at(point: str, then: tuple[str, ...] = RUN, first: tuple[str, ...] = RUN) -> list[Step]:
    return [Step(first, point), Step(then)]


@dataclass(frozen=True)
class Case:
    point: str
    scenario: Scenario
    steps: list[Step]
    # What the kill legitimately changes against the baseline: a call (and its charge)
    # that was in flight when the process died, a charge whose call never happened, or a
    # stage that had run (and counted itself) when its attempt's end was lost.
    extra_calls: int = 0
    extra_diagnoses: int = 0
    final: str | None = None  # the end state, when the kill changes it
    no_recovery: bool = False  # the interrupted stage may have counted: its re-run may pass
    baseline_steps: list[Step] = field(default_factory=lambda: [Step(RUN)])

    @property
    def id(self) -> str:
        return self.point


CASES = [
    Case("run-created", RETRY, killed_at("run-created")),
    Case("run-started", RETRY, killed_at("run-started")),
    Case("attempt-started:2", RETRY, killed_at("attempt-started:2")),
    # The stage ran (and failed) but its end was lost: its re-run is its second, which passes.
    Case("attempt-group:2", RETRY, killed_at("attempt-group:2"), no_recovery=True),
    Case(
        "attempt-interrupted",
        RETRY,
        [Step(RUN, "attempt-group:2"), Step(RUN, "attempt-interrupted"), Step(RUN)],
        no_recovery=True,
    ),
    Case("attempt-finished:2", RETRY, killed_at("attempt-finished:2")),
    Case("recovering", RETRY, killed_at("recovering")),
    Case("bundle", RETRY, killed_at("bundle")),
    # Charged, never called: the charge is not refunded (a call may have happened).
    Case("diagnosis-charge", RETRY, killed_at("diagnosis-charge"), extra_diagnoses=1),
    # The call returned and was journaled, its decision not written yet: the resumed
    # decision is answered from the journal, neither asked nor charged again.
    Case("model-reply", RETRY, killed_at("model-reply")),
    Case("model-reply/investigate", INVESTIGATE, killed_at("model-reply:1")),
    Case("reply-texts", RETRY, killed_at("reply-texts")),
    Case("verdict", RETRY, killed_at("verdict")),
    Case("verdict/batch", RETRY, killed_at("verdict", then=BATCH)),
    Case("ledger-decision", RETRY, killed_at("ledger-decision")),
    Case("verdict-ref", RETRY, killed_at("verdict-ref", then=BATCH)),
    Case("approval", RETRY, killed_at("approval")),
    Case("retry-charge", RETRY, killed_at("retry-charge")),
    Case("ledger-outcome", RETRY, killed_at("ledger-outcome")),
    Case("outcome", RETRY, killed_at("outcome", then=BATCH)),
    Case("run-ended", RETRY, killed_at("run-ended")),
    Case("temp-file", RETRY, killed_at("temp-file")),
    Case("hand-off", ABANDON, killed_at("hand-off")),
    # The fix's plan, then its green result: carried out once, not again on resume.
    Case("fix-report:1", DEMO, killed_at("fix-report:1")),
    # The review check's result on the base commit, cached: read back, not run again.
    Case("base-check", DEMO, killed_at("base-check")),
    Case("fix-report:2", DEMO, killed_at("fix-report:2", then=BATCH)),
    Case("sub-ticket:1", SPLIT, killed_at("sub-ticket:1")),
    Case("sub-ticket:2", SPLIT, killed_at("sub-ticket:2", then=BATCH)),
    Case("awaiting-approval", APPROVAL, killed_at("awaiting-approval")),
    Case(
        "approval/person",
        APPROVAL,
        [Step(RUN), Step(("approve", "LATEST"), "approval"), Step(RUN)],
        final="completed",
        # ``approve`` records the answer; the next run (or batch) carries it out.
        baseline_steps=[Step(RUN), Step(("approve", "LATEST")), Step(RUN)],
    ),
    Case("ledger-trace", INVESTIGATE, killed_at("ledger-trace")),
    # A person's resume and reset: recorded in the ledger, then carried out, once.
    Case(
        "resume/ledger-decision",
        SHIPS,
        [BLOCKED, Step(RESUME, "ledger-decision"), Step(RESUME)],
        baseline_steps=[BLOCKED, Step(RESUME)],
    ),
    Case(
        "resumed",
        SHIPS,
        [BLOCKED, Step(RESUME, "resumed"), Step(RUN)],
        baseline_steps=[BLOCKED, Step(RESUME)],
    ),
    Case(
        "reset/ledger-decision",
        ABANDON,
        [Step(RUN), Step(RESET, "ledger-decision"), Step(RESET)],
        baseline_steps=[Step(RUN), Step(RESET)],
    ),
    Case(
        "caps-reset",
        ABANDON,
        [Step(RUN), Step(RESET, "caps-reset"), Step(RESET)],
        baseline_steps=[Step(RUN), Step(RESET)],
    ),
    # The call reserved against the batch's budget, before the ticket is charged for it:
    # the next batch (a fresh budget) asks once, as if nothing had happened.
    Case(
        "batch-budget:1",
        BUDGETED,
        killed_at("batch-budget:1", first=BATCH, then=BATCH),
        baseline_steps=[Step(BATCH)],
    ),
    # Its tokens are counted as the call returns, before the journal has the reply: the
    # call was in flight, so it is asked (and charged) again.
    Case(
        "batch-budget:2",
        BUDGETED,
        killed_at("batch-budget:2", first=BATCH, then=BATCH),
        extra_calls=1,
        extra_diagnoses=1,
        baseline_steps=[Step(BATCH)],
    ),
]


@dataclass(frozen=True)
class Result:
    state: str
    calls: int
    diagnoses: int
    retries: int
    code: int


def _setup(root: Path, scenario: Scenario) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if scenario.demo:
        build_demo(root)
        (root / "t").mkdir()
        for name in ("CARDS-1.md", "CARDS-1.patch"):
            shutil.copy(root / "tickets" / name, root / "t" / name)
        (root / "script.json").write_text("[]")
        return root
    (root / "config.toml").write_text(
        'state_dir = "state"\n'
        + scenario.header
        + "[recovery]\nmax_diag_invocations_per_ticket = 3\nmax_retries_per_ticket = 2\n"
        + CLONE
        + scenario.stages
    )
    write_ticket(root / "t")
    # Scripted twice over: a call repeated after a kill gets the same answer, and is
    # counted (the case says whether it may happen).
    (root / "script.json").write_text(json.dumps(list(scenario.replies) * 2))
    return root


def _ticket(root: Path) -> str:
    return "T-1" if (root / "config.toml").exists() else "CARDS-1"


def _config(root: Path) -> list[str]:
    if (root / "config.toml").exists():
        return ["--config", str(root / "config.toml")]
    return ["--config", str(ROOT / "config.toml"), "--state-dir", str(root / "state")]


def _latest(root: Path) -> RunRecord:
    runs = root / "state" / "runs"
    records = [read_record_file(p) for p in run_record_paths(runs, _ticket(root))]
    return max(records, key=lambda r: r.created_at)


def _orchestrator(root: Path, step: Step) -> subprocess.CompletedProcess[str]:
    """One orchestrator command. A step armed with a crash point runs in a process of its
    own, the one SIGKILL ends, forked from this one (``run_forked``); a step that is not
    killed runs the same CLI in this process (``run_here``): everything it knows comes
    from the state dir either way, and an interpreter start (a second of CPU) per step
    was most of what the matrix cost."""
    command = step.command
    if command[1:] == ("LATEST",):
        command = (command[0], _latest(root).run_id)
    command = tuple(f"t/{_ticket(root)}.md" if a == "t/T-1.md" else a for a in command)
    extra = {SCRIPT_ENV: str(root / "script.json"), CALLS_ENV: str(root / "calls")}
    argv = [*_config(root), *command]
    if step.crash is None:
        return run_here(root, argv, subprocess_env(DRY_RUN=step.dry_run, **extra))
    extra["ORCHESTRATOR_CRASH_AT"] = step.crash
    return run_forked(root, argv, subprocess_env(DRY_RUN=step.dry_run, **extra))


def _drive(root: Path, steps: list[Step]) -> Result:
    proc = None
    for step in steps:
        proc = _orchestrator(root, step)
        said = f"{step}: {proc.stdout}{proc.stderr}"
        if step.crash is not None:
            assert proc.returncode == KILLED, f"crash point never reached: {said}"
        else:
            assert proc.returncode != KILLED, said
    assert proc is not None
    budget = BudgetStore(root / "state").load(_ticket(root))
    return Result(
        state=str(_latest(root).state),
        calls=requests_made(root / "calls"),
        diagnoses=budget.spent("diagnosis"),
        retries=budget.spent("retry"),
        code=proc.returncode,
    )


@cache
def _baseline(scenario: Scenario, steps: tuple[Step, ...], root: Path) -> Result:
    return _drive(_setup(root, scenario), list(steps))


def _assert_consistent(root: Path) -> None:
    """The ledger verifies, holds exactly one decision row per verdict file and at most
    one outcome per decision; no charge key twice; no temp file left behind."""
    storage = FileStorage(root / "state")
    ledger = storage.ledger()
    verified = ledger.verify()
    assert verified.ok, verified
    rows = list(ledger.rows())
    decisions = Counter(r["decision_id"] for r in rows if r["kind"] == "decision")
    recoveries = [r["decision_id"] for r in rows if r["capability"] == "stage-recovery"]
    outcomes = Counter(r["decision_id"] for r in rows if r["kind"] == "outcome")
    traces = Counter(
        (r["decision_id"], r["decision"]["step"]) for r in rows if r["kind"] == "trace"
    )
    verdicts = [storage.decisions.read(v.run_id, v.number) for v in storage.decisions.find()]
    assert sorted(set(recoveries)) == sorted(v.decision_id for v in verdicts)
    assert set(decisions.values()) <= {1} and set(outcomes.values()) <= {1}
    assert set(traces.values()) <= {1}
    charges = BudgetStore(root / "state").load(_ticket(root)).charges
    keys = Counter((c.kind, c.key) for c in charges)
    assert set(keys.values()) <= {1}
    temps = [p for p in (root / "state").rglob(".*.tmp") if "clone" not in p.parts]
    assert temps == []


# The quick tier kills one run, mid-decision: right after the model's reply is persisted.
QUICK_CASE = "model-reply"


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.quick) if c.id == QUICK_CASE else c for c in CASES],
    ids=lambda c: c.id,
)
def test_a_run_killed_right_after_a_write_is_brought_forward_by_the_next(
    case: Case, tmp_path_factory: pytest.TempPathFactory
) -> None:
    name = f"{id(case.scenario)}-{abs(hash(tuple(case.baseline_steps)))}"
    base_root = tmp_path_factory.getbasetemp() / "baselines" / name
    baseline = _baseline(case.scenario, tuple(case.baseline_steps), base_root)
    root = _setup(tmp_path_factory.mktemp("crash"), case.scenario)
    result = _drive(root, case.steps)

    final = case.final or baseline.state
    if case.no_recovery:
        # The killed orchestrator's stage dies with it (its reaper is told of the death
        # and stops it), so whether the stage had counted itself is a race: either it had,
        # and its re-run passes with nothing to decide, or it had not, and the run goes
        # exactly as the baseline did. Nothing else is acceptable.
        assert (result.state, result.calls, result.diagnoses) in {
            ("completed", 0, 0),
            (baseline.state, baseline.calls, baseline.diagnoses),
        }
    else:
        assert result.state == final
        assert result.calls == baseline.calls + case.extra_calls
        assert result.diagnoses == baseline.diagnoses + case.extra_diagnoses
        assert result.retries == baseline.retries
    expected_code = EXIT[result.state] if case.steps[-1].command == RUN else None
    if expected_code is not None:
        assert result.code == expected_code
    _assert_consistent(root)

    # A second resume (a batch: it starts no new run of a ticket that ended) changes
    # nothing: no row, charge or call is added. In this process: it is not killed, and
    # an interpreter start per case is most of what the matrix costs.
    again = _batch_here(root)
    assert (again.state, again.calls, again.diagnoses, again.retries) == (
        result.state, result.calls, result.diagnoses, result.retries,
    )  # fmt: skip
    _assert_consistent(root)


def _batch_here(root: Path) -> Result:
    config = _config(root)
    code = batch(
        Path(config[1]), config[3] if len(config) > 2 else None, root / "t",
        jobs=1, as_json=False, worker=False, out=io.StringIO(),
        environ={"PATH": os.environ["PATH"], "HOME": str(root), "DRY_RUN": "false"},
        gateway_factory=lambda: FileScriptedGateway(root / "script.json", root / "calls"),
    )  # fmt: skip
    budget = BudgetStore(root / "state").load(_ticket(root))
    return Result(
        state=str(_latest(root).state),
        calls=requests_made(root / "calls"),
        diagnoses=budget.spent("diagnosis"),
        retries=budget.spent("retry"),
        code=code,
    )


def test_every_crash_point_is_reached_by_a_case() -> None:
    armed = {step.crash.partition(":")[0] for case in CASES for step in case.steps if step.crash}
    assert armed == {p.value for p in CrashPoint}


def test_a_referenced_decision_whose_ledger_row_was_lost_gets_it_on_resume(
    tmp_path: Path,
) -> None:
    """Killed mid-append of the decision's row after the run record pointed at the
    verdict: ``ledger repair`` quarantines the torn row, and the next run used to stop
    with "no decision row" (exit 7) for good. It appends the row from the verdict file."""
    root = _setup(tmp_path, RETRY)
    _drive(root, [Step(RUN, "verdict-ref")])
    ledger = root / "state" / "ledger.jsonl"
    [row] = ledger.read_bytes().splitlines(keepends=True)
    ledger.write_bytes(row[: len(row) // 2])  # torn: what a kill mid-write leaves
    (root / "state" / "ledger.head").unlink()  # (the head never moved to the torn row)
    repair = _ledger_command(root, "repair")
    assert repair.returncode == 0 and "quarantined line 1" in repair.stdout, repair.stderr

    result = _drive(root, [Step(RUN)])
    assert (result.state, result.code, result.calls) == ("completed", 0, 1)
    _assert_consistent(root)
    again = _drive(root, [Step(BATCH)])
    assert again.calls == 1
    _assert_consistent(root)


def test_a_ticket_whose_state_cannot_be_brought_forward_fails_the_batch(tmp_path: Path) -> None:
    """Not "skipped" with exit 0, which cron reads as success night after night: the
    ticket's line names the file and the reason, and the batch exits 7."""
    root = _setup(tmp_path, RETRY)
    _drive(root, [Step(RUN, "recovering")])
    [path] = run_record_paths(root / "state" / "runs", "T-1")
    edited = json.loads(path.read_text())
    edited["attempts"] = []  # recovering from nothing: no code can bring this forward
    path.write_text(json.dumps(edited))
    write_ticket(root / "t", "T-2")
    proc = _orchestrator(root, Step(BATCH))
    assert proc.returncode == 7, proc.stdout + proc.stderr
    lines = untimed(proc.stdout)
    [line] = [line for line in lines if line.startswith("T-1 ")]
    assert "state-error" in line
    assert (
        f"state error: {path}: run {path.stem} is recovering but records no failed attempt" in line
    )
    assert any(line.startswith("T-2 ") and " completed " in line for line in lines)


def _ledger_command(root: Path, action: str) -> subprocess.CompletedProcess[str]:
    """``orchestrator ledger ACTION`` in this process (``support.cli_here``)."""
    argv = ["--config", str(root / "config.toml"), "ledger", action]
    return cli_here(argv, subprocess_env(), cwd=root)


def test_ledger_verify_notices_a_decision_without_its_row_and_repair_appends_it(
    tmp_path: Path,
) -> None:
    root = _setup(tmp_path, RETRY)
    _drive(root, [Step(RUN, "verdict")])
    [verdict] = (root / "state" / "runs").glob("*.verdict-1.json")
    verify = _ledger_command(root, "verify")
    assert verify.returncode == 7
    assert verify.stdout == (
        "FAILED: 1 decision(s) persisted without a ledger row (a run killed in between); "
        "`orchestrator ledger repair` appends them, as does the ticket's next run:\n"
        f"  {verdict}\n"
    )
    repair = _ledger_command(root, "repair")
    assert repair.returncode == 0, repair.stdout + repair.stderr
    assert f"appended the ledger row of the decision in {verdict}\n" in repair.stdout
    assert _ledger_command(root, "verify").stdout == "OK: 1 entries\n"
    assert "appended" not in _ledger_command(root, "repair").stdout  # nothing left to do

    result = _drive(root, [Step(RUN)])  # the run finds the row and does not add another
    assert (result.state, result.calls) == ("completed", 1)
    _assert_consistent(root)


def test_a_mechanical_fix_cut_short_starts_again_from_where_it_started(tmp_path: Path) -> None:
    """Killed after the fix's first command ran (its plan, with the commit it starts
    from, is on disk): the resumed fix restores that commit first, so the recipe does
    not run on top of its own half-done work."""
    root = _setup(tmp_path, DEMO)
    _drive(root, [Step(RUN, "fix-report:1")])
    clone = _latest(root).clone_dir
    # What the recipe's first command (``git reset --soft HEAD~1``) leaves behind.
    subprocess.run(["git", "-C", clone, "reset", "-q", "--soft", "HEAD~1"], check=True)
    result = _drive(root, [Step(RUN)])
    assert (result.state, result.code, result.retries) == ("completed", 0, 1)
    outcomes = [v.outcome for v in _latest(root).verdicts]
    assert outcomes == ["mechanical-fix green: lint-bug-commit-order passes"]  # not red
    log = subprocess.run(
        ["git", "-C", str(root / "origin.git"), "log", "--format=%s", "orch/CARDS-1"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert log[:2] == ["test: pin Fix off-by-one in deal()", "Fix off-by-one in deal()"]
    kept = subprocess.run(
        ["git", "-C", clone, "rev-parse", "--verify", "-q",
         f"refs/orchestrator/{_latest(root).run_id}/recipe-1-cut"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert kept.returncode == 0  # what the cut-short recipe left is kept for a person
    _assert_consistent(root)


def test_an_older_state_dir_verifies_and_is_mended_the_same_way(tmp_path: Path) -> None:
    """The kept fixture's ledger lacks CARDS-1's decision: verify names it, repair
    appends it from the verdict file. A verdict written before decisions kept their
    inputs cannot be rebuilt, so it is not held against the ledger."""
    state = tmp_path / "state"
    shutil.copytree(ROOT / "tests" / "data" / "old_state", state)
    verdict = state / "runs" / "CARDS-1-20261130T232650Z-1a8b.verdict-1.json"

    def ledger(action: str) -> subprocess.CompletedProcess[str]:
        return cli_here(["--state-dir", str(state), "ledger", action], subprocess_env())

    assert f"  {verdict}\n" in ledger("verify").stdout
    older = json.loads(verdict.read_text())
    del older["inputs"]
    verdict.write_text(json.dumps(older))
    assert (ledger("verify").returncode, ledger("verify").stdout) == (0, "OK: 4 entries\n")

    shutil.copy(ROOT / "tests" / "data" / "old_state" / "runs" / verdict.name, verdict)
    repaired = ledger("repair")
    assert f"appended the ledger row of the decision in {verdict}\n" in repaired.stdout
    assert ledger("verify").stdout == "OK: 5 entries\n"
