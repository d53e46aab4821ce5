"""Benchmark: ``orchestrator report`` over a batch of 1,000 runs, against reading them.

    python bench/bench_report.py            # 1,000 runs (~1 min to build, the report timed)
    python bench/bench_report.py --quick    # 100 runs (a smoke run, seconds)
    python bench/bench_report.py --runs N   # any size

Setup: two tickets run through the real pipeline (bash stages, the real driver, recovery
with a model answered in process): one completes, one fails once and waits for approval
of the model's retry. Their run record, verdict file, bundle, approval, logs and hand-off
are the seeds; N runs are written from them through the storage layer's own writers
(``RunStore.save``, ``write_verdict``, ``write_approval``, ``write_bundle``,
``write_handoff``), each with its own ids, and one batch record names them all. So the
report reads the files a real batch writes, N times over.

Timed, median of ``TRIALS``, interleaved: the whole report (``read_report`` +
``render_page`` + the atomic write) against the baseline of reading the same runs through
the read model alone (each run record and verdict file parsed and validated). Targets, from
the issue: the report in at most 2 s, the page at most 5 MB.

Prints PASS/FAIL; the exit code is 0 unless the benchmark itself failed.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/bench_report.py` puts bench/ on sys.path
    sys.path.insert(0, str(ROOT))

from orchestrator.cli.commands.batch import batch  # noqa: E402
from orchestrator.cli.commands.report import context_of, write_page  # noqa: E402
from orchestrator.domain.runs import RunRecord  # noqa: E402
from orchestrator.recovery.gateway import ModelReply, ModelRequest  # noqa: E402
from orchestrator.reports.report_reader import Selection, read_report  # noqa: E402
from orchestrator.storage.approvals import read_approval, write_approval  # noqa: E402
from orchestrator.storage.batch_record import (  # noqa: E402
    BatchRecord,
    BatchTicket,
    write_batch_record,
)
from orchestrator.storage.decisions import read_verdict, write_verdict  # noqa: E402
from orchestrator.storage.files import FileStorage  # noqa: E402
from orchestrator.storage.layout import run_record_paths  # noqa: E402
from orchestrator.storage.runs import read_record_file  # noqa: E402

TARGET_S = 2.0
TARGET_BYTES = 5_000_000
TRIALS = 5
FULL_RUNS, QUICK_RUNS = 1000, 100
MODEL = "claude-sonnet-4-6"

CONFIG = f"""
state_dir = "state"
[prices."{MODEL}"]
input_per_mtok = 3.0
output_per_mtok = 15.0
[[stages]]
name = "clone"
cwd = "run"
command = ["bash", "-c", "git init -q clone"]
[[stages]]
name = "build"
command = ["bash", "-c", "f=$ORCH_STATE_DIR/b-$ORCH_TICKET_ID; echo x >> $f; [ $ORCH_TICKET_ID = S-OK ] || [ $(wc -l < $f) -ge 2 ] || {{ seq 1 40; echo 'error: flaky build'; exit 1; }}"]
[[stages]]
name = "test"
command = ["bash", "-c", "echo tested"]
"""


class RetryModel:
    """Answers every diagnosis with retry (routed to a person: no track record)."""

    model_name = MODEL

    def complete(self, request: ModelRequest) -> ModelReply:
        text = json.dumps({"action": "retry", "summary": "the build looks flaky; run it again"})
        return ModelReply(
            text=text, model=MODEL, stop_reason="end_turn", input_tokens=1200, output_tokens=80
        )


def seed(work: Path) -> Path:
    """Two real runs in ``work/state``: S-OK completed, S-FLAKY awaiting approval."""
    import git

    origin = work / "origin.git"
    git.Repo.init(origin, bare=True).close()
    tickets = work / "tickets"
    tickets.mkdir()
    for ticket_id in ("S-OK", "S-FLAKY"):
        (tickets / f"{ticket_id}.md").write_text(
            f'+++\nid = "{ticket_id}"\ntitle = "Seed {ticket_id}"\nkind = "feature"\n'
            f'repository = "{origin}"\nbase_branch = "main"\n+++\nDo it.\n'
        )
    config = work / "config.toml"
    config.write_text(CONFIG)
    model = RetryModel()
    code = batch(
        config, None, tickets, jobs=1, as_json=True, worker=False, out=io.StringIO(),
        environ={"PATH": os.environ["PATH"], "HOME": str(work)}, gateway_factory=lambda: model,
    )  # fmt: skip
    if code != 3:  # awaiting approval counts as needing a person
        raise SystemExit(f"the seed batch ended {code}, not 3: the benchmark cannot run")
    return work / "state"


def clone_runs(seed_state: Path, count: int) -> tuple[Path, str]:
    """``count`` runs written from the two seeds through the storage writers; returns the
    state dir and the id of the batch that names them."""
    storage = FileStorage(seed_state)
    seeds = [storage.runs.latest_for_ticket(t) for t in ("S-OK", "S-FLAKY")]
    assert all(seeds), "the seed runs are missing"
    batch_id = "20261201T030000Z-bench"
    tickets = []
    for index in range(count):
        source: RunRecord = seeds[index % 2]  # type: ignore[assignment]
        ticket_id = f"B-{index:05d}"
        run_id = f"{ticket_id}-20261201T{index // 3600 % 24:02d}{index // 60 % 60:02d}{index % 60:02d}Z-{index % 65536:04x}"
        old_dir = source.run_dir

        def move(
            text: str, src: RunRecord = source, rid: str = run_id, tid: str = ticket_id
        ) -> str:
            return text.replace(src.run_id, rid).replace(src.ticket_id, tid)

        shift = timedelta(seconds=index)
        raw = json.loads(move(source.model_dump_json()))
        record = RunRecord.model_validate(raw).model_copy(
            update={
                "created_at": source.created_at + shift,
                "updated_at": source.updated_at + shift,
                "attempts": tuple(
                    a.model_copy(
                        update={
                            "started_at": a.started_at + shift,
                            "ended_at": a.ended_at + shift if a.ended_at else None,
                        }
                    )
                    for a in RunRecord.model_validate(raw).attempts
                ),
            }
        )
        logs = Path(move(str(Path(old_dir) / "logs")))
        shutil.copytree(Path(old_dir) / "logs", logs)
        for ref in source.verdicts:
            verdict = read_verdict(Path(ref.path))
            copied = type(verdict).model_validate_json(move(verdict.model_dump_json()))
            write_verdict(storage.decisions.path(run_id, ref.number), copied)
            bundle = storage.layout.bundle_path(source.run_id, ref.number)
            if bundle.is_file():
                storage.runs.write_bundle(run_id, ref.number, move(bundle.read_text()))
            approval = read_approval(storage.approvals.path(source.run_id, ref.number))
            if approval is not None:
                write_approval(
                    storage.approvals.path(run_id, ref.number),
                    type(approval).model_validate_json(move(approval.model_dump_json())),
                )
        if source.handoff:
            storage.runs.write_handoff(run_id, move(Path(source.handoff).read_text()))
        storage.runs.save(record)
        tickets.append(BatchTicket(ticket=ticket_id, status=str(record.state), run_id=run_id))
    write_batch_record(
        storage.layout,
        BatchRecord(batch_id=batch_id, started_at=seeds[0].created_at, tickets=tuple(tickets)),  # type: ignore[union-attr]
    )
    return seed_state, batch_id


def read_model_only(state_dir: Path, run_ids: set[str]) -> int:
    """The baseline: every run record and verdict file of the batch, parsed and validated."""
    decisions = 0
    for path in run_record_paths(state_dir / "runs"):
        if path.stem not in run_ids:
            continue
        record = read_record_file(path)
        for ref in record.verdicts:
            read_verdict(Path(ref.path))
            decisions += 1
    return decisions


def median_time(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_RUNS} runs (a smoke run)")
    parser.add_argument("--runs", type=int, help=f"how many runs (default {FULL_RUNS})")
    args = parser.parse_args(argv)
    count = args.runs or (QUICK_RUNS if args.quick else FULL_RUNS)
    with tempfile.TemporaryDirectory(prefix="orchestrator-bench-report-") as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        state_dir, batch_id = clone_runs(seed(work), count)
        print(f"setup ({count:,} runs from 2 real seed runs, through the storage writers) "
              f"{time.perf_counter() - started:.1f}s")  # fmt: skip
        run_ids = {t.stem for t in run_record_paths(state_dir / "runs") if t.stem.startswith("B-")}
        context = context_of(work / "config.toml")
        page = work / "site" / "report.html"
        page.parent.mkdir()
        reports, baselines = [], []
        decisions = 0
        for _ in range(TRIALS):
            decisions = read_model_only(state_dir, run_ids)
            baselines.append(median_time(lambda: read_model_only(state_dir, run_ids)))
            reports.append(
                median_time(
                    lambda: write_page(
                        read_report(state_dir, Selection(batch_id=batch_id), context),
                        page,
                        what="bench",
                    )
                )
            )
        data = read_report(state_dir, Selection(batch_id=batch_id), context)
        if len(data.runs) != count:
            print(f"benchmark error: the report has {len(data.runs)} runs, not {count}")
            return 1
        size = page.stat().st_size
        report_s, base_s = statistics.median(reports), statistics.median(baselines)
        time_ok, size_ok = report_s <= TARGET_S, size <= TARGET_BYTES
        print(f"report over {count:,} runs ({decisions:,} decisions), median of {TRIALS}")
        print(f"  read model only (baseline)  {base_s * 1000:8.1f} ms")
        print(f"  report (read, render, write){report_s * 1000:8.1f} ms  "
              f"{report_s / base_s:.2f}x the baseline")  # fmt: skip
        print(
            f"  page size                   {size / 1e6:8.2f} MB  ({size / count / 1000:.1f} kB per run)"
        )
        print("summary")
        print(
            f"  report time {report_s:.2f}s (target <= {TARGET_S:g}s)  {'PASS' if time_ok else 'FAIL'}"
        )
        print(f"  page size {size / 1e6:.2f} MB (target <= {TARGET_BYTES / 1e6:g} MB)  "
              f"{'PASS' if size_ok else 'FAIL'}")  # fmt: skip
        print(f"  {int(time_ok) + int(size_ok)}/2 targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
