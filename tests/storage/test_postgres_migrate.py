"""The schema's migrations (orchestrator/storage/postgres/migrate.py), against a real
PostgreSQL: each applied once, in order, recorded; two migrators at once never race; a
database a newer orchestrator migrated is refused; a failing file is rolled back alone
and named."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from orchestrator.storage.postgres import (
    MigrationError,
    MigrationFailed,
    SchemaTooNew,
    connect,
    known_migrations,
    migrate,
)


def recorded(url: str) -> list[tuple[int, str]]:
    with connect(url) as conn:
        rows = conn.execute("SELECT version, name FROM schema_version ORDER BY applied_at, version")
        return [(int(v), str(n)) for v, n in rows]


def write_migrations(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(exist_ok=True)
    for name, sql in files.items():
        (directory / name).write_text(sql)
    return directory


def test_the_package_migrations_apply_once_in_order(pg_url: str) -> None:
    shipped = known_migrations()
    assert shipped[0].file == "0001_schema_version.sql"
    assert [m.version for m in shipped] == sorted(m.version for m in shipped)
    with connect(pg_url) as conn:
        assert migrate(conn) == [m.version for m in shipped]
        assert migrate(conn) == []
    assert recorded(pg_url) == [(m.version, m.name) for m in shipped]
    with connect(pg_url) as conn:
        (comment,) = conn.execute("SELECT obj_description('schema_version'::regclass)").fetchone()  # type: ignore[misc]
        assert comment.startswith("One row per migration applied")


def test_only_the_new_migrations_are_applied(pg_url: str, tmp_path: Path) -> None:
    migrations = write_migrations(
        tmp_path / "m",
        {"0001_start.sql": "CREATE TABLE a (n int);", "0002_more.sql": "CREATE TABLE b (n int);"},
    )
    with connect(pg_url) as conn:
        assert migrate(conn, directory=migrations) == [1, 2]
        write_migrations(migrations, {"0003_third.sql": "ALTER TABLE b ADD COLUMN m int;"})
        assert migrate(conn, directory=migrations) == [3]
        assert migrate(conn, directory=migrations) == []
    assert recorded(pg_url) == [(1, "start"), (2, "more"), (3, "third")]


def test_two_migrators_at_once_apply_each_migration_exactly_once(
    pg_url: str, tmp_path: Path
) -> None:
    # A table counting each application, and a slow migration the other migrator waits on.
    migrations = write_migrations(
        tmp_path / "m",
        {
            "0001_hits.sql": "CREATE TABLE hits (version int NOT NULL);"
            "INSERT INTO hits VALUES (1);",
            "0002_slow.sql": "SELECT pg_sleep(0.3); INSERT INTO hits VALUES (2);",
            "0003_last.sql": "CREATE TABLE last (n int); INSERT INTO hits VALUES (3);",
        },
    )
    start = threading.Barrier(2, timeout=30)

    def migrator() -> list[int]:
        with connect(pg_url) as conn:
            start.wait()
            return migrate(conn, directory=migrations)

    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [pool.submit(migrator) for _ in range(2)]
        results = [run.result(timeout=60) for run in runs]
    assert sorted(v for applied in results for v in applied) == [1, 2, 3]
    with connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM hits ORDER BY version").fetchall() == [
            (1,),
            (2,),
            (3,),
        ]
    assert [v for v, _ in recorded(pg_url)] == [1, 2, 3]


def test_a_database_a_newer_orchestrator_migrated_is_refused(pg_url: str) -> None:
    with connect(pg_url) as conn:
        migrate(conn)
        with conn.transaction():
            conn.execute("INSERT INTO schema_version (version, name) VALUES (9999, 'future')")
        with pytest.raises(SchemaTooNew) as caught:
            migrate(conn)
    known = max(m.version for m in known_migrations())
    database = pg_url.rsplit("/", 1)[1]
    assert str(caught.value) == (
        f"the database 127.0.0.1:{pg_url.split(':')[3].split('/')[0]}/{database} has schema "
        f"version 9999, which this orchestrator does not know (it knows up to {known}): a "
        "newer orchestrator migrated it; upgrade this one to use it"
    )
    assert pg_url.split(":")[2].split("@")[0] not in str(caught.value)  # the password


def test_a_failing_migration_is_rolled_back_alone_and_named(pg_url: str, tmp_path: Path) -> None:
    migrations = write_migrations(
        tmp_path / "m",
        {
            "0001_good.sql": "CREATE TABLE good (n int);",
            "0002_broken.sql": "CREATE TABLE half (n int);\nCREAT TABLE oops (n int);",
            "0003_after.sql": "CREATE TABLE after (n int);",
        },
    )
    with connect(pg_url) as conn:
        with pytest.raises(MigrationFailed) as caught:
            migrate(conn, directory=migrations)
        message = str(caught.value)
        assert message.startswith("migration 0002_broken.sql failed on 127.0.0.1:")
        assert "was rolled back (the versions before it stay applied): " in message
        assert 'syntax error at or near "CREAT"' in message
        tables = {
            name
            for (name,) in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            )
        }
        assert tables == {"schema_version", "good"}  # not "half": the whole file rolled back
        conn.commit()  # the query above opened a transaction
        assert [v for v, _ in recorded(pg_url)] == [1]
        # Fixed, it applies on the next run, with what follows it.
        write_migrations(migrations, {"0002_broken.sql": "CREATE TABLE half (n int);"})
        assert migrate(conn, directory=migrations) == [2, 3]


def test_a_connection_inside_a_transaction_is_refused(pg_url: str) -> None:
    with connect(pg_url) as conn:
        conn.execute("SELECT 1")  # not autocommit: a transaction is now open
        with pytest.raises(MigrationError, match="outside a transaction"):
            migrate(conn)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"1_short.sql": ""}, "migration file '1_short.sql' is not named NNNN_<name>.sql"),
        ({"0001-Dash.sql": ""}, "migration file '0001-Dash.sql' is not named NNNN_<name>.sql"),
        (
            {"0001_a.sql": "", "0001_b.sql": ""},
            "share version 1",
        ),
    ],
)
def test_a_misnamed_or_doubled_migration_file_is_refused(
    tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    with pytest.raises(MigrationError, match=expected.replace("<", ".").replace(">", ".")):
        known_migrations(write_migrations(tmp_path / "m", files))


def test_other_files_beside_the_migrations_are_ignored(tmp_path: Path) -> None:
    migrations = write_migrations(
        tmp_path / "m", {"0002_b.sql": "", "0001_a.sql": "", "README": ""}
    )
    assert [m.file for m in known_migrations(migrations)] == ["0001_a.sql", "0002_b.sql"]
