"""Budgets in PostgreSQL (issue 30): a ticket's charges (``PostgresBudgets``, the
``Budgets`` protocol) and a batch's shared model budget (``PostgresBatchBudget``, the
``SharedBudget`` a batch's gateway charges), each charge one transaction.

The same values as the files
    ``PostgresBudgets`` answers with the file store's own ``TicketBudget``: the same
    charges in the same order, the same resets, a (kind, key) charged once.
    ``PostgresBatchBudget`` refuses with the file budget's own ``over_cap``: the same rule
    and the same message.

One transaction per charge
    Lock the ticket's (or batch's) row (``SELECT ... FOR UPDATE``, made first if absent),
    read what is spent, decide, write, commit. Charges from any number of processes queue
    on that row, so no file lock and no ticket lock is needed for the budget to be exact,
    and a connection lost in the middle leaves the whole charge or none of it: a charge
    that may have paid for a call is never half-refunded. ``charge_within`` checks the
    cap inside the same transaction, so two processes cannot both take the last one.

Connections
    Each operation opens a connection from the factory and closes it (as the ledger does).
    Driver errors leave this module as ``StateError`` (a connection that cannot be made is
    ``connect``'s ``PostgresUnavailable``, its URL masked). psycopg is imported when a
    connection is first used. Times are stored as ``timestamptz``: pass aware datetimes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from orchestrator.domain.config import BatchConfig, PriceConfig
from orchestrator.domain.errors import StateError
from orchestrator.storage.batch_budget import Spend, estimate_cost, over_cap
from orchestrator.storage.budget import CapsReset, Charge, ChargeKind, TicketBudget
from orchestrator.storage.crash_points import CrashPoint, crash_point
from orchestrator.storage.postgres.session import (
    ConnectionFactory,
    connection_factory,
    transaction,
)

if TYPE_CHECKING:
    import psycopg

# A seam for tests: called inside a charge's transaction, after its first write and
# before the rest, with the connection (to drop it there).
MidCharge = Callable[["psycopg.Connection[Any]"], None]
KINDS: tuple[ChargeKind, ...] = ("diagnosis", "retry", "infra-retry")


def _transaction(
    connect_to: ConnectionFactory, where: str, *, snapshot: bool = False
) -> AbstractContextManager[psycopg.Connection[Any]]:
    """One transaction (times read back in UTC); driver errors are StateError naming
    ``where``."""
    return transaction(
        connect_to, says=f"state error: {where}", error=StateError, snapshot=snapshot, utc=True
    )


def _aware(at: datetime) -> datetime:
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError("a budget's time must be timezone-aware (it is stored as timestamptz)")
    return at


@dataclass(frozen=True)
class CappedCharge:
    """What ``charge_within`` did: the budget after it, and why it refused (None when
    the charge was made now or had been made before under the same key)."""

    budget: TicketBudget
    refusal: str | None = None

    @property
    def granted(self) -> bool:
        return self.refusal is None


class PostgresBudgets:
    """Per-ticket budgets in one PostgreSQL database (migrated: ``0003_budgets.sql``).

    ``source``: a ``postgresql://`` URL, or a function returning a new connection."""

    def __init__(
        self, source: str | ConnectionFactory, *, _mid_charge: MidCharge | None = None
    ) -> None:
        self._connect = connection_factory(source)
        self._mid_charge = _mid_charge
        self.where = "the PostgreSQL ticket budgets"

    def load(self, ticket_id: str) -> TicketBudget:
        """The ticket's budget as the file store would load it (empty when never charged)."""
        with _transaction(self._connect, self.where, snapshot=True) as conn:
            return _budget(conn, ticket_id)

    def charge(
        self, ticket_id: str, kind: ChargeKind, key: str, *, run_id: str, at: datetime
    ) -> TicketBudget:
        """Append a charge unless (kind, key) is already charged; one transaction. No cap
        is checked (as in the file store, whose callers check it): see ``charge_within``."""
        return self._charge(ticket_id, kind, key, run_id=run_id, at=at, limit=None).budget

    def charge_within(
        self,
        ticket_id: str,
        kind: ChargeKind,
        key: str,
        *,
        limit: int,
        run_id: str,
        at: datetime,
    ) -> CappedCharge:
        """Charge only while fewer than ``limit`` charges of ``kind`` count (since the last
        reset), deciding under the ticket's row lock: exact across processes. A key
        already charged is granted again without a new charge. The refusal reads as
        ``actions.budget.decide_charge``'s does for the same budget."""
        return self._charge(ticket_id, kind, key, run_id=run_id, at=at, limit=limit)

    def _charge(
        self,
        ticket_id: str,
        kind: ChargeKind,
        key: str,
        *,
        run_id: str,
        at: datetime,
        limit: int | None,
    ) -> CappedCharge:
        if kind not in KINDS:
            raise ValueError(f"unknown charge kind {kind!r}")
        at = _aware(at)
        with _transaction(self._connect, self.where) as conn:
            count = _locked(conn, ticket_id)
            charged = conn.execute(
                "SELECT 1 FROM ticket_charges WHERE ticket_id = %s AND kind = %s AND key = %s",
                (ticket_id, kind, key),
            ).fetchone()
            if charged is not None:
                return CappedCharge(_budget(conn, ticket_id))
            if limit is not None:
                spent = _spent(conn, ticket_id, kind)
                if spent >= limit:
                    refusal = f"{kind} cap spent ({spent}/{limit} for this ticket)"
                    return CappedCharge(_budget(conn, ticket_id), refusal)
            conn.execute(
                "INSERT INTO ticket_charges (ticket_id, position, kind, key, run_id, at) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (ticket_id, count, kind, key, run_id, at),
            )
            if self._mid_charge is not None:
                self._mid_charge(conn)
            conn.execute(
                "UPDATE ticket_budgets SET charges = %s WHERE ticket_id = %s",
                (count + 1, ticket_id),
            )
            budget = _budget(conn, ticket_id)
        crash_point(CrashPoint.DIAGNOSIS_CHARGE if kind == "diagnosis" else CrashPoint.RETRY_CHARGE)
        return CappedCharge(budget)

    def reset(self, ticket_id: str, *, by: str, reason: str, at: datetime) -> TicketBudget:
        """Clear the ticket's caps (a person decided so): later charges start from zero;
        the reset records what had been spent, as the file store's does."""
        at = _aware(at)
        with _transaction(self._connect, self.where) as conn:
            count = _locked(conn, ticket_id)
            cleared = {kind: _spent(conn, ticket_id, kind) for kind in KINDS}
            (position,) = conn.execute(
                "SELECT count(*) FROM ticket_caps_resets WHERE ticket_id = %s", (ticket_id,)
            ).fetchone() or (0,)
            conn.execute(
                "INSERT INTO ticket_caps_resets "
                "(ticket_id, position, at, by_whom, reason, after, cleared) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (ticket_id, position, at, by, reason, count, json.dumps(cleared)),
            )
            budget = _budget(conn, ticket_id)
        crash_point(CrashPoint.CAPS_RESET)
        return budget


