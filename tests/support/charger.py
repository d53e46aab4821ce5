"""A worker charging a fleet budget, as its own process: COUNT charges of 1, keyed
``PREFIX-<i>``, printing one line each: ``charged <total> <duplicate>`` or ``refused <spent>``.
It waits for a line on stdin first, so the test can release every charger at once.

Usage: python charger.py URL NAMESPACE BATCH CAP COUNT PREFIX
"""

from __future__ import annotations

import sys

from orchestrator.domain.broker_url import BrokerUrl
from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.redis.fleet_budget import Charged, FleetBudget


def main(argv: list[str]) -> int:
    url, namespace, batch, cap, count, prefix = argv
    store = CoordinationStore(BrokerUrl(url), namespace=namespace)
    budget = FleetBudget(store, batch, "calls", int(cap))
    store.ping()
    print("ready", flush=True)
    sys.stdin.readline()
    lines = []
    for i in range(int(count)):
        result = budget.charge(f"{prefix}-{i}")
        if isinstance(result, Charged):
            lines.append(f"charged {result.total} {result.duplicate}")
        else:
            lines.append(f"refused {result.spent}")
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
