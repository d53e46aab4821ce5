"""An outage does not spend a ticket (issue 43), through the real batch against the
loopback GitHub: the forge answers 503 to every pull-request call for longer than the
in-batch back-off, so the open-pr stage fails ``outage`` until the infra retries are used
up; the run then waits (``waiting-infra``) with its caps untouched, as ``runs``, ``show``,
the batch's line and the issue's status comment say, and nobody is notified. The next
batch, the forge healthy again but for one more 503, goes on from open-pr with a fresh
round of infra retries and opens exactly one pull request, the status comment edited in
place. An outage older than ``[recovery] infra_wait_max_h`` stops the run
``needs-human`` (``infra_wait_expired``) and a person is notified once. A kill -9 right
after a batch took a run out of waiting leaves the record to go on from.

Every wait is on the test's clock (``batch(clock=, sleep=)``): a back-off advances it.
Real stage programs (clone, open-pr) in subprocesses, real git repositories.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import git
import pytest

from orchestrator.batch.queue import waiting_detail
from orchestrator.batch.results import TicketResult, exit_code
from orchestrator.cli.commands.batch import batch
from orchestrator.cli.commands.runs import runs
from orchestrator.cli.commands.show import show
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import Halt
from orchestrator.storage import FileStorage
from orchestrator.storage.crash_points import CRASH_ENV

from support.github_fake import LOGIN, TOKEN, FakeGitHub, serve_github
from support.gitrepo import commit_files, init_repo
from support.notify_fixtures import Webhook, run_record, webhook_server

REPO = "octo/widgets"
TICKET = "gh-octo-widgets-7"
MARKER = "<!-- orchestrator:status"
IMPLEMENT = 'echo "fixed: $ORCH_TICKET_ID" > FIX.txt && git add FIX.txt && git commit -qm fix'
HOOK_URL = "HOOK_URL"


class Clock:
    """The batch's time: ``sleep`` moves it on and is recorded, never waited."""

    def __init__(self, at: datetime) -> None:
        self.at = at
        self.slept: list[float] = []

    def now(self) -> datetime:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.at += timedelta(seconds=seconds)


class PullsDown(list[tuple[int, dict[str, str], Any]]):
    """The fake's canned answers (served before the real ones), holding a 503 for each
    pull-request call while the forge is down (``calls`` more of them; -1: until told)
    and nothing for any other call: the issue list and the comments still answer."""

    def __init__(self, fake: FakeGitHub) -> None:
        super().__init__()
        self.fake = fake
        self.calls = 0
        self.failed = 0

    def __bool__(self) -> bool:
        last = self.fake.requests[-1] if self.fake.requests else None
        return self.calls != 0 and last is not None and last.path.endswith("/pulls")

    def pop(self, index: Any = -1) -> tuple[int, dict[str, str], Any]:
        self.calls -= 1 if self.calls > 0 else 0
        self.failed += 1
        return 503, {}, {"message": "Service Unavailable"}


@pytest.fixture
def forge() -> Iterator[tuple[FakeGitHub, PullsDown, Webhook]]:
    with serve_github() as github, webhook_server() as hook:
        down = PullsDown(github)
        github.answers = down
        yield github, down, hook


def write_config(tmp_path: Path, github: FakeGitHub, max_h: float = 6) -> Path:
    work = init_repo(tmp_path / "widgets-work")
    commit_files(work, {"README.md": "widgets\n"}, "initial")
    origin = tmp_path / "widgets.git"
    git.Repo.clone_from(work.working_dir, origin, bare=True).close()
    config = tmp_path / "config.toml"
    config.write_text(
        'state_dir = "state"\n[recovery]\nmax_infra_retries_per_ticket = 2\n'
        f"infra_backoff_s = 30.0\ninfra_wait_max_h = {max_h}\n"
        # The open-pr stage sends each forge request once and waits for nothing: the
        # in-batch back-off (the test's clock) and the next batch do the waiting here.
        "forge_max_wait_s = 0.0\n"
        '[git]\nauthor_name = "Orchestrator"\nauthor_email = "bot@example.org"\n\n'
        f'[[sources]]\nkind = "github"\nrepo = "{REPO}"\nlabel = "orchestrate"\n'
        f'api_url = "{github.url}"\nrepository = "{origin}"\n\n'
        f'[[notify]]\nkind = "webhook"\nurl_env = "{HOOK_URL}"\nallow_private = ["127.0.0.1"]\n\n'
        '[[stages]]\nname = "clone"\n'
        'command = ["{python}", "-P", "-m", "orchestrator.stages.clone"]\n'
        'cwd = "run"\nnetwork = true\n\n'
        f'[[stages]]\nname = "implement"\ncommand = ["bash", "-c", {json.dumps(IMPLEMENT)}]\n\n'
        '[[stages]]\nname = "open-pr"\n'
        'command = ["{python}", "-P", "-m", "orchestrator.stages.open_pr"]\n'
        'side_effectful = true\nnetwork = true\npass_env = ["GITHUB_TOKEN"]\n'
    )
    github.add_issue(REPO, 7, "deal() hands out one card too few", "Steps…", ("orchestrate",))
    return config


