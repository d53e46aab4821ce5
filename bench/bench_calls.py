"""Model calls per ticket, counted over a batch of scripted failures.

    python bench/bench_calls.py [--quick]

Builds the demo project and runs a batch of tickets through the default pipeline with a
scripted model that is as unhelpful as possible (garbage, then "retry" forever). Reports,
per ticket kind, the diagnoses charged and the model calls made, against the caps in
config.toml: diagnoses ≤ max_diag_invocations_per_ticket, calls ≤ that * (1 + max_reasks),
and zero calls for failures the playbook knows. Exit 0 unless the benchmark crashed.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from orchestrator.app.driver import run_ticket  # noqa: E402
from orchestrator.app.services import Services  # noqa: E402
from orchestrator.cli.console import PlainReporter  # noqa: E402
from orchestrator.demo.run import build_demo  # noqa: E402
from orchestrator.domain.config import load_config  # noqa: E402
from orchestrator.domain.tickets import load_ticket  # noqa: E402
from orchestrator.recovery.gateway import ModelReply, ModelRequest  # noqa: E402
from orchestrator.reports.handoff import MARKDOWN  # noqa: E402
from orchestrator.storage.budget import BudgetStore  # noqa: E402
from orchestrator.storage.files import FileStorage  # noqa: E402
from orchestrator.storage.runs import RunStore  # noqa: E402

UNHELPFUL = ["I think you should retry.", '{"action": "retry", "summary": "try again"}']


class CountingGateway:
    """Answers garbage, then "retry", in turn; counts calls per ticket."""

    model_name = "scripted-unhelpful"

    def __init__(self) -> None:
        self.calls: dict[str, int] = defaultdict(int)
        self.current = ""

    def complete(self, request: ModelRequest) -> ModelReply:
        self.calls[self.current] += 1
        text = UNHELPFUL[self.calls[self.current] % len(UNHELPFUL)]
        return ModelReply(text=text, model=self.model_name, stop_reason="end_turn")


def copy_ticket(source: Path, new_id: str) -> Path:
    text = source.read_text().replace(f'id = "{source.stem}"', f'id = "{new_id}"', 1)
    target = source.with_name(f"{new_id}.md")
    target.write_text(text)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="3 tickets of each kind, not 10")
    copies = 3 if parser.parse_args().quick else 10
    loaded = load_config(ROOT / "config.toml")
    caps = loaded.config.recovery
    work = Path(tempfile.mkdtemp(prefix="bench-calls-"))
    try:
        layout = build_demo(work / "demo")
        gateway = CountingGateway()
        store = RunStore(work / "state")
        services = Services(
            loaded=loaded,
            storage=FileStorage(work / "state"),
            reporter=PlainReporter(io.StringIO()),
            handoffs=MARKDOWN,
            environ={"PATH": os.environ["PATH"], "HOME": str(work), "DRY_RUN": "false"},
            gateway_factory=lambda: gateway,
        )
        kinds = {
            "playbook-known (squashed commit)": layout.tickets["CARDS-1"],
            "unknown (failing project tests)": layout.tickets["CARDS-3"],
        }
        started = time.monotonic()
        results: dict[str, list[tuple[str, int, int, str]]] = defaultdict(list)
        for kind, source in kinds.items():
            for k in range(copies):
                ticket_id = f"{source.stem}-{k}"
                gateway.current = ticket_id
                record = run_ticket(load_ticket(copy_ticket(source, ticket_id)), services)
                charged = BudgetStore(store.state_dir).load(ticket_id).spent("diagnosis")
                results[kind].append((ticket_id, gateway.calls[ticket_id], charged, record.state))
        elapsed = time.monotonic() - started
    finally:
        shutil.rmtree(work, ignore_errors=True)

    max_calls = caps.max_diag_invocations_per_ticket * (1 + caps.max_reasks)
    print(
        f"caps: {caps.max_diag_invocations_per_ticket} diagnoses per ticket, "
        f"{caps.max_reasks} re-ask(s) each → at most {max_calls} model calls per ticket"
    )
    verdicts = []
    for kind, rows in results.items():
        calls = [r[1] for r in rows]
        charged = [r[2] for r in rows]
        states = ", ".join(sorted({str(r[3]) for r in rows}))
        print(
            f"{kind}: {len(rows)} tickets, calls per ticket max {max(calls)} "
            f"(total {sum(calls)}), diagnoses charged max {max(charged)}, end states: {states}"
        )
        if kind.startswith("playbook"):
            verdicts.append((f"{kind}: zero model calls", sum(calls) == 0))
        verdicts.append(
            (f"{kind}: diagnoses ≤ cap", max(charged) <= caps.max_diag_invocations_per_ticket)
        )
        verdicts.append((f"{kind}: calls ≤ cap * (1 + re-asks)", max(calls) <= max_calls))
    print("summary")
    for label, ok in verdicts:
        print(f"  {label:<60} {'PASS' if ok else 'FAIL'}")
    print(f"  {sum(ok for _, ok in verdicts)}/{len(verdicts)} targets met in {elapsed:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
