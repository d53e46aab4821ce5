"""The recovery loop end to end: real clones, real stage processes, real git, a scripted
model. Each action of the vocabulary, the caps, and the recipe guards."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import git
import pytest

from orchestrator.app.driver import run_ticket
from orchestrator.domain.errors import EXIT_NEEDS_HUMAN
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import RunRecord, exit_code
from orchestrator.domain.tickets import load_ticket
from orchestrator.recovery.gateway import ModelReply, ModelRequest, ScriptedGateway
from orchestrator.storage.decisions import read_verdict
from orchestrator.storage.layout import run_record_paths
from orchestrator.storage.runs import RunStore

from conftest import write_ticket
from support.gitrepo import bare_clone, commit_files, init_repo
from support.harness import Harness, demo_harness, flaky, make_origin, reply, write_pipeline
from support.recording_executor import RecordingExecutor

pytestmark = pytest.mark.slow


def test_retry_reruns_the_failed_stage_and_completes(tmp_path: Path) -> None:
    make_origin(tmp_path)
    config = write_pipeline(tmp_path, flaky("build", fails=1))
    gateway = ScriptedGateway([reply({"action": "retry", "summary": "transient"})])
    h = Harness(config, gateway)
    record = h.run(write_ticket(tmp_path / "t", repository="../origin.git"))
    assert record.state is RunState.COMPLETED, record.halt
    assert [a.stage for a in record.attempts] == ["clone", "build", "build"]
    assert gateway.calls == 1
    [verdict] = h.verdicts(record)
    assert (verdict["source"], verdict["action"], verdict["valid"]) == ("model", "retry", True)
    assert record.verdicts[0].outcome == "retry: re-running build"
    assert h.budget() == (1, 1)
    assert Path(str(verdict["bundle_path"])).is_file()


def test_escalate_model_walks_the_ladder(tmp_path: Path) -> None:
    make_origin(tmp_path)
    body = (
        '[engines.coder]\ncommand = ["bash", "-c", "echo model=$ORCH_MODEL; [ $ORCH_MODEL = large ]"]\n'
        'models = ["small", "large"]\n'
        '[[stages]]\nname = "implement"\nengine = "coder"\n'
    )
    gateway = ScriptedGateway([reply({"action": "escalate-model", "summary": "too weak"})])
    h = Harness(write_pipeline(tmp_path, body), gateway)
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.COMPLETED, record.halt
    assert [(a.stage, a.model) for a in record.attempts] == [
        ("clone", None),
        ("implement", "small"),
        ("implement", "large"),
    ]
    assert "model=large" in Path(record.attempts[-1].log_path or "").read_text()


def test_switch_engine_reruns_with_the_named_engine(tmp_path: Path) -> None:
    make_origin(tmp_path)
    body = (
        '[engines.broken]\ncommand = ["bash", "-c", "exit 1"]\n'
        '[engines.works]\ncommand = ["bash", "-c", "echo engine=$ORCH_ENGINE"]\nmodels = ["m1"]\n'
        '[[stages]]\nname = "implement"\nengine = "broken"\n'
    )
    gateway = ScriptedGateway(
        [reply({"action": "switch-engine", "summary": "x", "engine": "works"})]
    )
    h = Harness(write_pipeline(tmp_path, body), gateway)
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.COMPLETED, record.halt
    assert [(a.engine, a.model) for a in record.attempts[1:]] == [("broken", None), ("works", "m1")]


def test_split_writes_linked_sub_tickets_and_ends_split(tmp_path: Path) -> None:
    make_origin(tmp_path)
    gateway = ScriptedGateway(
        [
            reply(
                {
                    "action": "split",
                    "summary": "two concerns",
                    "sub_tickets": [
                        {"title": "Fix the parser", "body": "Only the parser."},
                        {"title": "Fix the printer", "body": "Only the printer."},
                    ],
                }
            )
        ]
    )
    h = Harness(write_pipeline(tmp_path, flaky("build", fails=9)), gateway)
    ticket = write_ticket(tmp_path / "t")
    record = h.run(ticket)
    assert record.state is RunState.SPLIT and record.halt is None
    subs = [load_ticket(Path(p)) for p in record.sub_tickets]
    assert [(s.id, s.fields.parent, s.fields.title) for s in subs] == [
        ("T-1.1", "T-1", "Fix the parser"),
        ("T-1.2", "T-1", "Fix the printer"),
    ]
    assert all(Path(p).parent == ticket.parent for p in record.sub_tickets)
    assert subs[0].repository_location() == str((tmp_path / "origin.git").resolve())


@pytest.mark.quick
def test_abandon_human_writes_a_hand_off(tmp_path: Path) -> None:
    make_origin(tmp_path)
    gateway = ScriptedGateway(
        [reply({"action": "abandon-human", "summary": "needs a product decision"})]
    )
    h = Harness(write_pipeline(tmp_path, flaky("build", fails=9)), gateway)
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.NEEDS_HUMAN
    assert record.halt is not None and record.halt.reason is HaltReason.ABANDONED
    handoff = Path(record.handoff or "").read_text()
    assert "needs a product decision" in handoff
    assert "stage `build` (attempt 2)" in handoff
    assert str(RunStore(tmp_path / "state").verdict_path(record.run_id, 1)) in handoff
    assert (
        f"## To continue\n- fix what stopped it (above), then `orchestrator resume {record.run_id}`"
        in handoff
    )
    assert h.budget() == (1, 0)


def test_unknown_failure_without_a_model_is_a_synthetic_abandon(tmp_path: Path) -> None:
    make_origin(tmp_path)
    h = Harness(write_pipeline(tmp_path, flaky("build", fails=9)), None)
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.NEEDS_HUMAN
    assert record.halt is not None and record.halt.reason is HaltReason.NO_MODEL
    [verdict] = h.verdicts(record)
    assert (verdict["source"], verdict["action"], verdict["reason"]) == (
        "synthetic",
        "abandon-human",
        "no model configured",
    )
    assert h.budget() == (0, 0)  # nothing was asked, nothing charged
    assert Path(record.handoff or "").is_file()


def test_spent_diagnosis_cap_ends_the_ticket_without_a_call(tmp_path: Path) -> None:
    make_origin(tmp_path)
    config = write_pipeline(tmp_path, flaky("build", fails=9), recovery="")
    config.write_text(
        config.read_text().replace(
            "max_diag_invocations_per_ticket = 2", "max_diag_invocations_per_ticket = 0"
        )
    )
    gateway = ScriptedGateway([])
    h = Harness(config, gateway)
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.FAILED
    assert record.halt is not None and record.halt.reason is HaltReason.CAP_EXHAUSTED
    assert gateway.calls == 0 and h.builds == 0


def test_retry_cap_spent_ends_needs_human(tmp_path: Path) -> None:
    make_origin(tmp_path)
    config = write_pipeline(tmp_path, flaky("build", fails=9))
    config.write_text(
        config.read_text().replace("max_retries_per_ticket = 2", "max_retries_per_ticket = 1")
    )
    gateway = ScriptedGateway([reply({"action": "retry", "summary": "again"})] * 2)
    h = Harness(config, gateway)
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.NEEDS_HUMAN
    assert record.halt is not None and record.halt.reason is HaltReason.CAP_EXHAUSTED
    assert "retry cap spent (1/1 for this ticket)" in record.halt.detail
    assert [a.stage for a in record.attempts] == ["clone", "build", "build"]
    assert h.budget() == (2, 1)


def test_diagnosis_cap_holds_across_runs_of_the_same_ticket(tmp_path: Path) -> None:
    make_origin(tmp_path)
    gateway = ScriptedGateway([reply({"action": "abandon-human", "summary": "no"})] * 2)
    h = Harness(write_pipeline(tmp_path, flaky("build", fails=99)), gateway)
    ticket = write_ticket(tmp_path / "t")
    for _ in range(3):
        run_ticket(load_ticket(ticket), h.services, rerun=True)
    assert gateway.calls == 2  # the third run finds the cap spent and asks nobody
    assert h.budget() == (2, 0)


def test_a_crash_between_charging_and_calling_keeps_the_charge(tmp_path: Path) -> None:
    make_origin(tmp_path)

    def die(request: ModelRequest) -> ModelReply:
        raise KeyboardInterrupt  # the process dies mid-call (not an error the loop handles)

    config = write_pipeline(tmp_path, flaky("build", fails=9))
    h = Harness(config, ScriptedGateway([die]))
    ticket = write_ticket(tmp_path / "t")
    with pytest.raises(KeyboardInterrupt):
        h.run(ticket)
    assert h.budget() == (1, 0)
    [path] = run_record_paths(tmp_path / "state" / "runs")
    assert json.loads(path.read_text())["state"] == "recovering"

    # Resuming decides again: the first charge is not refunded, the new one is added.
    h2 = Harness(config, ScriptedGateway([reply({"action": "abandon-human", "summary": "stop"})]))
    record = h2.run(ticket)
    assert record.state is RunState.NEEDS_HUMAN
    assert h2.budget() == (2, 0)


def test_a_persisted_verdict_is_executed_on_resume_without_asking_again(tmp_path: Path) -> None:
    """Redelivery: the decision is found on disk; the model is not called again."""
    make_origin(tmp_path)
    config = write_pipeline(tmp_path, flaky("build", fails=1))
    gateway = ScriptedGateway([reply({"action": "retry", "summary": "transient"})])
    h = Harness(config, gateway)
    ticket = write_ticket(tmp_path / "t")

    import orchestrator.app.recover as recover_module

    real_apply = recover_module.apply
    calls: list[int] = []

    def crash_once(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        if not calls:
            calls.append(1)
            raise KeyboardInterrupt
        return real_apply(*args, **kwargs)  # type: ignore[arg-type]

    recover_module.apply = crash_once  # type: ignore[assignment]
    try:
        with pytest.raises(KeyboardInterrupt):
            h.run(ticket)
        record = h.run(ticket)
    finally:
        recover_module.apply = real_apply
    assert record.state is RunState.COMPLETED
    assert gateway.calls == 1
    assert len(record.verdicts) == 1
    assert h.budget() == (1, 1)


def test_the_decision_is_persisted_once_before_it_runs_and_handed_on_as_the_object(
    tmp_path: Path,
) -> None:
    """Reply texts, verdict file and ledger row are on disk when the substrate is called,
    and it gets the proposal that was persisted — not one read back from the file."""
    from orchestrator.app.ledger_link import ledger_for
    from orchestrator.storage.transcripts import read_texts, replies_dir

    make_origin(tmp_path)
    config = write_pipeline(tmp_path, flaky("build", fails=1))
    gateway = ScriptedGateway([reply({"action": "retry", "summary": "transient"})])
    h = Harness(config, gateway)

    import orchestrator.app.recover as recover_module

    real_apply, real_read = recover_module.apply, recover_module.read_verdict
    seen: list[str] = []

    def checked_apply(record, proposal, approval, services):  # type: ignore[no-untyped-def]
        [ref] = record.verdicts
        stored = real_read(Path(ref.path))
        assert stored.proposal == proposal
        assert stored.transcript is not None
        [call] = stored.transcript
        texts = read_texts(
            replies_dir(services.storage.runs.runs_dir, record.run_id), [call.reply_sha256]
        )
        assert list(texts.values()) == [reply({"action": "retry", "summary": "transient"})]
        rows = list(ledger_for(services.storage.runs.state_dir, {}).rows())
        assert [(r["kind"], r["decision_id"]) for r in rows] == [("decision", proposal.decision_id)]
        seen.append(proposal.action.action)
        return real_apply(record, proposal, approval, services)

    def no_read_back(path: Path) -> object:
        raise AssertionError(f"the decision was read back from {path}")

    recover_module.apply = checked_apply  # type: ignore[assignment]
    recover_module.read_verdict = no_read_back  # type: ignore[assignment]
    try:
        record = h.run(write_ticket(tmp_path / "t"))
    finally:
        recover_module.apply, recover_module.read_verdict = real_apply, real_read
    assert record.state is RunState.COMPLETED and seen == ["retry"]


def test_a_crash_before_the_ledger_row_is_mended_on_redelivery(tmp_path: Path) -> None:
    from orchestrator.app.ledger_link import LedgerLink, ledger_for

    make_origin(tmp_path)
    config = write_pipeline(tmp_path, flaky("build", fails=1))
    gateway = ScriptedGateway([reply({"action": "retry", "summary": "transient"})])
    h = Harness(config, gateway)
    ticket = write_ticket(tmp_path / "t")
    real = LedgerLink.record_decision
    crashed: list[int] = []

    def crash_once(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if not crashed:
            crashed.append(1)
            raise KeyboardInterrupt  # after the verdict file, before the ledger row
        return real(self, *args, **kwargs)

    LedgerLink.record_decision = crash_once  # type: ignore[method-assign]
    try:
        with pytest.raises(KeyboardInterrupt):
            h.run(ticket)
        record = h.run(ticket)
    finally:
        LedgerLink.record_decision = real  # type: ignore[method-assign]
    assert record.state is RunState.COMPLETED and gateway.calls == 1
    kinds = [r["kind"] for r in ledger_for(tmp_path / "state", {}).rows()]
    assert kinds == ["decision", "outcome", "playbook"]  # the green retry, proposed (issue 44)


@dataclass(frozen=True)
class Repaired:
    """The demo's CARDS-1 through the real config with no model: the squashed commit
    repaired by the playbook's recipe. Run once for the tests that only read it."""

    h: Harness
    record: RunRecord
    root: Path
    origin: Path
    gateway: ScriptedGateway


