"""Tasks for the Celery tests, loaded by real worker processes (``celery -A celery_tasks``).

``stage`` stands for a ticket's run: it journals each start and end, and on its first
delivery it can stop midway (telling the test so over a loopback socket) and wait to be
killed, as a worker lost in the middle of a ticket.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

from orchestrator.app.fleet_key import FleetKey
from orchestrator.batch.celery.celery_app import celery_app
from orchestrator.domain.broker_url import BrokerUrl

app = celery_app(
    BrokerUrl(os.environ["TEST_BROKER_URL"]),
    namespace=os.environ["TEST_NAMESPACE"],
    fleet=FleetKey(Path(os.environ["TEST_FLEET_KEY"]), Path(os.environ["TEST_FLEET_CERT"])),
    visibility_timeout_s=float(os.environ.get("TEST_VISIBILITY_TIMEOUT_S", "3600")),
    restore_interval_s=0.5,
)


def _journal(path: Path, line: str) -> None:
    with path.open("a") as journal:
        journal.write(line + "\n")


@app.task(name="orchestrator.test.stage", bind=True)  # type: ignore[misc]
def stage(self: Any, ticket_id: str, journal: str, stop_first_at_port: int = 0) -> str:
    path = Path(journal)
    _journal(path, f"start {ticket_id} {self.request.hostname}")
    starts = [
        line for line in path.read_text().splitlines() if line.startswith(f"start {ticket_id} ")
    ]
    if stop_first_at_port and len(starts) == 1:
        with socket.create_connection(("127.0.0.1", stop_first_at_port)) as test:
            test.sendall(f"started {os.getpid()}\n".encode())
        threading.Event().wait()  # until the test kills this worker
    _journal(path, f"done {ticket_id} {self.request.hostname}")
    return f"{ticket_id} done by {self.request.hostname} at delivery {len(starts)}"
