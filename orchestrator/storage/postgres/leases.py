"""Ticket leases in PostgreSQL (issue 30), and the one fenced write of the state's rows
(``publish_rows``): what ``mirror.StateMirror`` publishes every run record and state file
through, each write fenced in the transaction that makes it.

Leases
    One row per ticket (``ticket_leases``, migration ``0004_runs.sql``): holder, fencing
    token, expiry. Winning a lease when it is free or expired takes token + 1; the row is
    kept after a release or an expiry, so a ticket's token only grows. Expiry is read on
    the database's clock (``clock_timestamp()``), never a worker's: the workers' clocks
    may disagree, the server's is the one every check sees.

Fenced writes
    The Redis fence checks a token and then the file lands: a worker paused between the
    answer and the rename still writes after a takeover (``storage/redis/fence.py`` says
    the window is narrowed, not closed). Here a fenced write is one statement, so one
    transaction (``publish_state``, migration 0007): it locks the ticket's lease row
    (``SELECT ... FOR UPDATE``), checks that the token is still this worker's and the
    lease has not run out, writes the rows, and commits.
    A takeover (``acquire``) must update that row, so it waits for the write to commit; a
    write that waited for a takeover reads the new token and is refused (``FencedOut``,
    the type the Celery worker already catches). Check and write cannot be separated.

A connection lost before the commit writes nothing (the server rolls the transaction
back); one lost during the commit leaves it unknown whether the rows landed, which is
safe to retry: a write replaces the whole file. Each operation opens a connection from
the factory and closes it when done; a connection that drops is ``PostgresUnavailable``
(try again later), any other driver error ``StateError``. psycopg is imported when a
connection is first used, not when this module is.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import ValidationError

from orchestrator.domain.errors import StateError
from orchestrator.domain.runs import RunRecord
from orchestrator.domain.validation import describe_validation_error
from orchestrator.storage.layout import is_run_id, ticket_of
from orchestrator.storage.postgres.connect import PostgresUnavailable
from orchestrator.storage.postgres.session import (
    ConnectionFactory,
    connection_factory,
    transaction,
)
from orchestrator.storage.redis.errors import FencedOut

if TYPE_CHECKING:
    import psycopg

WHERE = "the PostgreSQL run store"


class LeaseToken(NamedTuple):
    """What a fenced write presents: the ticket and the fencing token its lease took."""

    ticket_id: str
    token: int


class LeaseFencedOut(FencedOut):
    """``FencedOut`` (what callers catch), said as PostgreSQL sees it: the lease row is
    missing, ran out without a takeover, or names a newer token (and its holder)."""

    def __init__(
        self, ticket_id: str, held: int, current: int | None, holder: str | None, expired: bool
    ) -> None:
        super().__init__(ticket_id, held, current, holder)
        if current is None or current == 0:
            why = "the database has no lease of it"
        elif current == held:
            why = "its lease ran out (or was released) before this write"
        else:
            who = f" by {holder}" if holder else ""
            why = f"another worker took it over{who} (current fencing token {current})"
        self.expired = expired
        self.args = (
            f"fenced out: ticket {ticket_id}: this worker's fencing token is {held}, but "
            f"{why}; nothing was written",
        )


def _transaction(
    factory: ConnectionFactory, *, pipeline: bool = False
) -> AbstractContextManager[psycopg.Connection[Any]]:
    """One transaction: a connection lost (or never made) is PostgresUnavailable; other
    driver errors are StateError."""
    return transaction(
        factory,
        says=f"state error: {WHERE}",
        error=StateError,
        unavailable=WHERE,
        pipeline=pipeline,
    )


def _statement(factory: ConnectionFactory) -> AbstractContextManager[psycopg.Connection[Any]]:
    """A connection for one statement, its own transaction (no BEGIN, no COMMIT)."""
    return transaction(
        factory, says=f"state error: {WHERE}", error=StateError, unavailable=WHERE, implicit=True
    )


def _seconds(ttl_s: float) -> float:
    if not ttl_s > 0:
        raise ValueError("a lease needs a positive time to live")
    return ttl_s


class PostgresLeases:
    """Per-ticket leases with fencing tokens, in one database (migrated: 0004).

    ``source``: a ``postgresql://`` URL, or a function returning a new connection."""

    def __init__(self, source: str | ConnectionFactory) -> None:
        self._connect = connection_factory(source)

    def acquire(self, ticket_id: str, holder: str, ttl_s: float) -> int | None:
        """The fencing token of a new lease for ``holder`` (the last token + 1) when the
        ticket is free or its lease ran out; the same token again when ``holder`` already
        holds it (its own win, asked again after the answer was lost); None while another
        holder's lease lasts."""
        seconds = _seconds(ttl_s)
        # Pipelined: the insert, the lock and the update go in one round trip.
        with _transaction(self._connect, pipeline=True) as conn:
            conn.execute(
                "INSERT INTO ticket_leases (ticket_id, holder, token, expires_at) "
                "VALUES (%s, NULL, 0, '-infinity') ON CONFLICT (ticket_id) DO NOTHING",
                (ticket_id,),
            )
            conn.execute(
                "SELECT 1 FROM ticket_leases WHERE ticket_id = %s FOR UPDATE", (ticket_id,)
            )
            # The row is locked now: the clock is read after any wait for that lock.
            won = conn.execute(
                "UPDATE ticket_leases SET holder = %s, token = token + 1, "
                "expires_at = clock_timestamp() + %s * interval '1 second' "
                "WHERE ticket_id = %s AND expires_at <= clock_timestamp() RETURNING token",
                (holder, seconds, ticket_id),
            ).fetchone()
            if won is not None:
                return int(won[0])
            held = conn.execute(
                "SELECT holder, token FROM ticket_leases WHERE ticket_id = %s", (ticket_id,)
            ).fetchone()
        return int(held[1]) if held is not None and held[0] == holder else None

    def renew(self, ticket_id: str, holder: str, token: int, ttl_s: float) -> bool:
        """Extend the lease to ``ttl_s`` from now; False once the ticket was taken over
        or released. A lease that ran out with nobody taking the ticket is still this
        holder's (its token is the current one), as with the Redis leases."""
        seconds = _seconds(ttl_s)
        with _statement(self._connect) as conn:
            renewed = conn.execute(
                "UPDATE ticket_leases SET expires_at = clock_timestamp() + %s * interval '1 second' "
                "WHERE ticket_id = %s AND holder = %s AND token = %s RETURNING token",
                (seconds, ticket_id, holder, token),
            ).fetchone()
        return renewed is not None

    def holder(self, ticket_id: str) -> str | None:
        """Who holds the ticket's lease now (None: nobody, or it ran out); for a refusal's
        message, never for a decision (it may change the moment it is read). A database
        that cannot be reached says nobody it knows of."""
        try:
            with _statement(self._connect) as conn:
                found = conn.execute(
                    "SELECT holder FROM ticket_leases WHERE ticket_id = %s "
                    "AND expires_at > clock_timestamp()",
                    (ticket_id,),
                ).fetchone()
        except PostgresUnavailable:
            return None
        return None if found is None or found[0] is None else str(found[0])

    def release(self, ticket_id: str, holder: str, token: int) -> bool:
        """Give the lease up (the token stays, so the next lease takes token + 1); False
        when it was no longer this holder's (nothing is changed then)."""
        with _statement(self._connect) as conn:
            released = conn.execute(
                "UPDATE ticket_leases SET holder = NULL, expires_at = clock_timestamp() "
                "WHERE ticket_id = %s AND holder = %s AND token = %s RETURNING token",
                (ticket_id, holder, token),
            ).fetchone()
        return released is not None