def _locked(conn: psycopg.Connection[Any], ticket_id: str) -> int:
    """Lock the ticket's row (made if absent) until the transaction ends; its count."""
    conn.execute(
        "INSERT INTO ticket_budgets (ticket_id) VALUES (%s) ON CONFLICT DO NOTHING",
        (ticket_id,),
    )
    found = conn.execute(
        "SELECT charges FROM ticket_budgets WHERE ticket_id = %s FOR UPDATE", (ticket_id,)
    ).fetchone()
    assert found is not None  # made above, and never deleted
    return int(found[0])


def _since_last_reset(conn: psycopg.Connection[Any], ticket_id: str) -> int:
    found = conn.execute(
        "SELECT after FROM ticket_caps_resets WHERE ticket_id = %s ORDER BY position DESC LIMIT 1",
        (ticket_id,),
    ).fetchone()
    return int(found[0]) if found is not None else 0


def _spent(conn: psycopg.Connection[Any], ticket_id: str, kind: ChargeKind) -> int:
    """``TicketBudget.spent``: the charges of ``kind`` since the last reset."""
    found = conn.execute(
        "SELECT count(*) FROM ticket_charges WHERE ticket_id = %s AND kind = %s AND position >= %s",
        (ticket_id, kind, _since_last_reset(conn, ticket_id)),
    ).fetchone()
    return int(found[0]) if found is not None else 0


def _budget(conn: psycopg.Connection[Any], ticket_id: str) -> TicketBudget:
    charges = conn.execute(
        "SELECT kind, key, run_id, at FROM ticket_charges WHERE ticket_id = %s ORDER BY position",
        (ticket_id,),
    ).fetchall()
    resets = conn.execute(
        "SELECT at, by_whom, reason, after, cleared FROM ticket_caps_resets "
        "WHERE ticket_id = %s ORDER BY position",
        (ticket_id,),
    ).fetchall()
    return TicketBudget(
        ticket_id=ticket_id,
        charges=tuple(Charge(kind=k, key=key, run_id=run, at=at) for k, key, run, at in charges),
        resets=tuple(
            CapsReset(at=at, by=by, reason=reason, after=after, cleared=cleared)
            for at, by, reason, after, cleared in resets
        ),
    )