@pytest.fixture(scope="module")
def repaired(tmp_path_factory: pytest.TempPathFactory) -> Repaired:
    root = tmp_path_factory.mktemp("repaired-demo")
    gateway = ScriptedGateway([])
    h, tickets, origin = demo_harness(root, gateway)
    return Repaired(h, h.run(tickets["CARDS-1"]), root, origin, gateway)


def test_the_squashed_commit_is_repaired_by_the_playbook_recipe_and_verified(
    repaired: Repaired,
) -> None:
    h, record, tmp_path, origin, gateway = (
        repaired.h, repaired.record, repaired.root, repaired.origin, repaired.gateway,
    )  # fmt: skip
    assert record.state is RunState.COMPLETED, (record.halt, h.out.getvalue())
    assert gateway.calls == 0 and h.builds == 0  # a known failure costs no model call
    [verdict] = h.verdicts(record)
    assert (verdict["source"], verdict["action"], verdict["playbook_entry"]) == (
        "playbook",
        "mechanical-fix",
        "commit-order-squash",
    )
    fix = json.loads(
        (tmp_path / "state" / "runs" / f"{record.run_id}.mechanical_fix.json").read_text()
    )
    assert fix["status"] == "green" and fix["red_reason"] is None
    assert fix["verifier"]["check"] == "lint-bug-commit-order"
    assert fix["verification"]["exit_code"] == 0
    assert [c["exit_code"] for c in fix["commands"]] == [0] * 5
    pushed = git.Repo(origin).commit("orch/CARDS-1")
    assert [c.summary for c in (pushed, pushed.parents[0])] == [
        "test: pin Fix off-by-one in deal()",
        "Fix off-by-one in deal()",
    ]
    assert [a.stage for a in record.attempts] == [
        "clone",
        "implement",
        "review",
        "review",
        "open-pr",
    ]
    assert h.budget("CARDS-1") == (0, 1)


