"""The state dir mirrored in PostgreSQL (issue 30): each machine's state dir stays its
working copy, the database is the record (schema: ``migrations/0005_state_files.sql``).

Publishing
    Every file the stores write under the state dir is handed, before it is renamed into
    place (``_atomic.published_under``), to ``StateMirror.publish``: one statement, so
    one transaction (``publish_state``, migration 0007), that checks the ticket's lease
    first when the writer holds one (under the lease row's lock), then writes the file's
    row with the next ``state_seq`` number. A worker that lost its ticket is refused by
    the database, and its file is not written either. A published file is not fsynced
    locally: the commit is its durability, and the local file a working copy. A run record brings along, in the same transaction, whatever changed of its
    run's files that no atomic write of this process saw (stage logs, the ticket
    snapshot, what a stage program wrote in the run's directory).

Routing
    ``route`` names the table and key of a state-dir path, and nothing else: a pure
    function, the one place that says what is mirrored. Never mirrored: ``keys/`` (the
    approval key is a secret), ``locks/``, the ledger's files (the ledger is
    ``PostgresLedger``), ``tickets/`` (``PostgresBudgets``), a batch's ``budget.json``
    (``batch_spend``) and worker logs, the per-machine caches (``baselines/``,
    ``base_checks/``), temp and hidden files, a run's clone and verification checkouts,
    and **any name the layout does not define**: an unknown file stays local.

Hydrating
    ``hydrate`` writes into the local state dir what the database holds and the local
    copy lacks: everything of one ticket (taken with its lease), or everything newer than
    the last time (``mirror.json`` under the root keeps that seq, with the database's
    identity and the machine's boot: another database, or a reboot, which may have lost
    published files never flushed here, starts again from nothing, comparing every
    file). "Newer than" is safe although
    transactions commit out of their seq order: the reader first takes ``STATE_SEQ_LOCK``
    exclusively for an instant, so every number drawn up to then belongs to a finished
    transaction, and reads no further than that. A run record names the machine that
    wrote it in its absolute paths: it lands rebased onto this root (``rebase_record``).

    A stage log grows on disk between publishes, so one is brought down only when the
    local copy is missing or shorter than the database's (or as long but not the same):
    a reader's hydrate never truncates a log a stage on this machine is writing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from functools import cache
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

from orchestrator.domain.errors import StateError
from orchestrator.redaction import redact
from orchestrator.storage._atomic import atomic_write
from orchestrator.storage.layout import RUN_ID_TICKET, is_run_id, ticket_of
from orchestrator.storage.postgres.leases import (
    STATE_SEQ_LOCK,
    LeaseToken,
    StateRow,
    check_record,
    parse_record,
    publish_fenced,
    record_row,
)
from orchestrator.storage.postgres.session import (
    ConnectionFactory,
    connection_factory,
    transaction,
)

if TYPE_CHECKING:
    import psycopg

WHERE = "the PostgreSQL state mirror"
MARKER_NAME: Final = "mirror.json"

Table = Literal[
    "runs",
    "verdicts",
    "transcripts",
    "approvals",
    "batches",
    "stage_logs",
    "run_files",
    "state_files",
]
WRITTEN_ONCE: Final = frozenset({"verdicts", "transcripts", "approvals"})
# Every table keyed by a run: what forgetting a run record deletes.
RUN_TABLES: Final = ("verdicts", "transcripts", "approvals", "stage_logs", "run_files", "runs")

_NUMBER = r"(?P<n>0|[1-9][0-9]{0,8})"
# A run's files beside its record, by what follows the run id (tried in this order; the
# run part must then be a run id).
_RUN_SIBLINGS: Final[tuple[tuple[re.Pattern[str], Table], ...]] = (
    (re.compile(rf"(?P<run>.+)\.verdict-{_NUMBER}\.json"), "verdicts"),
    (re.compile(rf"(?P<run>.+)\.approval-{_NUMBER}\.json"), "approvals"),
    (re.compile(rf"(?P<run>.+)\.bundle-{_NUMBER}\.json"), "run_files"),
    (re.compile(rf"(?P<run>.+)\.mechanical_fix-{_NUMBER}\.json"), "run_files"),
    (re.compile(r"(?P<run>.+)\.mechanical_fix\.json"), "run_files"),
    (re.compile(r"(?P<run>.+)\.handoff\.md"), "run_files"),
    (re.compile(r"(?P<run>.+)\.json"), "runs"),
)
_TRANSCRIPT = re.compile(r"[0-9a-f]{64}\.txt")
_PENDING = re.compile(rf"pending-{_NUMBER}\.json")
# What a run's workspace holds beside its clone, logs and ticket snapshot.
_RUN_DIR_FILES = re.compile(r"pull-request\.json|pruned\.json|prompt-(0|[1-9][0-9]{0,8})\.txt")
_LOG = re.compile(r"[^/]+\.log")
_BATCH_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_BATCH_FILES: Final = frozenset({"batch.json", "queue.json"})
# The directories of a run's workspace whose files a published run record brings along.
_RUN_DIR_SUBDIRS: Final = frozenset({"logs", "ticket"})


class Route(NamedTuple):
    """Where one state-dir file is kept: its table and its key there.

    ``run_id`` for the run tables, ``batch_id`` for ``batches``, ``number`` for verdicts
    and approvals; ``name``: a transcript's or a log's file name, a run file's path
    relative to ``runs/``, a batch file's name, a state file's path."""

    table: Table
    run_id: str | None = None
    batch_id: str | None = None
    number: int | None = None
    name: str = ""

    @property
    def ticket_id(self) -> str | None:
        return None if self.run_id is None else ticket_of(self.run_id)

    def relpath(self) -> PurePosixPath:
        """The state-dir path this route names (``route`` of it is this route again)."""
        run, table = self.run_id, self.table
        if table == "runs":
            return PurePosixPath("runs", f"{run}.json")
        if table == "verdicts":
            return PurePosixPath("runs", f"{run}.verdict-{self.number}.json")
        if table == "approvals":
            return PurePosixPath("runs", f"{run}.approval-{self.number}.json")
        if table == "transcripts":
            return PurePosixPath("runs", f"{run}.replies", self.name)
        if table == "stage_logs":
            return PurePosixPath("runs", f"{run}", "logs", self.name)
        if table == "run_files":
            return PurePosixPath("runs", self.name)
        if table == "batches":
            return PurePosixPath("batches", f"{self.batch_id}", self.name)
        return PurePosixPath(self.name)


def route(relpath: PurePosixPath) -> Route | None:
    """The table and key of ``relpath`` (relative to the state dir), or None when it is
    not mirrored: secrets, locks, the ledger, budgets, caches, temp and hidden files, a
    run's clone, anything absolute or climbing out (``..``), and every name the layout
    does not define. Pure: touches no file and no database."""
    parts = relpath.parts
    if not parts or relpath.is_absolute():
        return None
    if any(p in ("", ".", "..") or p.startswith(".") or "\x00" in p for p in parts):
        return None
    top = parts[0]
    if top == "runs" and len(parts) >= 2:
        return _run_route(parts)
    if top == "batches" and len(parts) == 3:
        batch_id, name = parts[1], parts[2]
        if _BATCH_ID.fullmatch(batch_id) and name in _BATCH_FILES:
            return Route("batches", batch_id=batch_id, name=name)
        return None
    if top == "batches" and len(parts) >= 5 and parts[2] == "tickets":
        # A queued ticket's copy (layout.batch_ticket_dir): carried to the fleet's workers.
        if _BATCH_ID.fullmatch(parts[1]) and RUN_ID_TICKET.fullmatch(parts[3]):
            return Route("batches", batch_id=parts[1], name="/".join(parts[2:]))
        return None
    if top == "notify" and len(parts) == 2 and parts[1].endswith(".json"):
        return Route("state_files", name=relpath.as_posix())
    if top == "intake" and len(parts) == 3:
        if RUN_ID_TICKET.fullmatch(parts[1]) and parts[2].endswith(".md"):
            return Route("state_files", name=relpath.as_posix())
    return None


def _run_route(parts: tuple[str, ...]) -> Route | None:
    name = parts[1]
    if len(parts) == 2:
        for pattern, table in _RUN_SIBLINGS:
            match = pattern.fullmatch(name)
            if match is None or not is_run_id(match["run"]):
                continue
            run = match["run"]
            if table == "runs":
                return Route("runs", run_id=run)
            if table == "run_files":
                return Route("run_files", run_id=run, name=name)
            return Route(table, run_id=run, number=int(match["n"]))
        return None
    if name.endswith(".replies") and len(parts) == 3:
        run, leaf = name.removesuffix(".replies"), parts[2]
        if not is_run_id(run):
            return None
        if _TRANSCRIPT.fullmatch(leaf):
            return Route("transcripts", run_id=name.removesuffix(".replies"), name=leaf)
        if _PENDING.fullmatch(leaf):
            return Route("run_files", run_id=run, name=f"{name}/{leaf}")
        return None
    if not is_run_id(name):
        return None
    inside = parts[2]
    if inside == "logs" and len(parts) == 4 and _LOG.fullmatch(parts[3]):
        return Route("stage_logs", run_id=name, name=parts[3])
    if inside == "ticket" and len(parts) >= 4:
        return Route("run_files", run_id=name, name="/".join(parts[1:]))
    if len(parts) == 3 and _RUN_DIR_FILES.fullmatch(inside):
        return Route("run_files", run_id=name, name="/".join(parts[1:]))
    return None  # the clone, a verification checkout, anything else of the workspace


def rebase_record(text: str, old_root: str, new_root: str) -> str:
    """A run record's text with every string that is ``old_root`` or a path under it
    (``old_root/…``) moved under ``new_root``; laid out as the file store writes a record
    (``model_dump_json(indent=2)``). Pure."""
    if old_root == new_root:
        return text
    prefix = old_root.rstrip("/") + "/"

    def moved(value: Any) -> Any:
        if isinstance(value, str):
            if value == old_root:
                return new_root
            if value.startswith(prefix):
                return new_root.rstrip("/") + "/" + value[len(prefix) :]
            return value
        if isinstance(value, list):
            return [moved(v) for v in value]
        if isinstance(value, dict):
            return {k: moved(v) for k, v in value.items()}
        return value

    return json.dumps(moved(json.loads(text)), indent=2, ensure_ascii=False)


def _record_root(text: str, run_id: str) -> str | None:
    """The state dir a record was written under: its ``run_dir`` less ``runs/<run-id>``."""
    try:
        run_dir = json.loads(text).get("run_dir")
    except (ValueError, AttributeError):
        return None
    suffix = f"/runs/{run_id}"
    if not isinstance(run_dir, str) or not run_dir.endswith(suffix):
        return None
    return run_dir[: -len(suffix)] or "/"


class _Found(NamedTuple):
    """One file a run record's publish brings along."""

    path: Path
    route: Route
    data: bytes
    stamp: tuple[int, int]


