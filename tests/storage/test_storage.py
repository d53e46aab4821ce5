"""The storage layer: names on disk are the ones older state dirs have, finders find
exactly the decisions there are, and a lock held by another process is reported, not
waited on (or waited on, where waiting is asked for)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.domain.errors import StateError, TicketLocked
from orchestrator.reports.handoff import HandoffFacts, render_handoff
from orchestrator.storage._locks import flock
from orchestrator.storage.approvals import Approval
from orchestrator.storage.decisions import VerdictRecord, read_verdict, write_verdict
from orchestrator.storage.files import FileStorage
from orchestrator.storage.layout import StateLayout, verdict_files
from orchestrator.storage.ledger import history_by_scan
from orchestrator.storage.runs import interrupts_held
from orchestrator.storage.ticket_queue import write_sub_ticket

from conftest import ROOT, subprocess_env

RUN = "CARDS-1-20260115T120000Z-ab12"
OTHER_RUN = "CARDS-1-20260116T090000Z-cd34"
AT = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


OLD_STATE = ROOT / "tests" / "data" / "old_state"  # written by the code before this layer
OLD_RUN = "CARDS-1-20261130T232650Z-1a8b"


def verdict(run_id: str, number: int) -> VerdictRecord:
    """A real verdict file's record, renumbered."""
    old = read_verdict(OLD_STATE / "runs" / f"{OLD_RUN}.verdict-1.json")
    return old.model_copy(update={"run_id": run_id, "number": number})


