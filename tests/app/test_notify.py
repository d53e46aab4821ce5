"""Notifications sent for real over loopback (issue 28): once per run and event, retried
with a back-off that is recorded rather than slept, never blocking or failing a run, and
the webhook's URL — a secret — in no output, no log and no file under the state dir."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.app.driver import run_ticket, run_unfinished
from orchestrator.app.notify import Notify, notifier_for
from orchestrator.domain.config import load_config
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.notify import NotifyEvent, NotifyTarget
from orchestrator.domain.tickets import load_ticket
from orchestrator.storage import FileStorage
from orchestrator.storage.notify_outbox import NotifyOutbox

from conftest import bash_stage, write_config, write_ticket
from support.notify_fixtures import HANG, closed_port, halt, run_record, smtp_server, webhook_server
from support.services import make_services

pytestmark = pytest.mark.timeout(30)

TOKEN = "XoXb4Zq9TOKENs3cr3t"  # what the URL's path holds: the webhook's credential


def hook_target(kind: str = "webhook", **settings: object) -> NotifyTarget:
    # The test's servers are on loopback, which a target reaches only when allowed by name.
    return NotifyTarget.model_validate(
        {"kind": kind, "url_env": "HOOK_URL", "allow_private": ["127.0.0.1"], **settings}
    )


class Rig:
    """A notifier over a state dir, its sleeps and lines recorded."""

    def __init__(
        self, state: Path, targets: tuple[NotifyTarget, ...], environ: Mapping[str, str]
    ) -> None:
        self.storage = FileStorage(state)
        self.outbox = NotifyOutbox(state)
        self.said: list[str] = []
        self.slept: list[float] = []
        self.notify = Notify(
            targets=targets, outbox=self.outbox, environ=environ, say=self.said.append,
            lock=self.storage.locks.ticket, sleep=self.slept.append,
        )  # fmt: skip

    def failed_record(self, **update: object) -> object:
        record = run_record(RunState.FAILED, halt=halt(), **update)
        self.storage.runs.save(record)
        return record


def everything_under(root: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(root.rglob("*")) if p.is_file())


def test_one_post_per_run_and_event(tmp_path: Path) -> None:
    with webhook_server() as hook:
        rig = Rig(tmp_path, (hook_target(),), {"HOOK_URL": hook.url(f"/h/{TOKEN}")})
        record = rig.failed_record()
        rig.notify.after_run(record)
        rig.notify.after_run(record)  # the same event again: already sent
        rig.notify.catch_up()
    assert len(hook.requests) == 1 and hook.paths == [f"/h/{TOKEN}"]
    assert hook.requests[0]["event"] == "failed"
    assert hook.requests[0]["halt"]["reason"] == "check_failed"
    (entry,) = rig.outbox.entries()
    assert (entry.status, entry.tries, entry.passes) == ("sent", 1, 1)
    assert entry.target_name == "webhook $HOOK_URL" and rig.said == []


def test_an_event_a_target_did_not_ask_for_is_not_sent(tmp_path: Path) -> None:
    with webhook_server() as hook:
        target = hook_target(events=["completed"])
        rig = Rig(tmp_path, (target,), {"HOOK_URL": hook.url()})
        rig.notify.after_run(rig.failed_record())
    assert hook.requests == [] and rig.outbox.entries() == []


def test_a_500_is_retried_after_a_back_off_recorded_not_slept(tmp_path: Path) -> None:
    with webhook_server(500, 500) as hook:
        rig = Rig(tmp_path, (hook_target("slack"),), {"HOOK_URL": hook.url(f"/h/{TOKEN}")})
        rig.notify.after_run(rig.failed_record())
    assert len(hook.requests) == 3
    assert set(hook.requests[0]) == {"text", "unfurl_links", "unfurl_media"}
    assert rig.slept == [0.5, 1.0]
    (entry,) = rig.outbox.entries()
    assert (entry.status, entry.tries, entry.back_off_s) == ("sent", 3, (0.5, 1.0))


@pytest.mark.parametrize("server", ["answers 500", "hangs", "is gone", "refuses (404)"])
def test_a_broken_server_costs_bounded_tries_and_leaves_a_failed_entry(
    tmp_path: Path, server: str
) -> None:
    answers = {"answers 500": (500,) * 3, "hangs": (HANG,) * 3, "refuses (404)": (404,)}
    with webhook_server(*answers.get(server, ())) as hook:
        url = hook.url(f"/h/{TOKEN}")
        if server == "is gone":
            url = f"http://127.0.0.1:{closed_port()}/h/{TOKEN}"
        rig = Rig(tmp_path, (hook_target("teams", timeout_s=0.2),), {"HOOK_URL": url})
        rig.notify.after_run(rig.failed_record())
    (entry,) = rig.outbox.entries()
    tries = 1 if server == "refuses (404)" else 3  # a refusal will refuse again
    assert (entry.status, entry.tries, entry.passes) == ("failed", tries, 1)
    assert len(rig.slept) == tries - 1
    expected = {
        "answers 500": "$HOOK_URL answered HTTP 500",
        "refuses (404)": "$HOOK_URL answered HTTP 404",
        "hangs": "timed out",
        "is gone": "Connection refused",
    }[server]
    assert entry.error is not None and expected in entry.error
    (line,) = rig.said
    assert line.startswith(f"notify: failed of {entry.run_id} not sent to teams $HOOK_URL")
    assert TOKEN not in line and TOKEN not in everything_under(tmp_path)


def test_a_failed_notice_is_tried_again_by_the_next_batch_until_its_passes_are_spent(
    tmp_path: Path,
) -> None:
    with webhook_server(*(500,) * 9) as hook:
        rig = Rig(tmp_path, (hook_target(),), {"HOOK_URL": hook.url()})
        rig.notify.after_run(rig.failed_record())
        rig.notify.catch_up()
        rig.notify.catch_up()
        rig.notify.catch_up()  # three passes spent: nothing more is tried
    assert len(hook.requests) == 9
    (entry,) = rig.outbox.entries()
    assert (entry.status, entry.tries, entry.passes) == ("failed", 9, 3)


def test_a_crash_between_sending_and_recording_sends_again(tmp_path: Path) -> None:
    with webhook_server() as hook:
        rig = Rig(tmp_path, (hook_target(),), {"HOOK_URL": hook.url()})
        rig.notify.after_run(rig.failed_record())
        for path in (tmp_path / "notify").iterdir():
            path.unlink()  # as if we died after the POST, before the entry was written
        rig.notify.catch_up()
    assert len(hook.requests) == 2
    assert [e.status for e in rig.outbox.entries()] == ["sent"]


def test_the_catch_up_leaves_a_ticket_another_process_holds(tmp_path: Path) -> None:
    with webhook_server() as hook:
        rig = Rig(tmp_path, (hook_target(),), {"HOOK_URL": hook.url()})
        rig.failed_record()
        other = FileStorage(tmp_path)  # a separate flock: as another process holds it
        with other.locks.ticket("T-1"):
            rig.notify.catch_up()
        assert hook.requests == []
        rig.notify.catch_up()
    assert len(hook.requests) == 1


def test_an_unset_variable_is_said_by_name_and_not_retried(tmp_path: Path) -> None:
    rig = Rig(tmp_path, (hook_target(),), {})
    rig.notify.after_run(rig.failed_record())
    (entry,) = rig.outbox.entries()
    assert (entry.status, entry.tries) == ("failed", 1)
    assert entry.error == "$HOOK_URL is not set to an http(s) URL"


def test_email_goes_through_smtp(tmp_path: Path) -> None:
    with smtp_server() as box:
        target = NotifyTarget.model_validate({
            "kind": "email", "smtp_host": "127.0.0.1", "smtp_port": box.port,
            "starttls": False, "from": "orch@example.org", "to": ["ops@example.org"],
            "timeout_s": 2.0, "allow_private": ["127.0.0.1"],
        })  # fmt: skip
        rig = Rig(tmp_path, (target,), {})
        record = rig.failed_record()
        rig.notify.after_run(record)
        rig.notify.after_run(record)
    (message,) = box.messages
    assert "ops@example.org" in message["to"][0]
    assert "Subject: orchestrator: T-1 failed" in message["data"]
    assert "halt: check_failed at a" in message["data"]
    assert "Content-Type: text/plain" in message["data"] and "text/html" not in message["data"]
    assert [e.status for e in rig.outbox.entries()] == ["sent"]


def test_email_to_a_server_that_is_gone_fails_without_raising(tmp_path: Path) -> None:
    target = NotifyTarget.model_validate({
        "kind": "email", "smtp_host": "127.0.0.1", "smtp_port": closed_port(),
        "from": "orch@example.org", "to": ["ops@example.org"], "timeout_s": 0.5,
        "allow_private": ["127.0.0.1"],
    })  # fmt: skip
    rig = Rig(tmp_path, (target,), {})
    rig.notify.after_run(rig.failed_record())
    (entry,) = rig.outbox.entries()
    assert entry.status == "failed" and "Connection refused" in (entry.error or "")
    assert rig.said[0].startswith("notify: failed of T-1-")


def test_no_targets_no_notifier() -> None:
    assert type(
        notifier_for((), NotifyOutbox(Path("/nonexistent")), {}, print, print)
    ).__name__ == ("NoNotifier")


def test_a_real_run_that_needs_a_human_notifies_the_webhook_once(tmp_path: Path) -> None:
    """End to end: a pipeline whose stage fails, recovery on and no model configured,
    ends needs-human; the driver's notice reaches the loopback webhook once, a second
    drive of the ended run and the batch's catch-up send nothing more, and the URL's
    secret is nowhere: not in the output, not in a log, not under the state dir."""
    with webhook_server() as hook:
        header = (
            '[[notify]]\nkind = "webhook"\nurl_env = "HOOK_URL"\n'
            'events = ["needs-human", "failed"]\ntimeout_s = 1.0\n'
            'allow_private = ["127.0.0.1"]\n'
        )
        config = write_config(
            tmp_path, bash_stage("build", "echo building; exit 3"), header=header, recovery=True
        )
        loaded = load_config(config)
        environ = {"PATH": "/usr/bin:/bin", "HOOK_URL": hook.url(f"/h/{TOKEN}")}
        out = io.StringIO()
        state = tmp_path / "state"
        services = make_services(loaded, state, out=out, environ=environ)
        rig = Rig(state, loaded.config.notify, environ)
        services = replace(services, notifier=replace(rig.notify, say=out.write))
        ticket = load_ticket(write_ticket(tmp_path / "tickets"))
        record = run_ticket(ticket, services)
        assert record.state is RunState.NEEDS_HUMAN
        assert run_unfinished(ticket, services) == (record, False)  # as a batch finds it
        services.notifier.catch_up()
    assert len(hook.requests) == 1
    (notice,) = hook.requests
    assert (notice["event"], notice["run_id"]) == (NotifyEvent.NEEDS_HUMAN.value, record.run_id)
    assert notice["halt"]["reason"] == record.halt.reason.value  # type: ignore[union-attr]
    assert TOKEN not in out.getvalue()
    assert TOKEN not in everything_under(state)
    entry = json.loads(next((state / "notify").iterdir()).read_text())
    assert entry["status"] == "sent" and entry["target_name"] == "webhook $HOOK_URL"


def test_the_next_batch_sends_what_the_last_one_could_not(tmp_path: Path) -> None:
    """``orchestrator batch`` as cron runs it: the first batch's notice is refused (a
    404 is not retried, so nothing sleeps) and said on the batch's output by the
    variable's name; the next batch, finding the ticket already failed, catches it up."""
    from orchestrator.cli.commands.batch import batch

    with webhook_server(404) as hook:
        header = (
            '[[notify]]\nkind = "slack"\nurl_env = "HOOK_URL"\ntimeout_s = 1.0\n'
            'allow_private = ["127.0.0.1"]\n'
        )
        config = write_config(tmp_path, bash_stage("build", "exit 3"), header=header)
        tickets = tmp_path / "tickets"
        write_ticket(tickets)
        environ = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "HOOK_URL": hook.url(f"/h/{TOKEN}"),
        }
        outputs = []
        for _ in range(2):
            out = io.StringIO()
            batch(config, None, tickets, jobs=1, as_json=False, worker=False, out=out,
                  environ=environ)  # fmt: skip
            outputs.append(out.getvalue())
    assert len(hook.requests) == 2 and hook.requests[1]["text"].startswith(
        "orchestrator: T-1 failed"
    )
    assert "batch: notify: failed of T-1-" in outputs[0]
    assert "not sent to slack $HOOK_URL after 1 try: $HOOK_URL answered HTTP 404" in outputs[0]
    assert "already-failed" in outputs[1] and "notify" not in outputs[1]
    (entry,) = NotifyOutbox(tmp_path / "state").entries()
    assert (entry.status, entry.tries, entry.passes) == ("sent", 2, 2)
    assert TOKEN not in "".join(outputs) + everything_under(tmp_path / "state")


def test_an_outbox_that_cannot_be_written_is_said_and_the_run_goes_on(tmp_path: Path) -> None:
    with webhook_server() as hook:
        rig = Rig(tmp_path, (hook_target(),), {"HOOK_URL": hook.url(f"/h/{TOKEN}")})
        record = rig.failed_record()
        (tmp_path / "notify").write_text("not a directory")
        rig.notify.after_run(record)  # raises nothing
    assert len(hook.requests) == 1
    (line,) = rig.said
    assert line.startswith("notify: not sent: ") and TOKEN not in line
