"""The state dir mirrored in PostgreSQL: which paths are kept where (``route``, pure), a
run record's paths moved onto another machine's state dir (``rebase_record``, pure),
and, on a real server (``pg_url``), publish then hydrate into another empty state dir
giving back the same bytes — fenced, written once where the layout says so, nothing
written when the connection drops, and never a key."""

from __future__ import annotations

import json
import os
import zlib
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, get_args

import pytest

from orchestrator.domain.errors import StateError
from orchestrator.domain.runs import RunRecord, StageRecord, new_run_id
from orchestrator.storage.layout import StateLayout
from orchestrator.storage.postgres import Route, rebase_record, route
from orchestrator.storage.postgres.mirror import Table

try:  # the pure tests run without the driver; the others skip in ``db``
    import psycopg
except ImportError:  # pragma: no cover
    psycopg = None  # type: ignore[assignment]

AT = datetime(2026, 12, 1, 3, 4, 5, tzinfo=UTC)
RUN = new_run_id("T-1", AT)
OTHER_RUN = new_run_id("T.2-x", AT)


def record(root: Path, run_id: str = RUN, ticket_id: str = "T-1", note: str = "") -> RunRecord:
    run_dir = f"{root}/runs/{run_id}"
    return RunRecord(
        run_id=run_id, ticket_id=ticket_id, ticket_title=f"Fix it {note} é ✓",
        ticket_kind="bug", ticket_path="/elsewhere/t.md",
        ticket_snapshot=f"{run_dir}/ticket/t.md", ticket_sha256="0" * 64,
        repository="/r.git", base_branch="main", work_branch=f"orchestrator/{ticket_id}",
        config_path="/c.toml", config_sha256="0" * 64, run_dir=run_dir,
        clone_dir=f"{run_dir}/clone", created_at=AT, updated_at=AT,
        stages=(StageRecord(name="implement"),), handoff=f"{root}/runs/{run_id}.handoff.md",
    )  # fmt: skip


def rel(text: str) -> PurePosixPath:
    return PurePosixPath(text)


# -- route: pure ------------------------------------------------------------------


def test_route_names_every_mirrored_layout_path_and_back() -> None:
    layout = StateLayout(Path("/s"))
    digest = "ab" * 32
    expected = {
        layout.record_path(RUN): Route("runs", run_id=RUN),
        layout.verdict_path(RUN, 3): Route("verdicts", run_id=RUN, number=3),
        layout.approval_path(RUN, 12): Route("approvals", run_id=RUN, number=12),
        layout.replies_dir(RUN) / f"{digest}.txt": Route(
            "transcripts", run_id=RUN, name=f"{digest}.txt"
        ),
        layout.replies_dir(RUN) / "pending-2.json": Route(
            "run_files", run_id=RUN, name=f"{RUN}.replies/pending-2.json"
        ),
        layout.bundle_path(RUN, 1): Route("run_files", run_id=RUN, name=f"{RUN}.bundle-1.json"),
        layout.mechanical_fix_path(RUN): Route(
            "run_files", run_id=RUN, name=f"{RUN}.mechanical_fix.json"
        ),
        layout.mechanical_fix_report_path(RUN, 4): Route(
            "run_files", run_id=RUN, name=f"{RUN}.mechanical_fix-4.json"
        ),
        layout.handoff_path(RUN): Route("run_files", run_id=RUN, name=f"{RUN}.handoff.md"),
        layout.ticket_snapshot_dir(RUN) / "t.md": Route(
            "run_files", run_id=RUN, name=f"{RUN}/ticket/t.md"
        ),
        layout.ticket_snapshot_dir(RUN) / "files" / "a.png": Route(
            "run_files", run_id=RUN, name=f"{RUN}/ticket/files/a.png"
        ),
        layout.pull_request_path(RUN): Route(
            "run_files", run_id=RUN, name=f"{RUN}/pull-request.json"
        ),
        layout.pruned_record_path(RUN): Route("run_files", run_id=RUN, name=f"{RUN}/pruned.json"),
        layout.run_dir(RUN) / "prompt-2.txt": Route(
            "run_files", run_id=RUN, name=f"{RUN}/prompt-2.txt"
        ),
        layout.logs_dir(RUN) / "001-implement.log": Route(
            "stage_logs", run_id=RUN, name="001-implement.log"
        ),
        layout.logs_dir(RUN) / "verdict-1-recipe-0.log": Route(
            "stage_logs", run_id=RUN, name="verdict-1-recipe-0.log"
        ),
        layout.batch_record_path("20261201T000000Z-b1"): Route(
            "batches", batch_id="20261201T000000Z-b1", name="batch.json"
        ),
        layout.batch_queue_path("b1"): Route("batches", batch_id="b1", name="queue.json"),
        layout.batch_ticket_dir("b1", "T-1") / "T-1.md": Route(
            "batches", batch_id="b1", name="tickets/T-1/T-1.md"
        ),
        layout.batch_ticket_dir("b1", "T-1") / "files" / "spec.txt": Route(
            "batches", batch_id="b1", name="tickets/T-1/files/spec.txt"
        ),
        layout.notify_record_path(RUN, "halted", 1, 0): Route(
            "state_files", name=f"notify/{RUN}.halted-1.0.json"
        ),
        layout.intake_ticket_path("gh", "GH-7"): Route("state_files", name="intake/gh/GH-7.md"),
    }
    for path, want in expected.items():
        relative = PurePosixPath(path.relative_to("/s").as_posix())
        assert route(relative) == want, relative
        assert want.relpath() == relative
    assert route(rel(f"runs/{OTHER_RUN}.verdict-1.json")) == Route(
        "verdicts", run_id=OTHER_RUN, number=1
    )
    assert Route("verdicts", run_id=OTHER_RUN, number=1).ticket_id == "T.2-x"


