"""The ledger in PostgreSQL: the same rows and hashes as the file ledger, appends that
serialise on the head row, the same verify (and messages), and moving a ledger between
a file and the database both ways, byte for byte. On a real server (``pg_url``)."""

from __future__ import annotations

import multiprocessing
import re
import threading
from pathlib import Path
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg")

from orchestrator.storage.ledger import (  # noqa: E402 - after the skip without psycopg
    Ledger,
    LedgerError,
    LedgerRow,
    VerifyResult,
    inputs_hash,
)
from orchestrator.storage.postgres import PostgresUnavailable, migrate  # noqa: E402
from orchestrator.storage.postgres.ledger import (  # noqa: E402
    PostgresLedger,
    export_ledger,
    import_ledger,
)

from support.ledger_rows import play  # noqa: E402

KEY = b"k" * 32


def migrated(url: str) -> str:
    with psycopg.connect(url) as conn:
        assert 2 in migrate(conn)
    return url


@pytest.fixture
def db(pg_url: str) -> str:
    return migrated(pg_url)


def row(n: int, **over: Any) -> LedgerRow:
    fields: dict[str, Any] = {
        "kind": "decision",
        "decision_id": f"D-{n % 3}",
        "ticket": f"T-{n}",
        "run": f"T-{n}-20260115T120000Z-ab12",
        "capability": "recover-stage",
        "inputs_hash": inputs_hash({"n": n}),
        "model_version": "model-a",
        "prompt_version": "recovery-v1",
        "source": "model",
        "decision": {"action": "retry", "reason": f"attempt {n} failed: é ✓ \x00 \u2028"},
        "confidence": 0.1 * n,
        "routing": "auto",
        "ts": "2026-01-15T12:00:00.000000Z",
    }
    fields.update(over)
    return LedgerRow(**fields)


def file_ledger(path: Path, count: int, key: bytes | None = KEY) -> Ledger:
    ledger = Ledger(path, key=key)
    for n in range(1, count + 1):
        ledger.append(row(n))
    return ledger


