"""Bad queues are refused loudly: two files with one ticket id, a repository that does not
exist, and a failed stage whose own last words reach the console. Run as cron runs the
batch: the real CLI as ``python -m orchestrator`` starts it, each command in a process of
its own (forked from the test's, ``run_forked``: no interpreter start per command), real
git repositories, real stage processes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import git
import pytest

from orchestrator.cli.main import main

from conftest import COUNTS, bash_stage, subprocess_env, write_config, write_ticket
from support.scripted_cli import run_forked

pytestmark = pytest.mark.slow

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def counted() -> str:
    return bash_stage("a", f"echo x >> {COUNTS}/count-$ORCH_TICKET_ID")


def batch(config: Path, tickets: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return cli(["--config", str(config), "batch", "--tickets", str(tickets), *args], **env)


def cli(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return run_forked(Path.cwd(), argv, subprocess_env(**env), timeout_s=120, as_entry=True)


def ran(tmp_path: Path) -> dict[str, int]:
    return {
        p.name.removeprefix("count-"): len(p.read_text().splitlines())
        for p in (tmp_path / "counts").glob("count-*")
    }


def runs_of(tmp_path: Path, ticket_id: str) -> list[Path]:
    return sorted((tmp_path / "state" / "runs").glob(f"{ticket_id}-*"))


def line_of(stdout: str, first_column: str) -> str:
    [line] = [
        line
        for line in stdout.splitlines()
        if re.match(rf"^{STAMP} {re.escape(first_column)} ", line)
    ]
    return line


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_two_files_with_one_id_are_both_refused_naming_each_other_and_the_rest_runs(
    tmp_path: Path, jobs: str
) -> None:
    config = write_config(tmp_path, counted())
    tickets = tmp_path / "tickets"
    write_ticket(tickets, "T-00")
    first = write_ticket(tickets, "T-01")
    second = tickets / "T-01-copy.md"
    second.write_text(first.read_text().replace("Do the thing.", "Do another thing."))
    write_ticket(tickets, "T-02")

    proc = batch(config, tickets, "--jobs", jobs)

    assert proc.returncode == 2, proc.stdout + proc.stderr  # a refusal: cron hears of it
    for this, other in ((first, second), (second, first)):
        line = line_of(proc.stdout, this.name)
        assert " refused " in line
        assert (
            f"ticket error: {this}: id 'T-01' is also the id of {other}; rename or remove" in line
        )
    assert ran(tmp_path) == {"T-00": 1, "T-02": 1}  # the rest of the queue ran
    assert runs_of(tmp_path, "T-01") == []  # and neither file did


@pytest.mark.quick
def test_run_on_a_second_file_with_a_taken_id_names_the_file_that_has_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, counted())
    first = write_ticket(tmp_path / "tickets", "T-01")
    assert main(["--config", str(config), "run", str(first)]) == 0
    second = write_ticket(tmp_path / "elsewhere", "T-01", body="Something else.")
    capsys.readouterr()

    assert main(["--config", str(config), "run", str(second)]) == 2

    assert capsys.readouterr().err == (
        f"ticket error: {second}: id 'T-01' is taken by another file, {first} "
        "(its runs are this id's runs); rename or remove one of them\n"
    )
    assert ran(tmp_path) == {"T-01": 1}
    # Moved rather than copied: the old file gone, the id is the new file's.
    first.unlink()
    assert main(["--config", str(config), "run", str(second), "--rerun"]) == 0


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda root: None, "no such directory: {repo}"),
        (lambda root: (root / "nowhere.git").mkdir(), "not a git repository: {repo}"),
        (lambda root: (root / "nowhere.git").write_text("x"), "not a directory: {repo}"),
    ],
)
def test_a_repository_that_does_not_exist_is_refused_before_a_run_is_created(
    tmp_path: Path, make: object, problem: str
) -> None:
    config = write_config(
        tmp_path,
        '[[stages]]\nname = "clone"\ncommand = ["{python}", "-P", "-m", "orchestrator.stages.clone"]\n'
        'cwd = "run"\n\n',
    )
    tickets = tmp_path / "tickets"
    make(tmp_path)  # type: ignore[operator]
    bad = write_ticket(tickets, "T-01", repository="file://" + str(tmp_path / "nowhere.git"))
    repo = tmp_path / "nowhere.git"

    proc = batch(config, tickets)

    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = line_of(proc.stdout, "T-01")
    reason = problem.format(repo=repo)
    assert (
        " refused " in line
        and f"ticket error: {bad}: repository: {reason}; nothing was run" in line
    )
    assert runs_of(tmp_path, "T-01") == []  # nothing written under runs/

    single = cli(["--config", str(config), "run", str(bad)])
    assert single.returncode == 2
    assert single.stderr == f"ticket error: {bad}: repository: {reason}; nothing was run\n"
    assert runs_of(tmp_path, "T-01") == []


def test_a_missing_relative_repository_is_refused_and_the_rest_of_the_queue_runs(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, counted())
    tickets = tmp_path / "tickets"
    write_ticket(tickets, "T-00")
    bad = tickets / "T-01.md"
    bad.write_text(
        write_ticket(tickets, "T-01").read_text().replace("../origin.git", "../gone.git")
    )

    proc = batch(config, tickets)

    assert proc.returncode == 2, proc.stdout
    assert f"repository: no such directory: {tmp_path / 'gone.git'}" in line_of(proc.stdout, "T-01")
    assert ran(tmp_path) == {"T-00": 1}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_failed_stage_prints_its_last_error_lines_under_the_batch_line(
    tmp_path: Path, jobs: str
) -> None:
    script = (
        "echo step one; echo 'Traceback (most recent call last):'; "
        'echo \'  File "build.py", line 3\'; echo "ValueError: token=hunter2hunter2hunter2"; '
        "echo cleaning up; exit 1"
    )
    config = write_config(tmp_path, bash_stage("build", script))
    tickets = tmp_path / "tickets"
    write_ticket(tickets, "T-01")
    before = datetime.now(UTC).replace(microsecond=0)

    proc = batch(config, tickets, "--jobs", jobs)  # in process, or from workers' reports

    after = datetime.now(UTC)
    assert proc.returncode == 4, proc.stdout
    lines = proc.stdout.splitlines()
    head = line_of(proc.stdout, "T-01")
    assert " failed " in head and "stage_failed at build" in head
    said = lines[lines.index(head) + 1 : lines.index(head) + 5]
    assert said[:3] == [
        "    | step one",
        "    | Traceback (most recent call last):",
        '    | File "build.py", line 3',
    ]
    assert said[3].startswith("    | ValueError: token=") and "hunter2" not in said[3]
    assert "cleaning up" not in proc.stdout  # after the error: noise, not the cause
    at = datetime.strptime(head[:20], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert before <= at <= after
    assert re.match(rf"^{STAMP} batch ", lines[-1])


def test_json_lines_carry_the_time_and_the_error_lines(tmp_path: Path) -> None:
    config = write_config(tmp_path, bash_stage("build", "echo 'fatal: no way' >&2; exit 1"))
    tickets = tmp_path / "tickets"
    write_ticket(tickets, "T-01")
    proc = batch(config, tickets, "--json")
    [row, summary] = [json.loads(line) for line in proc.stdout.splitlines()]
    assert re.fullmatch(STAMP, row["at"]) and row["error_lines"] == ["fatal: no way"]
    assert row["halt"] == "stage_failed"
    assert re.fullmatch(STAMP, summary["summary"]["at"])
    assert summary["summary"]["dry_run_blocked"] == []


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_one_line_says_dry_run_blocked_something_and_how_to_allow_it(
    tmp_path: Path, jobs: str
) -> None:
    config = write_config(
        tmp_path, bash_stage("build", "exit 0") + bash_stage("push", "exit 0", side_effectful=True)
    )
    tickets = tmp_path / "tickets"
    for ticket_id in ("T-01", "T-02"):
        write_ticket(tickets, ticket_id)

    armed = batch(config, tickets, "--jobs", jobs)

    assert armed.returncode == 3, armed.stdout
    [notice] = [line for line in armed.stdout.splitlines() if " DRY_RUN blocked " in line]
    assert re.fullmatch(
        rf"{STAMP} DRY_RUN blocked a side-effectful stage of 2 ticket\(s\) \(T-01, T-02\): "
        "DRY_RUN is decided by the environment that runs the ticket \\(the batch's; with "
        "--backend celery, the worker's\\); the next `DRY_RUN=false orchestrator batch` "
        "continues each at the stage that stopped it, or `DRY_RUN=false orchestrator resume "
        "RUN_ID` one now",
        notice,
    )
    # Each ticket's own line says it too, naming whose environment decides.
    said = "blocked by DRY_RUN at 'push': DRY_RUN is armed in the batch's environment, which"
    for ticket_id in ("T-01", "T-02"):
        assert said in line_of(armed.stdout, ticket_id)
    # Found blocked by an earlier batch is not "blocked in this batch": no notice, but
    # each ticket's line still says it is blocked, and by what.
    again = batch(config, tickets)
    assert " DRY_RUN blocked " not in again.stdout
    for ticket_id in ("T-01", "T-02"):
        line = line_of(again.stdout, ticket_id)
        assert " already-needs-human " in line
        assert "DRY_RUN is armed in the batch's environment, which decides" in line

    # A batch with DRY_RUN=false continues the blocked runs (tests/batch/
    # test_dry_run_continues.py has the details) and runs the new ticket.
    write_ticket(tickets, "T-03")
    disarmed = batch(config, tickets, DRY_RUN="false")
    assert "DRY_RUN" not in disarmed.stdout
    for ticket_id in ("T-01", "T-02", "T-03"):
        assert " completed " in line_of(disarmed.stdout, ticket_id)


def test_cron_over_several_batches_refuses_then_runs_what_a_person_fixed(tmp_path: Path) -> None:
    """What cron's monitoring sees: the first batch exits 2 (two files claim one id, one
    ticket's repository is missing) while the good ticket still runs and is stopped by
    DRY_RUN; after a person removes the copy and creates the repository, the next batch,
    with DRY_RUN=false, runs exactly those two tickets and exits 0."""
    config = write_config(tmp_path, counted() + bash_stage("push", "exit 0", side_effectful=True))
    tickets = tmp_path / "tickets"
    write_ticket(tickets, "A-1")
    twin = write_ticket(tickets, "B-1")
    copy = tickets / "B-1-copy.md"
    copy.write_text(twin.read_text())
    write_ticket(tickets, "C-1", repository="../c-origin.git")
    shutil.rmtree(tmp_path / "c-origin.git")  # write_ticket made one; this one is missing

    first = batch(config, tickets)

    assert first.returncode == 2, first.stdout
    assert " needs-human " in line_of(first.stdout, "A-1")
    assert " refused " in line_of(first.stdout, "B-1.md")
    assert " refused " in line_of(first.stdout, "B-1-copy.md")
    assert "repository: no such directory" in line_of(first.stdout, "C-1")
    assert "DRY_RUN blocked a side-effectful stage of 1 ticket(s) (A-1)" in first.stdout
    assert ran(tmp_path) == {"A-1": 1}
    assert runs_of(tmp_path, "B-1") == runs_of(tmp_path, "C-1") == []

    copy.unlink()
    git.Repo.init(tmp_path / "c-origin.git", bare=True).close()  # a person made it

    second = batch(config, tickets, DRY_RUN="false")

    assert second.returncode == 0, second.stdout
    assert " completed " in line_of(second.stdout, "B-1")
    assert " completed " in line_of(second.stdout, "C-1")
    assert "DRY_RUN" not in second.stdout
    assert ran(tmp_path) == {"A-1": 1, "B-1": 1, "C-1": 1}  # A-1's build was not repeated
