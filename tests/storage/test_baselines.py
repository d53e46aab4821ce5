"""Baselines on disk: learned from green logs, merged under a lock by concurrent workers,
moved aside when damaged and rebuilt, pruned when stale; and learned from each check a
real run passes, without a failure to learn ever failing the run."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.app.driver import Services, run_ticket
from orchestrator.domain.baseline import Baseline
from orchestrator.domain.config import load_config
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.line_templates import template_of
from orchestrator.domain.tickets import load_ticket
from orchestrator.storage.baselines import BaselineStore
from orchestrator.storage.layout import StateLayout, name_slug

from conftest import subprocess_env, write_config, write_ticket
from support.services import make_services

REPO = "https://example.com/team/deal.git"
GREEN = b"collected 12 items\ntests/test_deal.py ............ [100%]\n12 passed in 0.52s\n"


@pytest.fixture
def green_log(tmp_path: Path) -> Path:
    path = tmp_path / "green.log"
    path.write_bytes(GREEN)
    return path


def store_of(tmp_path: Path) -> tuple[BaselineStore, list[str]]:
    warnings: list[str] = []
    return BaselineStore(tmp_path / "state", warn=warnings.append), warnings


def test_a_green_log_is_learned_and_each_one_counts(tmp_path: Path, green_log: Path) -> None:
    store, warnings = store_of(tmp_path)
    assert store.load(REPO, "unit") is None
    store.record_green(REPO, "unit", green_log)
    store.record_green(REPO, "unit", green_log)
    baseline = store.load(REPO, "unit")
    assert baseline is not None
    assert (baseline.repo, baseline.check, baseline.runs) == (REPO, "unit", 2)
    assert baseline.knows(template_of(b"collected 407 items"))
    assert not baseline.knows(template_of(b"1 failed, 11 passed in 0.6s"))
    assert store.load(REPO, "lint") is None
    assert store.load("https://example.com/team/other.git", "unit") is None
    assert warnings == []
    path = store.path(REPO, "unit")
    assert path.parent.parent == tmp_path / "state" / "baselines"
    assert path.stat().st_mode & 0o777 == 0o600


def test_save_replaces_what_is_stored(tmp_path: Path, green_log: Path) -> None:
    store, _ = store_of(tmp_path)
    for _ in range(3):
        store.record_green(REPO, "unit", green_log)
    fresh = Baseline("unit", REPO, 1, {})
    store.save(fresh)
    assert store.load(REPO, "unit") == fresh


def damage_truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def damage_flipped(data: bytes) -> bytes:
    return data[:30] + bytes([data[30] ^ 0x10]) + data[31:]


def damage_magic(data: bytes) -> bytes:
    return b"PK\x03\x04" + data[4:]


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (damage_truncated, "truncated: "),
        (damage_flipped, "checksum mismatch"),
        (damage_magic, "not a baseline (wrong magic)"),
    ],
)
def test_a_damaged_baseline_is_moved_aside_and_rebuilt(
    tmp_path: Path, green_log: Path, damage: object, why: str
) -> None:
    store, warnings = store_of(tmp_path)
    for _ in range(3):
        store.record_green(REPO, "unit", green_log)
    path = store.path(REPO, "unit")
    assert callable(damage)
    damaged = damage(path.read_bytes())
    path.write_bytes(damaged)

    assert store.load(REPO, "unit") is None
    assert not path.exists()
    aside = path.with_name(path.name + ".damaged")
    assert aside.read_bytes() == damaged
    assert len(warnings) == 1
    assert warnings[0].startswith(f"baseline of check 'unit' in {REPO} was damaged ({why}")
    assert warnings[0].endswith(f"moved aside to {aside.name}; the next green run starts a new one")

    store.record_green(REPO, "unit", green_log)
    rebuilt = store.load(REPO, "unit")
    assert rebuilt is not None and rebuilt.runs == 1
    assert rebuilt.knows(template_of(b"collected 3 items"))
    assert len(warnings) == 1


def test_a_green_run_over_a_damaged_baseline_starts_a_new_one(
    tmp_path: Path, green_log: Path
) -> None:
    store, warnings = store_of(tmp_path)
    store.record_green(REPO, "unit", green_log)
    path = store.path(REPO, "unit")
    path.write_bytes(b"garbage")
    store.record_green(REPO, "unit", green_log)  # no load in between
    baseline = store.load(REPO, "unit")
    assert baseline is not None and baseline.runs == 1
    assert [w.split(" (")[0] for w in warnings] == [
        f"baseline of check 'unit' in {REPO} was damaged"
    ]


def test_another_checks_baseline_in_its_place_is_damage(tmp_path: Path, green_log: Path) -> None:
    store, warnings = store_of(tmp_path)
    store.record_green(REPO, "lint", green_log)
    target = store.path(REPO, "unit")
    target.write_bytes(store.path(REPO, "lint").read_bytes())
    assert store.load(REPO, "unit") is None
    assert f"(it holds check 'lint' of {REPO})" in warnings[0]


def test_a_file_too_big_to_be_a_baseline_is_not_read(tmp_path: Path, green_log: Path) -> None:
    store, warnings = store_of(tmp_path)
    store.record_green(REPO, "unit", green_log)
    with store.path(REPO, "unit").open("r+b") as f:
        f.truncate(41 << 20)  # sparse: nothing written
    assert store.load(REPO, "unit") is None
    assert f"({41 << 20} bytes, more than any baseline)" in warnings[0]


def test_a_log_that_cannot_be_read_warns_and_changes_nothing(
    tmp_path: Path, green_log: Path
) -> None:
    store, warnings = store_of(tmp_path)
    store.record_green(REPO, "unit", green_log)
    before = store.path(REPO, "unit").read_bytes()
    missing = tmp_path / "pruned.log"
    store.record_green(REPO, "unit", missing)
    store.record_green(REPO, "unit", tmp_path)  # a directory
    assert warnings == [
        f"baseline of check 'unit' in {REPO} not updated: {missing}: No such file or directory",
        f"baseline of check 'unit' in {REPO} not updated: {tmp_path}: Is a directory",
    ]
    assert store.path(REPO, "unit").read_bytes() == before


def test_a_state_dir_where_baselines_cannot_be_written_warns(
    tmp_path: Path, green_log: Path
) -> None:
    store, warnings = store_of(tmp_path)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "baselines").write_text("a file where the directory goes\n")
    store.record_green(REPO, "unit", green_log)
    assert len(warnings) == 1
    assert warnings[0].startswith(f"baseline of check 'unit' in {REPO} not updated: ")
    assert warnings[0].endswith("Not a directory")


# Each child learns ``n`` green logs, once the parent lets them all go at once.
CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from orchestrator.storage.baselines import BaselineStore

    state, log, n = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    store = BaselineStore(Path(state), learn_seconds=None, warn=print)
    print("ready", flush=True)
    sys.stdin.read(1)
    for _ in range(n):
        store.record_green("origin", "unit", log)
    print("done", flush=True)
    """
)