def environ(config: Path, hook: Webhook) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"], "HOME": str(config.parent), "DRY_RUN": "false",
        "GITHUB_TOKEN": TOKEN, HOOK_URL: hook.url("/hooks/x"),
    }  # fmt: skip


def run_batch(config: Path, hook: Webhook, clock: Clock) -> tuple[int, str]:
    out = io.StringIO()
    code = batch(
        config, None, config.parent / "tickets", jobs=1, as_json=False, worker=False,
        out=out, environ=environ(config, hook), stderr=out, preflight=False,
        clock=clock.now, sleep=clock.sleep,
    )  # fmt: skip
    return code, out.getvalue()


def ticket_line(out: str) -> str:
    [line] = [line for line in out.splitlines() if f" {TICKET} " in line]
    return line


def status_comments(github: FakeGitHub) -> list[dict[str, Any]]:
    return [
        c for c in github.comments_on(REPO, 7)
        if c["user"]["login"] == LOGIN and c["body"].startswith(MARKER)
    ]  # fmt: skip


def spent(storage: FileStorage) -> list[str]:
    return [c.kind for c in storage.budgets.load(TICKET).charges]


def start() -> Clock:
    return Clock(datetime.now(UTC).replace(microsecond=0))


@pytest.mark.slow
def test_an_outage_longer_than_the_back_off_waits_and_the_next_batch_opens_one_pull_request(
    tmp_path: Path, forge: tuple[FakeGitHub, PullsDown, Webhook]
) -> None:
    github, down, hook = forge
    config = write_config(tmp_path, github)
    storage = FileStorage(tmp_path / "state")
    clock = start()
    down.calls = -1  # the forge's pull requests are down for the whole first batch

    code, first = run_batch(config, hook, clock)

    record = storage.runs.latest_for_ticket(TICKET)
    assert record is not None and record.state is RunState.WAITING_INFRA, first
    assert record.halt is not None and record.halt.reason is HaltReason.INFRA_UNAVAILABLE
    assert record.halt.stage == "open-pr"
    assert code == 75, first  # try again later: nothing for a person yet
    assert clock.slept == [30.0, 60.0]  # the in-batch back-off, on the test's clock
    assert [a.failure_class for a in record.attempts if a.stage == "open-pr"] == ["outage"] * 3
    assert spent(storage) == ["infra-retry", "infra-retry"]  # no diagnosis, no plain retry
    assert "waiting-infra" in ticket_line(first)
    assert "waiting out an outage at 'open-pr': the next batch goes on from there" in first
    assert github.pulls.get(REPO, []) == []
    per_attempt, left = divmod(down.failed, 3)  # the stage's calls before it gives up
    assert per_attempt >= 1 and left == 0
    [status] = status_comments(github)
    assert "**Waiting for the infrastructure**" in status["body"]
    assert "the next batch goes on from there" in status["body"]
    assert hook.requests == []  # waiting is nobody's to act on: no notice
    listed = io.StringIO()
    runs(tmp_path / "state", listed)
    assert "waiting-infra" in listed.getvalue().splitlines()[1]
    shown = io.StringIO()
    show(tmp_path / "state", record.run_id, shown)
    assert "state    waiting-infra at open-pr" in shown.getvalue()
    assert "waiting  the next batch goes on from the failed stage, its caps untouched" in (
        shown.getvalue()
    )

    # The next batch, an hour on: one more failed attempt, then the forge answers. The
    # retries the outage spent in the first batch no longer count: the cap (2) allows it.
    clock.at += timedelta(hours=1)
    down.calls = per_attempt

    code, second = run_batch(config, hook, clock)

    record = storage.runs.load(record.run_id)
    assert record.state is RunState.COMPLETED, second
    assert code == 0, second
    assert down.failed == 4 * per_attempt and clock.slept == [30.0, 60.0, 30.0]
    assert spent(storage) == ["infra-retry"] * 3
    [pull] = github.pulls[REPO]
    assert pull["head"]["ref"] == f"orch/{TICKET}" and pull["body"].rstrip().endswith("Fixes #7")
    assert [r.by for r in record.resumes] == ["next-run"]
    assert [a.stage for a in record.attempts] == ["clone", "implement", *["open-pr"] * 5]
    [status] = status_comments(github)  # the one comment, edited in place
    assert "**Completed**" in status["body"] and pull["html_url"] in status["body"]
    assert any("Waiting for the infrastructure" in body for body in status["history"])
    assert [(r["ticket"]["id"], r["event"]) for r in hook.requests] == [(TICKET, "completed")]

    _, third = run_batch(config, hook, clock)  # done: nothing again
    assert len(github.pulls[REPO]) == 1 and "0 ticket(s)" in third.splitlines()[-1]