def test_route_never_mirrors_secrets_locks_ledger_budgets_caches_or_clones() -> None:
    layout = StateLayout(Path("/s"))
    never = [
        layout.approval_key_path,
        layout.ticket_lock_path("T-1"),
        layout.ledger_path,
        Path("/s/ledger.head"),
        Path("/s/ledger.lock"),
        Path("/s/ledger.index.sqlite3"),
        Path("/s/ledger.index.sqlite3-wal"),
        Path("/s/ledger.quarantine-20261201T000000Z.jsonl"),
        layout.ticket_budget_path("T-1"),
        layout.batch_budget_path("b1"),
        layout.batch_worker_log("b1", 1),
        layout.baseline_path("repo", "check"),
        layout.base_check_path("repo", "a" * 40, "check", "ff"),
        layout.clone_dir(RUN) / "README.md",
        layout.clone_dir(RUN) / "logs" / "x.log",
        layout.run_dir(RUN) / "verify-1" / "file.py",
        layout.run_dir(RUN) / "ticket",  # the directory itself
        layout.logs_dir(RUN) / "nested" / "x.log",
        layout.logs_dir(RUN) / "notes.txt",
        layout.replies_dir(RUN) / "notes.txt",
        layout.replies_dir(RUN) / ("AB" * 32 + ".txt"),  # not lower-case hex
        Path("/s/mirror.json"),
        Path("/s/unknown.json"),
        Path("/s/runs/unknown.json"),
        Path("/s/runs/not-a-run.verdict-1.json"),
        Path(f"/s/runs/{RUN}.verdict-01.json"),
        Path(f"/s/runs/{RUN}.verdict-x.json"),
        Path(f"/s/runs/{RUN}.json.bak"),
        Path(f"/s/runs/.{RUN}.json.abcdef01-12.a1b2c3d4.tmp"),
        Path(f"/s/runs/{RUN}/.hidden"),
        Path("/s/batches/b1/other.json"),
        Path("/s/batches/.b1/batch.json"),
        Path("/s/notify/x.txt"),
        Path("/s/intake/gh/GH-7.txt"),
        Path("/s/intake/-bad/GH-7.md"),
        Path("/s/keys/approval.key.bak"),
    ]
    for path in never:
        assert route(PurePosixPath(path.relative_to("/s").as_posix())) is None, path


def test_route_refuses_hostile_paths() -> None:
    hostile = [
        "",
        ".",
        f"/runs/{RUN}.json",
        f"/etc/../runs/{RUN}.json",
        f"../runs/{RUN}.json",
        f"runs/../runs/{RUN}.json",
        f"runs/{RUN}/../{RUN}.json",
        f"runs/{RUN}/ticket/../../../keys/approval.key",
        f"runs/{RUN}/ticket/..",
        f"runs/{RUN}.replies/../{RUN}.json",
        "batches/../keys/batch.json",
        "batches/b1/tickets/../../keys/approval.key",
        "batches/b1/tickets/T-1",  # the directory, not a file in it
        "batches/b1/tickets/not a ticket/T.md",
        "batches/b1/budget.json",
        "notify/../keys/x.json",
    ]
    for text in hostile:
        assert route(PurePosixPath(text)) is None, text