class _Row(NamedTuple):
    """One row to bring down: where it goes, and its bytes (a log's once needed)."""

    seq: int
    route: Route
    body: bytes | None
    size: int = -1
    sha256: str = ""


class StateMirror:
    """One state dir (``root``) and the database it is mirrored in (migrated: 0005).

    ``source``: a ``postgresql://`` URL, or a function returning a connection."""

    def __init__(self, source: str | ConnectionFactory, root: Path) -> None:
        self._root_resolved: Path | None = None
        self._snapshot_sent: set[str] = set()
        self._connect = connection_factory(source)
        self.root = root
        # What this process published of the files it reads itself (a run's logs, its
        # ticket snapshot): (size, mtime_ns) by path, so an unchanged one is not sent again.
        self._published: dict[Path, tuple[int, int]] = {}
        self._published_pid = os.getpid()
        self._guard = threading.Lock()

    def _transaction(
        self, *, snapshot: bool = False, implicit: bool = False, pipeline: bool = False
    ) -> AbstractContextManager[psycopg.Connection[Any]]:
        return transaction(
            self._connect,
            says=f"state error: {WHERE}",
            error=StateError,
            unavailable=WHERE,
            snapshot=snapshot,
            implicit=implicit,
            pipeline=pipeline,
        )

    def _relative(self, path: Path) -> PurePosixPath:
        return self.relative_of(path.resolve())

    def relative_of(self, resolved: Path) -> PurePosixPath:
        """The state-dir path of an already resolved path (ValueError outside the root)."""
        root = self._resolved_root()
        if not resolved.is_relative_to(root):
            raise ValueError(f"{resolved}: not under the state dir {root}")
        return PurePosixPath(resolved.relative_to(root).as_posix())

    def _resolved_root(self) -> Path:
        if self._root_resolved is None:
            self._root_resolved = self.root.resolve()
        return self._root_resolved

    def publish_relative(
        self, relative: PurePosixPath, data: bytes, *, fence: LeaseToken | None = None
    ) -> bool:
        """``publish`` of a path already made relative to the state dir (``relative_of``):
        the storage's hot path, which has resolved it once already. Whether the file is
        mirrored (and so was published)."""
        return self._publish(relative, data, fence=fence) > 0

    # -- publishing ---------------------------------------------------------------

    def publish(
        self,
        path: Path,
        data: bytes,
        *,
        fence: LeaseToken | None = None,
        _before_write: Callable[[psycopg.Connection[Any]], None] | None = None,
    ) -> None:
        """Write ``data`` as the file at ``path`` (under the root, else ValueError) to
        the database, in one transaction; nothing when the path is not mirrored. With
        ``fence``, only while that lease is the ticket's current one (else
        ``LeaseFencedOut``, and nothing is written). A file written once (a verdict, a
        transcript, an approval) published again with other bytes is a StateError naming
        it. ``_before_write``: a test seam, called once the fence is checked."""
        self._publish(self._relative(path), data, fence=fence, before_write=_before_write)

    def _publish(
        self,
        relative: PurePosixPath,
        data: bytes,
        *,
        fence: LeaseToken | None = None,
        before_write: Callable[[psycopg.Connection[Any]], None] | None = None,
    ) -> int:
        found = route(relative)
        if found is None:
            return 0
        lease = LeaseToken(*fence) if fence is not None else None
        if lease is not None and found.ticket_id not in (None, lease.ticket_id):
            raise ValueError(
                f"{relative} is ticket {found.ticket_id}'s, "
                f"not fenced by ticket {lease.ticket_id}'s lease"
            )
        brought: list[_Found] = []
        if found.table == "runs":
            assert found.run_id is not None
            text = _record_text(relative, data)
            record = parse_record(found.run_id, text)
            check_record(record)
            if record.run_id != found.run_id:
                raise StateError(f"state error: {relative}: holds the record of {record.run_id}")
            first = record_row(record, text)
            brought = self._changed_run_files(found.run_id)
        else:
            record, first = None, _state_row(found, data)
        rows = [first, *(_state_row(extra.route, extra.data) for extra in brought)]
        publish_fenced(
            lambda: self._transaction(implicit=True), self._transaction, rows, lease, before_write
        )
        with self._guard:
            self._fresh_cache()
            for extra in brought:
                self._published[extra.path] = extra.stamp
            if record is not None:
                self._snapshot_sent.add(record.run_id)
        return 1 + len(brought)

    def _fresh_cache(self) -> None:
        if self._published_pid != os.getpid():  # a forked child has sent nothing yet
            self._published.clear()
            self._snapshot_sent.clear()
            self._published_pid = os.getpid()

    def _changed_run_files(self, run_id: str) -> list[_Found]:
        """The run's workspace files (not its clone) changed since this process last
        published them, read from disk. Symbolic links are not followed: a link in a
        ticket snapshot must not publish whatever it points to. The ticket snapshot is
        written once, before the run's first record: it is walked until this process has
        published that record, the logs and the run dir's own files every time."""
        run_dir = self.root / "runs" / run_id
        found: list[_Found] = []
        with self._guard:
            self._fresh_cache()
            sent = dict(self._published)
            walk_snapshot = run_id not in self._snapshot_sent
        prefix = PurePosixPath("runs", run_id)

        def keep(directory: PurePosixPath) -> bool:  # its logs; its snapshot, until sent
            if directory.parent != prefix:
                return True
            return directory.name in _RUN_DIR_SUBDIRS and (
                directory.name != "ticket" or walk_snapshot
            )

        for entry, relative in _files(run_dir, prefix, keep):
            where = route(relative)
            if where is None:
                continue
            path = Path(entry.path)
            try:
                stat = entry.stat(follow_symlinks=False)
                stamp = (stat.st_size, stat.st_mtime_ns)
                if sent.get(path) == stamp:
                    continue
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            found.append(_Found(path, where, data, stamp))
        return found

    def publish_tree(self) -> int:
        """Publish every mirrored file under the root (``storage export``), each run record
        with its run's files; how many files were published."""
        records: list[PurePosixPath] = []
        others: list[PurePosixPath] = []
        for _, relative in _files(self.root, PurePosixPath(), _worth_walking):
            where = route(relative)
            if where is None:
                continue
            (records if where.table == "runs" else others).append(relative)
        with_records = {r.parts[1].removesuffix(".json") for r in records}
        with self._guard:
            self._published.clear()  # send everything again
            self._snapshot_sent.clear()
        count = 0
        for relative in others:
            if len(relative.parts) > 2 and relative.parts[1] in with_records:
                continue  # brought along by its run record
            count += self._publish(relative, (self.root / relative).read_bytes())
        for relative in records:
            count += self._publish(relative, (self.root / relative).read_bytes())
        return count

    # -- forgetting ---------------------------------------------------------------

    def forget(self, paths: Iterable[Path]) -> int:
        """Delete the rows of these local paths (what ``prune`` removed), in one
        transaction: a run record takes every row of its run with it (the ledger's are
        never deleted), a run's ``logs``/``ticket`` directory or its replies directory
        the rows under it. How many rows were deleted."""
        statements: list[tuple[str, tuple[Any, ...]]] = []
        for path in paths:
            statements += _deletions(self._relative(path))
            with self._guard:
                self._published.pop(path, None)
        deleted = 0
        with self._transaction() as conn:
            for sql, params in statements:
                deleted += max(conn.execute(sql, params).rowcount, 0)
        return deleted

    # -- hydrating ----------------------------------------------------------------

    def hydrate(
        self, *, ticket_id: str | None = None, queued: tuple[str, str] | None = None
    ) -> int:
        """Write into the local root every mirrored row the local copy lacks or differs
        from; how many files were written. With ``ticket_id``: every row of that
        ticket's runs; with ``queued`` (batch id, ticket id): that batch's copy of that
        ticket only (what a fleet task needs before it can read its ticket); with
        neither: every row newer than the last hydrate (``mirror.json``)."""
        since, upto, identity = 0, None, ""
        whole = ticket_id is None and queued is None
        if whole:
            identity, upto = self._barrier()
            marker = self._marker()
            if marker is not None and marker[0] == identity and marker[1] <= upto:
                since = marker[1]
        with self._transaction(snapshot=True, pipeline=True) as conn:
            rows = [
                self._local_form(row)
                for row in _rows(conn, since=since, upto=upto, ticket_id=ticket_id, queued=queued)
            ]
            wanted = [row for row in rows if self._lacks(row)]
            wanted = _with_log_bodies(conn, wanted)
        # The run records last: a reader that finds one finds its files already there.
        wanted.sort(key=lambda row: (row.route.table == "runs", row.seq))
        for row in wanted:
            assert row.body is not None
            atomic_write(self.root / row.route.relpath(), row.body, mirrored=False)
        if whole and upto is not None:
            mark = json.dumps(
                {"database": identity, "seq": upto, "boot": boot_id()}, indent=2
            ).encode()
            atomic_write(self.root / MARKER_NAME, mark, mirrored=False)
        return len(wanted)

    def _barrier(self) -> tuple[str, int]:
        """The database's identity, and the seq up to which every writer has finished."""
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (STATE_SEQ_LOCK,))
            found = conn.execute(
                "SELECT (SELECT system_identifier FROM pg_control_system())::text "
                "|| '/' || d.oid::text || '/' || d.datname, "
                "(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM state_seq) "
                "FROM pg_database d WHERE d.datname = current_database()"
            ).fetchone()
        assert found is not None
        return str(found[0]), int(found[1])

    def _marker(self) -> tuple[str, int] | None:
        try:
            marker = json.loads((self.root / MARKER_NAME).read_bytes())
            database, seq, boot = str(marker["database"]), int(marker["seq"]), marker["boot"]
        except (OSError, ValueError, TypeError, KeyError):
            return None  # none yet, or damaged: start again from nothing
        # Published files are not fsynced here (``atomic_write``): a reboot since the
        # marker may have lost some, so everything is compared again after one.
        booted = boot_id()
        return (database, seq) if booted and boot == booted else None

    def _lacks(self, row: _Row) -> bool:
        path = self.root / row.route.relpath()
        if row.route.table == "stage_logs":
            try:
                size = path.lstat().st_size
            except FileNotFoundError:
                return True
            if size != row.size:
                return size < row.size  # a longer local log is this machine's, still growing
            return _sha256(path.read_bytes()) != row.sha256
        try:
            return path.read_bytes() != row.body
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return True

    def _local_form(self, row: _Row) -> _Row:
        """A run record's row rebased onto this root; any other row as it is."""
        if row.route.table != "runs" or row.body is None or row.route.run_id is None:
            return row
        text = row.body.decode("utf-8")
        old_root = _record_root(text, row.route.run_id)
        if old_root is None:
            return row
        rebased = rebase_record(text, old_root, os.path.abspath(self.root))
        return row._replace(body=rebased.encode())