def test_a_recipe_that_leaves_the_check_red_falls_back_to_a_retry(tmp_path: Path) -> None:
    """The model proposes a recipe that runs fine but does not fix the order: the
    verifier stays red, the artifact is kept, and a plain retry follows (one charge)."""
    make_origin(tmp_path)
    body = (
        '[engines.patch]\ncommand = ["bash", "-c", "git commit -q --allow-empty -m work"]\n'
        '[[stages]]\nname = "implement"\nengine = "patch"\n'
        '[[stages]]\nname = "review"\n[[stages.checks]]\nname = "never"\ncommand = ["bash", "-c", "exit 1"]\n'
        'on_red_base = "ignore"\n'  # red on the base too: this test is about the recipe
    )
    gateway = ScriptedGateway(
        [
            reply(
                {
                    "action": "mechanical-fix",
                    "summary": "amend",
                    "repair_plan": {
                        "verification_check": "never",
                        "commands": ["git -C <clone> commit --allow-empty -m again"],
                    },
                }
            ),
            reply({"action": "abandon-human", "summary": "still red"}),
        ]
    )
    h = Harness(write_pipeline(tmp_path, body), gateway)
    record = h.run(write_ticket(tmp_path / "t"))
    fix = json.loads(
        (tmp_path / "state" / "runs" / f"{record.run_id}.mechanical_fix.json").read_text()
    )
    assert fix["status"] == "red"
    assert fix["red_reason"] == "verification check 'never' still fails (exit 1)"
    assert record.verdicts[0].outcome == (
        "mechanical-fix red (verification check 'never' still fails (exit 1)); "
        "fell back to retry of implement"
    )
    assert [a.stage for a in record.attempts] == [
        "clone",
        "implement",
        "review",
        "implement",
        "review",
    ]
    assert record.state is RunState.NEEDS_HUMAN
    assert h.budget() == (2, 1)