def superuser(url: str, sql: str) -> None:
    """What someone with the owner's rights can do: switch the guard off and edit."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)


def head_bytes(path: Path) -> bytes:
    return path.with_suffix(".head").read_bytes()


# --------------------------------------------------------------------------- appending


def test_rows_appended_in_postgres_are_the_file_ledgers_rows(db: str, tmp_path: Path) -> None:
    pg = PostgresLedger(db, key=KEY)
    in_file = Ledger(tmp_path / "ledger.jsonl", key=KEY)
    for n in range(1, 6):
        assert pg.append(row(n)) == in_file.append(row(n))
    decision = pg.rows_of("D-1")[0]
    assert pg.append_outcome(decision, "retry green", ts="2026-01-15T12:00:01.000000Z") == (
        in_file.append_outcome(decision, "retry green", ts="2026-01-15T12:00:01.000000Z")
    )

    assert list(pg.rows()) == list(in_file.rows())
    assert pg.recent(2) == in_file.recent(2)
    assert pg.rows_of("D-1") == in_file.rows_of("D-1")
    assert pg.rows_of("D-none") == []
    assert pg.verify() == in_file.verify() == VerifyResult(True, 6, None, None)
    assert pg.repair().kept == 6


def test_rows_are_append_only(db: str) -> None:
    pg = PostgresLedger(db)
    pg.append(row(1))
    with psycopg.connect(db, autocommit=True) as conn:
        for sql in (
            "UPDATE ledger_rows SET decision_id = 'x'",
            "DELETE FROM ledger_rows",
            "TRUNCATE ledger_rows",
            "DELETE FROM ledger_head",
            "UPDATE ledger_head SET seq = 0, entry_hash = NULL",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="ledger"):
                conn.execute(sql)
    assert pg.verify() == VerifyResult(True, 1, None, None)


def test_two_appenders_make_one_chain(db: str) -> None:
    per_worker = 25
    failures: list[BaseException] = []

    def worker(name: str) -> None:
        ledger = PostgresLedger(db, key=KEY)  # its own connections
        try:
            for n in range(per_worker):
                ledger.append(row(n, decision_id=f"{name}-{n}"))
        except BaseException as exc:  # noqa: BLE001 - reported by the assert below
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    pg = PostgresLedger(db, key=KEY)
    rows = list(pg.rows())
    assert [r["seq"] for r in rows] == list(range(1, 2 * per_worker + 1))
    assert {r["decision_id"][0] for r in rows} == {"a", "b"}
    assert pg.verify() == VerifyResult(True, 2 * per_worker, None, None)


def _append_many(url: str, writer: str, count: int, start: Any) -> None:
    ledger = PostgresLedger(url, key=KEY)
    start.wait()  # both writers begin together, so their appends really interleave
    for n in range(count):
        ledger.append(row(n, decision_id=f"{writer}-{n}"))


@pytest.mark.slow
def test_two_processes_appending_make_one_chain(db: str) -> None:
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(2)
    procs = [ctx.Process(target=_append_many, args=(db, w, 60, start)) for w in "ab"]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
    assert [proc.exitcode for proc in procs] == [0, 0]
    pg = PostgresLedger(db, key=KEY)
    assert pg.verify() == VerifyResult(True, 120, None, None)
    assert sorted(r["decision_id"] for r in pg.rows()) == sorted(
        f"{w}-{n}" for w in "ab" for n in range(60)
    )


def test_a_keyed_ledger_needs_its_key(db: str) -> None:
    PostgresLedger(db, key=KEY).append(row(1))
    with pytest.raises(LedgerError, match="the ledger is keyed"):
        PostgresLedger(db).append(row(2))
    assert PostgresLedger(db).verify().reason is not None
    assert not PostgresLedger(db, key=b"another key").verify().ok


def test_a_database_that_cannot_be_reached_is_reported_without_its_password(
    tmp_path: Path,
) -> None:
    pg = PostgresLedger(f"postgresql://postgres:s3cret@/nope?host={tmp_path}")
    with pytest.raises(PostgresUnavailable, match="cannot reach PostgreSQL") as caught:
        pg.verify()
    assert "s3cret" not in str(caught.value)

    def broken() -> Any:
        raise psycopg.OperationalError("the server went away")

    with pytest.raises(LedgerError, match="the PostgreSQL ledger: the server went away"):
        PostgresLedger(broken).append(row(1))


# --------------------------------------------------------------------------- moving


@pytest.mark.parametrize("key", [KEY, None])
def test_a_file_ledger_moves_to_postgres_and_back_byte_for_byte(
    db: str, tmp_path: Path, key: bytes | None
) -> None:
    original = tmp_path / "ledger.jsonl"
    file_ledger(original, 12, key)
    pg = PostgresLedger(db, key=key)

    assert import_ledger(original, pg) == VerifyResult(True, 12, None, None)
    assert pg.verify() == VerifyResult(True, 12, None, None)
    with psycopg.connect(db) as conn:
        stored = conn.execute(
            "SELECT entry_hash, prev_hash FROM ledger_rows ORDER BY seq"
        ).fetchall()
    in_file = list(Ledger(original, key=key).rows())
    assert stored == [(r["entry_hash"], r["prev_hash"]) for r in in_file]

    pg.append(row(13))  # and it goes on from there, as the file would
    copy = tmp_path / "copy" / "ledger.jsonl"
    copy.parent.mkdir()
    assert export_ledger(pg, copy) == VerifyResult(True, 13, None, None)
    Ledger(original, key=key).append(row(13))
    assert copy.read_bytes() == original.read_bytes()
    assert head_bytes(copy) == head_bytes(original)
    assert Ledger(copy, key=key).verify() == VerifyResult(True, 13, None, None)


def test_a_ledger_written_by_the_test_helpers_round_trips(db: str, tmp_path: Path) -> None:
    original = tmp_path / "ledger.jsonl"
    play(
        Ledger(original),
        [
            ("decide", "sig-a", "retry"),
            ("decide", "sig-b", "mechanical-fix"),
            ("conclude", 0, "mechanical-fix green: ok"),
            ("decide", "sig-a", "abandon-human"),
            ("conclude", 1, "needs-human: x"),
            ("conclude", 2, "mechanical-fix red"),
        ],
    )
    pg = PostgresLedger(db)
    import_ledger(original, pg)
    assert list(pg.rows()) == list(Ledger(original).rows())
    assert pg.history("sig-a") == Ledger(original).history("sig-a")
    back = tmp_path / "back.jsonl"
    export_ledger(pg, back)
    assert back.read_bytes() == original.read_bytes()
    assert head_bytes(back) == head_bytes(original)


def test_import_refuses_a_ledger_that_does_not_verify(db: str, tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    file_ledger(path, 5)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"ticket":"T-3"', b'"ticket":"T-9"')
    path.write_bytes(b"".join(lines))
    reason = Ledger(path, key=KEY).verify().reason
    assert reason is not None and reason.startswith("entry_hash mismatch")
    with pytest.raises(LedgerError, match=re.escape(f"refusing to import: line 3: {reason}")):
        import_ledger(path, PostgresLedger(db, key=KEY))
    assert PostgresLedger(db, key=KEY).verify() == VerifyResult(True, 0, None, None)


def test_import_refuses_a_ledger_that_is_not_empty(db: str, tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    file_ledger(path, 3)
    pg = PostgresLedger(db, key=KEY)
    pg.append(row(1))
    with pytest.raises(LedgerError, match=r"not empty \(1 rows\)"):
        import_ledger(path, pg)
    assert pg.verify() == VerifyResult(True, 1, None, None)


def test_export_refuses_to_overwrite(db: str, tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b"")
    with pytest.raises(LedgerError, match="already exists"):
        export_ledger(PostgresLedger(db), path)
    assert path.read_bytes() == b""


# --------------------------------------------------------------------------- tampering

EDIT = """UPDATE ledger_rows SET line = replace(line, '"ticket":"T-4"', '"ticket":"T-5"')
WHERE seq = 4"""
TAMPERING = {
    # name: (what it does in the file, what it does in the database)
    "an edited row": (
        lambda lines: [
            line.replace(b'"ticket":"T-4"', b'"ticket":"T-5"') if i == 3 else line
            for i, line in enumerate(lines)
        ],
        EDIT,
    ),
    "a deleted row": (
        lambda lines: lines[:4] + lines[5:],
        "DELETE FROM ledger_rows WHERE seq = 5",
    ),
    "a truncated ledger": (
        lambda lines: lines[:7],
        "DELETE FROM ledger_rows WHERE seq > 7",
    ),
}


@pytest.mark.parametrize("tampering", sorted(TAMPERING))
def test_tampering_in_the_database_is_reported_as_the_file_verify_reports_it(
    db: str, tmp_path: Path, tampering: str
) -> None:
    path = tmp_path / "ledger.jsonl"
    file_ledger(path, 10)
    pg = PostgresLedger(db, key=KEY)
    import_ledger(path, pg)
    in_file, in_database = TAMPERING[tampering]

    path.write_bytes(b"".join(in_file(path.read_bytes().splitlines(keepends=True))))
    superuser(
        db,
        "ALTER TABLE ledger_rows DISABLE TRIGGER USER; "
        f"{in_database}; ALTER TABLE ledger_rows ENABLE TRIGGER USER",
    )
    expected = Ledger(path, key=KEY).verify()
    assert not expected.ok
    assert pg.verify() == expected
    with pytest.raises(LedgerError, match="refusing to repair"):
        pg.repair()
    exported = tmp_path / "exported.jsonl"
    with pytest.raises(LedgerError, match=re.escape(f"refusing to export: line {expected.line}")):
        export_ledger(pg, exported)
    assert not exported.exists()
    assert not exported.with_suffix(".head").exists()


def test_a_rewritten_head_mac_is_reported_as_in_the_file(db: str, tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    file_ledger(path, 3)
    pg = PostgresLedger(db, key=KEY)
    import_ledger(path, pg)
    forged = "0" * 64
    head = path.with_suffix(".head")
    text = head.read_text()
    mac = text.split('"hmac":"')[1][:64]
    head.write_text(text.replace(mac, forged))
    superuser(
        db,
        "ALTER TABLE ledger_head DISABLE TRIGGER USER; "
        f"UPDATE ledger_head SET hmac = '{forged}'; ALTER TABLE ledger_head ENABLE TRIGGER USER",
    )

    expected = Ledger(path, key=KEY).verify()
    assert expected == VerifyResult(
        False,
        3,
        None,
        "the head file's HMAC does not match: rewritten without the key (or another key)",
    )
    assert pg.verify() == expected
    with pytest.raises(LedgerError, match="HMAC does not match"):
        pg.append(row(4))


def test_a_head_one_row_behind_moves_as_it_is_and_repair_brings_it_up(
    db: str, tmp_path: Path
) -> None:
    # A crash between a row and its head: the file is one row ahead of its head file.
    path = tmp_path / "ledger.jsonl"
    ledger = file_ledger(path, 2)
    behind = head_bytes(path)
    ledger.append(row(3))
    path.with_suffix(".head").write_bytes(behind)
    assert Ledger(path, key=KEY).verify() == VerifyResult(True, 3, None, None)

    pg = PostgresLedger(db, key=KEY)
    assert import_ledger(path, pg) == VerifyResult(True, 3, None, None)
    back = tmp_path / "back.jsonl"
    export_ledger(pg, back)
    assert (back.read_bytes(), head_bytes(back)) == (path.read_bytes(), behind)

    repaired = pg.repair()
    assert (repaired.kept, repaired.head_fixed) == (3, True)
    assert pg.append(row(4))["seq"] == 4
    assert pg.verify() == VerifyResult(True, 4, None, None)


def test_the_history_through_the_indexes_is_the_scans_answer(db: str) -> None:
    from orchestrator.storage.ledger import history_by_scan, recent_outcomes_by_scan

    from support.ledger_rows import conclude, decide

    pg = PostgresLedger(db)
    play(
        pg,  # type: ignore[arg-type]
        [
            ("decide", "sig-a", "retry"),
            ("decide", "sig-b", "mechanical-fix"),
            ("conclude", 0, "mechanical-fix green: ok"),
            ("decide", "sig-a", "abandon-human"),
            ("conclude", 1, "needs-human: x"),
            ("conclude", 2, "mechanical-fix red"),
            ("conclude", 0, "mechanical-fix green: again"),
            ("decide", "", "retry"),
            ("conclude", 3, "mechanical-fix green: ok"),
        ],
    )
    # Rows the SQL must not trip over, nor count where the scan would not: a decision
    # whose signature is not text, an outcome whose reason holds a NUL (valid JSON that
    # PostgreSQL cannot read as text), a decision about sig-a concluded twice.
    odd = pg.append(row(90, decision={"signature": 5, "verdict": {"action": "retry"}}))
    conclude(pg, odd, "mechanical-fix green: ok")  # type: ignore[arg-type]
    nul = decide(pg, 91, "sig-a", "retry")  # type: ignore[arg-type]
    conclude(pg, nul, "needs-human: \x00 in the reason")  # type: ignore[arg-type]
    conclude(pg, nul, "mechanical-fix green: late")  # type: ignore[arg-type]
    every = list(pg.rows())
    for signature in ("sig-a", "sig-b", "", "5", "nothing"):
        assert pg.history(signature) == history_by_scan(every, signature), signature
        for last in (1, 2, 5):
            assert pg.recent_outcomes(signature, last) == recent_outcomes_by_scan(
                every, signature, last
            ), (signature, last)
    assert pg.history("sig-a")["retry"].total == 4


def test_the_history_query_can_use_the_indexes(db: str) -> None:
    import psycopg

    with psycopg.connect(db) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            line
            for (line,) in conn.execute(
                "EXPLAIN SELECT d.seq, o.seq FROM ledger_rows d "
                "JOIN ledger_rows o ON ledger_member(o.line, 'supersedes') = d.entry_hash "
                "AND ledger_member(o.line, 'kind') = 'outcome' AND o.seq > d.seq "
                "WHERE ledger_member(d.line, 'kind') = 'decision' "
                "AND ledger_member(d.line, 'decision', 'signature') = 'sig-a'"
            ).fetchall()
        )
    assert "ledger_rows_decision_signature" in plan, plan
    assert "ledger_rows_outcome_supersedes" in plan, plan
