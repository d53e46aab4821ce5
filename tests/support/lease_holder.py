"""A worker holding a ticket's lease, as its own process, driven line by line on stdin:

    (start)        acquire the lease with a heartbeat; print ``held <fence> <holder>``
    write TEXT     fence.check(), then write TEXT to the output file; print ``wrote``,
                   or ``fenced <the FencedOut message>``
    renew          renew the lease once by hand; print ``renewed True|False``
    quit           stop the heartbeat, release the lease (if still ours), exit

Usage: python lease_holder.py URL NAMESPACE TICKET TTL_S OUTPUT_FILE
"""

from __future__ import annotations

import sys
from pathlib import Path

from orchestrator.domain.broker_url import BrokerUrl
from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.redis.coordination import Heartbeat, Lease, TicketLeases
from orchestrator.storage.redis.errors import FencedOut


def main(argv: list[str]) -> int:
    url, namespace, ticket, ttl_s, output = argv
    leases = TicketLeases(
        CoordinationStore(BrokerUrl(url), namespace=namespace), ttl_s=float(ttl_s)
    )
    lease = leases.acquire(ticket)
    if not isinstance(lease, Lease):
        print(f"refused {lease.holder}", flush=True)
        return 1
    fence = leases.fence(lease)
    with Heartbeat(leases, lease):
        print(f"held {lease.fence} {lease.holder}", flush=True)
        for line in sys.stdin:
            command, _, text = line.rstrip("\n").partition(" ")
            if command == "write":
                try:
                    fence.check()
                except FencedOut as exc:
                    print(f"fenced {exc}", flush=True)
                    continue
                Path(output).write_text(text)
                print("wrote", flush=True)
            elif command == "renew":
                print(f"renewed {leases.renew(lease)}", flush=True)
            elif command == "quit":
                break
    print(f"released {leases.release(lease)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