def test_every_name_on_disk_is_the_one_older_state_dirs_have(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    runs = tmp_path / "runs"
    assert layout.record_path(RUN) == runs / f"{RUN}.json"
    assert layout.run_dir(RUN) == runs / RUN
    assert layout.ticket_snapshot_dir(RUN) == runs / RUN / "ticket"
    assert layout.clone_dir(RUN) == runs / RUN / "clone"
    assert layout.logs_dir(RUN) == runs / RUN / "logs"
    assert layout.pull_request_path(RUN) == runs / RUN / "pull-request.json"
    assert layout.verdict_path(RUN, 3) == runs / f"{RUN}.verdict-3.json"
    assert layout.bundle_path(RUN, 3) == runs / f"{RUN}.bundle-3.json"
    assert layout.approval_path(RUN, 3) == runs / f"{RUN}.approval-3.json"
    assert layout.replies_dir(RUN) == runs / f"{RUN}.replies"
    assert layout.mechanical_fix_path(RUN) == runs / f"{RUN}.mechanical_fix.json"
    assert layout.handoff_path(RUN) == runs / f"{RUN}.handoff.md"
    assert layout.ticket_budget_path("CARDS-1") == tmp_path / "tickets" / "CARDS-1.json"
    assert layout.ticket_lock_path("CARDS-1") == tmp_path / "locks" / "CARDS-1.lock"
    assert layout.batch_dir("b1") == tmp_path / "batches" / "b1"
    assert layout.batch_budget_path("b1") == tmp_path / "batches" / "b1" / "budget.json"
    assert layout.batch_worker_log("b1", 2) == tmp_path / "batches" / "b1" / "worker-2.log"
    assert layout.ledger_path == tmp_path / "ledger.jsonl"
    assert StateLayout.of_run_dir(layout.run_dir(RUN)) == layout
    assert not tmp_path.joinpath("runs").exists()  # naming touches nothing


def test_verdict_files_are_found_by_run_or_ticket_in_decision_order(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    for run_id, number in (
        (RUN, 10),
        (RUN, 2),
        (OTHER_RUN, 1),
        ("CARDS-10-20260115T120000Z-ab12", 1),
    ):
        (runs / f"{run_id}.verdict-{number}.json").write_text("{}")
    # Not decisions: a stray name, a directory, a number that is not one, a bundle.
    (runs / "notes.verdict-1.json").write_text("{}")
    (runs / f"{RUN}.verdict-7.json").mkdir()
    (runs / f"{RUN}.verdict-x.json").write_text("{}")
    (runs / f"{RUN}.bundle-1.json").write_text("{}")

    def found(**where: str) -> list[tuple[str, int]]:
        return [(v.run_id, v.number) for v in verdict_files(runs, **where)]

    assert found(run_id=RUN) == [(RUN, 2), (RUN, 10)]
    assert found(ticket_id="CARDS-1") == [(RUN, 2), (RUN, 10), (OTHER_RUN, 1)]
    assert found() == [  # by run id: "CARDS-1-..." sorts before "CARDS-10-..."
        (RUN, 2),
        (RUN, 10),
        (OTHER_RUN, 1),
        ("CARDS-10-20260115T120000Z-ab12", 1),
    ]
    assert verdict_files(tmp_path / "absent") == []


def test_run_files_are_what_a_reader_opens_to_see_what_was_decided(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    layout.run_dir(RUN).mkdir(parents=True)
    for path in (
        layout.record_path(RUN),
        layout.handoff_path(RUN),
        layout.verdict_path(RUN, 1),
        layout.bundle_path(RUN, 1),
        layout.mechanical_fix_path(RUN),
        layout.record_path(OTHER_RUN),
    ):
        path.write_text("{}")
    assert [p.name for p in layout.run_files(RUN)] == [
        f"{RUN}.bundle-1.json",
        f"{RUN}.mechanical_fix.json",
        f"{RUN}.verdict-1.json",
        f"{RUN}.handoff.md",
    ]


def test_stores_read_what_the_files_of_an_older_state_dir_hold(tmp_path: Path) -> None:
    # Written the way the code before the storage layer wrote it: at a path it built.
    old = tmp_path / "runs" / f"{RUN}.verdict-1.json"
    write_verdict(old, verdict(RUN, 1))
    storage = FileStorage(tmp_path)
    assert storage.decisions.read(RUN, 1) == verdict(RUN, 1)
    assert [v.path for v in storage.decisions.find(run_id=RUN)] == [old]
    assert storage.decisions.write(verdict(RUN, 2)) == tmp_path / "runs" / f"{RUN}.verdict-2.json"
    with pytest.raises(StateError, match="no such verdict file"):
        storage.decisions.read(RUN, 9)


def test_an_approval_is_written_once_where_the_run_expects_it(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    approval = Approval(
        decision_id=f"{RUN}:attempt-1:verdict-1", run_id=RUN, verdict=1, approved=True,
        by="alice", at=AT, routing="hitl_required",
    )  # fmt: skip
    assert not storage.approvals.answered(RUN, 1)
    storage.approvals.write(approval)
    assert storage.approvals.answered(RUN, 1)
    assert (tmp_path / "runs" / f"{RUN}.approval-1.json").is_file()
    assert storage.approvals.read(RUN, 1) == approval
    with pytest.raises(StateError, match="decision 1 was already answered"):
        storage.approvals.write(approval.model_copy(update={"approved": False}))
    assert storage.approvals.read(RUN, 1) == approval


def test_budgets_and_the_ledger_live_where_they_always_have(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    storage.budgets.charge("CARDS-1", "retry", "k1", run_id=RUN, at=AT)
    storage.budgets.charge("CARDS-1", "retry", "k1", run_id=RUN, at=AT)  # same key: no-op
    assert storage.budgets.load("CARDS-1").spent("retry") == 1
    assert (tmp_path / "tickets" / "CARDS-1.json").is_file()
    assert storage.ledger().path == tmp_path / "ledger.jsonl"


HOLD = """
import sys
from pathlib import Path
from orchestrator.storage.files import FileStorage
from orchestrator.storage._locks import flock
from orchestrator.reports.handoff import HandoffFacts, render_handoff
from orchestrator.storage.runs import interrupts_held
from orchestrator.storage.ticket_queue import write_sub_ticket

kind, root = sys.argv[1], Path(sys.argv[2])
if kind == "ticket":
    with FileStorage(root).locks.ticket("CARDS-1"):
        print("held", flush=True)
        sys.stdin.read()
else:
    with flock(root / "some.lock"):
        print("held", flush=True)
        sys.stdin.read()
"""


def holder(kind: str, root: Path) -> subprocess.Popen[str]:
    """A real second process that holds the lock until its stdin closes."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLD), kind, str(root)],
        cwd=ROOT, env=subprocess_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


@pytest.mark.slow
def test_a_ticket_held_by_another_process_is_reported_with_its_pid(tmp_path: Path) -> None:
    proc = holder("ticket", tmp_path)
    try:
        with pytest.raises(TicketLocked) as raised:
            with FileStorage(tmp_path).locks.ticket("CARDS-1"):
                pass
        assert raised.value.holder_pid == proc.pid
        assert str(raised.value) == f"skipped: CARDS-1 is locked by pid {proc.pid}"
    finally:
        proc.communicate("", timeout=30)
    with FileStorage(tmp_path).locks.ticket("CARDS-1"):  # released when the holder ended
        assert (tmp_path / "locks" / "CARDS-1.lock").read_text() == f"{os.getpid()}\n"


@pytest.mark.slow
def test_flock_without_waiting_refuses_and_with_missing_ok_yields_none(tmp_path: Path) -> None:
    proc = holder("plain", tmp_path)
    try:
        for exclusive in (True, False):
            with pytest.raises(BlockingIOError):
                with flock(tmp_path / "some.lock", exclusive=exclusive, wait=False):
                    pass
    finally:
        proc.communicate("", timeout=30)
    (tmp_path / "dir.lock").mkdir()  # cannot be opened as a lock file
    with flock(tmp_path / "dir.lock", missing_ok=True) as fd:
        assert fd is None
    with flock(tmp_path / "absent" / "r.lock", missing_ok=True) as fd:
        assert fd is None
    assert not (tmp_path / "absent").exists()  # a reader creates nothing


def test_a_second_mechanical_fix_never_overwrites_the_first_report(tmp_path: Path) -> None:
    runs = FileStorage(tmp_path).runs
    first = runs.write_mechanical_fix(RUN, 1, {"verdict": 1, "status": "running"})
    runs.write_mechanical_fix(RUN, 1, {"verdict": 1, "status": "red"})  # the same fix, later
    second = runs.write_mechanical_fix(RUN, 3, {"verdict": 3, "status": "green"})
    assert first.name == f"{RUN}.mechanical_fix-1.json"
    assert second.name == f"{RUN}.mechanical_fix-3.json"
    assert json.loads(first.read_text()) == {"verdict": 1, "status": "red"}
    assert json.loads(second.read_text()) == {"verdict": 3, "status": "green"}
    # The seed's name keeps working, for the latest.
    latest = tmp_path / "runs" / f"{RUN}.mechanical_fix.json"
    assert latest.read_bytes() == second.read_bytes()


def test_bundle_and_handoff_are_written_where_the_run_names_them(tmp_path: Path) -> None:
    runs = FileStorage(tmp_path).runs
    assert runs.write_bundle(RUN, 2, '{"b": 1}') == runs.bundle_path(RUN, 2)
    assert runs.bundle_path(RUN, 2).read_text() == '{"b": 1}'
    assert runs.write_handoff(RUN, "# over to you\n").read_text() == "# over to you\n"
    assert runs.handoff_path(RUN) == tmp_path / "runs" / f"{RUN}.handoff.md"


def test_an_older_state_dir_reads_through_every_store(tmp_path: Path) -> None:
    state = tmp_path / "state"
    shutil.copytree(OLD_STATE, state)
    storage = FileStorage(state)
    assert storage.runs.load(OLD_RUN).run_id == OLD_RUN
    assert storage.runs.latest_for_ticket("CARDS-1") == storage.runs.load(OLD_RUN)
    found = storage.decisions.find(ticket_id="CARDS-3")
    assert [(v.run_id, v.number) for v in found] == [
        ("CARDS-3-20261130T232652Z-6de1", 1),
        ("CARDS-3-20261130T232652Z-6de1", 2),
    ]
    assert storage.decisions.read(OLD_RUN, 1).run_id == OLD_RUN
    approval = storage.approvals.read(OLD_RUN, 1)
    assert approval is not None and approval.verdict == 1
    ledger = storage.ledger()
    assert ledger.verify().ok
    rows = list(ledger.rows())
    decision = next(r for r in rows if r["kind"] == "decision")
    signature = decision["decision"]["signature"]
    # The index is built on first use from the old ledger, and agrees with its rows.
    assert ledger.rows_of(decision["decision_id"])[0] == decision
    assert ledger.history(signature) == history_by_scan(rows, signature)
    assert ledger.verify().ok


class _Stop(BaseException):
    pass


def test_a_signal_during_a_record_save_lands_after_serialising_not_inside_it(
    tmp_path: Path,
) -> None:
    record = FileStorage(OLD_STATE).runs.load(OLD_RUN)
    store = FileStorage(tmp_path).runs
    delivered: list[str] = []

    def stop(signum: int, frame: object) -> None:
        delivered.append("handler")
        raise _Stop

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        with pytest.raises(_Stop):
            with interrupts_held():
                os.kill(os.getpid(), signal.SIGTERM)  # arrives while held: deferred
                delivered.append("body finished")
        assert delivered == ["body finished", "handler"]
        store.save(record)  # and with nothing pending, a save is a save
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert store.load(OLD_RUN) == record


def test_a_signal_the_os_gives_another_thread_is_held_all_the_same() -> None:
    # A worker has a lease renewer thread; the OS may hand SIGTERM to it, and Python then
    # runs the handler in the main thread, in the middle of the block. The wakeup fd is
    # written by the C-level handler, in whichever thread took the signal: reading it
    # waits until the signal has been taken, with no sleep.
    delivered: list[str] = []

    def stop(signum: int, frame: object) -> None:
        delivered.append("handler")
        raise _Stop

    other_may_end = threading.Event()
    other = threading.Thread(target=other_may_end.wait)
    other.start()
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous = signal.signal(signal.SIGTERM, stop)
    previous_fd = signal.set_wakeup_fd(write_end)
    try:
        with pytest.raises(_Stop):
            with interrupts_held():
                assert other.ident is not None
                signal.pthread_kill(other.ident, signal.SIGTERM)
                assert os.read(read_end, 1) == bytes([signal.SIGTERM])
                delivered.append("body finished")  # a call: where a handler would run
        assert delivered == ["body finished", "handler"]
    finally:
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGTERM, previous)
        other_may_end.set()
        other.join()
        os.close(read_end)
        os.close(write_end)


def test_an_older_run_records_workspace_is_where_the_layout_names_it() -> None:
    # Paths the code before this layer built by hand, as its run record and hand-off hold
    # them: the layout (from the record's own run dir) names the very same places.
    run_id = "CARDS-3-20261130T232652Z-6de1"
    record = FileStorage(OLD_STATE).runs.load(run_id)
    layout = StateLayout.of_run_dir(Path(record.run_dir))
    assert layout.root == Path("/tmp/h1old/w/mstate")
    assert str(layout.clone_dir(run_id)) == record.clone_dir
    assert str(layout.ticket_snapshot_dir(run_id) / "CARDS-3.md") == record.ticket_snapshot
    logs = {Path(a.log_path).parent for a in record.attempts if a.log_path}
    assert logs == {layout.logs_dir(run_id)}
    facts = HandoffFacts(
        why="w", verdict_number=2, source="model", action="abandon-human", reason="r",
        record_path=layout.record_path(run_id), verdict_path=layout.verdict_path(run_id, 2),
        bundle_path=None,
    )  # fmt: skip
    old = (OLD_STATE / "runs" / f"{run_id}.handoff.md").read_text().splitlines()
    new = render_handoff(record, facts).splitlines()
    for label in ("- logs:", "- clone:", "- ticket:"):
        assert [line for line in new if line.startswith(label)] == [
            line for line in old if line.startswith(label)
        ]


def test_workspace_files_are_written_inside_the_run_workspace_only(tmp_path: Path) -> None:
    runs = FileStorage(tmp_path).runs
    prompt = runs.run_dir(RUN) / "prompt-1.txt"
    runs.write_workspace_files(RUN, {prompt: "fix the tests\n"})
    assert prompt.read_text() == "fix the tests\n"
    stray = tmp_path / "elsewhere.txt"
    escaping = runs.run_dir(RUN) / ".." / f"{OTHER_RUN}" / "prompt-1.txt"
    for outside in (stray, escaping):
        with pytest.raises(StateError, match="outside the run's workspace"):
            # Refused before anything is written: the good file beside it is not written.
            runs.write_workspace_files(RUN, {prompt.with_name("p2.txt"): "x", outside: "x"})
        assert not outside.exists()
    assert not prompt.with_name("p2.txt").exists()


def test_a_sub_ticket_is_written_once_and_never_over_another_file(tmp_path: Path) -> None:
    queue = tmp_path / "tickets"
    queue.mkdir()
    first = write_sub_ticket(queue, "CARDS-7.1", "one\n", run_id=RUN)
    assert first == queue / "CARDS-7.1.md" and first.read_text() == "one\n"
    before = first.stat()
    # A redelivered split finds its own file and leaves it as it is.
    assert write_sub_ticket(queue, "CARDS-7.1", "one\n", run_id=RUN) == first
    assert first.stat().st_mtime_ns == before.st_mtime_ns
    # Another run's different sub-ticket of that id goes beside it, under its run id.
    other = write_sub_ticket(queue, "CARDS-7.1", "two\n", run_id=OTHER_RUN)
    assert other == queue / f"CARDS-7.1.{OTHER_RUN}.md" and other.read_text() == "two\n"
    assert first.read_text() == "one\n"
    assert {p.name for p in queue.iterdir()} == {"CARDS-7.1.md", f"CARDS-7.1.{OTHER_RUN}.md"}