def test_workers_recording_at_once_all_count(tmp_path: Path, green_log: Path) -> None:
    workers, each = 3, 25
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(tmp_path / "state"), str(green_log), str(each)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=subprocess_env(),
        )
        for _ in range(workers)
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        for child in children:  # all of them go now
            assert child.stdin is not None
            child.stdin.write(b"g")
            child.stdin.flush()
        outputs = [child.communicate(timeout=60)[0] for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert outputs == [b"done\n"] * workers  # and no warning
    baseline = BaselineStore(tmp_path / "state").load("origin", "unit")
    assert baseline is not None
    assert baseline.runs == workers * each
    assert baseline.runs_with(template_of(b"collected 5 items")) == min(255, workers * each)


def test_baselines_not_written_for_a_while_are_pruned(tmp_path: Path, green_log: Path) -> None:
    store, _ = store_of(tmp_path)
    store.record_green(REPO, "unit", green_log)
    store.record_green(REPO, "lint", green_log)
    store.record_green("origin", "unit", green_log)
    store.path("origin", "unit").write_bytes(b"damaged")
    assert store.load("origin", "unit") is None  # moved aside
    now = store.path(REPO, "unit").stat().st_mtime
    month_ago = now - 31 * 86400
    for path in (store.path(REPO, "lint"), store.layout.damaged_baseline_path("origin", "unit")):
        os.utime(path, (month_ago, month_ago))

    removed = store.prune(older_than_days=30, now=now)

    assert sorted(removed) == sorted(
        [
            store.path(REPO, "lint").relative_to(tmp_path / "state").as_posix(),
            store.layout.damaged_baseline_path("origin", "unit")
            .relative_to(tmp_path / "state")
            .as_posix(),
        ]
    )
    assert store.load(REPO, "unit") is not None
    assert not store.path(REPO, "lint").exists()
    assert store.prune(older_than_days=30, now=now) == []
    assert [s.baseline.check for s in store.stored() if s.baseline] == ["unit"]


def test_stored_lists_every_baseline_and_names_a_damaged_one(
    tmp_path: Path, green_log: Path
) -> None:
    store, _ = store_of(tmp_path)
    store.record_green(REPO, "unit", green_log)
    store.record_green("origin", "lint", green_log)
    store.path("origin", "lint").write_bytes(b"ORCHBASE")
    found = {(s.path, s.baseline.check if s.baseline else None, s.problem) for s in store.stored()}
    assert found == {
        (store.path(REPO, "unit"), "unit", None),
        (store.path("origin", "lint"), None, "truncated: 8 bytes, less than a header"),
    }


# ---- where they are -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["..", "../../etc/passwd", "/", ".hidden", "a/../../b", "x" * 5000, "", "-rf", "ünï cödé"],
)
def test_untrusted_names_stay_inside_the_baselines_dir(tmp_path: Path, name: str) -> None:
    layout = StateLayout(tmp_path / "state")
    for path in (layout.baseline_path(name, name), layout.baseline_lock_path(name, "c")):
        assert path.parent.parent == layout.baselines_dir
        assert path.resolve().parent.parent == layout.baselines_dir.resolve()
        for part in (path.parent.name, path.name):
            assert not part.startswith(".") and ".." not in part and "/" not in part
            assert len(part) <= 40 + 1 + 12 + len(".baseline")
            assert part.isascii()