# -- rebase_record: pure ----------------------------------------------------------


def test_rebase_record_moves_every_path_under_the_old_root_and_keeps_the_layout() -> None:
    old = record(Path("/old/state"))
    text = old.model_dump_json(indent=2)
    rebased = rebase_record(text, "/old/state", "/new/home/state")
    want = record(Path("/new/home/state"))
    assert rebased == want.model_dump_json(indent=2)
    assert RunRecord.model_validate_json(rebased) == want
    # Outside the root (the ticket's source, the config) stays; a prefix that is not a
    # whole path component is not the root.
    assert RunRecord.model_validate_json(rebased).ticket_path == "/elsewhere/t.md"
    tricky = json.dumps({"a": "/old/state", "b": "/old/statement", "c": ["/old/state/x"]})
    assert json.loads(rebase_record(tricky, "/old/state", "/n")) == {
        "a": "/n",
        "b": "/old/statement",
        "c": ["/n/x"],
    }
    assert rebase_record(text, "/old/state", "/old/state") == text


# -- on a real server -------------------------------------------------------------


@pytest.fixture
def db(pg_url: str) -> str:
    if psycopg is None:  # pragma: no cover
        pytest.skip("psycopg is not installed")
    from orchestrator.storage.postgres import migrate

    with psycopg.connect(pg_url) as conn:
        assert 5 in migrate(conn)
    return pg_url


def rows(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return list(conn.execute(sql, params).fetchall())


# Every table the mirror writes, but the run records' own.
MIRROR_TABLES = tuple(t for t in get_args(Table) if t != "runs")


def count_rows(url: str) -> int:
    return sum(rows(url, f"SELECT count(*) FROM {t}")[0][0] for t in (*MIRROR_TABLES, "runs"))


def mirror(url: str, root: Path) -> Any:
    from orchestrator.storage.postgres import StateMirror

    root.mkdir(parents=True, exist_ok=True)
    return StateMirror(url, root)


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "mirror.json"
    }


def test_publish_then_hydrate_into_an_empty_root_gives_the_same_files(
    db: str, tmp_path: Path
) -> None:
    here, there = tmp_path / "a" / "state", tmp_path / "b" / "elsewhere"
    source = mirror(db, here)
    layout = StateLayout(here)
    big_log = b"".join(b"line %d of the log \x00\xff\n" % i for i in range(40_000))[: 1 << 20]
    write(layout.logs_dir(RUN) / "001-implement.log", big_log)
    write(layout.ticket_snapshot_dir(RUN) / "t.md", "# Ticket é\n".encode())
    write(layout.ticket_snapshot_dir(RUN) / "files" / "blob.bin", bytes(range(256)))
    write(layout.pull_request_path(RUN), b'{"url": "x"}')
    write(layout.clone_dir(RUN) / "secret.py", b"never published")
    files = {
        layout.verdict_path(RUN, 1): b'{"verdict": 1}',
        layout.replies_dir(RUN) / ("ab" * 32 + ".txt"): bytes(range(256)) * 3,
        layout.approval_path(RUN, 1): b'{"approved": true}',
        layout.bundle_path(RUN, 1): b"{}",
        layout.batch_record_path("b1"): b'{"batch": 1}',
        layout.notify_record_path(RUN, "halted", 1, 0): b'{"status": "sent"}',
        layout.intake_ticket_path("gh", "GH-7"): b"# from an issue\n",
    }
    for path, data in files.items():
        write(path, data)
        source.publish(path, data)
    data = record(here).model_dump_json(indent=2).encode()
    write(layout.record_path(RUN), data)
    source.publish(layout.record_path(RUN), data)

    stored_log = rows(db, "SELECT body, size FROM stage_logs")
    assert len(stored_log) == 1 and stored_log[0][1] == len(big_log)
    assert len(stored_log[0][0]) < len(big_log) // 4  # kept compressed
    assert zlib.decompress(stored_log[0][0]) == big_log

    target = mirror(db, there)
    written = target.hydrate()
    want = {k: v for k, v in tree(here).items() if "/clone/" not in k}
    got = tree(there)
    assert written == len(want) == 12
    rebased = RunRecord.model_validate_json(got.pop(f"runs/{RUN}.json"))
    assert rebased == record(there)
    assert got == {k: v for k, v in want.items() if k != f"runs/{RUN}.json"}
    assert not (there / "runs" / RUN / "clone").exists()
    assert target.hydrate() == 0  # nothing newer


