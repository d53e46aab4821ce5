"""A fleet's batch leaves the same report and metrics as a local one: ``batch --backend
celery --report --metrics`` waits for real workers on a real Redis, records its tickets and
their runs, and writes the page and the Prometheus figures with the fleet's model spend."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.domain.errors import EXIT_NEEDS_HUMAN
from orchestrator.storage.runs import RunStore

from conftest import subprocess_env
from support.fleet_machines import (
    FleetWorkers,
    batch_cmd,
    counted,
    write_fleet_config,
    write_tickets,
)
from support.page_checks import check_links, parse
from support.prometheus_text import parse as parse_metrics
from support.redis_server import RedisServer


@pytest.mark.slow
def test_a_fleet_batch_writes_its_report_and_metrics(
    redis_server: RedisServer, namespace: str, tmp_path: Path, machines: list[FleetWorkers]
) -> None:
    stages = counted("a") + counted("b", '[ "$ORCH_TICKET_ID" != T-02 ]')
    config = write_fleet_config(tmp_path, redis_server.url, namespace, stages, recovery=True)
    tickets = tmp_path / "tickets"
    ids = write_tickets(tickets, 4)
    fleet = FleetWorkers(tmp_path, config)
    machines.append(fleet)
    fleet.start("one", concurrency=2)
    fleet.wait_ready("one")
    page, metrics = tmp_path / "site" / "fleet.html", tmp_path / "textfile" / "fleet.prom"
    page.parent.mkdir()
    metrics.parent.mkdir()
    done = subprocess.run(
        batch_cmd(config, tickets, "--report", str(page), "--metrics", str(metrics)),
        capture_output=True, text=True, env=subprocess_env(), timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == EXIT_NEEDS_HUMAN, done.stdout + done.stderr
    store = RunStore(tmp_path / "state")
    runs = {t: store.latest_for_ticket(t) for t in ids}
    parsed = parse(page.read_text())
    check_links(page, parsed)
    for ticket_id, record in runs.items():
        assert record is not None
        assert f"run-{record.run_id}" in parsed.ids, ticket_id
    families = parse_metrics(metrics.read_text())
    samples = {
        (name, tuple(sorted(labels.items()))): value
        for family in families.values()
        for name, labels, value in family.samples
    }
    assert samples[("orchestrator_batch_tickets", (("outcome", "completed"),))] == 3
    assert samples[("orchestrator_batch_tickets", (("outcome", "needs-human"),))] == 1
    [(info_labels, _)] = [
        (labels, v) for (name, labels), v in samples.items() if name == "orchestrator_batch_info"
    ]
    assert dict(info_labels)["backend"] == "celery"
    # No model is configured: the one failure got a synthetic verdict and no call.
    assert samples[("orchestrator_batch_model_calls", ())] == 0