def test_names_that_slug_alike_never_share_a_file() -> None:
    names = ["team/deal", "team:deal", "team deal", "team-deal", "team--deal", "TEAM/deal"]
    assert len({name_slug(n) for n in names}) == len(names)
    # Readable: the end of a repository's name is in it.
    assert name_slug("https://github.com/team/deal.git").startswith(
        "https-github.com-team-deal.git-"
    )


def test_an_interrupted_write_of_a_baseline_is_swept(tmp_path: Path, green_log: Path) -> None:
    store, _ = store_of(tmp_path)
    store.record_green(REPO, "unit", green_log)
    directory = store.path(REPO, "unit").parent
    assert directory in StateLayout(tmp_path / "state").write_dirs()


# ---- learned from the checks a real run passes ---------------------------------------

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


def services_for(tmp_path: Path, body: str, **hook: object) -> tuple[Services, io.StringIO]:
    loaded = load_config(write_config(tmp_path, body))
    out = io.StringIO()
    state = loaded.root / loaded.config.state_dir
    services = make_services(
        loaded,
        state,
        out=out,
        environ=dict(os.environ),
        record_green=BaselineStore(state).record_green,
    )
    return replace(services, **hook), out  # type: ignore[arg-type]


def test_a_run_learns_the_baselines_of_the_checks_it_passes(tmp_path: Path) -> None:
    services, _ = services_for(tmp_path, CHECKS)
    ticket = load_ticket(write_ticket(tmp_path / "tickets"))
    first = run_ticket(ticket, services)
    assert first.state is RunState.COMPLETED
    second = run_ticket(ticket, services, rerun=True)
    assert second.run_id != first.run_id

    store = BaselineStore(services.storage.runs.state_dir)
    unit = store.load(first.repository, "unit")
    assert unit is not None and unit.runs == 2
    assert unit.knows(template_of(b"12 passed in 0.4 s"))
    assert not unit.knows(template_of(b"All checks passed!"))
    lint = store.load(first.repository, "lint")
    assert lint is not None and lint.runs == 2
    assert lint.knows(template_of(b"All checks passed!"))