def check_fence(conn: psycopg.Connection[Any], fence: LeaseToken) -> None:
    """Lock the ticket's lease row and raise LeaseFencedOut unless it still holds
    ``fence.token`` unexpired (the database's ``state_fence``, migration 0007: the one
    definition of the fence). The lock is held until the transaction ends, so no
    takeover can land between this check and the write."""
    with _refusals(fence, ()):
        conn.execute("SELECT state_fence(%s, %s)", (fence.ticket_id, fence.token))


# Taken (shared) by every transaction that draws from ``state_seq`` before it draws, and
# (exclusive, for an instant) by a reader that wants to know up to which seq everything
# drawn has been committed or rolled back: a sequence hands its numbers out in order, but
# the transactions holding them commit in any order (``mirror.StateMirror.hydrate``).
STATE_SEQ_LOCK = 0x6F72_6368_0005  # "orch", migration 0005

# The SQLSTATEs of migration 0007's functions: fenced out, and a file written once
# already there with other bytes.
_FENCED_OUT = "OR001"
_WRITTEN_ONCE = "OR002"


class StateRow(NamedTuple):
    """One row ``publish_rows`` writes: the table, its key (``key`` is the run id, or the
    batch id for ``batches``; ``number`` or ``name`` as the table keys it), the body as
    stored, and ``path``, the state-dir file it is, for messages. ``size`` and ``sha256``
    go with verdicts (the hash) and stage logs (both of the uncompressed bytes);
    ``created`` with a run record."""

    table: str
    path: str
    body: bytes
    key: str | None = None
    ticket_id: str | None = None
    number: int | None = None
    name: str | None = None
    size: int | None = None
    sha256: str | None = None
    created: datetime | None = None