def test_a_recipe_that_edits_the_checks_own_script_is_red(tmp_path: Path) -> None:
    work = init_repo(tmp_path / "work")
    commit_files(work, {"check.sh": "exit 1\n"}, "strict check")
    work.git.branch("weak")
    work.git.checkout("weak")
    commit_files(work, {"check.sh": "exit 0\n"}, "weakened check")
    work.git.checkout("main")
    bare_clone(tmp_path / "work", tmp_path / "origin.git")
    body = '[[stages]]\nname = "review"\n[[stages.checks]]\nname = "strict"\ncommand = ["bash", "check.sh"]\n'
    gateway = ScriptedGateway(
        [
            reply(
                {
                    "action": "mechanical-fix",
                    "summary": "make it pass",
                    "repair_plan": {
                        "verification_check": "strict",
                        "commands": [
                            "git -C <clone> checkout origin/weak -- check.sh",
                            "git -C <clone> commit -m weaken",
                        ],
                    },
                }
            ),
            reply({"action": "abandon-human", "summary": "give up"}),
        ]
    )
    h = Harness(write_pipeline(tmp_path, body), gateway)
    record = h.run(write_ticket(tmp_path / "t"))
    fix = json.loads(
        (tmp_path / "state" / "runs" / f"{record.run_id}.mechanical_fix.json").read_text()
    )
    assert fix["verification"]["exit_code"] == 0  # the weakened script passed...
    assert fix["status"] == "red"  # ...and that does not count
    assert fix["red_reason"].startswith("the recipe changed the check's own files: ")
    assert record.state is RunState.NEEDS_HUMAN


