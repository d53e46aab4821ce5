"""``orchestrator demo``: build a small project with
real bugs, then run a ticket for each through the default pipeline. It needs no
config.toml: it writes the packaged default one (``orchestrator.starter``) beside the
project it builds, so it runs the same from a checkout or an installed wheel.

CARDS-1's patch squashes the fix and its test into one commit: ``lint-bug-commit-order``
fails it, the playbook proposes its mechanical fix, the recipe splits the commit,
the same check re-runs green, and the pull request is recorded. CARDS-2 lands the fix,
then the test, and completes first time. CARDS-3's fix is incomplete, so the project's own
tests fail: no playbook entry knows that, and without a model the ticket ends
``needs-human`` with a synthetic verdict and a hand-off file.

The demo is offline: the model's key is withheld unless ``--with-model`` is given.

The build uses GitPython only, with fixed authors and dates, so every build produces
byte-identical patches and tickets.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import git

from orchestrator.demo.cards import PROJECT_FILES, TICKETS, TicketSpec
from orchestrator.domain import errors

EXPECTED: dict[str, int] = {
    "CARDS-1": errors.EXIT_COMPLETED,
    "CARDS-2": errors.EXIT_COMPLETED,
    "CARDS-3": errors.EXIT_NEEDS_HUMAN,
}
WHY_EXPECTED = {
    "CARDS-1": "lint-bug-commit-order failed, the playbook's recipe split the commit, "
    "the check re-ran green, the PR is recorded",
    "CARDS-2": "the fix lands before its test, both checks pass, the PR is recorded",
    "CARDS-3": "project-tests failed in a way no playbook entry knows; no model is "
    "configured, so a synthetic abandon-human verdict hands it to a person",
}
DEFAULT_DIR = ".state/demo"
MARKER = ".orchestrator-demo"  # only a directory carrying this is ever deleted by a rebuild
AUTHOR = git.Actor("Dana Dealer", "dana@cards.example")
EPOCH = 1_709_546_400  # 2024-03-04 10:00 UTC; each commit is one hour after the previous


@dataclass(frozen=True)
class DemoLayout:
    workdir: Path
    origin: Path  # bare repository the tickets point at
    tickets: Mapping[str, Path]  # ticket id → ticket file


def _toml_str(value: str) -> str:
    # A JSON string is a valid TOML basic string: quotes, backslashes, controls escaped.
    return json.dumps(value, ensure_ascii=False)


def ticket_text(spec: TicketSpec, patch_name: str) -> str:
    return (
        "+++\n"
        f"id = {_toml_str(spec.id)}\n"
        f"title = {_toml_str(spec.title)}\n"
        'kind = "bug-fix"\n'
        'repository = "../origin.git"\n'
        'base_branch = "main"\n'
        "\n"
        "[extras.patch]\n"
        f"file = {_toml_str(patch_name)}\n"
        "+++\n"
        f"{spec.body}"
    )


def _fresh_dir(path: Path) -> None:
    if path.exists() and any(path.iterdir()) and not (path / MARKER).exists():
        raise ValueError(f"refusing to replace {path}: it is not a demo directory (no {MARKER})")
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    (path / MARKER).write_text("built by orchestrator.demo.run; deleted on every rebuild\n")


def _commit(repo: git.Repo, files: Mapping[str, str], message: str, tick: int) -> None:
    for rel, text in files.items():
        target = Path(repo.working_dir, rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    repo.index.add(list(files))
    when = f"{EPOCH + 3600 * tick} +0000"
    repo.index.commit(message, author=AUTHOR, committer=AUTHOR, author_date=when, commit_date=when)


def _make_patch(repo: git.Repo, spec: TicketSpec, first_tick: int) -> str:
    """Commit the ticket's change on a scratch branch and return it as an mbox series."""
    branch = f"demo/{spec.id}"
    repo.git.checkout("-b", branch, "main")
    for offset, commit in enumerate(spec.commits):
        _commit(repo, commit.files, commit.message, first_tick + offset)
    # --no-signature: the default signature is git's version, which would make the
    # patch differ between machines.
    mbox: str = repo.git.format_patch(
        "--stdout", "--no-signature", f"main..{branch}", strip_newline_in_stdout=False
    )
    repo.git.checkout("main")
    repo.git.branch("-D", branch)
    return mbox


def build_demo(workdir: Path) -> DemoLayout:
    """(Re)create ``workdir`` with the cards project, its bare origin and the tickets."""
    workdir = workdir.resolve()
    _fresh_dir(workdir)
    with git.Repo.init(workdir / "cards", initial_branch="main") as repo:
        _commit(repo, PROJECT_FILES, "Start the cards library\n", tick=0)
        origin = workdir / "origin.git"
        # Clone before any scratch branch exists, so origin holds main and nothing else.
        git.Repo.clone_from(repo.working_dir, origin, bare=True).close()
        tickets_dir = workdir / "tickets"
        tickets_dir.mkdir()
        tickets: dict[str, Path] = {}
        tick = 1
        for spec in TICKETS:
            patch_name = f"{spec.id}.patch"
            (tickets_dir / patch_name).write_text(_make_patch(repo, spec, tick), encoding="utf-8")
            tick += len(spec.commits)
            path = tickets_dir / f"{spec.id}.md"
            path.write_text(ticket_text(spec, patch_name), encoding="utf-8")
            tickets[spec.id] = path
    return DemoLayout(workdir=workdir, origin=origin, tickets=tickets)