@pytest.mark.slow
def test_an_outage_older_than_infra_wait_max_h_goes_to_a_person_once(
    tmp_path: Path, forge: tuple[FakeGitHub, PullsDown, Webhook]
) -> None:
    github, down, hook = forge
    config = write_config(tmp_path, github, max_h=2)
    storage = FileStorage(tmp_path / "state")
    clock = start()
    down.calls = -1

    run_batch(config, hook, clock)
    clock.at += timedelta(hours=1)
    code, second = run_batch(config, hook, clock)  # still down, 1 h old: waits again

    record = storage.runs.latest_for_ticket(TICKET)
    assert record is not None and record.state is RunState.WAITING_INFRA, second
    assert code == 75 and hook.requests == []
    sent = down.failed
    clock.at += timedelta(hours=1)

    code, third = run_batch(config, hook, clock)  # 2 h since the first 503: too old

    record = storage.runs.load(record.run_id)
    assert record.state is RunState.NEEDS_HUMAN, third
    assert record.halt is not None and record.halt.reason is HaltReason.INFRA_WAIT_EXPIRED
    assert "longer than [recovery] infra_wait_max_h = 2.0 in " in record.halt.detail
    assert str(config) in record.halt.detail
    assert code == 3 and down.failed == sent  # nothing more was sent to the forge
    assert [(r["ticket"]["id"], r["event"]) for r in hook.requests] == [(TICKET, "needs-human")]
    [status] = status_comments(github)
    assert "**Needs a person**" in status["body"] and "infra_wait_expired" in status["body"]

    _, fourth = run_batch(config, hook, clock)  # told once; not queued again
    assert len(hook.requests) == 1 and "0 ticket(s)" in fourth.splitlines()[-1]


@pytest.mark.slow
def test_a_kill_right_after_a_batch_took_the_run_out_of_waiting_loses_nothing(
    tmp_path: Path, forge: tuple[FakeGitHub, PullsDown, Webhook]
) -> None:
    github, down, hook = forge
    config = write_config(tmp_path, github)
    storage = FileStorage(tmp_path / "state")
    clock = start()
    down.calls = -1
    run_batch(config, hook, clock)
    record = storage.runs.latest_for_ticket(TICKET)
    assert record is not None and record.state is RunState.WAITING_INFRA
    down.calls = 0

    # A batch of its own process, killed (SIGKILL) right after it recorded the run going
    # on: the record says where it is.
    killed = subprocess.run(
        [sys.executable, "-P", "-m", "orchestrator", "--config", str(config), "batch"],
        env={**environ(config, hook), CRASH_ENV: "resumed"}, cwd=tmp_path,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert killed.returncode == -9, killed.stdout + killed.stderr
    record = storage.runs.load(record.run_id)
    assert record.state is RunState.RUNNING and [r.by for r in record.resumes] == ["next-run"]
    assert github.pulls.get(REPO, []) == []

    code, out = run_batch(config, hook, clock)

    record = storage.runs.load(record.run_id)
    assert record.state is RunState.COMPLETED and code == 0, out
    assert len(github.pulls[REPO]) == 1 and len(record.resumes) == 1
    assert spent(storage) == ["infra-retry", "infra-retry"]


@pytest.mark.quick
def test_a_waiting_ticket_makes_the_batch_exit_75_unless_something_worse_happened() -> None:
    def result(status: str) -> TicketResult:
        return TicketResult(TICKET, status, "R-1", "", 0.0, True)

    assert exit_code([result("waiting-infra"), result("completed")]) == 75
    assert exit_code([result("waiting-infra"), result("needs-human")]) == 3
    assert exit_code([result("waiting-infra"), result("failed")]) == 4
    assert waiting_detail(
        run_record(RunState.WAITING_INFRA, halt=Halt(
            reason=HaltReason.INFRA_UNAVAILABLE, stage="open-pr", detail="503")),
        24.0,
    ) == (
        "waiting out an outage at 'open-pr': the next batch goes on from there, its caps "
        "untouched; a person is told once it has lasted 24 h"
    )  # fmt: skip