def test_a_record_brings_along_only_its_run_files_that_changed(db: str, tmp_path: Path) -> None:
    root = tmp_path / "state"
    source = mirror(db, root)
    layout = StateLayout(root)
    log = write(layout.logs_dir(RUN) / "001-implement.log", b"first\n")
    write(layout.ticket_snapshot_dir(RUN) / "t.md", b"ticket")
    data = record(root).model_dump_json(indent=2).encode()
    source.publish(layout.record_path(RUN), data)
    seqs = dict(
        rows(db, "SELECT name, seq FROM run_files UNION ALL SELECT name, seq FROM stage_logs")
    )
    with log.open("ab") as fh:
        fh.write(b"second\n")
    source.publish(layout.record_path(RUN), data)
    after = dict(
        rows(db, "SELECT name, seq FROM run_files UNION ALL SELECT name, seq FROM stage_logs")
    )
    assert after[f"{RUN}/ticket/t.md"] == seqs[f"{RUN}/ticket/t.md"]  # unchanged: not sent
    assert after["001-implement.log"] > seqs["001-implement.log"]
    assert zlib.decompress(rows(db, "SELECT body FROM stage_logs")[0][0]) == b"first\nsecond\n"


def test_a_stage_log_leaves_the_machine_redacted_and_stays_whole_here(
    db: str, tmp_path: Path
) -> None:
    root = tmp_path / "state"
    source = mirror(db, root)
    layout = StateLayout(root)
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    raw = f"step 1\nexport GITHUB_TOKEN={secret}\nbytes \xff kept\n".encode(
        "utf-8", "surrogateescape"
    )
    raw = raw.replace(b"\xc3\xbf", b"\xff")  # an undecodable byte, as a binary tool prints it
    log = write(layout.logs_dir(RUN) / "001-build.log", raw)
    source.publish(layout.record_path(RUN), record(root).model_dump_json(indent=2).encode())
    [(body,)] = rows(db, "SELECT body FROM stage_logs")
    stored = zlib.decompress(body)
    assert secret.encode() not in stored and b"GITHUB_TOKEN=" in stored
    assert b"step 1\n" in stored and b"bytes \xff kept\n" in stored  # the rest as it was
    assert log.read_bytes() == raw  # this machine's log is the stage's own
    there = mirror(db, tmp_path / "there")
    there.hydrate()
    assert (tmp_path / "there" / "runs" / RUN / "logs" / "001-build.log").read_bytes() == stored


def test_a_file_written_once_is_refused_with_other_bytes(db: str, tmp_path: Path) -> None:
    root = tmp_path / "state"
    source = mirror(db, root)
    path = StateLayout(root).verdict_path(RUN, 1)
    source.publish(path, b"one")
    source.publish(path, b"one")  # the same bytes again: a retry, accepted
    with pytest.raises(StateError) as refused:
        source.publish(path, b"two")
    assert str(refused.value) == (
        f"state error: runs/{RUN}.verdict-1.json: already in the PostgreSQL state mirror "
        "with other bytes (verdicts are written once)"
    )
    assert rows(db, "SELECT body FROM verdicts") == [(b"one",)]


