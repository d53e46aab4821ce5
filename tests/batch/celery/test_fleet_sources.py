"""``[[sources]]`` on the fleet: ``orchestrator batch --backend celery`` reads its GitHub
source once (a loopback fake), queues the ticket files it wrote under the shared state
dir, and real ``orchestrator worker`` processes on a real Redis run each once, without
asking the forge for issues; the token is in no output and no state file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from conftest import subprocess_env
from support.fleet_machines import FleetWorkers, counted, counts, run_batch, write_fleet_config
from support.github_fake import TOKEN, FakeGitHub, serve_github
from support.redis_server import RedisServer

REPO = "octo/widgets"
LISTING = f"/repos/{REPO}/issues"


@pytest.fixture
def github_fake() -> Iterator[FakeGitHub]:
    with serve_github() as fake:
        yield fake


@pytest.mark.slow
def test_a_celery_batch_queues_the_labelled_issues_it_took_in_and_workers_run_each_once(
    redis_server: RedisServer,
    namespace: str,
    tmp_path: Path,
    machines: list[FleetWorkers],
    github_fake: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAKE_GH_TOKEN", TOKEN)  # the batch's and the workers' environment
    assert subprocess_env()["FAKE_GH_TOKEN"] == TOKEN
    for number in (1, 2):
        github_fake.add_issue(REPO, number, f"issue {number}", "body", ("orchestrate",))
    github_fake.add_issue(REPO, 3, "not for us", "", ("question",))
    origin = tmp_path / "origin.git"
    git.Repo.init(origin, bare=True).close()
    source = (
        f'[[sources]]\nkind = "github"\nrepo = "{REPO}"\nlabel = "orchestrate"\n'
        f'api_url = "{github_fake.url}"\ntoken_env = "FAKE_GH_TOKEN"\nrepository = "{origin}"\n\n'
    )
    config = write_fleet_config(tmp_path, redis_server.url, namespace, source + counted("a"))
    (tmp_path / "counts").mkdir()
    fleet = FleetWorkers(tmp_path, config)
    machines.append(fleet)
    fleet.start("one", concurrency=2)
    fleet.wait_ready("one")

    done = run_batch(config, tmp_path / "no-tickets-dir", "--json", "--no-preflight")

    assert done.returncode == 0, done.stdout + done.stderr
    ids = ["gh-octo-widgets-1", "gh-octo-widgets-2"]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert sorted((r["ticket"], r["status"]) for r in rows if "ticket" in r) == [
        (ticket_id, "completed") for ticket_id in ids
    ]
    assert counts(tmp_path / "state", "a") == {ticket_id: 1 for ticket_id in ids}
    listed = [r for r in github_fake.requests if r.method == "GET" and r.path == LISTING]
    assert len(listed) == 1  # the batch's intake; the workers ran the files it wrote
    assert fleet.ran("one") == 2
    intake = tmp_path / "state" / "intake" / "gh-octo-widgets"
    assert sorted(p.name for p in intake.iterdir()) == [f"{t}.md" for t in ids]
    assert TOKEN not in done.stdout + done.stderr + fleet.log("one")
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