class PostgresBatchBudget:
    """One batch's model budget (``[batch]``: calls, tokens, estimated cost) shared by
    every worker that reaches the database: the rules and refusals of the local batch's
    ``BatchBudget`` (a call reserved before it is made, its tokens and cost added when it
    returns), each step one transaction under the batch row's lock. With a ``key`` (the
    decision and call), a redelivered reservation or record is not counted twice, as in
    the Redis ``FleetBatchBudget``; without one it counts as the local budget does."""

    def __init__(
        self,
        source: str | ConnectionFactory,
        batch_id: str,
        caps: BatchConfig,
        prices: dict[str, PriceConfig],
        *,
        _mid_charge: MidCharge | None = None,
    ) -> None:
        self._connect = connection_factory(source)
        self.batch_id = batch_id
        self.caps = caps
        self.prices = prices
        self._mid_charge = _mid_charge
        self.where = f"the PostgreSQL budget of batch {batch_id}"

    def read(self) -> Spend:
        with _transaction(self._connect, self.where, snapshot=True) as conn:
            found = conn.execute(
                "SELECT calls, input_tokens, output_tokens, cost_micros FROM batch_spend "
                "WHERE batch_id = %s",
                (self.batch_id,),
            ).fetchone()
        return _spend(found)

    def reserve(self, key: str | None = None) -> str | None:
        """Count one call if the budget allows it; otherwise say why not (``over_cap``)."""
        with _transaction(self._connect, self.where) as conn:
            spend = self._locked(conn)
            if key is not None and _seen(conn, self.batch_id, "reserve", key):
                return None
            refusal = over_cap(spend, self.caps)
            if refusal is not None:
                return refusal
            conn.execute(
                "UPDATE batch_spend SET calls = calls + 1 WHERE batch_id = %s", (self.batch_id,)
            )
            if self._mid_charge is not None:
                self._mid_charge(conn)
            if key is not None:
                _remember(conn, self.batch_id, "reserve", key)
        crash_point(CrashPoint.BATCH_BUDGET)
        return None

    def record(
        self, model: str, input_tokens: int, output_tokens: int, key: str | None = None
    ) -> None:
        """Add a returned call's tokens and estimated cost (once per ``key``)."""
        if input_tokens < 0 or output_tokens < 0:
            raise ValueError("token counts are never negative: budgets are not refunded")
        micros = round(estimate_cost(self.prices, model, input_tokens, output_tokens) * 1e6)
        with _transaction(self._connect, self.where) as conn:
            self._locked(conn)
            if key is not None and _seen(conn, self.batch_id, "record", key):
                return
            conn.execute(
                "UPDATE batch_spend SET input_tokens = input_tokens + %s, "
                "output_tokens = output_tokens + %s, cost_micros = cost_micros + %s "
                "WHERE batch_id = %s",
                (input_tokens, output_tokens, micros, self.batch_id),
            )
            if key is not None:
                _remember(conn, self.batch_id, "record", key)
        crash_point(CrashPoint.BATCH_BUDGET)

    def _locked(self, conn: psycopg.Connection[Any]) -> Spend:
        conn.execute(
            "INSERT INTO batch_spend (batch_id) VALUES (%s) ON CONFLICT DO NOTHING",
            (self.batch_id,),
        )
        return _spend(
            conn.execute(
                "SELECT calls, input_tokens, output_tokens, cost_micros FROM batch_spend "
                "WHERE batch_id = %s FOR UPDATE",
                (self.batch_id,),
            ).fetchone()
        )


def _spend(found: tuple[Any, ...] | None) -> Spend:
    if found is None:
        return Spend()
    calls, inp, out, micros = found
    return Spend(int(calls), int(inp), int(out), int(micros) / 1_000_000)


def _seen(conn: psycopg.Connection[Any], batch_id: str, step: str, key: str) -> bool:
    found = conn.execute(
        "SELECT 1 FROM batch_charge_keys WHERE batch_id = %s AND step = %s AND key = %s",
        (batch_id, step, key),
    ).fetchone()
    return found is not None


def _remember(conn: psycopg.Connection[Any], batch_id: str, step: str, key: str) -> None:
    conn.execute(
        "INSERT INTO batch_charge_keys (batch_id, step, key) VALUES (%s, %s, %s)",
        (batch_id, step, key),
    )
