"""``[[sources]]`` beyond one process: a ``--jobs N`` batch reads its sources once, in its
own process, and its workers run exactly what it took in (no worker asks the forge for
issues); two batches started together over the same issue run it once, the second saying
it is held, with one ticket file and one status comment, edited in place."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from orchestrator.storage.batch_budget import BATCH_ENV

from conftest import COUNTS, bash_stage, orchestrator_cmd, subprocess_env
from support.file_watch import wait_for
from support.github_fake import TOKEN, FakeGitHub, serve_github
from support.leaks import assert_not_leaked

REPO = "octo/widgets"
LISTING = f"/repos/{REPO}/issues"
DEADLINE_S = 60.0


@pytest.fixture
def github_fake() -> Iterator[FakeGitHub]:
    with serve_github() as fake:
        yield fake


def write_config(tmp_path: Path, fake: FakeGitHub, script: str) -> Path:
    origin = tmp_path / "origin.git"
    git.Repo.init(origin, bare=True).close()
    (tmp_path / "counts").mkdir()
    (tmp_path / "tickets").mkdir()
    config = tmp_path / "config.toml"
    config.write_text(
        'state_dir = "state"\n[recovery]\nenabled = false\n\n'
        f'[[sources]]\nkind = "github"\nrepo = "{REPO}"\nlabel = "orchestrate"\n'
        f'api_url = "{fake.url}"\ntoken_env = "FAKE_GH_TOKEN"\nrepository = "{origin}"\n\n'
        + bash_stage("note", script, sandbox="none")
    )
    return config


def batch_cmd(config: Path, *extra: str) -> list[str]:
    return orchestrator_cmd(
        "--config", str(config), "batch", "--tickets", str(config.parent / "tickets"),
        "--no-preflight", *extra,
    )  # fmt: skip


def listings(fake: FakeGitHub) -> int:
    """How many times the issues of ``REPO`` were listed (an intake's one request)."""
    return sum(1 for r in fake.requests if r.method == "GET" and r.path == LISTING)


def ran(tmp_path: Path) -> list[str]:
    path = tmp_path / "counts" / "ran"
    return path.read_text().split() if path.exists() else []


def assert_no_token(tmp_path: Path, output: str) -> None:
    assert_not_leaked([TOKEN], output, tmp_path / "state")


@pytest.mark.slow
def test_jobs_n_reads_the_sources_once_and_its_workers_run_what_it_took_in(
    tmp_path: Path, github_fake: FakeGitHub
) -> None:
    for number in (1, 2, 3):
        github_fake.add_issue(REPO, number, f"issue {number}", "body", ("orchestrate",))
    github_fake.add_issue(REPO, 4, "not for us", "", ("question",))
    config = write_config(tmp_path, github_fake, f'echo "$ORCH_TICKET_ID" >> {COUNTS}/ran')

    done = subprocess.run(
        batch_cmd(config, "--jobs", "2", "--json"), capture_output=True, text=True,
        env=subprocess_env(FAKE_GH_TOKEN=TOKEN), cwd=tmp_path, timeout=DEADLINE_S,
    )  # fmt: skip

    assert done.returncode == 0, done.stdout + done.stderr
    ids = [f"gh-octo-widgets-{n}" for n in (1, 2, 3)]
    assert sorted(ran(tmp_path)) == ids  # each once, and nothing unlabelled
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert sorted(r["ticket"] for r in rows if "ticket" in r and r["ran"]) == ids
    assert rows[-1]["summary"]["tickets"] == 3
    assert listings(github_fake) == 1  # the batch's own intake; no worker listed issues
    batches = list((tmp_path / "state" / "batches").iterdir())
    assert len(batches) == 1 and len(list(batches[0].glob("worker-*.log"))) == 2
    queued = json.loads((batches[0] / "queue.json").read_text())
    assert sorted(Path(p).name for p in queued) == [f"{i}.md" for i in ids]
    assert_no_token(tmp_path, done.stdout + done.stderr)

    again = subprocess.run(
        batch_cmd(config, "--jobs", "2"), capture_output=True, text=True,
        env=subprocess_env(FAKE_GH_TOKEN=TOKEN), cwd=tmp_path, timeout=DEADLINE_S,
    )  # fmt: skip

    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(ran(tmp_path)) == ids  # nothing repeated
    assert listings(github_fake) == 2  # one listing per batch


def test_a_worker_without_its_batch_queue_refuses_rather_than_read_the_sources(
    tmp_path: Path, github_fake: FakeGitHub
) -> None:
    github_fake.add_issue(REPO, 1, "issue 1", "body", ("orchestrate",))
    config = write_config(tmp_path, github_fake, f'echo "$ORCH_TICKET_ID" >> {COUNTS}/ran')

    done = subprocess.run(
        batch_cmd(config, "--worker"), capture_output=True, text=True,
        env=subprocess_env(FAKE_GH_TOKEN=TOKEN, **{BATCH_ENV: "20260101T000000Z-abcd"}),
        cwd=tmp_path, timeout=DEADLINE_S,
    )  # fmt: skip

    assert done.returncode == 2, done.stdout + done.stderr
    assert "a worker never reads the sources itself" in done.stderr
    assert github_fake.requests == [] and ran(tmp_path) == []


def start(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd
    )


@pytest.mark.slow
def test_two_batches_racing_over_one_issue_run_it_once_with_one_status_comment(
    tmp_path: Path, github_fake: FakeGitHub
) -> None:
    github_fake.add_issue(REPO, 1, "only one", "body", ("orchestrate",))
    started, release = tmp_path / "started", tmp_path / "release"
    os.mkfifo(release)
    # The stage says it is running (a file the test waits on), then holds the ticket
    # until the test writes to the fifo: the second batch certainly overlaps it.
    config = write_config(
        tmp_path, github_fake,
        f'echo "$ORCH_TICKET_ID" >> {COUNTS}/ran; echo $$ > {started}; read -r go < {release}',
    )  # fmt: skip
    env = subprocess_env(FAKE_GH_TOKEN=TOKEN)
    batches = [start(batch_cmd(config, "--json"), env, tmp_path) for _ in range(2)]
    try:
        wait_for(
            started.exists, tmp_path, "the stage to start in one of the batches",
            deadline_s=DEADLINE_S,
            still_possible=lambda: any(b.poll() is None for b in batches),
        )  # fmt: skip
        # The batch whose stage is not holding the ticket ends while the other still runs.
        wait_for(
            lambda: any(b.poll() is not None for b in batches), tmp_path,
            "the batch that did not get the ticket to end", deadline_s=DEADLINE_S,
        )  # fmt: skip
        loser = next(b for b in batches if b.poll() is not None)
        winner = next(b for b in batches if b is not loser)
        assert winner.poll() is None  # still in its stage: the two overlapped
        lost_out, lost_err = loser.communicate(timeout=DEADLINE_S)
    finally:
        fd = os.open(release, os.O_WRONLY | os.O_NONBLOCK)  # the stage is reading it
        os.write(fd, b"go\n")
        os.close(fd)
    won_out, won_err = winner.communicate(timeout=DEADLINE_S)

    assert winner.returncode == 0, won_out + won_err
    assert ran(tmp_path) == ["gh-octo-widgets-1"]  # exactly once
    won = [json.loads(line) for line in won_out.splitlines() if line.startswith("{")]
    assert [(r["ticket"], r["status"], r["ran"]) for r in won if "ticket" in r] == [
        ("gh-octo-widgets-1", "completed", True)
    ]
    assert loser.returncode == 0, lost_out + lost_err  # a held ticket is not a failure
    lost = [json.loads(line) for line in lost_out.splitlines() if line.startswith("{")]
    assert [(r["ticket"], r["status"], r["ran"]) for r in lost if "ticket" in r] == [
        ("gh-octo-widgets-1", "skipped", False)
    ], lost_out + lost_err
    detail = next(r["detail"] for r in lost if "ticket" in r)
    assert detail == f"skipped: gh-octo-widgets-1 is locked by pid {winner.pid}"
    intake = tmp_path / "state" / "intake" / "gh-octo-widgets"
    assert [p.name for p in intake.iterdir()] == ["gh-octo-widgets-1.md"]  # one file, no temp
    comments = github_fake.comments_on(REPO, 1)
    assert len(comments) == 1, comments
    assert comments[0]["history"], "the status comment was never edited"
    assert_no_token(tmp_path, won_out + won_err + lost_out + lost_err)
