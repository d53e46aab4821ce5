"""A worker appending decision rows to the shared ledger through the fleet's Redis lock,
as its own process (waits for a line on stdin first, so all writers start at once).

Usage: python ledger_writer.py URL NAMESPACE LEDGER COUNT WORKER
"""

from __future__ import annotations

import sys
from pathlib import Path

from orchestrator.domain.broker_url import BrokerUrl
from orchestrator.storage.ledger import Ledger, LedgerRow, inputs_hash
from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.redis.fleet_ledger import FleetLedger
from orchestrator.storage.redis.ledger_lock import ledger_lock


def main(argv: list[str]) -> int:
    url, namespace, path, count, worker = argv
    store = CoordinationStore(BrokerUrl(url), namespace=namespace)
    ledger = FleetLedger(Ledger(Path(path)), ledger_lock(store, wait_s=60))
    store.ping()
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(int(count)):
        row = ledger.append(
            LedgerRow(
                kind="decision",
                decision_id=f"{worker}:verdict-{i}",
                ticket=worker,
                run=f"{worker}-run",
                capability="recover-stage",
                inputs_hash=inputs_hash({"worker": worker, "i": i}),
                model_version="model-a",
                prompt_version="recovery-v1",
                source="model",
                decision={"verdict": {"action": "retry"}},
                confidence=0.5,
                routing="auto",
            )
        )
        ledger.append_outcome(row, "green")
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