@cache
def boot_id() -> str:
    """This boot of this machine's kernel (Linux: ``/proc/sys/kernel/random/boot_id``,
    the same in every container it runs), or "" where it cannot be told. Unflushed
    writes outlive any process that made them, and are lost only when the kernel goes."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _record_text(relative: PurePosixPath, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise StateError(f"state error: {relative}: a run record is not UTF-8") from None


def _worth_walking(directory: PurePosixPath) -> bool:
    """The directories ``publish_tree`` walks: those that hold mirrored files (never a
    run's clone)."""
    parts = directory.parts
    if len(parts) == 1:
        return parts[0] in ("runs", "batches", "notify", "intake")
    if len(parts) == 3 and parts[0] == "runs":
        return parts[2] in _RUN_DIR_SUBDIRS
    return True


def _files(
    top: Path, relative: PurePosixPath, keep: Callable[[PurePosixPath], bool]
) -> Iterator[tuple[os.DirEntry[str], PurePosixPath]]:
    """The regular files (never a link) under ``top`` with their state-dir paths (``top``
    is ``relative``), into the directories ``keep`` accepts, hidden names skipped, in
    name order."""
    stack: list[tuple[str, PurePosixPath]] = [(str(top), relative)]
    while stack:
        directory, here = stack.pop()
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                if keep(here / entry.name):
                    stack.append((entry.path, here / entry.name))
            elif entry.is_file(follow_symlinks=False):
                yield entry, here / entry.name


def _state_row(where: Route, data: bytes) -> StateRow:
    """The row of one file that is not a run record, as ``publish_rows`` writes it."""
    path = where.relpath().as_posix()
    if where.table == "stage_logs":
        # A stage's output leaves this machine redacted, as everything else we send out.
        # The local log stays as the stage wrote it; a hydrate here replaces it with the
        # redacted copy only where that copy is the longer (``_lacks``), which it can be
        # once the attempt ended and its log is no longer written.
        data = redact(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
        return StateRow(
            "stage_logs", path, zlib.compress(data), key=where.run_id,
            ticket_id=where.ticket_id, name=where.name, size=len(data), sha256=_sha256(data),
        )  # fmt: skip
    if where.table == "runs":  # pragma: no cover - a record's row is record_row's
        raise AssertionError(path)
    return StateRow(
        where.table,
        path,
        data,
        key=where.batch_id if where.table == "batches" else where.run_id,
        ticket_id=where.ticket_id,
        number=where.number,
        name=where.name,
        sha256=_sha256(data) if where.table == "verdicts" else None,
    )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _deletions(relative: PurePosixPath) -> list[tuple[str, tuple[Any, ...]]]:
    """The DELETE statements that forget ``relative`` (a file, or a run's directory)."""
    where = route(relative)
    parts = relative.parts
    if where is None:
        if len(parts) == 3 and parts[0] == "runs" and is_run_id(parts[1]):
            run = parts[1]
            if parts[2] == "logs":
                return [("DELETE FROM stage_logs WHERE run_id = %s", (run,))]
            if parts[2] == "ticket":
                return [
                    (
                        "DELETE FROM run_files WHERE run_id = %s AND starts_with(name, %s)",
                        (run, f"{run}/ticket/"),
                    )
                ]
        if len(parts) == 2 and parts[0] == "runs" and parts[1].endswith(".replies"):
            run = parts[1].removesuffix(".replies")
            if is_run_id(run):
                return [
                    ("DELETE FROM transcripts WHERE run_id = %s", (run,)),
                    (
                        "DELETE FROM run_files WHERE run_id = %s AND starts_with(name, %s)",
                        (run, f"{run}.replies/"),
                    ),
                ]
        if len(parts) == 2 and parts[0] == "batches" and _BATCH_ID.fullmatch(parts[1]):
            return [("DELETE FROM batches WHERE batch_id = %s", (parts[1],))]
        if len(parts) == 3 and parts[0] == "batches" and parts[2] == "tickets":
            if _BATCH_ID.fullmatch(parts[1]):  # the batch's queued-ticket copies
                return [
                    (
                        "DELETE FROM batches WHERE batch_id = %s AND starts_with(name, %s)",
                        (parts[1], "tickets/"),
                    )
                ]
        return []
    if where.table == "runs":
        return [(f"DELETE FROM {table} WHERE run_id = %s", (where.run_id,)) for table in RUN_TABLES]
    if where.table in ("verdicts", "approvals"):
        sql = f"DELETE FROM {where.table} WHERE run_id = %s AND number = %s"
        return [(sql, (where.run_id, where.number))]
    if where.table == "batches":
        return [
            ("DELETE FROM batches WHERE batch_id = %s AND name = %s", (where.batch_id, where.name))
        ]
    if where.table == "state_files":
        return [("DELETE FROM state_files WHERE path = %s", (where.name,))]
    return [
        (f"DELETE FROM {where.table} WHERE run_id = %s AND name = %s", (where.run_id, where.name))
    ]


# Each table's rows as routes: the columns that key a row, then its body (a log's
# metadata only: its body is fetched once it is known to be wanted).
_SELECTS: Final[dict[Table, str]] = {
    "runs": "SELECT seq, run_id, convert_to(record, 'UTF8') FROM runs",
    "verdicts": "SELECT seq, run_id, number, body FROM verdicts",
    "approvals": "SELECT seq, run_id, number, body FROM approvals",
    "transcripts": "SELECT seq, run_id, name, body FROM transcripts",
    "run_files": "SELECT seq, run_id, name, body FROM run_files",
    "stage_logs": "SELECT seq, run_id, name, size, sha256 FROM stage_logs",
    "batches": "SELECT seq, batch_id, name, body FROM batches",
    "state_files": "SELECT seq, path, body FROM state_files",
}


def _rows(
    conn: psycopg.Connection[Any],
    *,
    since: int,
    upto: int | None,
    ticket_id: str | None,
    queued: tuple[str, str] | None = None,
) -> Iterator[_Row]:
    if queued is not None:
        batch_id, queued_ticket = queued
        found = conn.execute(
            f"{_SELECTS['batches']} WHERE batch_id = %s AND starts_with(name, %s)",
            (batch_id, f"tickets/{queued_ticket}/"),
        )
        for row in found.fetchall():
            yield _row("batches", row)
        return
    # Every table's query is sent before any answer is read: pipelined, one round trip.
    sent = []
    for table, select in _SELECTS.items():
        if ticket_id is not None:
            if table in ("batches", "state_files"):
                continue
            sent.append((table, conn.execute(f"{select} WHERE ticket_id = %s", (ticket_id,))))
        else:
            sent.append(
                (table, conn.execute(f"{select} WHERE seq > %s AND seq <= %s", (since, upto)))
            )
    for table, found in sent:
        for row in found.fetchall():
            yield _row(table, row)


def _row(table: Table, row: tuple[Any, ...]) -> _Row:
    """A database row as the file it stands for; StateError for one whose key does not
    name a mirrored path (written by hand: it must not land anywhere else)."""
    seq = int(row[0])
    size, sha, body = -1, "", None
    if table == "runs":
        where, body = Route("runs", run_id=row[1]), bytes(row[2])
    elif table in ("verdicts", "approvals"):
        where, body = Route(table, run_id=row[1], number=int(row[2])), bytes(row[3])
    elif table in ("transcripts", "run_files"):
        where, body = Route(table, run_id=row[1], name=row[2]), bytes(row[3])
    elif table == "stage_logs":
        where, size, sha = Route(table, run_id=row[1], name=row[2]), int(row[3]), str(row[4])
    elif table == "batches":
        where, body = Route(table, batch_id=row[1], name=row[2]), bytes(row[3])
    else:
        where, body = Route(table, name=row[1]), bytes(row[2])
    if route(where.relpath()) != where:
        raise StateError(
            f"state error: {WHERE}: a {table} row names {str(where.relpath())!r}, "
            "not a mirrored file of the state dir; refusing to bring it down"
        )
    return _Row(seq, where, body, size, sha)


def _with_log_bodies(conn: psycopg.Connection[Any], rows: list[_Row]) -> list[_Row]:
    """The wanted logs' bodies fetched (in the same snapshot) and decompressed."""
    done = []
    for row in rows:
        if row.route.table == "stage_logs":
            found = conn.execute(
                "SELECT body FROM stage_logs WHERE run_id = %s AND name = %s",
                (row.route.run_id, row.route.name),
            ).fetchone()
            if found is not None:
                done.append(row._replace(body=zlib.decompress(bytes(found[0]))))
        else:
            done.append(row)
    return done