def test_a_stale_fence_writes_nothing(db: str, tmp_path: Path) -> None:
    from orchestrator.storage.postgres import LeaseFencedOut, LeaseToken, PostgresLeases

    root = tmp_path / "state"
    source = mirror(db, root)
    leases = PostgresLeases(db)
    mine = leases.acquire("T-1", "me", ttl_s=60)
    assert mine is not None
    source.publish(StateLayout(root).verdict_path(RUN, 1), b"v1", fence=LeaseToken("T-1", mine))
    assert leases.release("T-1", "me", mine)
    theirs = leases.acquire("T-1", "them", ttl_s=60)
    assert theirs == mine + 1
    before = count_rows(db)
    write(StateLayout(root).logs_dir(RUN) / "001-implement.log", b"log")
    with pytest.raises(LeaseFencedOut, match="another worker took it over by them"):
        source.publish(
            StateLayout(root).record_path(RUN),
            record(root).model_dump_json(indent=2).encode(),
            fence=LeaseToken("T-1", mine),
        )
    with pytest.raises(LeaseFencedOut):
        source.publish(StateLayout(root).verdict_path(RUN, 2), b"v2", fence=LeaseToken("T-1", mine))
    assert count_rows(db) == before
    with pytest.raises(ValueError, match="not fenced by ticket T-1's lease"):
        source.publish(
            StateLayout(root).verdict_path(OTHER_RUN, 1), b"v", fence=LeaseToken("T-1", theirs)
        )


def test_a_connection_dropped_mid_transaction_writes_nothing(db: str, tmp_path: Path) -> None:
    from orchestrator.storage.postgres import PostgresUnavailable

    root = tmp_path / "state"
    source = mirror(db, root)
    layout = StateLayout(root)
    write(layout.logs_dir(RUN) / "001-implement.log", b"log")

    def drop(conn: Any) -> None:
        # Something written already in this transaction, then the connection is cut.
        conn.execute("INSERT INTO state_files (path, body) VALUES ('notify/x.json', 'x')")
        pid = conn.info.backend_pid
        with psycopg.connect(db, autocommit=True) as killer:
            killer.execute("SELECT pg_terminate_backend(%s)", (pid,))

    with pytest.raises(PostgresUnavailable, match="the PostgreSQL state mirror"):
        source.publish(
            layout.record_path(RUN),
            record(root).model_dump_json(indent=2).encode(),
            _before_write=drop,
        )
    assert count_rows(db) == 0
    # Not remembered as sent: the next publish sends the log.
    source.publish(layout.record_path(RUN), record(root).model_dump_json(indent=2).encode())
    assert rows(db, "SELECT name FROM stage_logs") == [("001-implement.log",)]


def test_paths_outside_the_root_are_refused_and_keys_never_stored(db: str, tmp_path: Path) -> None:
    root = tmp_path / "state"
    source = mirror(db, root)
    with pytest.raises(ValueError, match="not under the state dir"):
        source.publish(root / ".." / "runs" / f"{RUN}.json", b"{}")
    with pytest.raises(ValueError, match="not under the state dir"):
        source.publish(tmp_path / "elsewhere" / "notify" / "x.json", b"{}")
    (tmp_path / "outside").mkdir()
    write(tmp_path / "outside" / "x.json", b"outside")
    (root / "notify").mkdir(parents=True)
    (root / "notify" / "link.json").symlink_to(tmp_path / "outside" / "x.json")
    with pytest.raises(ValueError, match="not under the state dir"):
        source.publish(root / "notify" / "link.json", b"outside")
    key = b"\x13\x37 the approval key \xfe" * 4
    layout = StateLayout(root)
    write(layout.approval_key_path, key)
    source.publish(layout.approval_key_path, key)
    source.publish(layout.ledger_path, b"ledger line")
    source.publish(layout.ticket_budget_path("T-1"), b"budget")
    # A ticket snapshot holding a link to the key: the link is not followed.
    write(layout.ticket_snapshot_dir(RUN) / "t.md", b"ticket")
    (layout.ticket_snapshot_dir(RUN) / "key").symlink_to(layout.approval_key_path)
    data = record(root).model_dump_json(indent=2).encode()
    source.publish(write(layout.record_path(RUN), data), data)
    assert source.publish_tree() == 2  # the record and its ticket file
    stored = b"".join(
        bytes(body) for table in MIRROR_TABLES for (body,) in rows(db, f"SELECT body FROM {table}")
    )
    stored += b"".join(r[0].encode() for r in rows(db, "SELECT record FROM runs"))
    assert b"approval key" not in stored and b"ledger line" not in stored
    assert b"budget" not in stored and b"ticket" in stored
    assert rows(db, "SELECT name FROM run_files") == [(f"{RUN}/ticket/t.md",)]


def test_hydrate_refuses_a_row_naming_a_path_outside_the_layout(db: str, tmp_path: Path) -> None:
    rows(
        db,
        "INSERT INTO state_files (path, body) VALUES ('notify/../../evil.json', 'x') RETURNING 1",
    )
    with pytest.raises(StateError, match="not a mirrored file of the state dir"):
        mirror(db, tmp_path / "state").hydrate()
    assert not (tmp_path / "evil.json").exists()


