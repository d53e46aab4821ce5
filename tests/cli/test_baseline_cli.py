"""``orchestrator baseline``: real runs through the real CLI learn their checks'
baselines; ``baseline CHECK`` rebuilds one from the green logs the run records list,
``--list`` shows them, ``--prune DAYS`` drops stale ones."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from orchestrator.cli.main import main
from orchestrator.domain.line_templates import template_of
from orchestrator.domain.runs import RunRecord
from orchestrator.storage.baselines import BaselineStore
from orchestrator.storage.runs import read_record_file

from conftest import write_config, write_ticket

CHECKS = """
[[stages]]
name = "review"
cwd = "run"
[[stages.checks]]
name = "unit"
command = ["bash", "-c", "echo 'collected 12 items'; echo \\"12 passed in 0.$RANDOM s\\""]
[[stages.checks]]
name = "lint"
command = ["bash", "-c", "echo 'All checks passed!'"]
"""


class Project:
    def __init__(self, root: Path) -> None:
        self.config = write_config(root, CHECKS)
        self.ticket = write_ticket(root / "tickets")
        self.state = root / "state"
        self.repo = str((root / "origin.git").resolve())

    def cli(self, *args: str) -> int:
        return main(["--config", str(self.config), *args])

    def records(self) -> list[RunRecord]:
        return [read_record_file(p) for p in sorted((self.state / "runs").glob("T-1-*Z-????.json"))]

    def store(self) -> BaselineStore:
        return BaselineStore(self.state)


@pytest.fixture
def project(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Project:
    """Two completed runs of one ticket, whose checks both passed."""
    made = Project(tmp_path)
    assert made.cli("run", str(made.ticket)) == 0
    assert made.cli("run", "--rerun", str(made.ticket)) == 0
    capsys.readouterr()
    return made


def test_real_runs_learn_their_checks_baselines(project: Project) -> None:
    unit = project.store().load(project.repo, "unit")
    assert unit is not None and unit.runs == 2
    assert unit.knows(template_of(b"12 passed in 0.1 s"))
    lint = project.store().load(project.repo, "lint")
    assert lint is not None and lint.runs == 2


def test_a_baseline_is_rebuilt_from_the_green_logs_on_disk(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.rmtree(project.state / "baselines")  # runs from before baselines, say
    assert project.cli("baseline", "unit") == 0
    path = project.store().path(project.repo, "unit")
    lines = capsys.readouterr().out.splitlines()
    unit = project.store().load(project.repo, "unit")
    assert unit is not None and unit.runs == 2
    assert len(lines) == 1
    assert lines[0] == (
        f"baseline unit of {project.repo}: learned 2 green run(s), {len(unit)} templates, "
        f"{path.stat().st_size} B: {path}"
    )
    # The tool's lines, and the runner's own around them (its header and exit line).
    assert len(unit) == 5
    assert unit.knows(template_of(b"collected 9 items"))
    assert project.store().load(project.repo, "lint") is None  # only the check asked for


def test_runs_says_how_many_of_the_last_runs(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert project.cli("baseline", "unit", "--runs", "1") == 0
    out = capsys.readouterr().out
    assert "learned 1 green run(s), 5 templates" in out
    assert "  it replaces one learned from 2 runs\n" in out
    unit = project.store().load(project.repo, "unit")
    assert unit is not None and unit.runs == 1


def test_repo_picks_one_repository_as_a_ticket_names_it(
    project: Project, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(Path(project.repo).parent)
    assert project.cli("baseline", "unit", "--repo", "origin.git") == 0
    assert f"baseline unit of {project.repo}: learned 2" in capsys.readouterr().out
    assert project.cli("baseline", "unit", "--repo", "https://example.com/other.git") == 7
    assert capsys.readouterr().err == (
        "baseline: no run record of https://example.com/other.git lists a green run of "
        "check 'unit'\n"
    )


def test_a_check_no_run_passed_is_said(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert project.cli("baseline", "e2e") == 7
    assert capsys.readouterr().err == "baseline: no run record lists a green run of check 'e2e'\n"
    assert not list((project.state / "baselines").glob("*/e2e-*"))


def test_pruned_logs_are_counted_and_the_rest_learned(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = project.records()
    shutil.rmtree(Path(first.run_dir) / "logs")
    assert project.cli("baseline", "unit") == 0
    assert "learned 1 green run(s) of 2 listed (1 log(s) pruned), 5 templates" in (
        capsys.readouterr().out
    )
    before = project.store().path(project.repo, "unit").read_bytes()
    shutil.rmtree(Path(second.run_dir) / "logs")
    assert project.cli("baseline", "unit") == 7
    assert capsys.readouterr().out == (
        f"baseline unit of {project.repo}: no green log to learn from of 2 listed "
        "(2 log(s) pruned); the stored one is kept\n"
    )
    assert project.store().path(project.repo, "unit").read_bytes() == before


def test_a_run_record_that_does_not_read_is_named_and_passed_over(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    first = project.records()[0]
    record_file = project.state / "runs" / f"{first.run_id}.json"
    record_file.write_text("{ not json")
    assert project.cli("baseline", "unit") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"skipped state error: {record_file}: ")
    assert out[1].startswith(f"baseline unit of {project.repo}: learned 1 green run(s)")


def test_list_shows_each_baseline_and_each_damaged_one(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert project.cli("baseline", "--list") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["RUNS", "TEMPLATES", "SIZE", "UPDATED", "CHECK", "REPOSITORY"]
    rows = sorted(line.split() for line in lines[1:])
    assert [(r[0], r[1], r[-2], r[-1]) for r in rows] == [
        ("2", "4", "lint", project.repo),
        ("2", "5", "unit", project.repo),
    ]
    damaged = project.store().path(project.repo, "lint")
    damaged.write_bytes(b"nonsense")
    assert project.cli("baseline", "--list") == 7
    assert f"damaged {damaged}: truncated: 8 bytes, less than a header\n" in capsys.readouterr().out


def test_list_with_no_baselines_says_where_they_come_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path)
    assert project.cli("baseline", "--list") == 0
    assert capsys.readouterr().out == (
        "no baselines yet: they are learned from each check that passes\n"
    )


def test_prune_drops_baselines_not_written_for_that_many_days(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert project.cli("baseline", "--prune", "30") == 0
    assert capsys.readouterr().out == (
        "baseline --prune: removed 0 baseline(s) not written for 30 days\n"
    )
    lint = project.store().path(project.repo, "lint")
    stale = lint.stat().st_mtime - 31 * 86400
    os.utime(lint, (stale, stale))
    assert project.cli("baseline", "--prune", "30") == 0
    relative = lint.relative_to(project.state).as_posix()
    assert capsys.readouterr().out == (
        f"removed {relative}\nbaseline --prune: removed 1 baseline(s) not written for 30 days\n"
    )
    assert project.store().load(project.repo, "lint") is None
    assert project.store().load(project.repo, "unit") is not None


@pytest.mark.parametrize(
    "args",
    [(), ("unit", "--list"), ("unit", "--prune", "3"), ("--list", "--prune", "3")],
)
def test_one_of_check_list_or_prune(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    project = Project(tmp_path)
    assert project.cli("baseline", *args) == 2
    assert capsys.readouterr().err == "baseline: give one of CHECK, --list or --prune DAYS\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("unit", "--runs", "0"), "argument --runs: must be at least 1 (got 0)"),
        (("--prune", "-1"), "argument --prune: must be 0 or more (got -1)"),
        (("--prune", "nan"), "argument --prune: must be 0 or more (got nan)"),
        (("--prune", "week"), "argument --prune: not a number of days: 'week'"),
    ],
)
def test_bad_numbers_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    project = Project(tmp_path)
    with pytest.raises(SystemExit) as exited:
        project.cli("baseline", *args)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
