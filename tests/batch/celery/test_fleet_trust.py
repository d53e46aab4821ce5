"""The fleet trusts only what it signed (issue 40): a real ``orchestrator worker`` on a real
Redis is handed rogue messages put on the broker directly — unsigned, signed with another
key, signed by the fleet but naming ``/etc/passwd``, a ticket of another directory, a
batch nobody recorded, a way out of the batch's copy — and runs none of them (no stage,
no run record), says so in its log, and does not take them back; a batch the fleet
signed then runs as before. A broker off this machine without a password or TLS is
refused by ``doctor``, the worker and the batch before anything connects."""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from orchestrator.batch.celery.celery_app import (
    broker_keys,
    celery_app,
    celery_settings,
    key_prefix,
)
from orchestrator.batch.celery.celery_app import queue_name as fleet_queue
from orchestrator.batch.celery.ticket_task import TASK_NAME
from orchestrator.cli.main import main
from orchestrator.domain.broker_url import BrokerUrl
from orchestrator.domain.errors import EXIT_COMPLETED, EXIT_USAGE
from orchestrator.storage.redis.client import CoordinationStore
from orchestrator.storage.runs import RunStore

from conftest import subprocess_env, write_ticket
from support.file_watch import wait_for
from support.fleet_keys import install_fleet_key
from support.fleet_machines import FleetWorkers, batch_cmd, counted, counts, write_fleet_config
from support.redis_server import RedisServer

DEADLINE_S = 60.0


def unsigned_app(url: str, namespace: str) -> Any:
    """A Celery app with the fleet's queue and keys, and no signature: what anyone who can
    write to the broker could send."""
    from celery import Celery  # type: ignore[import-untyped]

    app = Celery(namespace, broker=url, backend=url)
    app.conf.update(celery_settings(namespace=namespace))
    return app


def send(app: Any, namespace: str, args: list[str]) -> str:
    task_id = str(uuid.uuid4())
    app.send_task(TASK_NAME, args=args, task_id=task_id, queue=fleet_queue(namespace))
    return task_id


def tampered(raw: str, old: bytes, new: bytes) -> str:
    """A message as kombu keeps it, its signed body's ``old`` replaced by ``new`` and
    everything else (the signer, the signature) left as it was."""
    envelope = json.loads(raw)
    signed = base64.b64decode(base64.b64decode(envelope["body"]))
    assert signed.count(old) == 1
    envelope["body"] = base64.b64encode(base64.b64encode(signed.replace(old, new))).decode()
    return json.dumps(envelope)


def nothing_left(store: CoordinationStore, namespace: str) -> bool:
    """No message of the fleet waits in its queue or is held by a worker."""
    keys = broker_keys(namespace)
    return all(store.client.llen(q) == 0 for q in keys.queues) and not store.client.hlen(
        keys.unacked
    )