def outcome(code: int) -> str:
    return f"exit {code}: {errors.EXIT_MEANINGS.get(code, 'unknown exit code')}"


def mismatches(results: Mapping[str, int], expected: Mapping[str, int]) -> dict[str, int]:
    """Tickets whose exit code differs from the expected one (missing counts as differing)."""
    return {t: results.get(t, -1) for t in expected if results.get(t) != expected[t]}


def orchestrator_command() -> str:
    """How to run this orchestrator from here: ``orchestrator`` when that is what PATH
    finds (pipx, an activated venv), else the script beside this interpreter
    (``.venv/bin/orchestrator`` in a checkout), else ``python -m orchestrator``."""
    script = Path(sys.executable).parent / "orchestrator"
    if not script.is_file():
        return f"{sys.executable} -m orchestrator"
    on_path = shutil.which("orchestrator")
    if on_path is not None and Path(on_path).resolve() == script.resolve():
        return "orchestrator"
    relative = os.path.relpath(script)
    return relative if not relative.startswith("..") else str(script)


def print_what_to_read(state_dir: Path) -> None:
    """Point at the files that say what was decided and why."""
    from orchestrator.storage.layout import StateLayout, run_record_paths

    relative = os.path.relpath(state_dir)
    command = orchestrator_command()
    print("\nWhat was decided, and why:")
    layout = StateLayout(state_dir)
    for record in run_record_paths(layout.runs_dir):
        for extra in layout.run_files(record.stem):
            print(f"  {os.path.relpath(extra)}")
    print(f"Every run:    {command} --state-dir {relative} runs")
    print(f"One run:      {command} --state-dir {relative} show <run-id or ticket id>")


def run_demo(workdir: Path, *, with_model: bool, cli: Callable[[list[str]], int]) -> int:
    """Build the demo in ``workdir`` and run its tickets; 0 when every ticket ended as
    expected, 1 when one did not, EXIT_USAGE when ``workdir`` is not the demo's to replace.
    ``cli`` is the orchestrator's entry point (``cli.main.main``), handed in by the
    ``orchestrator demo`` command: the demo drives the CLI and imports none of it."""
    from orchestrator import starter

    try:
        layout = build_demo(workdir)
    except ValueError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return errors.EXIT_USAGE
    config = layout.workdir / starter.CONFIG_NAME
    config.write_text(starter.config_text(), encoding="utf-8")
    print(f"demo project built in {layout.workdir}")
    print(f"  repository: {layout.origin}")
    print(f"  config:     {config}")
    for ticket_id, path in layout.tickets.items():
        print(f"  ticket {ticket_id}: {path}")

    os.environ["DRY_RUN"] = "false"
    print("DRY_RUN=false: the demo's remote is a local bare repository, so open-pr may push")
    if not with_model:
        # Offline and deterministic: what a model would say about CARDS-3 is not a demo.
        from orchestrator.domain.config import load_config

        key_env = load_config(config).config.model.api_key_env
        if os.environ.pop(key_env, None):
            print(f"{key_env} withheld: the demo runs without a model (--with-model to use it)")
    # Budgets are per ticket across runs: a fresh state dir per demo keeps it repeatable.
    state_dir = layout.workdir / "state"

    base = ["--config", str(config), "--state-dir", str(state_dir)]
    results: dict[str, int] = {}
    for ticket_id, path in layout.tickets.items():
        print(f"\n=== {ticket_id}: orchestrator run {path.name} ===", flush=True)
        results[ticket_id] = cli([*base, "run", str(path)])
        if results[ticket_id] == errors.EXIT_BROKEN_PIPE:
            # Our reader went away (``orchestrator demo | head``): stop as quietly as the
            # run did; the next demo starts afresh.
            return errors.EXIT_BROKEN_PIPE

    print("\n=== summary ===")
    for ticket_id, code in results.items():
        verdict = "as expected" if code == EXPECTED[ticket_id] else "NOT as expected"
        print(f"  {ticket_id}: {outcome(code)} — {verdict}: {WHY_EXPECTED[ticket_id]}")
    print_what_to_read(state_dir)
    # The page a person would look at after a night of cron, for these three runs.
    page = layout.workdir / "report.html"
    cli([*base, "report", "--out", str(page)])
    differing = mismatches(results, EXPECTED)
    for ticket_id, code in differing.items():
        print(
            f"demo: {ticket_id} ended with {outcome(code)}, expected "
            f"{outcome(EXPECTED[ticket_id])}",
            file=sys.stderr,
        )
    return 1 if differing else 0