def test_a_failing_check_teaches_nothing(tmp_path: Path) -> None:
    body = CHECKS.replace("echo 'All checks passed!'", "echo 'E501 line too long'; exit 1")
    services, _ = services_for(tmp_path, body)
    record = run_ticket(load_ticket(write_ticket(tmp_path / "tickets")), services)
    assert record.state is RunState.FAILED
    store = BaselineStore(services.storage.runs.state_dir)
    assert store.load(record.repository, "lint") is None
    unit = store.load(record.repository, "unit")  # it passed before lint failed
    assert unit is not None and unit.runs == 1


def test_a_failure_to_learn_never_fails_the_run(tmp_path: Path) -> None:
    def broken(repo: str, check: str, log: Path, *, warn: object = None) -> None:
        raise RuntimeError(f"learning {check} went wrong")

    services, out = services_for(tmp_path, CHECKS, record_green=broken)
    record = run_ticket(load_ticket(write_ticket(tmp_path / "tickets")), services)
    assert record.state is RunState.COMPLETED
    notes = [line.strip() for line in out.getvalue().splitlines() if "baseline" in line]
    assert notes == [
        "note: baseline of check 'unit' not updated: learning unit went wrong",
        "note: baseline of check 'lint' not updated: learning lint went wrong",
    ]


def test_a_state_dir_that_cannot_hold_baselines_is_said_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    services, out = services_for(tmp_path, CHECKS)
    state = services.storage.runs.state_dir
    state.mkdir(parents=True)
    (state / "baselines").write_text("not a directory\n")
    record = run_ticket(load_ticket(write_ticket(tmp_path / "tickets")), services)
    assert record.state is RunState.COMPLETED
    notes = [line.strip() for line in out.getvalue().splitlines() if "baseline" in line]
    assert len(notes) == 2
    assert notes[0].startswith(
        f"note: baseline of check 'unit' in {record.repository} not updated: "
    )


KILLED_WRITER = """
import sys
from pathlib import Path
from orchestrator.storage.baselines import BaselineStore

store = BaselineStore(Path(sys.argv[1]))
log = Path(sys.argv[2])
n = 0
while True:
    n += 1
    print(f"learning {n}", flush=True)
    # The test's go-ahead: without it, a test starved under load reads line n late,
    # while this loop has already written baseline n + 1 and more.
    if sys.stdin.readline().strip() != "go":
        raise SystemExit(0)
    store.record_green("REPO", "unit", log)
"""


@pytest.mark.parametrize("kill_after", [1, 3])
def test_a_kill_9_around_the_write_leaves_the_last_whole_baseline(
    tmp_path: Path, kill_after: int
) -> None:
    """A worker killed while a green check's baseline is being merged and written: the
    next reader finds the baseline of the runs that were written whole (never a damaged
    file), and the next green check adds to it."""
    log = tmp_path / "green.log"
    log.write_bytes(GREEN * 2000)  # a few hundred KiB: the write is not instant
    state = tmp_path / "state"
    writer = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(state), str(log)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    assert writer.stdin is not None and writer.stdout is not None
    # Each line is said before a learn-merge-write, which waits for our "go": the first
    # ``kill_after`` writes end whole (the next line says so), and the kill lands around
    # the one after them, which is the last the writer may start.
    for n in range(1, kill_after + 2):
        assert writer.stdout.readline() == f"learning {n}\n"
        writer.stdin.write("go\n")
        writer.stdin.flush()
    writer.kill()
    writer.wait(timeout=30)
    store, warnings = store_of(tmp_path)
    baseline = store.load("REPO", "unit")
    assert baseline is not None and kill_after <= baseline.runs <= kill_after + 1
    assert not list((state / "baselines").rglob("*.damaged"))
    assert warnings == []
    store.record_green("REPO", "unit", log)
    after = store.load("REPO", "unit")
    assert after is not None and after.runs == baseline.runs + 1