@pytest.mark.parametrize(
    "command",
    [
        "git -C <clone> status; touch /tmp/pwned",
        "git -C /tmp status",
        "touch <clone>/x",
        "git -C <clone> -c core.pager=sh log",
    ],
)
def test_an_unsafe_recipe_is_refused_and_nothing_runs(tmp_path: Path, command: str) -> None:
    make_origin(tmp_path)
    body = '[[stages]]\nname = "review"\n[[stages.checks]]\nname = "c"\ncommand = ["bash", "-c", "exit 1"]\n'
    gateway = ScriptedGateway(
        [
            reply(
                {
                    "action": "mechanical-fix",
                    "summary": "x",
                    "repair_plan": {"verification_check": "c", "commands": [command]},
                }
            )
        ]
        * 2
    )
    h = Harness(write_pipeline(tmp_path, body), gateway)
    executor = RecordingExecutor()
    ran = executor.started
    h.services = replace(h.services, executor=executor)
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.NEEDS_HUMAN
    assert record.halt is not None and record.halt.reason is HaltReason.INVALID_VERDICT
    assert gateway.calls == 2  # asked, re-asked with the reason, then abandoned
    assert (
        "is not" in read_verdict(Path(record.verdicts[0].path)).errors[0]
        or "outside" in read_verdict(Path(record.verdicts[0].path)).errors[0]
    )
    assert not any(
        argv[0] in ("git", "touch") and len(argv) > 1 and argv[1] == "-C" for argv in ran
    )
    assert not Path("/tmp/pwned").exists()