@pytest.mark.slow
def test_rogue_messages_are_refused_logged_and_dropped_and_a_signed_batch_still_runs(
    redis_server: RedisServer,
    namespace: str,
    store: CoordinationStore,
    tmp_path: Path,
    machines: list[FleetWorkers],
) -> None:
    config = write_fleet_config(tmp_path, redis_server.url, namespace, counted("a"))
    state = tmp_path / "state"
    tickets = tmp_path / "tickets"
    write_ticket(tickets, "T-00")
    elsewhere = tmp_path / "elsewhere"  # a valid ticket no batch queued
    write_ticket(elsewhere, "T-66")
    fleet = FleetWorkers(tmp_path, config)
    machines.append(fleet)
    fleet.start("one")
    fleet.wait_ready("one")
    # A batch the fleet really ran, so its id is a known one.
    done = subprocess.run(
        batch_cmd(config, tickets, "--json"), capture_output=True, text=True,
        env=subprocess_env(), cwd=tmp_path, timeout=DEADLINE_S * 2,
    )  # fmt: skip
    assert done.returncode == EXIT_COMPLETED, done.stdout + done.stderr
    [batch_id] = [p.name for p in (state / "batches").iterdir()]
    assert counts(state, "a") == {"T-00": 1}

    url = redis_server.url
    rogue = unsigned_app(url, namespace)
    other_key = install_fleet_key(tmp_path / "rogue-key", name="rogue")
    forged = celery_app(BrokerUrl(url), namespace=namespace, fleet=other_key)
    # The unsigned and the forged messages name a ticket the worker would otherwise run.
    send(rogue, namespace, ["T-66", "T-66.md", str(elsewhere), batch_id])
    send(forged, namespace, ["T-66", "T-66.md", str(elsewhere), batch_id])
    fleet_signed = celery_app(
        BrokerUrl(url), namespace=namespace, fleet=install_fleet_key(tmp_path / "copy")
    )
    out_of_bounds = {
        "passwd": ["T-66", "passwd", "/etc", batch_id],
        "elsewhere": ["T-66", "T-66.md", str(elsewhere), batch_id],
        "unknown batch": ["T-66", "T-00.md", str(tickets.resolve()), "20990101T000000Z-dead"],
        "climbing": ["T-66", "passwd", f"batches/{batch_id}/tickets/T-66/../../../../../etc", batch_id],
        "not an id": ["T-66", "T-00.md", str(tickets.resolve()), "../batches"],
    }  # fmt: skip
    for args in out_of_bounds.values():
        send(fleet_signed, namespace, args)
    refused = len(out_of_bounds)
    # A message the fleet signed, altered on the broker: its signature no longer holds.
    aside = f"{key_prefix(namespace)}aside"
    fleet_signed.send_task(TASK_NAME, args=["T-66", "T-66.md", "/etc", batch_id], queue="aside")
    [raw] = store.client.lrange(aside, 0, -1)
    store.client.delete(aside)
    store.client.lpush(broker_keys(namespace).queues[0], tampered(raw, b"/etc", b"/tmp"))
    wait_for(
        lambda: (
            fleet.log("one").count("refused task") >= refused and nothing_left(store, namespace)
        ),
        fleet.folder("one"),
        "every rogue message refused and gone from the broker",
        deadline_s=DEADLINE_S,
        explain=lambda: fleet.log("one"),
    )
    log = fleet.log("one")
    # Celery's consumer refuses the unsigned and the forged message before any task code.
    assert "application/json" in log or "ContentDisallowed" in log, log
    assert "Unknown certificate" in log or "SecurityError" in log, log
    assert "Bad signature" in log, log
    assert "is not a ticket batch" in log and "no batch 20990101T000000Z-dead" in log, log
    assert "'../batches' is not a batch id" in log, log
    assert log.count("nothing was run") == refused, log
    assert "root:" not in log  # /etc/passwd was never read
    # Nothing ran: no stage, no run record of the rogue ticket.
    assert counts(state, "a") == {"T-00": 1}
    assert RunStore(state).latest_for_ticket("T-66") is None
    # The worker still takes signed work: the ticket queued again by a batch runs.
    write_ticket(tickets, "T-01")
    again = subprocess.run(
        batch_cmd(config, tickets, "--json"), capture_output=True, text=True,
        env=subprocess_env(), cwd=tmp_path, timeout=DEADLINE_S * 2,
    )  # fmt: skip
    assert again.returncode == EXIT_COMPLETED, again.stdout + again.stderr
    lines = [json.loads(line) for line in again.stdout.splitlines() if line.startswith("{")]
    statuses = {line["ticket"]: line["status"] for line in lines if "ticket" in line}
    assert statuses == {"T-00": "already-completed", "T-01": "completed"}
    assert counts(state, "a") == {"T-00": 1, "T-01": 1}
    assert nothing_left(store, namespace)


def test_a_broker_off_this_machine_without_a_password_is_refused_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 192.0.2.0/24 is TEST-NET-1: nothing answers there, and nothing is asked.
    config = write_fleet_config(tmp_path, "redis://192.0.2.7:6379/0", "ns", counted("a"))
    (tmp_path / "tickets").mkdir()
    monkeypatch.chdir(tmp_path)
    for argv in (["worker"], ["doctor"], ["batch", "--backend", "celery", "--tickets", "tickets"]):
        code = main(["--config", str(config), *argv])
        said = "".join(capsys.readouterr())
        assert code == EXIT_USAGE, (argv, said)
        assert (
            f"{config}: distributed.broker_url: redis://192.0.2.7:6379/0 is a broker off this "
            "machine with neither a password nor TLS"
        ) in said, (argv, said)
        assert "rediss://" in said, (argv, said)
    # The variable overriding it is named as the culprit, and its user-info never shown.
    monkeypatch.setenv("ORCHESTRATOR_BROKER_URL", "redis://fleet@192.0.2.7:6379/0")
    assert main(["--config", str(config), "worker"]) == EXIT_USAGE
    said = "".join(capsys.readouterr())
    assert "$ORCHESTRATOR_BROKER_URL: redis://***@192.0.2.7:6379/0 is a broker off" in said
    assert "fleet@" not in said