def publish_rows(
    conn: psycopg.Connection[Any], rows: Sequence[StateRow], fence: LeaseToken | None = None
) -> None:
    """Write ``rows`` in one statement (``publish_state``, migration 0007): with ``fence``,
    only while that lease is current (else LeaseFencedOut, and nothing is written), each
    row with the next ``state_seq`` number drawn under ``STATE_SEQ_LOCK``. Outside a
    transaction block the statement is its own transaction, one round trip. A file
    written once found with other bytes is a StateError naming it."""
    with _refusals(fence, rows):
        conn.execute(
            "SELECT publish_state(%s, %s, %s, %s::jsonb)",
            (
                None if fence is None else fence.ticket_id,
                None if fence is None else fence.token,
                STATE_SEQ_LOCK,
                json.dumps([_as_json(row) for row in rows]),
            ),
        )


Connecting = Callable[[], AbstractContextManager["psycopg.Connection[Any]"]]


def publish_fenced(
    statement: Connecting,
    transaction: Connecting,
    rows: Sequence[StateRow],
    fence: LeaseToken | None,
    before_write: Callable[[psycopg.Connection[Any]], None] | None = None,
) -> None:
    """``publish_rows`` on a connection for one statement (``statement()``: the fence,
    the lock and the rows in one round trip; a run's every transition is one of these).
    With the test seam ``before_write``, in a transaction (``transaction()``) that checks
    the fence, calls it, then writes: what a test does there happens between the check
    and the write, as in the one statement."""
    if before_write is None:
        with statement() as conn:
            publish_rows(conn, rows, fence)
        return
    with transaction() as conn:
        if fence is not None:
            check_fence(conn, fence)
        before_write(conn)
        publish_rows(conn, rows)


def _as_json(row: StateRow) -> dict[str, Any]:
    """One element of ``publish_state``'s ``rows``: every field but the path (which is
    for messages), the time and the bytes as JSON can say them."""
    fields = row._asdict()
    del fields["path"]
    fields["created"] = None if row.created is None else row.created.isoformat()
    fields["body"] = base64.b64encode(row.body).decode("ascii")
    return fields


@contextmanager
def _refusals(fence: LeaseToken | None, rows: Sequence[StateRow]) -> Iterator[None]:
    """The functions' refusals as this module's errors; any other driver error as is."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        if exc.sqlstate == _FENCED_OUT and fence is not None:
            said = json.loads(exc.diag.message_detail or "{}")
            current = said.get("current")
            raise LeaseFencedOut(
                fence.ticket_id,
                fence.token,
                None if current is None else int(current),
                said.get("holder"),
                bool(said.get("expired", True)),
            ) from None
        if exc.sqlstate == _WRITTEN_ONCE:
            row = rows[int(exc.diag.message_detail or "0")]
            raise StateError(
                f"state error: {row.path}: already in the PostgreSQL state mirror with "
                f"other bytes ({row.table} are written once)"
            ) from None
        raise


def check_record(record: RunRecord) -> None:
    """StateError unless the record's run id is a run id of its own ticket."""
    if not is_run_id(record.run_id):
        raise StateError(f"state error: {record.run_id!r} is not a run id")
    if ticket_of(record.run_id) != record.ticket_id:
        raise StateError(
            f"state error: run {record.run_id}: not a run record of {record.ticket_id}"
        )


def record_row(record: RunRecord, text: str) -> StateRow:
    """The ``runs`` row of ``record``, stored as ``text`` (as the file store writes it)."""
    return StateRow(
        "runs",
        f"runs/{record.run_id}.json",
        text.encode("utf-8"),
        key=record.run_id,
        ticket_id=record.ticket_id,
        created=record.created_at,
    )


def parse_record(run_id: str, text: str) -> RunRecord:
    """The stored text validated as the file store validates a record file; StateError
    naming the run when it is not a valid run record."""
    try:
        return RunRecord.model_validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(describe_validation_error(exc)[:3])
        raise StateError(
            f"state error: run {run_id} in {WHERE}: not a valid run record: {problems}"
        ) from None
