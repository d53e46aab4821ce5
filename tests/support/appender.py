"""A ledger writer, as its own process: COUNT times, under the Redis lock, read the
file's last number and append the next one (a read-then-write that races without the
lock). Waits for a line on stdin first, so the test can release every writer at once.

Usage: python appender.py URL NAMESPACE FILE COUNT
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from orchestrator.domain.broker_url import BrokerUrl
from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.redis.ledger_lock import ledger_lock


def last_number(path: Path) -> int:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return 0
    return int(lines[-1].split()[0]) if lines else 0


def main(argv: list[str]) -> int:
    url, namespace, file, count = argv
    path = Path(file)
    store = CoordinationStore(BrokerUrl(url), namespace=namespace)
    lock = ledger_lock(store, ttl_s=30, wait_s=60)
    store.ping()
    print("ready", flush=True)
    sys.stdin.readline()
    for _ in range(int(count)):
        with lock.held():
            following = last_number(path) + 1
            os.sched_yield()  # invite another writer in between, if the lock let one
            with path.open("a") as ledger:
                ledger.write(f"{following} {os.getpid()}\n")
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