def test_incremental_hydrate_writes_only_new_rows(db: str, tmp_path: Path) -> None:
    here, there = tmp_path / "a", tmp_path / "b"
    source, target = mirror(db, here), mirror(db, there)
    layout = StateLayout(here)
    source.publish(layout.verdict_path(RUN, 1), b"v1")
    source.publish(layout.batch_record_path("b1"), b"batch 1")
    assert target.hydrate() == 2
    marker = json.loads((there / "mirror.json").read_text())
    # The local copy of a row hydrated before is changed: an incremental hydrate does
    # not look at old rows again, a ticket's hydrate does.
    (there / "runs" / f"{RUN}.verdict-1.json").write_bytes(b"edited")
    source.publish(layout.verdict_path(RUN, 2), b"v2")
    source.publish(layout.batch_record_path("b1"), b"batch 1, later")
    assert target.hydrate() == 2
    assert (there / "batches" / "b1" / "batch.json").read_bytes() == b"batch 1, later"
    assert (there / "runs" / f"{RUN}.verdict-2.json").read_bytes() == b"v2"
    assert (there / "runs" / f"{RUN}.verdict-1.json").read_bytes() == b"edited"
    assert json.loads((there / "mirror.json").read_text())["seq"] > marker["seq"]
    assert target.hydrate() == 0
    assert target.hydrate(ticket_id="T-2") == 0
    assert target.hydrate(ticket_id="T-1") == 1
    assert (there / "runs" / f"{RUN}.verdict-1.json").read_bytes() == b"v1"