def test_a_missing_clone_gives_a_synthetic_verdict_and_no_call(tmp_path: Path) -> None:
    make_origin(tmp_path)
    body = '[[stages]]\nname = "build"\ncwd = "run"\ncommand = ["bash", "-c", "rm -rf clone; exit 1"]\n'
    gateway = ScriptedGateway([])
    h = Harness(write_pipeline(tmp_path, body), gateway)
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.NEEDS_HUMAN
    assert record.halt is not None and record.halt.reason is HaltReason.PRECONDITION_FAILED
    [verdict] = h.verdicts(record)
    assert (verdict["source"], verdict["action"]) == ("synthetic", "abandon-human")
    assert "clone" in str(verdict["reason"]) and "missing" in str(verdict["reason"])
    assert gateway.calls == 0 and h.builds == 0
    assert h.budget() == (0, 0)


def test_show_tells_the_whole_story_of_a_repaired_run(repaired: Repaired) -> None:
    from orchestrator.cli.commands.show import render

    h, record = repaired.h, repaired.record
    text = "\n".join(render(record, h.services.storage.runs, {}))
    assert "1. after attempt #3: mechanical-fix (playbook) → mechanical-fix green" in text
    assert "routing auto at confidence" in text
    assert "recipe: git -C " in text and "commit -m 'Fix off-by-one in deal()' → exit 0" in text
    assert "verifier lint-bug-commit-order: exit 0 → green" in text
    assert "model    run: 0 call(s), 0 input + 0 output tokens" in text


def test_show_reports_model_usage_and_estimated_cost(tmp_path: Path) -> None:
    from orchestrator.cli.commands.show import render
    from orchestrator.domain.config import PriceConfig

    make_origin(tmp_path)
    gateway = ScriptedGateway(
        [ModelReply(text=reply({"action": "abandon-human", "summary": "no"}), model="m1",
                    stop_reason="end_turn", input_tokens=2000, output_tokens=500)]
    )  # fmt: skip
    h = Harness(write_pipeline(tmp_path, flaky("build", fails=9)), gateway)
    record = h.run(write_ticket(tmp_path / "t"))
    prices = {"m1": PriceConfig(input_per_mtok=3.0, output_per_mtok=15.0)}
    text = "\n".join(render(record, h.services.storage.runs, prices))
    assert "model    run: 1 call(s), 2000 input + 500 output tokens, ~$0.0135" in text
    assert "model    ticket: 1 call(s)" in text


@pytest.mark.parametrize(
    ("odd_reply", "said"),
    [
        ('{"action": ["retry"], "summary": "list action"}', "action: ['retry'] is not one of"),
        ("[" * 10_000 + "]" * 10_000, "reply is nested deeper than 16 levels"),
        ('{"action": "retry", "summary": "\\ud800"}', "a string holds a lone surrogate"),
        ('{"action": "retry", "summary": "raw \ud800 surrogate"}', "reply holds a lone surrogate"),
    ],
    ids=["list-action", "nested-10000", "surrogate-escape", "raw-surrogate"],
)
def test_an_odd_reply_ends_needs_human_with_a_valid_utf8_verdict_and_no_second_charge(
    tmp_path: Path, odd_reply: str, said: str
) -> None:
    make_origin(tmp_path)
    config = one_diagnosis(write_pipeline(tmp_path, flaky("build", fails=99)))
    gateway = ScriptedGateway([odd_reply, odd_reply])  # the reply, and the re-ask's
    h = Harness(config, gateway)
    ticket = write_ticket(tmp_path / "t")
    record = h.run(ticket)
    assert record.state is RunState.NEEDS_HUMAN, record.halt
    assert exit_code(record) == EXIT_NEEDS_HUMAN
    assert record.halt is not None and record.halt.reason is HaltReason.INVALID_VERDICT
    assert said in record.halt.detail
    [ref] = record.verdicts
    data = Path(ref.path).read_bytes()
    stored = json.loads(data.decode("utf-8"))  # strict UTF-8: no lone surrogate on disk
    assert (stored["action"], stored["valid"], stored["halt"]) == (
        "abandon-human", False, "invalid_verdict",
    )  # fmt: skip
    assert any(said in e for e in stored["errors"])
    for text in (tmp_path / "state" / "runs").glob("*.replies/*.txt"):
        text.read_bytes().decode("utf-8")
    assert gateway.calls == 2 and h.budget() == (1, 0)

    assert_ended_and_nothing_more_charged(tmp_path, config, ticket, record.run_id)


def one_diagnosis(config: Path) -> Path:
    text = config.read_text()
    assert "max_diag_invocations_per_ticket = 2" in text
    config.write_text(
        text.replace("max_diag_invocations_per_ticket = 2", "max_diag_invocations_per_ticket = 1")
    )
    return config


def assert_ended_and_nothing_more_charged(
    tmp_path: Path, config: Path, ticket: Path, run_id: str
) -> None:
    """The run is over on disk (not left in ``recovering`` for a re-run to resume and charge
    again), and running the ticket again asks no model and charges nothing."""
    [path] = run_record_paths(tmp_path / "state" / "runs")
    assert json.loads(path.read_text())["state"] == "needs-human"
    again = Harness(config, ScriptedGateway([]))
    record = again.run(ticket)
    assert record.run_id != run_id  # a new run: the first one ended
    assert record.state is RunState.FAILED and record.halt is not None
    assert record.halt.reason is HaltReason.CAP_EXHAUSTED
    assert again.budget() == (1, 0) and again.builds == 0


def test_a_bug_while_deciding_still_persists_an_abandon_and_keeps_the_charge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth: whatever raises inside the decision, the run ends needs-human
    with a persisted verdict that says why, never stuck in ``recovering``."""
    import orchestrator.recovery.diagnose as diagnose_module

    def broken(*args: object, **kwargs: object) -> object:
        raise TypeError("unhashable type: 'list' (sk-ant-api03-" + "k" * 40 + ")\nmore")

    # A bug on the model's path, after the diagnosis was charged and the call made.
    monkeypatch.setattr(diagnose_module, "semantic_errors", broken)
    make_origin(tmp_path)
    config = one_diagnosis(write_pipeline(tmp_path, flaky("build", fails=99)))
    gateway = ScriptedGateway([reply({"action": "retry", "summary": "x"})])
    h = Harness(config, gateway)
    ticket = write_ticket(tmp_path / "t")
    record = h.run(ticket)
    monkeypatch.undo()
    assert record.state is RunState.NEEDS_HUMAN, record.halt
    assert record.halt is not None and record.halt.reason is HaltReason.INVALID_VERDICT
    [stored] = h.verdicts(record)
    assert (stored["source"], stored["action"], stored["valid"]) == (
        "synthetic", "abandon-human", False,
    )  # fmt: skip
    reason = str(stored["reason"])
    assert "TypeError: unhashable type: 'list'" in reason
    assert "sk-ant" not in reason and "more" not in reason  # redacted, one line
    assert gateway.calls == 1 and h.budget() == (1, 0)
    assert record.counters.diagnoses == 1  # the call made stays counted

    assert_ended_and_nothing_more_charged(tmp_path, config, ticket, record.run_id)