def test_hydrate_after_a_reboot_compares_every_file_again(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A published file is not fsynced where it lands: a reboot may have lost or torn it
    although the marker says it was brought. After one, nothing is taken on trust."""
    from orchestrator.storage.postgres import mirror as mirror_module

    here, there = tmp_path / "a", tmp_path / "b"
    layout = StateLayout(here)
    mirror(db, here).publish(layout.verdict_path(RUN, 1), b"v1")
    target = mirror(db, there)
    assert target.hydrate() == 1
    assert json.loads((there / "mirror.json").read_text())["boot"] == mirror_module.boot_id()
    torn = there / "runs" / f"{RUN}.verdict-1.json"
    torn.write_bytes(b"")  # what a power cut can leave of a file never flushed
    assert target.hydrate() == 0  # the same boot: the marker holds
    assert torn.read_bytes() == b""
    monkeypatch.setattr(mirror_module, "boot_id", lambda: "another-boot")
    assert target.hydrate() == 1
    assert torn.read_bytes() == b"v1"
    assert json.loads((there / "mirror.json").read_text())["boot"] == "another-boot"


def test_a_local_log_longer_than_the_database_s_is_kept(db: str, tmp_path: Path) -> None:
    here, there = tmp_path / "a", tmp_path / "b"
    log = StateLayout(here).logs_dir(RUN) / "001-implement.log"
    mirror(db, here).publish(log, b"first\n")
    local = write(StateLayout(there).logs_dir(RUN) / "001-implement.log", b"first\nsecond\n")
    assert mirror(db, there).hydrate(ticket_id="T-1") == 0
    assert local.read_bytes() == b"first\nsecond\n"
    local.write_bytes(b"fir")
    assert mirror(db, there).hydrate(ticket_id="T-1") == 1
    assert local.read_bytes() == b"first\n"


def test_hydrate_after_the_database_was_replaced_starts_again(db: str, tmp_path: Path) -> None:
    from orchestrator.storage.postgres import migrate

    here, there = tmp_path / "a", tmp_path / "b"
    layout = StateLayout(here)
    mirror(db, here).publish(layout.verdict_path(RUN, 1), b"v1")
    for n in range(2, 6):
        mirror(db, here).publish(layout.verdict_path(RUN, n), b"v")
    assert mirror(db, there).hydrate() == 5
    old_seq = json.loads((there / "mirror.json").read_text())["seq"]
    name = db.rsplit("/", 1)[1]
    admin = db.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    with psycopg.connect(db) as conn:
        migrate(conn)
    # The same name on the same server, a new database: its seq starts again, below the
    # marker's, and its one row must still come down.
    mirror(db, here).publish(layout.batch_record_path("b9"), b"new database")
    assert rows(db, "SELECT seq FROM batches")[0][0] < old_seq
    assert mirror(db, there).hydrate() == 1
    assert (there / "batches" / "b9" / "batch.json").read_bytes() == b"new database"


def test_forget_deletes_a_run_s_rows_and_a_pruned_directory_s(db: str, tmp_path: Path) -> None:
    root = tmp_path / "state"
    source = mirror(db, root)
    layout = StateLayout(root)
    write(layout.logs_dir(RUN) / "001-implement.log", b"log")
    write(layout.ticket_snapshot_dir(RUN) / "t.md", b"ticket")
    source.publish(layout.verdict_path(RUN, 1), b"v1")
    source.publish(layout.record_path(RUN), record(root).model_dump_json(indent=2).encode())
    source.publish(layout.verdict_path(OTHER_RUN, 1), b"other")
    assert source.forget([layout.logs_dir(RUN)]) == 1
    assert rows(db, "SELECT count(*) FROM stage_logs") == [(0,)]
    assert source.forget([layout.record_path(RUN)]) == 3  # the record, a verdict, the ticket
    assert rows(db, "SELECT run_id FROM runs") == []
    assert rows(db, "SELECT run_id FROM verdicts") == [(OTHER_RUN,)]
    assert source.forget([layout.approval_key_path]) == 0


def test_a_run_record_published_again_draws_a_new_seq(db: str, tmp_path: Path) -> None:
    source = mirror(db, tmp_path)
    path = StateLayout(tmp_path).record_path(RUN)
    source.publish(path, record(tmp_path).model_dump_json(indent=2).encode())
    first = rows(db, "SELECT seq FROM runs")[0][0]
    source.publish(path, record(tmp_path, note="again").model_dump_json(indent=2).encode())
    assert rows(db, "SELECT seq FROM runs")[0][0] > first
    # And a hydrate elsewhere brings it down rebased.
    there = tmp_path / "b"
    assert mirror(db, there).hydrate() == 1
    assert RunRecord.model_validate_json((there / "runs" / f"{RUN}.json").read_bytes()) == record(
        there, note="again"
    )
    assert os.stat(there / "runs" / f"{RUN}.json").st_mode & 0o777 == 0o600


def test_forget_of_a_batchs_ticket_copies_keeps_its_record(db: str, tmp_path: Path) -> None:
    root = tmp_path / "state"
    source = mirror(db, root)
    layout = StateLayout(root)
    record = write(layout.batch_record_path("b1"), b"{}")
    copy = write(layout.batch_ticket_dir("b1", "T-1") / "T-1.md", b"ticket")
    other = write(layout.batch_ticket_dir("b2", "T-1") / "T-1.md", b"ticket")
    for path in (record, copy, other):
        source.publish(path, path.read_bytes())
    source.forget([layout.batch_dir("b1") / "tickets"])
    assert sorted(rows(db, "SELECT batch_id, name FROM batches")) == [
        ("b1", "batch.json"),
        ("b2", "tickets/T-1/T-1.md"),
    ]


def test_a_fleet_task_brings_down_its_queued_ticket_and_nothing_else(
    db: str, tmp_path: Path
) -> None:
    here = tmp_path / "batch-machine"
    source = mirror(db, here)
    layout = StateLayout(here)
    mine = write(layout.batch_ticket_dir("b1", "T-1") / "T-1.md", b"mine")
    spec = write(layout.batch_ticket_dir("b1", "T-1") / "files" / "spec.txt", b"its spec")
    other = write(layout.batch_ticket_dir("b1", "T-10") / "T-10.md", b"another's")
    log = write(layout.logs_dir(RUN) / "001-a.log", b"someone else's log\n")
    for path in (mine, spec, other):
        source.publish(path, path.read_bytes())
    data = record(here).model_dump_json(indent=2).encode()
    source.publish(write(layout.record_path(RUN), data), data)
    assert log.exists()
    worker = tmp_path / "worker"
    assert mirror(db, worker).hydrate(queued=("b1", "T-1")) == 2
    assert tree(worker) == {
        "batches/b1/tickets/T-1/T-1.md": b"mine",
        "batches/b1/tickets/T-1/files/spec.txt": b"its spec",
    }
